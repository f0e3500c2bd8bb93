/*
 * shm_server.h - the server side of the shared-memory interface (shm_layout.h):
 * create and own the region, take READY frames, post results, reclaim slots of dead or
 * stalled writers.  Used by `usbeam serve` through csrc/py_live.c, and by the C tests.
 */
#ifndef USBEAM_SHM_SERVER_H
#define USBEAM_SHM_SERVER_H

#include "shm/shm_layout.h"
#include "usbeam.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct usbeam_shm_server_config {
    const char *name;           /* POSIX shm name, "/usbeam" */
    uint32_t n_slots;           /* 1 .. USBEAM_SHM_MAX_SLOTS frame slots */
    uint32_t n_results;         /* 1 .. USBEAM_SHM_MAX_RESULTS result entries */
    uint64_t slot_capacity;     /* bytes of the largest frame */
    uint64_t result_capacity;   /* bytes of the largest result */
    uint32_t policy;            /* usbeam_shm_policy */
    uint32_t write_timeout_ms;  /* a slot WRITING longer than this is reclaimed (> 0) */
    int replace_stale;          /* 1: an existing region whose server is dead is replaced */
} usbeam_shm_server_config;

/* A frame taken by the server (slot is READING until released). */
typedef struct usbeam_shm_frame {
    uint32_t slot;
    uint64_t frame_id;
    uint64_t bytes;
    uint64_t param_generation;
    int64_t push_ns;
    const void *data;           /* NULL when the wait timed out */
} usbeam_shm_frame;

typedef struct usbeam_shm_server usbeam_shm_server;

/* Create the region; fails cleanly (USBEAM_ERR_INVALID_ARGUMENT, message naming the pid)
 * when the name exists, whether its server is alive or (without replace_stale) dead. */
usbeam_status usbeam_shm_server_create(const usbeam_shm_server_config *config, usbeam_shm_server **server);
/* Wait up to timeout_ms for a READY frame (oldest first); reaps first (see _reap). */
usbeam_status usbeam_shm_server_next_frame(usbeam_shm_server *server, int timeout_ms, usbeam_shm_frame *frame);
usbeam_status usbeam_shm_server_release(usbeam_shm_server *server, uint32_t slot);
/* Take WRITING slots from dead writers (FREE) and from live ones past the write timeout
 * (STALLED until they commit, abort or die), posting ABANDONED for their frames;
 * *reclaimed counts the frames abandoned by this call. */
usbeam_status usbeam_shm_server_reap(usbeam_shm_server *server, uint64_t *reclaimed);
/* Post the outcome of frame_id: status usbeam_shm_result_status, data (bytes) for OK.
 * Thread-safe; posts are serialised (a post never interleaves with another). */
usbeam_status usbeam_shm_server_post(usbeam_shm_server *server, uint64_t frame_id, int status, const void *data,
                                     uint64_t bytes, uint32_t dtype, uint32_t ndim, const uint64_t *shape,
                                     int64_t push_ns, const char *message);
/* The parameters of `generation` (a frame's param_generation) into text, NUL-terminated;
 * *bytes = 0 for generation 0 (pushed before any parameters).  USBEAM_ERR_INVALID_ARGUMENT
 * (message says which) when that generation was never set or has been overwritten in the
 * ring of USBEAM_SHM_PARAM_RING.  *latest (may be NULL) gets the newest generation. */
usbeam_status usbeam_shm_server_params(usbeam_shm_server *server, uint64_t generation, char *text,
                                       size_t capacity, size_t *bytes, uint64_t *latest);
usbeam_status usbeam_shm_server_counters(usbeam_shm_server *server, usbeam_shm_counters *counters);
/* Mark the region stopped and unlink its name (clients see "server gone"); memory stays
 * mapped until destroy, so views handed out remain valid. */
void usbeam_shm_server_stop(usbeam_shm_server *server);
void usbeam_shm_server_destroy(usbeam_shm_server *server); /* stop + unmap; safe on NULL */
int64_t usbeam_shm_now_ns(void);

#ifdef __cplusplus
}
#endif
#endif /* USBEAM_SHM_SERVER_H */
