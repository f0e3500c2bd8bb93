/*
 * test_client.c - the shared-memory server (shm_server.c) and the usbeam_client_ library
 * (client.c) across real processes (fork): frames round-trip in order with intact content,
 * a client killed mid-push (and one killed while holding the region lock) leaves the server
 * serving the next client, a second server is refused, a layout-version mismatch is
 * refused with a message, drop_oldest and block policies, parameters, server gone.
 * Prints "N passed, N failed".
 */
#define _GNU_SOURCE
#include "shm_server.h"
#include "shm_sync.h"
#include "usbeam.h"
#include "usbeam_client.h"

#include <fcntl.h>
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
    CHECK(counters.abandoned == 1);
    /* the next client is served normally */
    child = fork();
    if (child == 0) _exit(client_round_trip(5));
    while (waitpid(child, &status, WNOHANG) == 0) serve_one(s, 5);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    usbeam_shm_server_destroy(s);
}

static void test_stalled_writer_reclaimed_by_timeout(void)
{
    usbeam_shm_server *s = make_server(1, USBEAM_SHM_POLICY_BLOCK, 30);
    usbeam_client *c = usbeam_client_open(region, 100);
    CHECK(s && c);
    if (!s || !c) return;
    void *data;
    unsigned long long cap, id;
    CHECK(usbeam_client_push_begin(c, 0, &data, &cap, &id) == USBEAM_CLIENT_OK);
    CHECK(cap >= N_SAMPLES * 2);
    struct timespec pause = {0, 60000000};
    nanosleep(&pause, NULL);
    uint64_t reclaimed = 0;
    CHECK(usbeam_shm_server_reap(s, &reclaimed) == USBEAM_OK && reclaimed == 1);
    /* the late commit is refused instead of publishing a slot someone else may own */
    CHECK(usbeam_client_push_commit(c, id, N_SAMPLES * 2) == USBEAM_CLIENT_ERR_ARGUMENT);
    CHECK(strstr(usbeam_client_last_error(), "write timeout") != NULL);
    usbeam_client_close(c);
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
    uint64_t generation = 0;
    char text[128];
    size_t bytes = 0;
    CHECK(usbeam_client_set_params(c, "{\"c\": 1540}") == USBEAM_CLIENT_OK);
    CHECK(usbeam_shm_server_params(s, &generation, text, sizeof text, &bytes) == USBEAM_OK);
    CHECK(generation == 1 && bytes == 11 && strcmp(text, "{\"c\": 1540}") == 0);
    CHECK(usbeam_shm_server_params(s, &generation, text, sizeof text, &bytes) == USBEAM_OK && bytes == 0);

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
    test_stalled_writer_reclaimed_by_timeout();
    test_layout_version_mismatch_refused();
    test_policies_params_and_server_gone();
    shm_unlink(region);
    return check_summary();
}
