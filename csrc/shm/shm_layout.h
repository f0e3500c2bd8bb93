/*
 * shm_layout.h - the versioned shared-memory region between `usbeam serve` (the
 * beamforming process) and its clients (MATLAB, Python, C).  This is the ONE definition
 * of the layout: the server (csrc/shm_server.c, bound to Python by csrc/py_live.c) and
 * the standalone client library (csrc/client.c -> libusbeam_client.so) both include it.
 *
 * Region (one POSIX shm object, e.g. /dev/shm/usbeam):
 *   [usbeam_shm_header]                    fixed size, page aligned
 *   [slot data]   n_slots   x slot_capacity   bytes  (frames, client -> server)
 *   [result data] n_results x result_capacity bytes  (images, server -> client)
 * Offsets are stored in the header; every block starts on a 4096-byte boundary.
 *
 * Frames: raw channel data as the client holds it, e.g. a Vantage RcvData frame,
 * int16, MATLAB shape (rows = samples x acquisitions, channels), column-major.  The
 * server applies the channel mapping while it copies the slot out.
 *
 * Synchronisation (all processes on one host):
 * - `lock` is a process-shared ROBUST mutex.  It guards slot states, result headers,
 *   parameter blocks and counters, and is held only for O(n_slots) bookkeeping, never
 *   during a frame copy.  A holder that dies leaves EOWNERDEAD; the next locker marks the
 *   mutex consistent.  Each critical section writes owner/ids before the state word,
 *   so a death inside one leaves either the old or the new state, both valid.
 * - Slot states: FREE -> WRITING (client, owner_pid, since_ns) -> READY -> READING
 *   (server) -> FREE.  The server's reaper takes a WRITING slot away from its writer
 *   only when that cannot race with the writer's own stores:
 *     owner dead                         -> FREE (the dead process writes no more);
 *     owner alive, WRITING longer than   -> STALLED: quarantined, never handed out, until
 *       write_timeout_ms                    its owner commits (refused: the frame is
 *                                           discarded, counted) or aborts, or dies.
 *   Either way the frame is counted abandoned once and its result entry gets the status
 *   ABANDONED at once, so a waiter learns without waiting for its timeout.  A slot is
 *   therefore never read while partly written, never overwritten while READING, and
 *   never written by a late writer after it was given to someone else.
 * - Parameters: a ring of USBEAM_SHM_PARAM_RING blocks; generation g (1, 2, ...) lives
 *   in block g % USBEAM_SHM_PARAM_RING.  A frame records the generation current at its
 *   push and the server processes it with that generation's block, or refuses it
 *   (REJECTED, "no longer available") when that many newer sets have overwritten it.
 * - Results: entry k holds frame ids with id % n_results == k.  `seq` is a seqlock
 *   stamp: odd while the server writes, 2*frame_id + 2 once frame_id is complete, so a
 *   reader that copies without the lock detects a result overwritten under it.  Only
 *   the server posts, and its posts are serialised by a mutex of its own (held across
 *   both locked steps and the copy between them), so two posts to one entry never
 *   interleave.
 * - Wake-ups: process-shared semaphores (frames_ready posted per READY frame,
 *   results_posted per result).  They carry no ownership, so a dead process cannot
 *   leave them locked; waiters use bounded timed waits and re-check the state.
 *
 * Times are CLOCK_MONOTONIC nanoseconds (one clock for all processes of the host).
 * The layout depends on the platform's pthread_mutex_t and sem_t sizes, recorded in
 * header_bytes; a client refuses a region whose magic, layout version or header size
 * differs from its own, with a message saying which.
 */
#ifndef USBEAM_SHM_LAYOUT_H
#define USBEAM_SHM_LAYOUT_H

#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>

#define USBEAM_SHM_MAGIC 0x314d48534d425355ull /* bytes "USBMSHM1" */
#define USBEAM_SHM_LAYOUT_VERSION 2u /* 2: STALLED slots, ABANDONED results, parameter ring */
#define USBEAM_SHM_ALIGN 4096u
#define USBEAM_SHM_MAX_SLOTS 64u
#define USBEAM_SHM_MAX_RESULTS 64u
#define USBEAM_SHM_PARAM_CAPACITY 65536u  /* bytes of one parameter block (JSON text) */
#define USBEAM_SHM_PARAM_RING 8u          /* parameter generations kept for frames in flight */
#define USBEAM_SHM_MESSAGE_CAPACITY 256u
#define USBEAM_SHM_DROPPED_HISTORY 256u   /* ids of frames a client push displaced */
#define USBEAM_SHM_MAX_DIMS 4u

enum usbeam_shm_server_state {
    USBEAM_SHM_SERVER_STARTING = 0,
    USBEAM_SHM_SERVER_RUNNING = 1,
    USBEAM_SHM_SERVER_STOPPED = 2
};

enum usbeam_shm_policy {
    USBEAM_SHM_POLICY_DROP_OLDEST = 0, /* a push with no FREE slot displaces the oldest READY frame */
    USBEAM_SHM_POLICY_BLOCK = 1        /* a push with no FREE slot waits (up to its timeout) */
};

enum usbeam_shm_slot_state {
    USBEAM_SHM_SLOT_FREE = 0,
    USBEAM_SHM_SLOT_WRITING = 1,
    USBEAM_SHM_SLOT_READY = 2,
    USBEAM_SHM_SLOT_READING = 3,
    USBEAM_SHM_SLOT_STALLED = 4  /* writer alive but past the write timeout: quarantined */
};

enum usbeam_shm_result_state {
    USBEAM_SHM_RESULT_EMPTY = 0,
    USBEAM_SHM_RESULT_WRITING = 1,
    USBEAM_SHM_RESULT_DONE = 2
};

/* Outcome of one frame, as stored in its result entry. */
enum usbeam_shm_result_status {
    USBEAM_SHM_STATUS_OK = 0,        /* the image is in the result data */
    USBEAM_SHM_STATUS_DROPPED = 1,   /* displaced under overload (drop_oldest) */
    USBEAM_SHM_STATUS_REJECTED = 2,  /* wrong size/parameters: message says why */
    USBEAM_SHM_STATUS_FAILED = 3,    /* the pipeline raised: message says why */
    USBEAM_SHM_STATUS_ABANDONED = 4  /* its writer died or passed the write timeout mid-push */
};

/* Result element types: the values of usbeam_dtype in usbeam.h. */

typedef struct usbeam_shm_slot {
    uint32_t state;            /* usbeam_shm_slot_state */
    int32_t owner_pid;         /* writer while WRITING or STALLED, server while READING */
    uint64_t frame_id;         /* assigned at push, increasing from 1 */
    uint64_t bytes;            /* bytes of the frame written */
    uint64_t param_generation; /* parameters current when the frame was pushed */
    int64_t since_ns;          /* when the slot entered its state */
    int64_t push_ns;           /* when the push began (latency origin) */
} usbeam_shm_slot;

typedef struct usbeam_shm_result {
    uint64_t seq;              /* seqlock stamp, see above */
    uint64_t frame_id;
    uint32_t state;            /* usbeam_shm_result_state */
    int32_t status;            /* usbeam_shm_result_status */
    uint64_t bytes;
    uint32_t dtype;            /* usbeam_dtype */
    uint32_t ndim;
    uint64_t shape[USBEAM_SHM_MAX_DIMS];
    int64_t push_ns, done_ns;
    char message[USBEAM_SHM_MESSAGE_CAPACITY];
} usbeam_shm_result;

typedef struct usbeam_shm_params {
    uint64_t generation;       /* 0: never set */
    uint64_t bytes;
    char text[USBEAM_SHM_PARAM_CAPACITY]; /* JSON object, NUL-terminated */
} usbeam_shm_params;

typedef struct usbeam_shm_counters {
    uint64_t pushed, dropped, rejected, abandoned, processed, failed;
    uint64_t stalled;   /* of the abandoned: writers alive past the timeout (slot quarantined) */
    uint64_t discarded; /* late commits of quarantined slots, whose frames were thrown away */
} usbeam_shm_counters;

typedef struct usbeam_shm_header {
    /* identification: written last by the server (magic after everything else) */
    uint64_t magic;
    uint32_t layout_version;
    uint32_t header_bytes;     /* sizeof(usbeam_shm_header) of the creator */
    uint64_t region_bytes;
    /* geometry */
    uint32_t n_slots, n_results;
    uint64_t slot_capacity, result_capacity;
    uint64_t slots_offset, results_offset;
    uint32_t policy;           /* usbeam_shm_policy */
    uint32_t write_timeout_ms; /* WRITING longer than this is abandoned (STALLED if alive) */
    /* server */
    int32_t server_pid;
    uint32_t server_state;     /* usbeam_shm_server_state */
    int64_t server_heartbeat_ns;
    /* synchronisation */
    pthread_mutex_t lock;
    sem_t frames_ready;
    sem_t results_posted;
    /* guarded by lock */
    uint64_t next_frame_id;
    usbeam_shm_counters counters;
    uint64_t dropped_ids[USBEAM_SHM_DROPPED_HISTORY]; /* ring, by dropped count */
    uint64_t params_generation; /* latest; its block is params[params_generation % RING] */
    usbeam_shm_params params[USBEAM_SHM_PARAM_RING];
    usbeam_shm_slot slots[USBEAM_SHM_MAX_SLOTS];
    usbeam_shm_result results[USBEAM_SHM_MAX_RESULTS];
} usbeam_shm_header;

#endif /* USBEAM_SHM_LAYOUT_H */
