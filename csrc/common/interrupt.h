/*
 * interrupt.h - the cancellation seam of long CPU executes (Ctrl-C, Jupyter's "interrupt
 * kernel").  The C library has no Python in it: a caller that wants its long calls to be
 * interruptible registers a check for its own OS thread (usbeam_set_interrupt_check, core.h;
 * the Python binding registers one that takes the GIL back for a moment and runs
 * PyErr_CheckSignals), and an execute brackets its parallel loop with a scope:
 *
 *     usbeam_interrupt interrupt;
 *     usbeam_interrupt_begin(&interrupt);
 *     #pragma omp parallel for ...
 *     for (tile ...) {
 *         if (usbeam_interrupt_poll(&interrupt)) continue;   // the rest of the loop is skipped
 *         ... one tile ...
 *     }
 *     if ((st = usbeam_interrupt_end(&interrupt)) != USBEAM_OK) { fill out with NaN; return st; }
 *
 * Who calls what: only the thread that began the scope (the caller, OpenMP's master) reads
 * the clock and calls the check, never more often than every USBEAM_INTERRUPT_POLL_SECONDS (or
 * the interval the check was registered with) and
 * not at all in a call shorter than that, so a short execute never touches the check and a
 * long one pays a clock read per tile.  When the check says stop it sets an atomic flag that
 * every thread reads (a relaxed load) before its next tile, so the team drains within one
 * tile per thread.  Without a registered check a scope costs one pointer test per tile.
 *
 * Plans keep no per-call state in a scope: an interrupted execute leaves its plan as a
 * finished one would (scratch is scratch; a streaming filter does not commit its state) and
 * the next call runs normally.
 *
 * Not for cuda/ (C11 atomics): CUDA twins queue work and return; the wait for it happens in
 * the caller (csrc/python/device), which polls its own way.
 */
#ifndef USBEAM_INTERRUPT_H
#define USBEAM_INTERRUPT_H

#include "common/usbeam_internal.h"

#include <stdatomic.h>

/* The check runs at most this often by default (seconds): with a tile of at most a few ms, a signal is
 * seen well within the 0.5 s a user waits for Ctrl-C, and reacquiring the GIL 20 times a
 * second costs nothing measurable. */
#define USBEAM_INTERRUPT_POLL_SECONDS 0.05

typedef struct usbeam_interrupt {
    usbeam_interrupt_check check; /* the caller's check; NULL: this call cannot be interrupted */
    void *context;
    const void *owner;            /* identity of the thread that began the scope */
    double interval;              /* seconds between checks */
    double next_poll;             /* CLOCK_MONOTONIC seconds; written by the owner only */
    atomic_int stop;              /* set once, read by every thread of the team */
} usbeam_interrupt;

/* Start a scope on the calling thread with its registered check (none: a no-op scope). */
void usbeam_interrupt_begin(usbeam_interrupt *interrupt);
/* The owner's slow path of usbeam_interrupt_poll: the clock, and the check when it is due. */
int usbeam_interrupt_poll_owner(usbeam_interrupt *interrupt);

/* 1 when the work should stop: from any thread of the team, between units of work. */
static inline int usbeam_interrupt_poll(usbeam_interrupt *interrupt)
{
    if (!interrupt->check) return 0;
    if (atomic_load_explicit(&interrupt->stop, memory_order_relaxed)) return 1;
    return usbeam_interrupt_poll_owner(interrupt);
}

/* USBEAM_OK, or USBEAM_ERR_INTERRUPTED (with its message) when the scope was stopped. */
usbeam_status usbeam_interrupt_end(usbeam_interrupt *interrupt);

#endif /* USBEAM_INTERRUPT_H */
