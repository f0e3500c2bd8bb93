/*
 * shm_sync.h - the few synchronisation helpers that the shared-memory server
 * (shm_server.c) and the standalone client library (client.c) both need: the robust
 * lock with owner-death recovery, the monotonic clock, liveness of a pid, bounded
 * semaphore waits.  Static inline so that libusbeam_client.so stays one object.
 * See shm_layout.h for the protocol these implement.
 */
#ifndef USBEAM_SHM_SYNC_H
#define USBEAM_SHM_SYNC_H

#include "shm/shm_layout.h"

#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

static inline int64_t usbeam_shm_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* Lock the region.  A previous holder that died leaves EOWNERDEAD: every critical
 * section writes the state word last, so the data are consistent and we only have to
 * tell the mutex so.  Returns 0 or an errno value (ENOTRECOVERABLE, ...). */
static inline int usbeam_shm_lock(usbeam_shm_header *h)
{
    int rc = pthread_mutex_lock(&h->lock);
    if (rc == EOWNERDEAD) rc = pthread_mutex_consistent(&h->lock);
    return rc;
}

static inline void usbeam_shm_unlock(usbeam_shm_header *h) { pthread_mutex_unlock(&h->lock); }

/* 1 when pid names a live process (or one we may not signal), 0 when it is gone. */
static inline int usbeam_shm_pid_alive(int32_t pid)
{
    if (pid <= 0) return 0;
    if (kill((pid_t)pid, 0) == 0) return 1;
    return errno != ESRCH;
}

/* Wait on a process-shared semaphore for at most timeout_ns (>= 0).  Returns 1 when it
 * was posted, 0 on timeout or interruption (callers re-check the shared state). */
static inline int usbeam_shm_sem_wait_ns(sem_t *sem, int64_t timeout_ns)
{
    if (timeout_ns <= 0) return sem_trywait(sem) == 0;
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline); /* sem_timedwait takes CLOCK_REALTIME */
    int64_t ns = deadline.tv_nsec + timeout_ns;
    deadline.tv_sec += (time_t)(ns / 1000000000ll);
    deadline.tv_nsec = (long)(ns % 1000000000ll);
    return sem_timedwait(sem, &deadline) == 0;
}

static inline void *usbeam_shm_slot_data(usbeam_shm_header *h, uint32_t slot)
{
    return (char *)h + h->slots_offset + (size_t)slot * h->slot_capacity;
}

static inline void *usbeam_shm_result_data(usbeam_shm_header *h, uint32_t entry)
{
    return (char *)h + h->results_offset + (size_t)entry * h->result_capacity;
}

static inline uint64_t usbeam_shm_align(uint64_t bytes)
{
    return (bytes + USBEAM_SHM_ALIGN - 1) / USBEAM_SHM_ALIGN * USBEAM_SHM_ALIGN;
}

#endif /* USBEAM_SHM_SYNC_H */
