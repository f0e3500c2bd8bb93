/*
 * shm_server.c - server side of the usbeam shared-memory region (layout and protocol in
 * shm_layout.h; the client side is client.c).  The server creates the region with
 * O_EXCL, so a second server on the same name is refused with the pid of the first;
 * it takes READY frames oldest first, posts results under the seqlock stamp (one post at
 * a time: post_lock), reclaims slots whose writer died (a client killed mid-push) and
 * quarantines those whose live writer passed the write timeout, posting ABANDONED for
 * their frames.
 */
#define _GNU_SOURCE
#include "shm/shm_server.h"
#include "shm/shm_sync.h"
#include "common/usbeam_internal.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct usbeam_shm_server {
    usbeam_shm_header *header;
    size_t region_bytes;
    char name[256];
    int32_t pid;
    int stopped;
    /* Serialises posts (result entries) between the server's threads: a post is two
     * locked steps around an unlocked copy, and two posts to one entry must not
     * interleave.  Only this process posts, so a process-local mutex suffices; it is
     * always taken before the region lock, never inside it. */
    pthread_mutex_t post_lock;
};

/* A frame the reaper took from its writer, to be posted ABANDONED after the region lock. */
typedef struct abandoned_frame {
    uint64_t frame_id;
    int64_t push_ns;
    int32_t owner_pid;
    int stalled;
} abandoned_frame;

int64_t usbeam_shm_now_ns(void) { return usbeam_shm_clock_ns(); }

static usbeam_status lock_region(usbeam_shm_header *h)
{
    int rc = usbeam_shm_lock(h);
    if (rc != 0) return usbeam_fail(USBEAM_ERR_INTERNAL, "shared-memory lock failed: %s", strerror(rc));
    return USBEAM_OK;
}

/* Why an existing region may not be taken over: a live server, or a stale one. */
static usbeam_status describe_existing(const char *name, int *stale)
{
    *stale = 0;
    int fd = shm_open(name, O_RDONLY, 0);
    if (fd < 0) return USBEAM_OK; /* vanished meanwhile: retry the create */
    struct stat st;
    int32_t pid = 0;
    uint32_t state = USBEAM_SHM_SERVER_STOPPED;
    int ours = 0;
    if (fstat(fd, &st) == 0 && (size_t)st.st_size >= sizeof(usbeam_shm_header)) {
        const usbeam_shm_header *h = mmap(NULL, sizeof *h, PROT_READ, MAP_SHARED, fd, 0);
        if (h != MAP_FAILED) {
            ours = h->magic == USBEAM_SHM_MAGIC;
            pid = h->server_pid;
            state = h->server_state;
            munmap((void *)h, sizeof *h);
        }
    }
    close(fd);
    if (ours && state != USBEAM_SHM_SERVER_STOPPED && usbeam_shm_pid_alive(pid))
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                           "name: shared-memory region %s is already served by a running usbeam server "
                           "(pid %d); stop it or choose another name", name, (int)pid);
    *stale = 1;
    return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                       "name: shared-memory region %s already exists (%s%d, not running); "
                       "pass replace_stale (usbeam serve --replace-stale) to remove it",
                       name, ours ? "left by server pid " : "not a usbeam region, pid ", (int)pid);
}

static usbeam_status validate_config(const usbeam_shm_server_config *cfg, size_t *region_bytes)
{
    if (!cfg->name || cfg->name[0] != '/' || strlen(cfg->name) < 2 || strlen(cfg->name) > 250 ||
        strchr(cfg->name + 1, '/'))
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                           "name must look like \"/usbeam\" (one leading slash, <= 250 characters)");
    if (cfg->n_slots < 1 || cfg->n_slots > USBEAM_SHM_MAX_SLOTS)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "slots must be in 1..%u (got %u)", USBEAM_SHM_MAX_SLOTS,
                           cfg->n_slots);
    if (cfg->n_results < 1 || cfg->n_results > USBEAM_SHM_MAX_RESULTS)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "results must be in 1..%u (got %u)",
                           USBEAM_SHM_MAX_RESULTS, cfg->n_results);
    if (cfg->slot_capacity == 0 || cfg->result_capacity == 0)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "slot_bytes and result_bytes must be > 0");
    if (cfg->policy != USBEAM_SHM_POLICY_DROP_OLDEST && cfg->policy != USBEAM_SHM_POLICY_BLOCK)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "policy must be drop_oldest (0) or block (1)");
    if (cfg->write_timeout_ms == 0)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "write_timeout_ms must be > 0");
    size_t slots, results;
    if (usbeam_mul_size(usbeam_shm_align(cfg->slot_capacity), cfg->n_slots, &slots) ||
        usbeam_mul_size(usbeam_shm_align(cfg->result_capacity), cfg->n_results, &results))
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "slot_bytes/result_bytes: region size overflows");
    size_t total = usbeam_shm_align(sizeof(usbeam_shm_header)) + slots + results;
    if (total > USBEAM_MAX_ALLOCATION || total < slots)
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "slot_bytes/result_bytes: region of %zu bytes is too large",
                           total);
    *region_bytes = total;
    return USBEAM_OK;
}

static usbeam_status init_sync(usbeam_shm_header *h)
{
    pthread_mutexattr_t attr;
    if (pthread_mutexattr_init(&attr) != 0) return usbeam_fail(USBEAM_ERR_INTERNAL, "pthread_mutexattr_init failed");
    int rc = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    if (rc == 0) rc = pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    if (rc == 0) rc = pthread_mutex_init(&h->lock, &attr);
    pthread_mutexattr_destroy(&attr);
    if (rc != 0) return usbeam_fail(USBEAM_ERR_INTERNAL, "robust process-shared mutex: %s", strerror(rc));
    if (sem_init(&h->frames_ready, 1, 0) != 0 || sem_init(&h->results_posted, 1, 0) != 0)
        return usbeam_fail(USBEAM_ERR_INTERNAL, "process-shared semaphore: %s", strerror(errno));
    return USBEAM_OK;
}

usbeam_status usbeam_shm_server_create(const usbeam_shm_server_config *cfg, usbeam_shm_server **server)
{
    if (!cfg || !server) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "config and server must not be NULL");
    *server = NULL;
    size_t region_bytes = 0;
    usbeam_status st = validate_config(cfg, &region_bytes);
    if (st != USBEAM_OK) return st;

    int fd = -1;
    for (int attempt = 0; attempt < 3 && fd < 0; ++attempt) {
        fd = shm_open(cfg->name, O_CREAT | O_EXCL | O_RDWR, 0600);
        if (fd >= 0) break;
        if (errno != EEXIST)
            return usbeam_fail(USBEAM_ERR_INTERNAL, "shm_open(%s): %s", cfg->name, strerror(errno));
        int stale = 0;
        st = describe_existing(cfg->name, &stale);
        if (st != USBEAM_OK && !(stale && cfg->replace_stale)) return st;
        usbeam_clear_error();
        if (stale) shm_unlink(cfg->name);
    }
    if (fd < 0) return usbeam_fail(USBEAM_ERR_INTERNAL, "shm_open(%s): could not create the region", cfg->name);
    /* Reserve the pages now: a sparse region on a full /dev/shm would make a later write
     * (in any client) die of SIGBUS instead of failing here with a message. */
    int err = posix_fallocate(fd, 0, (off_t)region_bytes);
    if (err == EINVAL || err == EOPNOTSUPP) err = ftruncate(fd, (off_t)region_bytes) == 0 ? 0 : errno;
    if (err != 0) {
        close(fd);
        shm_unlink(cfg->name);
        return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY,
                           "slot_bytes/result_bytes: a region of %zu bytes does not fit in shared memory "
                           "(/dev/shm): %s", region_bytes, strerror(err));
    }
    void *map = mmap(NULL, region_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        shm_unlink(cfg->name);
        return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "mmap(%s, %zu bytes): %s", cfg->name, region_bytes,
                           strerror(errno));
    }
    usbeam_shm_server *s = calloc(1, sizeof *s);
    if (!s || pthread_mutex_init(&s->post_lock, NULL) != 0) {
        free(s);
        munmap(map, region_bytes);
        shm_unlink(cfg->name);
        return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "server handle");
    }
    usbeam_shm_header *h = map;
    memset(h, 0, sizeof *h);
    st = init_sync(h);
    if (st != USBEAM_OK) {
        munmap(map, region_bytes);
        shm_unlink(cfg->name);
        pthread_mutex_destroy(&s->post_lock);
        free(s);
        return st;
    }
    h->layout_version = USBEAM_SHM_LAYOUT_VERSION;
    h->header_bytes = (uint32_t)sizeof(usbeam_shm_header);
    h->region_bytes = region_bytes;
    h->n_slots = cfg->n_slots;
    h->n_results = cfg->n_results;
    h->slot_capacity = usbeam_shm_align(cfg->slot_capacity);
    h->result_capacity = usbeam_shm_align(cfg->result_capacity);
    h->slots_offset = usbeam_shm_align(sizeof(usbeam_shm_header));
    h->results_offset = h->slots_offset + (uint64_t)h->n_slots * h->slot_capacity;
    h->policy = cfg->policy;
    h->write_timeout_ms = cfg->write_timeout_ms;
    h->server_pid = (int32_t)getpid();
    h->server_state = USBEAM_SHM_SERVER_RUNNING;
    h->server_heartbeat_ns = usbeam_shm_clock_ns();
    h->next_frame_id = 1;
    /* magic last: a client that sees it sees everything above */
    __atomic_store_n(&h->magic, USBEAM_SHM_MAGIC, __ATOMIC_RELEASE);

    s->header = h;
    s->region_bytes = region_bytes;
    s->pid = h->server_pid;
    snprintf(s->name, sizeof s->name, "%s", cfg->name);
    *server = s;
    return USBEAM_OK;
}

/* Under the region lock: take WRITING slots away from dead writers (FREE) and from live
 * ones past the write timeout (STALLED: a live writer may still store into the slot, so
 * it must not be handed to anyone else); free STALLED slots whose writer has died since.
 * Frames taken away are listed in out[] (at most n_slots) to be posted ABANDONED once
 * the lock is released. */
static uint32_t reap_locked(usbeam_shm_header *h, int64_t now, abandoned_frame *out)
{
    uint32_t n = 0;
    int64_t timeout_ns = (int64_t)h->write_timeout_ms * 1000000ll;
    for (uint32_t i = 0; i < h->n_slots; ++i) {
        usbeam_shm_slot *slot = &h->slots[i];
        if (slot->state == USBEAM_SHM_SLOT_STALLED) {
            /* already counted and posted; its memory is reusable once the writer is gone */
            if (!usbeam_shm_pid_alive(slot->owner_pid)) {
                slot->owner_pid = 0;
                slot->since_ns = now;
                slot->state = USBEAM_SHM_SLOT_FREE;
            }
            continue;
        }
        if (slot->state != USBEAM_SHM_SLOT_WRITING) continue;
        int alive = usbeam_shm_pid_alive(slot->owner_pid);
        if (alive && now - slot->since_ns <= timeout_ns) continue;
        out[n].frame_id = slot->frame_id;
        out[n].push_ns = slot->push_ns;
        out[n].owner_pid = slot->owner_pid;
        out[n].stalled = alive;
        ++n;
        h->counters.abandoned += 1;
        slot->since_ns = now;
        if (alive) {
            h->counters.stalled += 1;
            slot->state = USBEAM_SHM_SLOT_STALLED; /* owner_pid kept: its commit finds the slot */
        } else {
            slot->owner_pid = 0;
            slot->state = USBEAM_SHM_SLOT_FREE;
        }
    }
    return n;
}

static void post_abandoned(usbeam_shm_server *s, const abandoned_frame *frames, uint32_t n)
{
    for (uint32_t k = 0; k < n; ++k) {
        char message[USBEAM_SHM_MESSAGE_CAPACITY];
        if (frames[k].stalled)
            snprintf(message, sizeof message,
                     "writer pid %d was still writing after the write timeout of %u ms; its late commit "
                     "will be refused", (int)frames[k].owner_pid, s->header->write_timeout_ms);
        else
            snprintf(message, sizeof message, "writer pid %d died before its commit",
                     (int)frames[k].owner_pid);
        /* cannot fail for a status without data; a failed post only delays the waiter */
        if (usbeam_shm_server_post(s, frames[k].frame_id, USBEAM_SHM_STATUS_ABANDONED, NULL, 0, 0, 0, NULL,
                                   frames[k].push_ns, message) != USBEAM_OK)
            usbeam_clear_error();
    }
}

usbeam_status usbeam_shm_server_reap(usbeam_shm_server *s, uint64_t *reclaimed)
{
    if (!s) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "server must not be NULL");
    abandoned_frame frames[USBEAM_SHM_MAX_SLOTS];
    usbeam_status st = lock_region(s->header);
    if (st != USBEAM_OK) return st;
    uint32_t n = reap_locked(s->header, usbeam_shm_clock_ns(), frames);
    usbeam_shm_unlock(s->header);
    post_abandoned(s, frames, n);
    if (reclaimed) *reclaimed = n;
    return USBEAM_OK;
}

usbeam_status usbeam_shm_server_next_frame(usbeam_shm_server *s, int timeout_ms, usbeam_shm_frame *frame)
{
    if (!s || !frame) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "server and frame must not be NULL");
    memset(frame, 0, sizeof *frame);
    usbeam_shm_header *h = s->header;
    int64_t deadline = usbeam_shm_clock_ns() + (int64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ll;
    for (;;) {
        usbeam_status st = lock_region(h);
        if (st != USBEAM_OK) return st;
        int64_t now = usbeam_shm_clock_ns();
        h->server_heartbeat_ns = now;
        abandoned_frame abandoned[USBEAM_SHM_MAX_SLOTS];
        uint32_t n_abandoned = reap_locked(h, now, abandoned);
        int best = -1;
        for (uint32_t i = 0; i < h->n_slots; ++i)
            if (h->slots[i].state == USBEAM_SHM_SLOT_READY &&
                (best < 0 || h->slots[i].frame_id < h->slots[best].frame_id))
                best = (int)i;
        if (best >= 0) {
            usbeam_shm_slot *slot = &h->slots[best];
            slot->owner_pid = s->pid;
            slot->since_ns = now;
            slot->state = USBEAM_SHM_SLOT_READING;
            frame->slot = (uint32_t)best;
            frame->frame_id = slot->frame_id;
            frame->bytes = slot->bytes;
            frame->param_generation = slot->param_generation;
            frame->push_ns = slot->push_ns;
            frame->data = usbeam_shm_slot_data(h, (uint32_t)best);
        }
        usbeam_shm_unlock(h);
        post_abandoned(s, abandoned, n_abandoned);
        if (best >= 0) return USBEAM_OK;
        int64_t left = deadline - usbeam_shm_clock_ns();
        if (left <= 0) return USBEAM_OK;
        /* bounded so that stalled writers are reaped even when no frame arrives */
        usbeam_shm_sem_wait_ns(&h->frames_ready, left < 20000000 ? left : 20000000);
    }
}

usbeam_status usbeam_shm_server_release(usbeam_shm_server *s, uint32_t slot)
{
    if (!s) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "server must not be NULL");
    usbeam_shm_header *h = s->header;
    if (slot >= h->n_slots) return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "slot %u out of range", slot);
    usbeam_status st = lock_region(h);
    if (st != USBEAM_OK) return st;
    usbeam_shm_slot *sl = &h->slots[slot];
    int was_reading = sl->state == USBEAM_SHM_SLOT_READING;
    if (was_reading) {
        sl->owner_pid = 0;
        sl->since_ns = usbeam_shm_clock_ns();
        sl->state = USBEAM_SHM_SLOT_FREE;
    }
    usbeam_shm_unlock(h);
    if (!was_reading) return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "slot %u is not being read", slot);
    return USBEAM_OK;
}

/* The post itself, with post_lock held. */
static usbeam_status post_serialised(usbeam_shm_server *s, uint64_t frame_id, int status, const void *data,
                                     uint64_t bytes, uint32_t dtype, uint32_t ndim, const uint64_t *shape,
                                     int64_t push_ns, const char *message)
{
    usbeam_shm_header *h = s->header;
    uint32_t e = (uint32_t)(frame_id % h->n_results);
    usbeam_shm_result *r = &h->results[e];
    usbeam_status st = lock_region(h);
    if (st != USBEAM_OK) return st;
    if (status == USBEAM_SHM_STATUS_DROPPED) {
        h->dropped_ids[h->counters.dropped % USBEAM_SHM_DROPPED_HISTORY] = frame_id;
        h->counters.dropped += 1;
    } else if (status == USBEAM_SHM_STATUS_REJECTED) {
        h->counters.rejected += 1;
    } else if (status == USBEAM_SHM_STATUS_FAILED) {
        h->counters.failed += 1;
    } /* ABANDONED frames were counted by the reaper; OK ones are counted when complete */
    /* an older frame's outcome never replaces a newer result in the same entry */
    int skip = r->state != USBEAM_SHM_RESULT_EMPTY && r->frame_id > frame_id;
    if (!skip) {
        __atomic_store_n(&r->seq, 2 * frame_id + 1, __ATOMIC_RELEASE);
        r->frame_id = frame_id;
        r->state = USBEAM_SHM_RESULT_WRITING;
    } else if (status == USBEAM_SHM_STATUS_OK) {
        h->counters.processed += 1;
    }
    usbeam_shm_unlock(h);
    if (skip) return USBEAM_OK;

    if (status == USBEAM_SHM_STATUS_OK && bytes) memcpy(usbeam_shm_result_data(h, e), data, (size_t)bytes);

    st = lock_region(h);
    if (st != USBEAM_OK) return st;
    r->status = status;
    r->bytes = status == USBEAM_SHM_STATUS_OK ? bytes : 0;
    r->dtype = dtype;
    r->ndim = ndim;
    for (uint32_t d = 0; d < USBEAM_SHM_MAX_DIMS; ++d) r->shape[d] = (shape && d < ndim) ? shape[d] : 0;
    r->push_ns = push_ns;
    r->done_ns = usbeam_shm_clock_ns();
    snprintf(r->message, sizeof r->message, "%s", message ? message : "");
    r->state = USBEAM_SHM_RESULT_DONE;
    __atomic_store_n(&r->seq, 2 * frame_id + 2, __ATOMIC_RELEASE);
    if (status == USBEAM_SHM_STATUS_OK) h->counters.processed += 1;
    usbeam_shm_unlock(h);
    sem_post(&h->results_posted);
    return USBEAM_OK;
}

usbeam_status usbeam_shm_server_post(usbeam_shm_server *s, uint64_t frame_id, int status, const void *data,
                                     uint64_t bytes, uint32_t dtype, uint32_t ndim, const uint64_t *shape,
                                     int64_t push_ns, const char *message)
{
    if (!s) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "server must not be NULL");
    usbeam_shm_header *h = s->header;
    if (status < USBEAM_SHM_STATUS_OK || status > USBEAM_SHM_STATUS_ABANDONED)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "status %d is not a usbeam_shm_result_status", status);
    if (frame_id == 0) return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "frame_id must be > 0");
    if (status == USBEAM_SHM_STATUS_OK && bytes > h->result_capacity)
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "result of %llu bytes exceeds result_bytes %llu",
                           (unsigned long long)bytes, (unsigned long long)h->result_capacity);
    if (status == USBEAM_SHM_STATUS_OK && bytes && !data)
        return usbeam_fail(USBEAM_ERR_NULL_POINTER, "result data must not be NULL");
    if (ndim > USBEAM_SHM_MAX_DIMS)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "result has %u dimensions, at most %u", ndim,
                           USBEAM_SHM_MAX_DIMS);
    int rc = pthread_mutex_lock(&s->post_lock);
    if (rc != 0) return usbeam_fail(USBEAM_ERR_INTERNAL, "post lock failed: %s", strerror(rc));
    usbeam_status st = post_serialised(s, frame_id, status, data, bytes, dtype, ndim, shape, push_ns, message);
    pthread_mutex_unlock(&s->post_lock);
    return st;
}

usbeam_status usbeam_shm_server_params(usbeam_shm_server *s, uint64_t generation, char *text, size_t capacity,
                                       size_t *bytes, uint64_t *latest)
{
    if (!s || !text || !bytes)
        return usbeam_fail(USBEAM_ERR_NULL_POINTER, "server, text and bytes must not be NULL");
    usbeam_shm_header *h = s->header;
    *bytes = 0;
    if (capacity) text[0] = '\0';
    usbeam_status st = lock_region(h);
    if (st != USBEAM_OK) return st;
    uint64_t newest = h->params_generation;
    if (latest) *latest = newest;
    if (generation == 0) { /* the frame was pushed before any parameters */
        usbeam_shm_unlock(h);
        return USBEAM_OK;
    }
    const usbeam_shm_params *p = &h->params[generation % USBEAM_SHM_PARAM_RING];
    if (generation > newest || p->generation != generation) {
        usbeam_shm_unlock(h);
        if (generation > newest)
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "generation: parameters generation %llu were never set "
                               "(latest is %llu)", (unsigned long long)generation, (unsigned long long)newest);
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                           "generation: parameters generation %llu are no longer available: %llu newer sets "
                           "replaced them before the frame was taken (the region keeps the last %u)",
                           (unsigned long long)generation, (unsigned long long)(newest - generation),
                           USBEAM_SHM_PARAM_RING);
    }
    if (p->bytes + 1 > capacity) {
        usbeam_shm_unlock(h);
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "parameters of %llu bytes exceed the buffer",
                           (unsigned long long)p->bytes);
    }
    memcpy(text, p->text, (size_t)p->bytes);
    text[p->bytes] = '\0';
    *bytes = (size_t)p->bytes;
    usbeam_shm_unlock(h);
    return USBEAM_OK;
}

usbeam_status usbeam_shm_server_counters(usbeam_shm_server *s, usbeam_shm_counters *counters)
{
    if (!s || !counters) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "server and counters must not be NULL");
    usbeam_status st = lock_region(s->header);
    if (st != USBEAM_OK) return st;
    *counters = s->header->counters;
    usbeam_shm_unlock(s->header);
    return USBEAM_OK;
}

void usbeam_shm_server_stop(usbeam_shm_server *s)
{
    if (!s || s->stopped) return;
    s->stopped = 1;
    __atomic_store_n(&s->header->server_state, USBEAM_SHM_SERVER_STOPPED, __ATOMIC_RELEASE);
    /* wake waiting clients so they notice at once */
    for (uint32_t i = 0; i < 8; ++i) sem_post(&s->header->results_posted);
    shm_unlink(s->name);
}

void usbeam_shm_server_destroy(usbeam_shm_server *s)
{
    if (!s) return;
    usbeam_shm_server_stop(s);
    munmap(s->header, s->region_bytes);
    pthread_mutex_destroy(&s->post_lock);
    free(s);
}
