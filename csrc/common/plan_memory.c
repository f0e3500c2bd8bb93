/*
 * plan_memory.c - the large blocks of plans (receive tables, staging buffers, the per-point
 * geometry): huge-page aligned, and the last few freed kept for the next plan.
 *
 * Why: a block of megabytes fresh from the kernel is faulted in on first touch, each fault
 * zeroing its page, and glibc gives blocks this large back to the kernel when they are freed
 * (its mmap threshold).  So a plan rebuilt after another was let go (a live session changing
 * depth or f-number, a parameter sweep in a notebook) paid the faults again: in this project's
 * 2-core virtual machine a 2 MiB page's fault costs ~0.2 ms, and a phased P4-2v plan's 32 MiB
 * took 16 of them, ~3 ms of its 7.5 ms (RESULTS.md, session 16).  Blocks of BIG_BYTES or more
 * are therefore allocated 2 MiB-aligned and advised for huge pages (so they fault in 2 MiB
 * pages, and the staging buffer's rows, tens of KiB apart, do not miss a 4 KiB TLB), and when
 * freed, up to CACHE_BYTES of them in all (CACHE_BLOCKS at most) stay mapped for the next
 * request they fit, the oldest let go first.  usbeam_release_cached_memory() gives them back.
 * The memory kept is what plans held a moment before, so a process's peak does not grow.
 *
 * Layout: none.  Units: bytes.  Thread-safe: one spin lock around two small tables (plans are
 * built and destroyed from any thread; no allocation or system call is made under it).
 */
#if defined(__linux__) && !defined(_DEFAULT_SOURCE)
#define _DEFAULT_SOURCE /* madvise */
#endif
#include "common/usbeam_internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#define HUGE_BYTES ((size_t)1 << 21)   /* a huge page on x86-64 and most aarch64 kernels */
#define BIG_BYTES ((size_t)1 << 20)    /* from here on: huge-page aligned, kept when freed */
#define CACHE_BYTES ((size_t)256 << 20) /* freed blocks kept, at most, in all */
#define CACHE_BLOCKS 8
#define LIVE_BLOCKS 1024                /* big blocks in use whose size is known (beyond: plain free) */

typedef struct {
    void *ptr;
    size_t bytes; /* a multiple of HUGE_BYTES */
} block;

static atomic_flag lock = ATOMIC_FLAG_INIT;
static block live[LIVE_BLOCKS];
static size_t n_live;
static block cached[CACHE_BLOCKS]; /* oldest first */
static size_t n_cached, cached_bytes;

static void acquire(void)
{
    while (atomic_flag_test_and_set_explicit(&lock, memory_order_acquire)) {
    }
}
static void release(void) { atomic_flag_clear_explicit(&lock, memory_order_release); }

/* Under the lock: the cached block that fits `bytes` best (the smallest of at least bytes and
 * at most twice them, so a small request does not hold a large block), taken out; NULL if none. */
static void *take_cached(size_t bytes)
{
    size_t best = n_cached;
    for (size_t k = 0; k < n_cached; ++k)
        if (cached[k].bytes >= bytes && cached[k].bytes / 2 <= bytes && (best == n_cached || cached[k].bytes < cached[best].bytes))
            best = k;
    if (best == n_cached) return NULL;
    block b = cached[best];
    for (size_t k = best; k + 1 < n_cached; ++k) cached[k] = cached[k + 1];
    --n_cached;
    cached_bytes -= b.bytes;
    if (n_live < LIVE_BLOCKS) live[n_live++] = b; /* else unknown from now on: usbeam_block_free frees it */
    return b.ptr;
}

void *usbeam_block_alloc(size_t bytes)
{
    if (bytes > USBEAM_MAX_ALLOCATION) return NULL;
    if (bytes < BIG_BYTES) return aligned_alloc(64, bytes == 0 ? 64 : (bytes + 63) / 64 * 64);
    const size_t rounded = (bytes + HUGE_BYTES - 1) / HUGE_BYTES * HUGE_BYTES;
    acquire();
    void *ptr = take_cached(rounded);
    release();
    if (ptr) return ptr;
    ptr = aligned_alloc(HUGE_BYTES, rounded);
    if (!ptr) return NULL;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    (void)madvise(ptr, rounded, MADV_HUGEPAGE);
#endif
    acquire();
    if (n_live < LIVE_BLOCKS) live[n_live++] = (block){ptr, rounded};
    release();
    return ptr;
}

void usbeam_block_free(void *ptr)
{
    if (!ptr) return;
    void *evicted[CACHE_BLOCKS + 1];
    size_t n_evicted = 0;
    acquire();
    size_t k = 0;
    while (k < n_live && live[k].ptr != ptr) ++k;
    if (k == n_live) { /* small, or not registered */
        release();
        free(ptr);
        return;
    }
    const block b = live[k];
    live[k] = live[--n_live];
    if (b.bytes > CACHE_BYTES) {
        evicted[n_evicted++] = b.ptr;
    } else {
        while (n_cached > 0 && (n_cached == CACHE_BLOCKS || cached_bytes + b.bytes > CACHE_BYTES)) {
            evicted[n_evicted++] = cached[0].ptr;
            cached_bytes -= cached[0].bytes;
            for (size_t j = 0; j + 1 < n_cached; ++j) cached[j] = cached[j + 1];
            --n_cached;
        }
        cached[n_cached++] = b;
        cached_bytes += b.bytes;
    }
    release();
    for (size_t j = 0; j < n_evicted; ++j) free(evicted[j]);
}

size_t usbeam_release_cached_memory(void)
{
    void *evicted[CACHE_BLOCKS];
    acquire();
    const size_t n = n_cached, bytes = cached_bytes;
    for (size_t k = 0; k < n; ++k) evicted[k] = cached[k].ptr;
    n_cached = 0;
    cached_bytes = 0;
    release();
    for (size_t k = 0; k < n; ++k) free(evicted[k]);
    return bytes;
}

size_t usbeam_cached_memory(void)
{
    acquire();
    const size_t bytes = cached_bytes;
    release();
    return bytes;
}
