/*
 * client.c - the usbeam_client_ library: attach to a `usbeam serve` shared-memory region,
 * publish parameters, push frames, read results.  Protocol and layout: shm_layout.h.
 * Built into the extension module (for tests) and, by `make client`, as the standalone
 * libusbeam_client.so that MATLAB loads (it needs nothing but libc).
 *
 * Frames are opaque bytes here (the server knows their layout from the parameters);
 * results carry dtype and C-order shape.  Copies run outside the region lock.
 */
#define _GNU_SOURCE
#include "shm/usbeam_client.h"
#include "shm/shm_sync.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct usbeam_client {
    usbeam_shm_header *header;
    size_t region_bytes;
    int32_t pid;
    int64_t last_liveness_check_ns;
};

static _Thread_local char client_error[512];

static int client_fail(int status, const char *format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static int client_fail(int status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(client_error, sizeof client_error, format, args);
    va_end(args);
    return status;
}

const char *usbeam_client_last_error(void) { return client_error; }

const char *usbeam_client_status_string(int status)
{
    switch (status) {
    case USBEAM_CLIENT_OK: return "success";
    case USBEAM_CLIENT_ERR_ARGUMENT: return "invalid argument";
    case USBEAM_CLIENT_ERR_SYSTEM: return "system call failed";
    case USBEAM_CLIENT_ERR_LAYOUT: return "shared-memory layout mismatch";
    case USBEAM_CLIENT_ERR_TIMEOUT: return "timed out";
    case USBEAM_CLIENT_ERR_DROPPED: return "frame dropped under overload";
    case USBEAM_CLIENT_ERR_REJECTED: return "frame rejected by the server";
    case USBEAM_CLIENT_ERR_FAILED: return "pipeline failed on the frame";
    case USBEAM_CLIENT_ERR_EVICTED: return "result overwritten by a newer frame";
    case USBEAM_CLIENT_ERR_SERVER_GONE: return "server is not running";
    case USBEAM_CLIENT_ERR_TOO_LARGE: return "larger than the region allows";
    case USBEAM_CLIENT_ERR_ABANDONED: return "frame abandoned mid-push";
    }
    return "unknown status";
}

/* Deadline helpers: timeout_ms < 0 waits forever. */
static int64_t deadline_after(int timeout_ms)
{
    return timeout_ms < 0 ? INT64_MAX : usbeam_shm_clock_ns() + (int64_t)timeout_ms * 1000000ll;
}

static int64_t remaining_ns(int64_t deadline)
{
    if (deadline == INT64_MAX) return INT64_MAX;
    int64_t left = deadline - usbeam_shm_clock_ns();
    return left > 0 ? left : 0;
}

/* The server's liveness, checked at most every 50 ms while a client waits. */
static int server_gone(usbeam_client *c)
{
    int64_t now = usbeam_shm_clock_ns();
    usbeam_shm_header *h = c->header;
    if (__atomic_load_n(&h->server_state, __ATOMIC_ACQUIRE) == USBEAM_SHM_SERVER_STOPPED) return 1;
    if (now - c->last_liveness_check_ns < 50000000ll) return 0;
    c->last_liveness_check_ns = now;
    return !usbeam_shm_pid_alive(__atomic_load_n(&h->server_pid, __ATOMIC_ACQUIRE));
}

static int gone_error(void)
{
    return client_fail(USBEAM_CLIENT_ERR_SERVER_GONE, "the usbeam server has stopped or died");
}

static int lock_or_fail(usbeam_client *c)
{
    int rc = usbeam_shm_lock(c->header);
    if (rc != 0) return client_fail(USBEAM_CLIENT_ERR_SYSTEM, "region lock failed: %s", strerror(rc));
    return USBEAM_CLIENT_OK;
}

/* Check the identification block of a mapped header; message says what differs. */
static int check_header(const usbeam_shm_header *h, const char *name, size_t file_bytes)
{
    if (h->magic != USBEAM_SHM_MAGIC)
        return client_fail(USBEAM_CLIENT_ERR_LAYOUT,
                           "%s is not a usbeam region (magic 0x%016llx, expected 0x%016llx)", name,
                           (unsigned long long)h->magic, (unsigned long long)USBEAM_SHM_MAGIC);
    if (h->layout_version != USBEAM_SHM_LAYOUT_VERSION)
        return client_fail(USBEAM_CLIENT_ERR_LAYOUT,
                           "%s has shared-memory layout version %u but this client speaks version %u: "
                           "use a client library and server from the same usbeam release",
                           name, h->layout_version, USBEAM_SHM_LAYOUT_VERSION);
    if (h->header_bytes != sizeof(usbeam_shm_header))
        return client_fail(USBEAM_CLIENT_ERR_LAYOUT,
                           "%s has a %u-byte header but this client expects %zu bytes (different "
                           "platform ABI or build)", name, h->header_bytes, sizeof(usbeam_shm_header));
    if (h->region_bytes > file_bytes || h->n_slots == 0 || h->n_slots > USBEAM_SHM_MAX_SLOTS ||
        h->n_results == 0 || h->n_results > USBEAM_SHM_MAX_RESULTS)
        return client_fail(USBEAM_CLIENT_ERR_LAYOUT, "%s has an inconsistent header (sizes)", name);
    return USBEAM_CLIENT_OK;
}

/* One attempt to attach; USBEAM_CLIENT_ERR_TIMEOUT means "not there yet, retry". */
static int try_open(const char *name, usbeam_client *c)
{
    int fd = shm_open(name, O_RDWR, 0);
    if (fd < 0) {
        if (errno == ENOENT) return client_fail(USBEAM_CLIENT_ERR_TIMEOUT, "no usbeam server region %s", name);
        return client_fail(USBEAM_CLIENT_ERR_SYSTEM, "shm_open(%s): %s", name, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return client_fail(USBEAM_CLIENT_ERR_SYSTEM, "fstat(%s): %s", name, strerror(errno));
    }
    if ((size_t)st.st_size < sizeof(usbeam_shm_header)) {
        close(fd);
        return client_fail(USBEAM_CLIENT_ERR_TIMEOUT, "%s is still being created", name);
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return client_fail(USBEAM_CLIENT_ERR_SYSTEM, "mmap(%s): %s", name, strerror(errno));
    usbeam_shm_header *h = map;
    /* The server stores magic last: zero means it is still initialising. */
    if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) == 0) {
        munmap(map, (size_t)st.st_size);
        return client_fail(USBEAM_CLIENT_ERR_TIMEOUT, "%s is still being initialised", name);
    }
    int rc = check_header(h, name, (size_t)st.st_size);
    if (rc != USBEAM_CLIENT_OK) {
        munmap(map, (size_t)st.st_size);
        return rc;
    }
    c->header = h;
    c->region_bytes = (size_t)st.st_size;
    return USBEAM_CLIENT_OK;
}

usbeam_client *usbeam_client_open(const char *name, int timeout_ms)
{
    if (!name || !name[0]) {
        client_fail(USBEAM_CLIENT_ERR_ARGUMENT, "name must be a region name such as \"/usbeam\"");
        return NULL;
    }
    usbeam_client *c = calloc(1, sizeof *c);
    if (!c) {
        client_fail(USBEAM_CLIENT_ERR_SYSTEM, "out of memory");
        return NULL;
    }
    c->pid = (int32_t)getpid();
    int64_t deadline = deadline_after(timeout_ms);
    for (;;) {
        int rc = try_open(name, c);
        if (rc == USBEAM_CLIENT_OK) {
            if (c->header->server_state != USBEAM_SHM_SERVER_RUNNING ||
                !usbeam_shm_pid_alive(c->header->server_pid)) {
                rc = client_fail(USBEAM_CLIENT_ERR_SERVER_GONE,
                                 "%s exists but its server (pid %d) is not running", name,
                                 (int)c->header->server_pid);
                munmap(c->header, c->region_bytes);
                c->header = NULL;
            } else {
                return c;
            }
        }
        if (rc != USBEAM_CLIENT_ERR_TIMEOUT && rc != USBEAM_CLIENT_ERR_SERVER_GONE) break;
        if (remaining_ns(deadline) == 0) break;
        struct timespec pause = {0, 2000000};
        nanosleep(&pause, NULL);
    }
    free(c);
    return NULL;
}

int usbeam_client_close(usbeam_client *client)
{
    if (!client) return USBEAM_CLIENT_OK;
    if (client->header) munmap(client->header, client->region_bytes);
    free(client);
    return USBEAM_CLIENT_OK;
}

int usbeam_client_info_get(usbeam_client *c, usbeam_client_info *info)
{
    if (!c || !info) return client_fail(USBEAM_CLIENT_ERR_ARGUMENT, "client and info must not be NULL");
    usbeam_shm_header *h = c->header;
    int rc = lock_or_fail(c);
    if (rc) return rc;
    memset(info, 0, sizeof *info);
    info->layout_version = h->layout_version;
    info->n_slots = h->n_slots;
    info->n_results = h->n_results;
    info->policy = h->policy;
    info->slot_capacity = h->slot_capacity;
    info->result_capacity = h->result_capacity;
    info->server_pid = h->server_pid;
    info->pushed = h->counters.pushed;
    info->dropped = h->counters.dropped;
    info->rejected = h->counters.rejected;
    info->abandoned = h->counters.abandoned;
    info->processed = h->counters.processed;
    info->failed = h->counters.failed;
    info->stalled = h->counters.stalled;
    info->discarded = h->counters.discarded;
    usbeam_shm_unlock(h);
    info->server_running = h->server_state == USBEAM_SHM_SERVER_RUNNING && usbeam_shm_pid_alive(h->server_pid);
    return USBEAM_CLIENT_OK;
}

int usbeam_client_set_params(usbeam_client *c, const char *json)
{
    if (!c || !json) return client_fail(USBEAM_CLIENT_ERR_ARGUMENT, "client and json must not be NULL");
    size_t bytes = strlen(json);
    if (bytes + 1 > USBEAM_SHM_PARAM_CAPACITY)
        return client_fail(USBEAM_CLIENT_ERR_TOO_LARGE, "parameters are %zu bytes, the region holds %u",
                           bytes, USBEAM_SHM_PARAM_CAPACITY - 1);
    usbeam_shm_header *h = c->header;
    if (server_gone(c)) return gone_error();
    int rc = lock_or_fail(c);
    if (rc) return rc;
    /* Generation g lives in block g % RING, so frames pushed under the last RING - 1
     * generations keep theirs.  Block generation, then the latest generation, last: a
     * death mid-copy leaves a block no generation points to and the old set current. */
    uint64_t generation = h->params_generation + 1;
    usbeam_shm_params *p = &h->params[generation % USBEAM_SHM_PARAM_RING];
    p->generation = 0;
    memcpy(p->text, json, bytes + 1);
    p->bytes = bytes;
    p->generation = generation;
    h->params_generation = generation;
    usbeam_shm_unlock(h);
    return USBEAM_CLIENT_OK;
}

/* Find a slot for a new frame under the lock: a FREE one, else (drop_oldest) the oldest
 * READY one, whose frame is recorded as dropped.  Returns the index or -1. */
static int claim_slot(usbeam_shm_header *h)
{
    int oldest_ready = -1;
    for (uint32_t i = 0; i < h->n_slots; ++i) {
        if (h->slots[i].state == USBEAM_SHM_SLOT_FREE) return (int)i;
        if (h->slots[i].state == USBEAM_SHM_SLOT_READY &&
            (oldest_ready < 0 || h->slots[i].frame_id < h->slots[oldest_ready].frame_id))
            oldest_ready = (int)i;
    }
    if (h->policy != USBEAM_SHM_POLICY_DROP_OLDEST || oldest_ready < 0) return -1;
    uint64_t dropped_id = h->slots[oldest_ready].frame_id;
    h->dropped_ids[h->counters.dropped % USBEAM_SHM_DROPPED_HISTORY] = dropped_id;
    h->counters.dropped += 1;
    return oldest_ready;
}

int usbeam_client_push_begin(usbeam_client *c, int timeout_ms, void **data,
                             unsigned long long *capacity, unsigned long long *frame_id)
{
    if (!c || !data || !frame_id)
        return client_fail(USBEAM_CLIENT_ERR_ARGUMENT, "client, data and frame_id must not be NULL");
    usbeam_shm_header *h = c->header;
    int64_t deadline = deadline_after(timeout_ms);
    for (;;) {
        if (server_gone(c)) return gone_error();
        int rc = lock_or_fail(c);
        if (rc) return rc;
        int slot = claim_slot(h);
        if (slot >= 0) {
            usbeam_shm_slot *s = &h->slots[slot];
            int64_t now = usbeam_shm_clock_ns();
            s->owner_pid = c->pid;
            s->frame_id = h->next_frame_id++;
            s->bytes = 0;
            s->param_generation = h->params_generation;
            s->since_ns = now;
            s->push_ns = now;
            s->state = USBEAM_SHM_SLOT_WRITING; /* last: see shm_layout.h */
            h->counters.pushed += 1;
            *frame_id = s->frame_id;
            usbeam_shm_unlock(h);
            *data = usbeam_shm_slot_data(h, (uint32_t)slot);
            if (capacity) *capacity = h->slot_capacity;
            return USBEAM_CLIENT_OK;
        }
        usbeam_shm_unlock(h);
        int64_t left = remaining_ns(deadline);
        if (left == 0)
            return client_fail(USBEAM_CLIENT_ERR_TIMEOUT, "no free slot within %d ms (all %u slots busy)",
                               timeout_ms, h->n_slots);
        struct timespec pause = {0, left < 100000 ? (long)left : 100000};
        nanosleep(&pause, NULL);
    }
}

/* The slot this process reserved for frame_id (WRITING, or STALLED once the server
 * quarantined it after the write timeout), or -1. */
static int find_my_slot(usbeam_client *c, unsigned long long frame_id)
{
    usbeam_shm_header *h = c->header;
    for (uint32_t i = 0; i < h->n_slots; ++i)
        if ((h->slots[i].state == USBEAM_SHM_SLOT_WRITING || h->slots[i].state == USBEAM_SHM_SLOT_STALLED) &&
            h->slots[i].frame_id == frame_id && h->slots[i].owner_pid == c->pid)
            return (int)i;
    return -1;
}

static int finish_push(usbeam_client *c, unsigned long long frame_id, unsigned long long bytes, int commit)
{
    if (!c) return client_fail(USBEAM_CLIENT_ERR_ARGUMENT, "client must not be NULL");
    usbeam_shm_header *h = c->header;
    if (commit && bytes > h->slot_capacity)
        return client_fail(USBEAM_CLIENT_ERR_TOO_LARGE, "frame of %llu bytes exceeds the slot capacity %llu",
                           bytes, (unsigned long long)h->slot_capacity);
    int rc = lock_or_fail(c);
    if (rc) return rc;
    int slot = find_my_slot(c, frame_id);
    if (slot < 0) {
        usbeam_shm_unlock(h);
        return client_fail(USBEAM_CLIENT_ERR_ARGUMENT,
                           "frame %llu is not being written by this process (reclaimed after the "
                           "write timeout of %u ms?)", frame_id, h->write_timeout_ms);
    }
    usbeam_shm_slot *s = &h->slots[slot];
    if (s->state == USBEAM_SHM_SLOT_STALLED) {
        /* The server gave this frame up (counted abandoned, result posted): the data may be
         * whole now but the frame's outcome is already final.  The slot is reusable from
         * here on, since its writer has stopped writing. */
        if (commit) h->counters.discarded += 1;
        s->since_ns = usbeam_shm_clock_ns();
        s->owner_pid = 0;
        s->state = USBEAM_SHM_SLOT_FREE;
        unsigned timeout = h->write_timeout_ms;
        usbeam_shm_unlock(h);
        if (!commit) return USBEAM_CLIENT_OK;
        return client_fail(USBEAM_CLIENT_ERR_ABANDONED,
                           "frame %llu was abandoned: it was still being written after the write timeout "
                           "of %u ms, so the server gave it up; the frame is discarded", frame_id, timeout);
    }
    s->bytes = bytes;
    s->since_ns = usbeam_shm_clock_ns();
    s->owner_pid = 0;
    s->state = commit ? USBEAM_SHM_SLOT_READY : USBEAM_SHM_SLOT_FREE;
    if (!commit) h->counters.pushed -= 1;
    usbeam_shm_unlock(h);
    if (commit) sem_post(&h->frames_ready);
    return USBEAM_CLIENT_OK;
}

int usbeam_client_push_commit(usbeam_client *c, unsigned long long frame_id, unsigned long long bytes)
{
    return finish_push(c, frame_id, bytes, 1);
}

int usbeam_client_push_abort(usbeam_client *c, unsigned long long frame_id)
{
    return finish_push(c, frame_id, 0, 0);
}

int usbeam_client_push(usbeam_client *c, const void *frame, unsigned long long bytes, int timeout_ms,
                       unsigned long long *frame_id)
{
    if (!c || !frame || !frame_id)
        return client_fail(USBEAM_CLIENT_ERR_ARGUMENT, "client, frame and frame_id must not be NULL");
    if (bytes == 0) return client_fail(USBEAM_CLIENT_ERR_ARGUMENT, "bytes must be > 0");
    if (bytes > c->header->slot_capacity)
        return client_fail(USBEAM_CLIENT_ERR_TOO_LARGE, "frame of %llu bytes exceeds the slot capacity %llu",
                           bytes, (unsigned long long)c->header->slot_capacity);
    void *data = NULL;
    int rc = usbeam_client_push_begin(c, timeout_ms, &data, NULL, frame_id);
    if (rc) return rc;
    memcpy(data, frame, (size_t)bytes);
    return usbeam_client_push_commit(c, *frame_id, bytes);
}

static int was_dropped(const usbeam_shm_header *h, uint64_t frame_id)
{
    uint64_t n = h->counters.dropped < USBEAM_SHM_DROPPED_HISTORY ? h->counters.dropped
                                                                 : USBEAM_SHM_DROPPED_HISTORY;
    for (uint64_t i = 0; i < n; ++i)
        if (h->dropped_ids[i] == frame_id) return 1;
    return 0;
}

static int status_of_result(int32_t status)
{
    switch (status) {
    case USBEAM_SHM_STATUS_OK: return USBEAM_CLIENT_OK;
    case USBEAM_SHM_STATUS_DROPPED: return USBEAM_CLIENT_ERR_DROPPED;
    case USBEAM_SHM_STATUS_REJECTED: return USBEAM_CLIENT_ERR_REJECTED;
    case USBEAM_SHM_STATUS_ABANDONED: return USBEAM_CLIENT_ERR_ABANDONED;
    default: return USBEAM_CLIENT_ERR_FAILED;
    }
}

/* Copy result entry e (already seen DONE for frame_id under the lock) without the lock,
 * then confirm with the seqlock stamp that it was not overwritten meanwhile. */
static int copy_result(usbeam_client *c, uint32_t e, uint64_t frame_id, void *out,
                       unsigned long long capacity, usbeam_client_result *result)
{
    usbeam_shm_header *h = c->header;
    usbeam_shm_result *r = &h->results[e];
    uint64_t stamp = 2 * frame_id + 2;
    usbeam_client_result local;
    memset(&local, 0, sizeof local);
    local.frame_id = frame_id;
    local.status = status_of_result(r->status);
    local.dtype = (int)r->dtype;
    local.ndim = (int)r->ndim;
    for (uint32_t d = 0; d < USBEAM_SHM_MAX_DIMS && d < r->ndim; ++d) local.shape[d] = r->shape[d];
    local.latency_s = (double)(r->done_ns - r->push_ns) * 1e-9;
    memcpy(local.message, r->message, sizeof local.message);
    local.message[sizeof local.message - 1] = '\0';
    int rc = local.status;
    /* read the size once: a concurrent overwrite must not change it between check and copy */
    uint64_t bytes = __atomic_load_n(&r->bytes, __ATOMIC_ACQUIRE);
    if (bytes > h->result_capacity) bytes = h->result_capacity; /* torn read; the stamp check fails below */
    if (rc == USBEAM_CLIENT_OK) {
        if (bytes > capacity) {
            rc = client_fail(USBEAM_CLIENT_ERR_TOO_LARGE, "result of frame %llu has %llu bytes, out holds %llu",
                             (unsigned long long)frame_id, (unsigned long long)bytes, capacity);
        } else if (out) {
            memcpy(out, usbeam_shm_result_data(h, e), (size_t)bytes);
            local.bytes = bytes;
        }
    } else {
        client_fail(rc, "frame %llu: %s%s%s", (unsigned long long)frame_id, usbeam_client_status_string(rc),
                    local.message[0] ? ": " : "", local.message);
    }
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&r->seq, __ATOMIC_ACQUIRE) != stamp)
        rc = client_fail(USBEAM_CLIENT_ERR_EVICTED, "result of frame %llu was overwritten while being read "
                         "(read results sooner or enlarge the result ring)", (unsigned long long)frame_id);
    local.status = rc;
    if (result) *result = local;
    return rc;
}

int usbeam_client_get_result(usbeam_client *c, unsigned long long frame_id, void *out,
                             unsigned long long capacity, int timeout_ms, usbeam_client_result *result)
{
    if (!c) return client_fail(USBEAM_CLIENT_ERR_ARGUMENT, "client must not be NULL");
    usbeam_shm_header *h = c->header;
    int64_t deadline = deadline_after(timeout_ms);
    uint32_t e = (uint32_t)(frame_id % h->n_results);
    if (result) memset(result, 0, sizeof *result);
    for (;;) {
        int rc = lock_or_fail(c);
        if (rc) return rc;
        if (frame_id == 0 || frame_id >= h->next_frame_id) {
            usbeam_shm_unlock(h);
            return client_fail(USBEAM_CLIENT_ERR_ARGUMENT, "frame id %llu was never pushed", frame_id);
        }
        usbeam_shm_result *r = &h->results[e];
        int state = -1; /* -1 pending, 0 ready to copy, else a final status */
        if (r->state == USBEAM_SHM_RESULT_DONE && r->frame_id == frame_id)
            state = 0;
        else if (was_dropped(h, frame_id))
            state = USBEAM_CLIENT_ERR_DROPPED;
        else if (r->frame_id > frame_id && r->state != USBEAM_SHM_RESULT_EMPTY)
            state = USBEAM_CLIENT_ERR_EVICTED;
        usbeam_shm_unlock(h);
        if (state == 0) return copy_result(c, e, frame_id, out, capacity, result);
        if (state > 0) {
            if (result) {
                result->frame_id = frame_id;
                result->status = state;
            }
            return client_fail(state, "frame %llu: %s", frame_id, usbeam_client_status_string(state));
        }
        if (server_gone(c)) return gone_error();
        int64_t left = remaining_ns(deadline);
        if (left == 0)
            return client_fail(USBEAM_CLIENT_ERR_TIMEOUT, "no result for frame %llu within %d ms", frame_id,
                               timeout_ms);
        /* Short slices: several clients share results_posted, so a post may wake another. */
        usbeam_shm_sem_wait_ns(&h->results_posted, left < 1000000 ? left : 1000000);
    }
}

int usbeam_client_latest(usbeam_client *c, unsigned long long after_id, void *out,
                         unsigned long long capacity, int timeout_ms, usbeam_client_result *result)
{
    if (!c) return client_fail(USBEAM_CLIENT_ERR_ARGUMENT, "client must not be NULL");
    usbeam_shm_header *h = c->header;
    int64_t deadline = deadline_after(timeout_ms);
    for (;;) {
        int rc = lock_or_fail(c);
        if (rc) return rc;
        uint64_t best_id = 0;
        uint32_t best = 0;
        for (uint32_t e = 0; e < h->n_results; ++e) {
            const usbeam_shm_result *r = &h->results[e];
            if (r->state == USBEAM_SHM_RESULT_DONE && r->status == USBEAM_SHM_STATUS_OK &&
                r->frame_id > after_id && r->frame_id > best_id) {
                best_id = r->frame_id;
                best = e;
            }
        }
        usbeam_shm_unlock(h);
        if (best_id) {
            rc = copy_result(c, best, best_id, out, capacity, result);
            if (rc != USBEAM_CLIENT_ERR_EVICTED) return rc;
            continue; /* overwritten by an even newer one: take that */
        }
        if (server_gone(c)) return gone_error();
        int64_t left = remaining_ns(deadline);
        if (left == 0)
            return client_fail(USBEAM_CLIENT_ERR_TIMEOUT, "no new result within %d ms", timeout_ms);
        usbeam_shm_sem_wait_ns(&h->results_posted, left < 1000000 ? left : 1000000);
    }
}
