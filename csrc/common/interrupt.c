/*
 * interrupt.c - the per-thread interrupt check and the scope of a long execute
 * (common/interrupt.h says how executes use it, core.h how a caller registers a check).
 */
#define _POSIX_C_SOURCE 200809L
#include "common/interrupt.h"

#include <time.h>

/* One registration per OS thread: a check belongs to the thread whose signals it handles
 * (CPython runs signal handlers on its main thread only). */
static _Thread_local usbeam_interrupt_check thread_check;
static _Thread_local void *thread_context;
static _Thread_local double thread_interval;
/* Its address tells the threads apart: the owner of a scope is the thread that began it. */
static _Thread_local char thread_marker;

usbeam_status usbeam_set_interrupt_check(usbeam_interrupt_check check, void *context, double interval)
{
    if (interval != interval) /* NaN */
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "interval must be a number of seconds (got NaN)");
    thread_check = check;
    thread_context = check ? context : NULL;
    thread_interval = interval > 0 ? interval : USBEAM_INTERRUPT_POLL_SECONDS;
    return USBEAM_OK;
}

static double monotonic_seconds(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

void usbeam_interrupt_begin(usbeam_interrupt *interrupt)
{
    interrupt->check = thread_check;
    interrupt->context = thread_context;
    interrupt->owner = &thread_marker;
    interrupt->interval = thread_interval;
    interrupt->next_poll = interrupt->check ? monotonic_seconds() + interrupt->interval : 0.0;
    atomic_init(&interrupt->stop, 0);
}

int usbeam_interrupt_poll_owner(usbeam_interrupt *interrupt)
{
    if (interrupt->owner != (const void *)&thread_marker) return 0; /* a worker: the flag only */
    const double now = monotonic_seconds();
    if (now < interrupt->next_poll) return 0;
    if (interrupt->check(interrupt->context)) {
        atomic_store_explicit(&interrupt->stop, 1, memory_order_relaxed);
        return 1;
    }
    /* from the end of the check: a check that waited (for the GIL) does not shorten the next gap */
    interrupt->next_poll = monotonic_seconds() + interrupt->interval;
    return 0;
}

usbeam_status usbeam_interrupt_end(usbeam_interrupt *interrupt)
{
    if (interrupt->check && atomic_load_explicit(&interrupt->stop, memory_order_relaxed))
        return usbeam_fail(USBEAM_ERR_INTERRUPTED, "interrupted");
    return USBEAM_OK;
}
