/*
 * test_client.c - the shared-memory server (shm_server.c) and the usbeam_client_ library
 * (client.c) across real processes (fork): frames round-trip in order with intact content,
 * a client killed mid-push (and one killed while holding the region lock) leaves the server
 * serving the next client and its frame's waiter learns ABANDONED at once, a live writer
 * slower than the write timeout has its slot quarantined (never handed to another client,
 * freed by its refused late commit, its abort or its death), a second server is refused, a
 * layout-version mismatch is refused with a message, drop_oldest and block policies,
 * parameters kept per generation in a ring, two posts racing for one result entry,
 * server gone.
 * Prints "N passed, N failed".
 */
#define _GNU_SOURCE
#include "shm/shm_server.h"
#include "shm/shm_sync.h"
#include "usbeam.h"
#include "shm/usbeam_client.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#define N_SAMPLES 1000 /* int16 per frame */
static char region[64];

static usbeam_shm_server *make_server(uint32_t slots, uint32_t policy, uint32_t write_timeout_ms)
{
    usbeam_shm_server_config cfg = {region, slots, 4, N_SAMPLES * 2, 2 * sizeof(int64_t), policy,
                                    write_timeout_ms, 0};
    usbeam_shm_server *s = NULL;
    usbeam_status st = usbeam_shm_server_create(&cfg, &s);
    if (st != USBEAM_OK) fprintf(stderr, "server create: %s\n", usbeam_last_error());
    return s;
}

/* frame k: sample i = k * 7 + i (mod 2^15), so a torn or wrong frame is detected */
static void fill_frame(int16_t *f, uint64_t k)
{
    for (int i = 0; i < N_SAMPLES; ++i) f[i] = (int16_t)((k * 7 + (uint64_t)i) & 0x7fff);
}

/* Server step: serve one frame; the result is (sum of samples, frame id). */
static int serve_one(usbeam_shm_server *s, int timeout_ms)
{
    usbeam_shm_frame fr;
    if (usbeam_shm_server_next_frame(s, timeout_ms, &fr) != USBEAM_OK || !fr.data) return 0;
    int64_t out[2] = {0, (int64_t)fr.frame_id};
    const int16_t *x = fr.data;
    for (uint64_t i = 0; i < fr.bytes / 2; ++i) out[0] += x[i];
    uint64_t shape[1] = {2};
    usbeam_shm_server_release(s, fr.slot);
    usbeam_shm_server_post(s, fr.frame_id, fr.bytes == N_SAMPLES * 2 ? USBEAM_SHM_STATUS_OK : USBEAM_SHM_STATUS_REJECTED,
                           out, sizeof out, USBEAM_DTYPE_INT32, 1, shape, fr.push_ns,
                           fr.bytes == N_SAMPLES * 2 ? "" : "frame has the wrong size");
    return 1;
}

static int64_t expected_sum(uint64_t k)
{
    int16_t f[N_SAMPLES];
    fill_frame(f, k);
    int64_t sum = 0;
    for (int i = 0; i < N_SAMPLES; ++i) sum += f[i];
    return sum;
}

/* Child: push n frames (one at a time) and check each result; exit status = failures. */
static int client_round_trip(int n)
{
    usbeam_client *c = usbeam_client_open(region, 2000);
    if (!c) return 100;
    int bad = 0;
    int16_t frame[N_SAMPLES];
    for (int k = 0; k < n; ++k) {
        fill_frame(frame, (uint64_t)k);
        unsigned long long id = 0;
        if (usbeam_client_push(c, frame, sizeof frame, 1000, &id) != USBEAM_CLIENT_OK) { ++bad; continue; }
        int64_t out[2] = {0, 0};
        usbeam_client_result info;
        int rc = usbeam_client_get_result(c, id, out, sizeof out, 2000, &info);
        if (rc != USBEAM_CLIENT_OK || out[1] != (int64_t)id || out[0] != expected_sum((uint64_t)k) ||
            info.ndim != 1 || info.shape[0] != 2 || info.latency_s < 0)
            ++bad;
    }
    /* a wrong-size frame is rejected with a message; the server keeps going */
    unsigned long long id = 0;
    if (usbeam_client_push(c, frame, 10, 1000, &id) != USBEAM_CLIENT_OK) ++bad;
    usbeam_client_result info;
    if (usbeam_client_get_result(c, id, NULL, 0, 2000, &info) != USBEAM_CLIENT_ERR_REJECTED) ++bad;
    if (!strstr(info.message, "wrong size")) ++bad;
    usbeam_client_close(c);
    return bad;
}

static void test_round_trip_across_processes(void)
{
    usbeam_shm_server *s = make_server(3, USBEAM_SHM_POLICY_BLOCK, 1000);
    CHECK(s != NULL);
    if (!s) return;
    pid_t child = fork();
    if (child == 0) _exit(client_round_trip(50));
    int served = 0, status = 0;
    while (waitpid(child, &status, WNOHANG) == 0) served += serve_one(s, 5);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(served == 51);
    usbeam_shm_counters counters;
    usbeam_shm_server_counters(s, &counters);
    CHECK(counters.pushed == 51 && counters.processed == 50 && counters.rejected == 1);
    usbeam_shm_server_destroy(s);
}

static void test_second_server_refused(void)
{
    usbeam_shm_server *s = make_server(2, USBEAM_SHM_POLICY_BLOCK, 1000);
    CHECK(s != NULL);
    usbeam_shm_server *second = make_server(2, USBEAM_SHM_POLICY_BLOCK, 1000);
    CHECK(second == NULL);
    CHECK(strstr(usbeam_last_error(), "already served") != NULL);
    usbeam_shm_server_destroy(s);
    usbeam_shm_server_destroy(second);
}

static void test_killed_client_does_not_wedge_server(void)
{
    usbeam_shm_server *s = make_server(2, USBEAM_SHM_POLICY_BLOCK, 60000); /* reclaim by death, not time */
    CHECK(s != NULL);
    if (!s) return;
    /* child 1: reserves a slot, writes half a frame, dies */
    pid_t child = fork();
    if (child == 0) {
        usbeam_client *c = usbeam_client_open(region, 2000);
        void *data = NULL;
        unsigned long long cap = 0, id = 0;
        if (!c || usbeam_client_push_begin(c, 1000, &data, &cap, &id) != USBEAM_CLIENT_OK) _exit(1);
        memset(data, 0x55, N_SAMPLES);
        raise(SIGKILL);
    }
    int status = 0;
    waitpid(child, &status, 0);
    CHECK(WIFSIGNALED(status));
    /* child 2: dies while holding the region lock itself */
    child = fork();
    if (child == 0) {
        int fd = shm_open(region, O_RDWR, 0);
        usbeam_shm_header *h = mmap(NULL, sizeof *h, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (h == MAP_FAILED) _exit(1);
        usbeam_shm_lock(h);
        raise(SIGKILL);
    }
    waitpid(child, &status, 0);
    CHECK(WIFSIGNALED(status));
    /* the server recovers the lock (EOWNERDEAD) and reclaims the half-written slot */
    CHECK(serve_one(s, 50) == 0);
    usbeam_shm_counters counters;
    CHECK(usbeam_shm_server_counters(s, &counters) == USBEAM_OK);
    CHECK(counters.abandoned == 1 && counters.stalled == 0);
    /* the dead writer's frame (id 1) has a final outcome at once, not after the timeout */
    usbeam_client *waiter = usbeam_client_open(region, 100);
    CHECK(waiter != NULL);
    if (waiter) {
        usbeam_client_result r;
        int64_t t0 = usbeam_shm_clock_ns();
        CHECK(usbeam_client_get_result(waiter, 1, NULL, 0, 5000, &r) == USBEAM_CLIENT_ERR_ABANDONED);
        CHECK(usbeam_shm_clock_ns() - t0 < 1000000000ll);
        CHECK(r.status == USBEAM_CLIENT_ERR_ABANDONED && strstr(r.message, "died") != NULL);
        usbeam_client_close(waiter);
    }
    /* the next client is served normally */
    child = fork();
    if (child == 0) _exit(client_round_trip(5));
    while (waitpid(child, &status, WNOHANG) == 0) serve_one(s, 5);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    usbeam_shm_server_destroy(s);
}

/* Child: reserve a slot, report its id, wait for the go, then write late (0x55 over the
 * whole slot, as a slow client would) and commit (or abort when asked).  Exit status 0
 * when the late commit was refused as ABANDONED (or the abort accepted). */
static int slow_writer(int report_fd, int go_fd, int do_abort)
{
    usbeam_client *c = usbeam_client_open(region, 2000);
    void *data = NULL;
    unsigned long long cap = 0, id = 0;
    if (!c || usbeam_client_push_begin(c, 1000, &data, &cap, &id) != USBEAM_CLIENT_OK) return 10;
    if (write(report_fd, &id, sizeof id) != (ssize_t)sizeof id) return 11;
    char go;
    if (read(go_fd, &go, 1) != 1) return 12;
    memset(data, 0x55, (size_t)cap);
    if (do_abort) return usbeam_client_push_abort(c, id) == USBEAM_CLIENT_OK ? 0 : 13;
    int rc = usbeam_client_push_commit(c, id, N_SAMPLES * 2);
    if (rc != USBEAM_CLIENT_ERR_ABANDONED || !strstr(usbeam_client_last_error(), "write timeout")) return 14;
    usbeam_client_close(c);
    return 0;
}

static pid_t start_slow_writer(int do_abort, int *go_fd, unsigned long long *id)
{
    int report[2], go[2];
    if (pipe(report) != 0 || pipe(go) != 0) return -1;
    pid_t child = fork();
    if (child == 0) {
        close(report[0]);
        close(go[1]);
        _exit(slow_writer(report[1], go[0], do_abort));
    }
    close(report[1]);
    close(go[0]);
    if (read(report[0], id, sizeof *id) != (ssize_t)sizeof *id) *id = 0;
    close(report[0]);
    *go_fd = go[1];
    return child;
}

/* Lets the slow writer go on (its late write and its commit or abort) and waits for it. */
static void finish_slow_writer(pid_t child, int go_fd)
{
    int status = 0;
    CHECK(write(go_fd, "g", 1) == 1);
    waitpid(child, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(go_fd);
}

static void sleep_ms(long ms)
{
    struct timespec pause = {ms / 1000, (ms % 1000) * 1000000l};
    nanosleep(&pause, NULL);
}

static void test_stalled_writer_quarantined(void)
{
    usbeam_shm_server *s = make_server(1, USBEAM_SHM_POLICY_BLOCK, 30);
    usbeam_client *c = usbeam_client_open(region, 100);
    CHECK(s && c);
    if (!s || !c) return;
    int16_t frame[N_SAMPLES];
    usbeam_client_result r;
    unsigned long long slow_id = 0, id = 0;
    int go = -1, status = 0;

    /* a live writer passes the timeout: its slot is quarantined, not handed out */
    pid_t child = start_slow_writer(0, &go, &slow_id);
    CHECK(child > 0 && slow_id == 1);
    sleep_ms(60);
    uint64_t reclaimed = 0;
    CHECK(usbeam_shm_server_reap(s, &reclaimed) == USBEAM_OK && reclaimed == 1);
    int64_t t0 = usbeam_shm_clock_ns();
    CHECK(usbeam_client_get_result(c, slow_id, NULL, 0, 5000, &r) == USBEAM_CLIENT_ERR_ABANDONED);
    CHECK(usbeam_shm_clock_ns() - t0 < 1000000000ll && strstr(r.message, "write timeout") != NULL);
    fill_frame(frame, 3);
    CHECK(usbeam_client_push(c, frame, sizeof frame, 50, &id) == USBEAM_CLIENT_ERR_TIMEOUT);
    CHECK(usbeam_shm_server_reap(s, &reclaimed) == USBEAM_OK && reclaimed == 0); /* counted once */
    /* its late write and commit: refused, and the slot is free again */
    finish_slow_writer(child, go);
    CHECK(usbeam_client_push(c, frame, sizeof frame, 50, &id) == USBEAM_CLIENT_OK);
    CHECK(serve_one(s, 100) == 1);
    int64_t out[2] = {0, 0};
    CHECK(usbeam_client_get_result(c, id, out, sizeof out, 1000, &r) == USBEAM_CLIENT_OK);
    CHECK(out[0] == expected_sum(3) && out[1] == (int64_t)id); /* no 0x55 from the late writer */

    /* a stalled writer that aborts frees the slot; one that dies frees it too */
    child = start_slow_writer(1, &go, &slow_id);
    sleep_ms(60);
    CHECK(usbeam_shm_server_reap(s, &reclaimed) == USBEAM_OK && reclaimed == 1);
    finish_slow_writer(child, go);
    CHECK(usbeam_client_push(c, frame, sizeof frame, 50, &id) == USBEAM_CLIENT_OK);
    CHECK(serve_one(s, 100) == 1);
    child = start_slow_writer(0, &go, &slow_id);
    sleep_ms(60);
    CHECK(usbeam_shm_server_reap(s, &reclaimed) == USBEAM_OK && reclaimed == 1);
    CHECK(usbeam_client_push(c, frame, sizeof frame, 0, &id) == USBEAM_CLIENT_ERR_TIMEOUT);
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    close(go);
    CHECK(usbeam_shm_server_reap(s, &reclaimed) == USBEAM_OK && reclaimed == 0);
    CHECK(usbeam_client_push(c, frame, sizeof frame, 50, &id) == USBEAM_CLIENT_OK);
    CHECK(serve_one(s, 100) == 1);

    usbeam_client_info info;
    CHECK(usbeam_client_info_get(c, &info) == USBEAM_CLIENT_OK);
    CHECK(info.abandoned == 3 && info.stalled == 3 && info.discarded == 1);
    CHECK(info.pushed == 6 && info.processed == 3);
    usbeam_client_close(c);
    usbeam_shm_server_destroy(s);
}

/* Parameters: each generation stays readable until USBEAM_SHM_PARAM_RING newer ones
 * replace it; a frame carries the generation of its push. */
static void test_parameter_generations(void)
{
    usbeam_shm_server *s = make_server(2, USBEAM_SHM_POLICY_BLOCK, 1000);
    usbeam_client *c = usbeam_client_open(region, 100);
    CHECK(s && c);
    if (!s || !c) return;
    char json[64], text[128];
    size_t bytes = 1;
    uint64_t latest = 99;
    CHECK(usbeam_shm_server_params(s, 0, text, sizeof text, &bytes, &latest) == USBEAM_OK);
    CHECK(bytes == 0 && latest == 0);
    int16_t frame[N_SAMPLES];
    fill_frame(frame, 1);
    unsigned long long ids[2];
    CHECK(usbeam_client_set_params(c, "{\"g\": 1}") == USBEAM_CLIENT_OK);
    CHECK(usbeam_client_push(c, frame, sizeof frame, 0, &ids[0]) == USBEAM_CLIENT_OK);
    const int n = (int)USBEAM_SHM_PARAM_RING + 3;
    for (int g = 2; g <= n; ++g) {
        snprintf(json, sizeof json, "{\"g\": %d}", g);
        CHECK(usbeam_client_set_params(c, json) == USBEAM_CLIENT_OK);
        if (g == 2) CHECK(usbeam_client_push(c, frame, sizeof frame, 0, &ids[1]) == USBEAM_CLIENT_OK);
    }
    usbeam_shm_frame fr;
    for (int k = 0; k < 2; ++k) {
        CHECK(usbeam_shm_server_next_frame(s, 10, &fr) == USBEAM_OK && fr.frame_id == ids[k]);
        CHECK(fr.param_generation == (uint64_t)k + 1);
        usbeam_shm_server_release(s, fr.slot);
    }
    for (int g = n - (int)USBEAM_SHM_PARAM_RING + 1; g <= n; ++g) {
        snprintf(json, sizeof json, "{\"g\": %d}", g);
        CHECK(usbeam_shm_server_params(s, (uint64_t)g, text, sizeof text, &bytes, &latest) == USBEAM_OK);
        CHECK(latest == (uint64_t)n && bytes == strlen(json) && strcmp(text, json) == 0);
    }
    CHECK(usbeam_shm_server_params(s, (uint64_t)(n - (int)USBEAM_SHM_PARAM_RING), text, sizeof text, &bytes,
                                   &latest) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "no longer available") != NULL && bytes == 0);
    CHECK(usbeam_shm_server_params(s, (uint64_t)n + 1, text, sizeof text, &bytes, NULL) ==
          USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "never set") != NULL);
    usbeam_client_close(c);
    usbeam_shm_server_destroy(s);
}

/* Two threads post to one result entry (frame a OK with a large image, frame
 * b = a + n_results REJECTED), the second one as soon as the first has stamped the entry
 * (seq odd: in its copy): the entry must end as b's complete rejection, never as a mix
 * that readers see as evicted. */
enum { RACE_BYTES = 4 << 20 };
typedef struct race_arg {
    usbeam_shm_server *s;
    const usbeam_shm_result *watch; /* NULL: post at once; else wait for seq >= wait_seq */
    uint64_t wait_seq;
    uint64_t frame_id;
    int status;
    const void *data;
} race_arg;

static void *race_post(void *p)
{
    race_arg *a = p;
    uint64_t shape[1] = {RACE_BYTES};
    if (a->watch)
        while (__atomic_load_n(&a->watch->seq, __ATOMIC_ACQUIRE) < a->wait_seq) {
        }
    usbeam_shm_server_post(a->s, a->frame_id, a->status, a->data, a->data ? RACE_BYTES : 0, USBEAM_DTYPE_UINT8,
                           a->data ? 1 : 0, a->data ? shape : NULL, 0, a->data ? "" : "rejected: wrong size");
    return NULL;
}

static void test_racing_posts_to_one_entry(void)
{
    usbeam_shm_server_config cfg = {region, 1, 4, 4096, RACE_BYTES, USBEAM_SHM_POLICY_BLOCK, 1000, 0};
    usbeam_shm_server *s = NULL;
    CHECK(usbeam_shm_server_create(&cfg, &s) == USBEAM_OK);
    unsigned char *image = malloc(RACE_BYTES);
    CHECK(image != NULL);
    if (!s || !image) return;
    memset(image, 0xa5, RACE_BYTES);
    int fd = shm_open(region, O_RDONLY, 0);
    const usbeam_shm_header *h = mmap(NULL, sizeof *h, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    CHECK(h != MAP_FAILED);
    if (h == MAP_FAILED) return;
    int mixed = 0;
    const int rounds = 100;
    for (int k = 0; k < rounds; ++k) {
        uint64_t a = 8 * (uint64_t)k + 1, b = a + 4; /* same entry: id % 4 == 1 */
        race_arg ok = {s, NULL, 0, a, USBEAM_SHM_STATUS_OK, image};
        race_arg rej = {s, &h->results[1], 2 * a + 1, b, USBEAM_SHM_STATUS_REJECTED, NULL};
        pthread_t t1, t2;
        pthread_create(&t2, NULL, race_post, &rej);
        pthread_create(&t1, NULL, race_post, &ok);
        pthread_join(t1, NULL);
        pthread_join(t2, NULL);
        const usbeam_shm_result *r = &h->results[1];
        if (!(r->state == USBEAM_SHM_RESULT_DONE && r->frame_id == b && r->seq == 2 * b + 2 &&
              r->status == USBEAM_SHM_STATUS_REJECTED && r->bytes == 0))
            ++mixed;
    }
    CHECK(mixed == 0);
    if (mixed) fprintf(stderr, "racing posts: %d of %d rounds left a mixed entry\n", mixed, rounds);
    usbeam_shm_counters counters;
    CHECK(usbeam_shm_server_counters(s, &counters) == USBEAM_OK);
    CHECK(counters.processed == (uint64_t)rounds && counters.rejected == (uint64_t)rounds);
    munmap((void *)h, sizeof *h);
    free(image);
    usbeam_shm_server_destroy(s);
}

static void test_layout_version_mismatch_refused(void)
{
    usbeam_shm_server *s = make_server(2, USBEAM_SHM_POLICY_BLOCK, 1000);
    CHECK(s != NULL);
    int fd = shm_open(region, O_RDWR, 0);
    usbeam_shm_header *h = mmap(NULL, sizeof *h, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    CHECK(h != MAP_FAILED);
    if (h == MAP_FAILED) return;
    h->layout_version = 99;
    usbeam_client *c = usbeam_client_open(region, 0);
    CHECK(c == NULL);
    CHECK(strstr(usbeam_client_last_error(), "layout version 99") != NULL);
    h->layout_version = USBEAM_SHM_LAYOUT_VERSION;
    c = usbeam_client_open(region, 0);
    CHECK(c != NULL);
    usbeam_client_close(c);
    munmap(h, sizeof *h);
    usbeam_shm_server_destroy(s);
}

static void test_policies_params_and_server_gone(void)
{
    usbeam_shm_server *s = make_server(3, USBEAM_SHM_POLICY_DROP_OLDEST, 1000);
    usbeam_client *c = usbeam_client_open(region, 100);
    CHECK(s && c);
    if (!s || !c) return;
    int16_t frame[N_SAMPLES];
    unsigned long long ids[5];
    for (int k = 0; k < 5; ++k) {
        fill_frame(frame, (uint64_t)k);
        CHECK(usbeam_client_push(c, frame, sizeof frame, 0, &ids[k]) == USBEAM_CLIENT_OK);
    }
    usbeam_client_info info;
    CHECK(usbeam_client_info_get(c, &info) == USBEAM_CLIENT_OK);
    CHECK(info.pushed == 5 && info.dropped == 2 && info.server_running == 1);
    usbeam_client_result r;
    CHECK(usbeam_client_get_result(c, ids[0], NULL, 0, 0, &r) == USBEAM_CLIENT_ERR_DROPPED);
    CHECK(usbeam_client_get_result(c, ids[2], NULL, 0, 0, &r) == USBEAM_CLIENT_ERR_TIMEOUT);
    /* the survivors are served oldest first and are intact */
    for (int k = 2; k < 5; ++k) CHECK(serve_one(s, 10) == 1);
    for (int k = 2; k < 5; ++k) {
        int64_t out[2];
        CHECK(usbeam_client_get_result(c, ids[k], out, sizeof out, 100, &r) == USBEAM_CLIENT_OK);
        CHECK(out[0] == expected_sum((uint64_t)k) && out[1] == (int64_t)ids[k]);
    }
    int64_t latest[2];
    CHECK(usbeam_client_latest(c, 0, latest, sizeof latest, 0, &r) == USBEAM_CLIENT_OK && r.frame_id == ids[4]);
    CHECK(usbeam_client_push(c, frame, 1u << 30, 0, &ids[0]) == USBEAM_CLIENT_ERR_TOO_LARGE);

    /* parameters: generation advances, text arrives whole */
    uint64_t newest = 0;
    char text[128];
    size_t bytes = 0;
    CHECK(usbeam_client_set_params(c, "{\"c\": 1540}") == USBEAM_CLIENT_OK);
    CHECK(usbeam_shm_server_params(s, 1, text, sizeof text, &bytes, &newest) == USBEAM_OK);
    CHECK(newest == 1 && bytes == 11 && strcmp(text, "{\"c\": 1540}") == 0);

    usbeam_shm_server_stop(s);
    fill_frame(frame, 9);
    CHECK(usbeam_client_push(c, frame, sizeof frame, 0, &ids[0]) == USBEAM_CLIENT_ERR_SERVER_GONE);
    usbeam_client_close(c);
    usbeam_shm_server_destroy(s);

    s = make_server(1, USBEAM_SHM_POLICY_BLOCK, 1000);
    c = usbeam_client_open(region, 100);
    CHECK(s && c);
    if (!s || !c) return;
    CHECK(usbeam_client_push(c, frame, sizeof frame, 0, &ids[0]) == USBEAM_CLIENT_OK);
    CHECK(usbeam_client_push(c, frame, sizeof frame, 10, &ids[1]) == USBEAM_CLIENT_ERR_TIMEOUT);
    usbeam_client_close(c);
    usbeam_shm_server_destroy(s);
    CHECK(usbeam_client_open(region, 0) == NULL); /* unlinked */
}

int main(void)
{
    snprintf(region, sizeof region, "/usbeam_ctest_%d", (int)getpid());
    test_round_trip_across_processes();
    test_second_server_refused();
    test_killed_client_does_not_wedge_server();
    test_stalled_writer_quarantined();
    test_parameter_generations();
    test_racing_posts_to_one_entry();
    test_layout_version_mismatch_refused();
    test_policies_params_and_server_gone();
    shm_unlink(region);
    return check_summary();
}
