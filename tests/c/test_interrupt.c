/*
 * test_interrupt.c - plain-C tests of the cancellation seam (common/interrupt.h, core.h's
 * usbeam_set_interrupt_check) in every CPU family that polls it: with a check that fires at
 * once (interval 1 ns) an execute returns USBEAM_ERR_INTERRUPTED, its float outputs all NaN
 * (no partial result), the check called from the registering thread only; a check that never
 * fires leaves the result bit for bit as without one; after an interrupted call the same plan
 * gives the uninterrupted result again (for the streaming IIR filter: its state was not
 * committed).  Built by `make ctest` and `make asan`.  Prints "N passed, N failed".
 *
 * Only the registering thread (OpenMP's master) asks the check, between the units of work it
 * takes; in a call this short a team larger than the machine's cores may finish every unit
 * before the master is scheduled, so the exact counts are checked with a team of one
 * (usbeam_set_thread_limit(1)), and with a team of four the weaker promise: interrupted (all
 * NaN) or finished (the reference), the check asked at most once, never from a worker.  The
 * SIGINT test (tests/beamform/test_interrupt.py) covers a long call on a team of two.
 */
#include "usbeam.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

typedef struct check_state {
    int fire;              /* 1: ask to stop */
    int calls;             /* how often the library asked */
    int from_other_thread; /* calls from a thread other than the registering one */
    pthread_t owner;
} check_state;

static int test_check(void *context)
{
    check_state *s = context;
    ++s->calls;
    if (!pthread_equal(pthread_self(), s->owner)) ++s->from_other_thread;
    return s->fire;
}

/* One family under test: run(plan-state, in, out) -> status; the output is n_out floats (or
 * bytes, for integer outputs: float_out 0). */
typedef usbeam_status (*run_fn)(void *plan, const void *in, void *out);

static int strict = 1; /* a team of one: the check must be asked */

static uint32_t lcg_state = 12345u;
static float noise(void)
{
    lcg_state = lcg_state * 1664525u + 1013904223u;
    return (float)((double)(lcg_state >> 8) / 16777216.0 - 0.5);
}

static void fill_noise(float *x, size_t n)
{
    for (size_t i = 0; i < n; ++i) x[i] = noise();
}

/* The checks every family gets (the output holds n_out_bytes bytes; float outputs are NaN
 * after an interrupt). */
static void check_family(const char *name, void *plan, run_fn run, const void *in, size_t n_out_bytes,
                         int float_out)
{
    const int failed_before = failed;
    unsigned char *reference = malloc(n_out_bytes), *out = malloc(n_out_bytes);
    CHECK(reference && out);
    if (!reference || !out) return;
    CHECK(run(plan, in, reference) == USBEAM_OK);

    check_state s = {.fire = 0, .owner = pthread_self()};
    CHECK(usbeam_set_interrupt_check(test_check, &s, 1e-9) == USBEAM_OK);
    memset(out, 0x5A, n_out_bytes);
    CHECK(run(plan, in, out) == USBEAM_OK); /* a check that never fires changes nothing */
    CHECK(s.calls >= 1 || !strict);
    CHECK(memcmp(out, reference, n_out_bytes) == 0);

    s.fire = 1;
    s.calls = 0;
    memset(out, 0, n_out_bytes);
    usbeam_status st = run(plan, in, out);
    CHECK(st == USBEAM_ERR_INTERRUPTED || (!strict && st == USBEAM_OK && s.calls == 0));
    if (st == USBEAM_OK) CHECK(memcmp(out, reference, n_out_bytes) == 0);
    CHECK(st == USBEAM_OK || strstr(usbeam_last_error(), "interrupted") != NULL);
    CHECK(s.calls == (st == USBEAM_ERR_INTERRUPTED)); /* asked once: the first yes stops the team */
    CHECK(s.from_other_thread == 0);
    if (float_out && st == USBEAM_ERR_INTERRUPTED) {
        int all_nan = 1;
        for (size_t i = 0; i < n_out_bytes / 4; ++i) all_nan &= isnan(((float *)out)[i]);
        CHECK(all_nan);
    }
    CHECK(usbeam_set_interrupt_check(NULL, NULL, 0.0) == USBEAM_OK);
    memset(out, 0x5A, n_out_bytes);
    CHECK(run(plan, in, out) == USBEAM_OK); /* the plan works as before */
    CHECK(memcmp(out, reference, n_out_bytes) == 0);
    if (failed != failed_before) fprintf(stderr, "  (family %s, team %s)\n", name, strict ? "of one" : "of four");
    free(reference);
    free(out);
}

/* ---- adapters: (plan, in, out) for each family ---------------------------------------- */
static usbeam_status run_das(void *p, const void *in, void *out) { return usbeam_das_execute(p, in, out); }
static usbeam_status run_rca(void *p, const void *in, void *out) { return usbeam_rca_execute(p, in, out); }
static usbeam_status run_clutter(void *p, const void *in, void *out) { return usbeam_clutter_execute(p, in, out); }
static usbeam_status run_power(void *p, const void *in, void *out) { return usbeam_power_execute(p, in, out); }
static usbeam_status run_color(void *p, const void *in, void *out)
{
    return usbeam_color_execute(p, in, out, NULL, NULL);
}
static usbeam_status run_hadamard(void *p, const void *in, void *out) { return usbeam_hadamard_execute(p, in, out); }
static usbeam_status run_rf2iq(void *p, const void *in, void *out) { return usbeam_rf2iq_execute(p, in, out); }
static usbeam_status run_envelope(void *p, const void *in, void *out) { return usbeam_envelope_execute(p, in, out); }
static usbeam_status run_das_sparse(void *p, const void *in, void *out)
{
    return usbeam_das_sparse_execute_frames(p, 2, in, out);
}
static usbeam_status run_adaptive(void *p, const void *in, void *out) { return usbeam_adaptive_execute(p, 2, in, out); }

static void test_das(void)
{
    enum { NE = 16, NS = 256, NP = 300 };
    double elements[3 * NE], points[3 * NP];
    for (int e = 0; e < NE; ++e) {
        elements[3 * e] = (e - 0.5 * (NE - 1)) * 3e-4;
        elements[3 * e + 1] = elements[3 * e + 2] = 0.0;
    }
    for (int q = 0; q < NP; ++q) {
        points[3 * q] = ((q % 20) - 10) * 2e-4;
        points[3 * q + 1] = 0.0;
        points[3 * q + 2] = 5e-3 + (q / 20) * 2e-4;
    }
    usbeam_transmit tx;
    memset(&tx, 0, sizeof tx);
    tx.kind = USBEAM_TRANSMIT_PLANE_WAVE;
    usbeam_das_params p = {0};
    p.n_elements = NE;
    p.element_positions = elements;
    p.n_transmits = 1;
    p.transmits = &tx;
    p.n_points = NP;
    p.points = points;
    p.n_frames = 2;
    p.n_samples = NS;
    p.fs = 20e6;
    p.fc = 5e6;
    p.c = 1540.0;
    p.window = USBEAM_DAS_RECT;
    p.interpolation = USBEAM_DAS_LINEAR;
    p.input_dtype = USBEAM_DTYPE_FLOAT32;
    usbeam_das_plan *plan = NULL;
    CHECK(usbeam_das_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_OK);
    float *rf = malloc(sizeof(float) * 2 * NE * NS);
    fill_noise(rf, 2 * NE * NS);
    if (plan) check_family("das", plan, run_das, rf, sizeof(float) * 2 * NP, 1);
    usbeam_das_plan_destroy(plan);
    /* the same operator as a sparse matrix, and minimum variance on the same delays */
    usbeam_das_sparse_plan *sparse = NULL;
    CHECK(usbeam_das_sparse_plan_create(&p, USBEAM_BACKEND_CPU, &sparse) == USBEAM_OK);
    if (sparse) check_family("das_sparse", sparse, run_das_sparse, rf, sizeof(float) * 2 * NP, 1);
    usbeam_das_sparse_plan_destroy(sparse);
    usbeam_adaptive_params ap;
    memset(&ap, 0, sizeof ap);
    ap.das = p;
    ap.method = USBEAM_ADAPTIVE_MV;
    ap.subarray_length = NE / 2;
    ap.diagonal_loading = 0.01;
    usbeam_adaptive_plan *adaptive = NULL;
    CHECK(usbeam_adaptive_plan_create(&ap, USBEAM_BACKEND_CPU, &adaptive) == USBEAM_OK);
    if (adaptive) check_family("adaptive (mv)", adaptive, run_adaptive, rf, sizeof(float) * 2 * NP, 1);
    usbeam_adaptive_plan_destroy(adaptive);
    free(rf);
}

static void test_rca(void)
{
    enum { NC = 8, NS = 200 };
    usbeam_rca_params p;
    memset(&p, 0, sizeof p);
    p.method = USBEAM_RCA_FORCES;
    p.n_columns = p.n_rows = NC;
    p.pitch_x = p.pitch_y = 3e-4;
    for (int i = 0; i < 4; ++i) {
        p.world_to_array[5 * i] = 1.0;                 /* identity */
        p.voxel_to_world[5 * i] = i < 3 ? 1e-4 : 1.0; /* 0.1 mm voxels ... */
    }
    p.voxel_to_world[11] = 3e-3; /* ... from z = 3 mm */
    p.n_frames = 1;
    p.n_acquisitions = p.n_channels = NC;
    p.n_samples = NS;
    p.fs = 20e6;
    p.c = 1540.0;
    p.interpolation = 1;
    p.n_i = 9, p.n_j = 7, p.n_k = 5;
    p.window = 1;
    usbeam_rca_plan *plan = NULL;
    CHECK(usbeam_rca_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_OK);
    float *data = malloc(sizeof(float) * NC * NC * NS);
    fill_noise(data, NC * NC * NS);
    if (plan) check_family("rca", plan, run_rca, data, sizeof(float) * 9 * 7 * 5, 1);
    usbeam_rca_plan_destroy(plan);
    free(data);
}

static void test_clutter_and_doppler(void)
{
    enum { NF = 12, NZ = 10, NX = 9, NPX = NZ * NX };
    float *iq = malloc(sizeof(float) * 2 * NF * NPX);
    fill_noise(iq, 2 * NF * NPX);
    const usbeam_clutter_method methods[] = {USBEAM_CLUTTER_MEAN, USBEAM_CLUTTER_SVD, USBEAM_CLUTTER_IIR};
    for (int k = 0; k < 3; ++k) {
        usbeam_clutter_params p = {.n_frames = NF, .n_pixels = NPX, .method = methods[k], .svd_low = 1,
                                   .svd_high = -1, .iir_order = 2, .iir_cutoff = 0.1};
        usbeam_clutter_plan *plan = NULL;
        CHECK(usbeam_clutter_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_OK);
        if (!plan) continue;
        if (methods[k] == USBEAM_CLUTTER_IIR) {
            /* a streaming filter: each call continues from the state of the last finished one,
             * so compare an interrupted stream with a fresh plan's */
            usbeam_clutter_plan *fresh = NULL;
            CHECK(usbeam_clutter_plan_create(&p, USBEAM_BACKEND_CPU, &fresh) == USBEAM_OK);
            float *want = malloc(sizeof(float) * 2 * NF * NPX), *got = malloc(sizeof(float) * 2 * NF * NPX);
            CHECK(usbeam_clutter_execute(fresh, iq, want) == USBEAM_OK);
            check_state s = {.fire = 1, .owner = pthread_self()};
            CHECK(usbeam_set_interrupt_check(test_check, &s, 1e-9) == USBEAM_OK);
            usbeam_status st = usbeam_clutter_execute(plan, iq, got);
            CHECK(st == USBEAM_ERR_INTERRUPTED || (!strict && st == USBEAM_OK));
            if (st == USBEAM_ERR_INTERRUPTED) {
                CHECK(isnan(got[0]) && isnan(got[2 * NF * NPX - 1]));
            } else { /* finished: the state moved on; start the comparison from a reset */
                CHECK(usbeam_clutter_reset(plan) == USBEAM_OK);
            }
            CHECK(usbeam_set_interrupt_check(NULL, NULL, 0.0) == USBEAM_OK);
            CHECK(usbeam_clutter_execute(plan, iq, got) == USBEAM_OK); /* the first block again */
            CHECK(memcmp(got, want, sizeof(float) * 2 * NF * NPX) == 0);
            free(want);
            free(got);
            usbeam_clutter_plan_destroy(fresh);
        } else {
            check_family(methods[k] == USBEAM_CLUTTER_SVD ? "clutter svd" : "clutter mean", plan, run_clutter, iq,
                         sizeof(float) * 2 * NF * NPX, 1);
        }
        usbeam_clutter_plan_destroy(plan);
    }
    usbeam_power_params pp = {.n_frames = NF, .n_pixels = NPX, .output_db = 1};
    usbeam_power_plan *power = NULL;
    CHECK(usbeam_power_plan_create(&pp, USBEAM_BACKEND_CPU, &power) == USBEAM_OK);
    if (power) check_family("power", power, run_power, iq, sizeof(float) * NPX, 1);
    usbeam_power_plan_destroy(power);
    usbeam_color_params cp = {.n_frames = NF, .n_images = 1, .nz = NZ, .nx = NX, .fc = 5e6, .prf = 4e3,
                              .c = 1540.0, .lag = 1, .window_z = 1, .window_x = 1};
    usbeam_color_plan *color = NULL;
    CHECK(usbeam_color_plan_create(&cp, USBEAM_BACKEND_CPU, &color) == USBEAM_OK);
    if (color) check_family("color", color, run_color, iq, sizeof(float) * NPX, 1);
    usbeam_color_plan_destroy(color);
    free(iq);
}

static void test_hadamard_rf2iq_envelope(void)
{
    enum { N = 8, OUTER = 3, INNER = 500 };
    float *x = malloc(sizeof(float) * OUTER * N * INNER);
    fill_noise(x, OUTER * N * INNER);
    usbeam_hadamard_params hp = {.order = N, .n_outer = OUTER, .n_inner = INNER, .in_dtype = USBEAM_DTYPE_FLOAT32,
                                 .out_dtype = USBEAM_DTYPE_FLOAT32, .algorithm = USBEAM_HADAMARD_FAST};
    usbeam_hadamard_plan *hadamard = NULL;
    CHECK(usbeam_hadamard_plan_create(&hp, USBEAM_BACKEND_CPU, &hadamard) == USBEAM_OK);
    if (hadamard) check_family("hadamard", hadamard, run_hadamard, x, sizeof(float) * OUTER * N * INNER, 1);
    usbeam_hadamard_plan_destroy(hadamard);

    usbeam_rf2iq_params rp = {.n_lines = OUTER * N, .n_samples = INNER, .input_dtype = USBEAM_DTYPE_FLOAT32,
                              .fs = 20e6, .fc = 5e6, .filter = USBEAM_RF2IQ_BUTTER, .order = 5, .wn = 0.3,
                              .decimation = 1};
    usbeam_rf2iq_plan *rf2iq = NULL;
    CHECK(usbeam_rf2iq_plan_create(&rp, USBEAM_BACKEND_CPU, &rf2iq) == USBEAM_OK);
    if (rf2iq) check_family("rf2iq", rf2iq, run_rf2iq, x, sizeof(float) * 2 * OUTER * N * INNER, 1);
    usbeam_rf2iq_plan_destroy(rf2iq);

    usbeam_envelope_params ep = {.n_outer = OUTER, .n_axis = INNER, .n_inner = N,
                                 .output = USBEAM_ENVELOPE_MAGNITUDE};
    usbeam_envelope_plan *envelope = NULL;
    CHECK(usbeam_envelope_plan_create(&ep, USBEAM_BACKEND_CPU, &envelope) == USBEAM_OK);
    if (envelope) check_family("envelope", envelope, run_envelope, x, sizeof(float) * OUTER * N * INNER, 1);
    usbeam_envelope_plan_destroy(envelope);
    free(x);
}

static void test_registration(void)
{
    CHECK(usbeam_set_interrupt_check(test_check, NULL, NAN) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "interval") != NULL);
    CHECK(usbeam_set_interrupt_check(NULL, NULL, 0.0) == USBEAM_OK);
    CHECK(strcmp(usbeam_status_string(USBEAM_ERR_INTERRUPTED), "interrupted") == 0);
}

/* A check registered on one thread is not another thread's: a call from a thread without one
 * runs to the end. */
static void *run_without_check(void *arg)
{
    usbeam_envelope_plan *plan = arg;
    static float in[64 * 4], out[64 * 4];
    for (int i = 0; i < 64 * 4; ++i) in[i] = (float)(i % 7) - 3.0f;
    return (void *)(intptr_t)usbeam_envelope_execute(plan, in, out);
}

static void test_other_threads_are_not_stopped(void)
{
    usbeam_envelope_params ep = {.n_outer = 1, .n_axis = 64, .n_inner = 4, .output = USBEAM_ENVELOPE_MAGNITUDE};
    usbeam_envelope_plan *plan = NULL;
    CHECK(usbeam_envelope_plan_create(&ep, USBEAM_BACKEND_CPU, &plan) == USBEAM_OK);
    check_state s = {.fire = 1, .owner = pthread_self()};
    CHECK(usbeam_set_interrupt_check(test_check, &s, 1e-9) == USBEAM_OK);
    pthread_t other;
    void *result = NULL;
    CHECK(pthread_create(&other, NULL, run_without_check, plan) == 0);
    CHECK(pthread_join(other, &result) == 0);
    CHECK((usbeam_status)(intptr_t)result == USBEAM_OK);
    CHECK(s.calls == 0);
    CHECK(usbeam_set_interrupt_check(NULL, NULL, 0.0) == USBEAM_OK);
    usbeam_envelope_plan_destroy(plan);
}

int main(void)
{
    test_registration();
    for (strict = 1; strict >= 0; --strict) {
        CHECK(usbeam_set_thread_limit(strict ? 1 : 4) == USBEAM_OK);
        test_das();
        test_rca();
        test_clutter_and_doppler();
        test_hadamard_rf2iq_envelope();
    }
    test_other_threads_are_not_stopped();
    return check_summary();
}
