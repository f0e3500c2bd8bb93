/*
 * das.c - delay-and-sum beamforming, CPU execute (OpenMP), for any probe: linear arrays and
 * the general geometry (convex, phased, matrix) take the same paths, the difference lies
 * only in the receive part (das_delays.c).
 *
 * Layouts: in  (n_frames, n_transmits, n_elements, n_samples): int16 / float32 RF or
 *              complex64 IQ (interleaved re, im);
 *          out (n_frames, n_points): float32 (RF) or complex64 (IQ).
 * Units: none here; the plan (das_setup.c, das_delays.c) turned geometry (m, s, Hz) into
 * sample indices and weights (layouts in das_internal.h).
 *
 * Why this shape: each (point, transmit, element) needs one delay and one set of weights
 * that all frames share, so the input is first staged in the plan as
 * (transmit, element, sample, frame) float32 rows (IQ: a sample's re row then its im row, or
 * with one frame re and im planes apart; channels an odd number of cache lines apart:
 * usbeam_das_staged_row_floats); a large record of several frames in windows of samples, round
 * a ring of rows that stays in cache, each window just ahead of the points that read it
 * ("Staging in windows" below).  The frame loop is then innermost, contiguous and
 * vectorised, and a tap of every frame is one row.  Per point, the delay splits into a
 * receive part per (point, element), from the table or computed once per point and shared
 * by every transmit, and a transmit part per (point, transmit); the entries (row offset and
 * weights) of a block of (transmit, element) pairs are formed in the thread's scratch
 * (das_delays.c) and summed by the kernels: blocks of 32 and 16 frames in 16-lane vectors,
 * 8 frames as two units (taps or entries) per vector, a last partial block of 8 lanes, and
 * a single frame formed and summed in one loop over the entries: a plan of one frame (or of
 * a few, each frame staged as one) on AVX-512 with 16 points in the lanes from its lane table
 * (das_lanes.c, usbeam_das_tile_lanes); else
 * das_single.c (on AVX-512 a whole tile of points per call, usbeam_das_tile_single, every
 * transmit of a point into the same accumulators; elsewhere a point and transmit per call,
 * usbeam_das_transmit_sum_single).
 * Every multi-frame kernel sums a frame in one fixed
 * order (independent chains that cover the FMA latency, met in a fixed tree: see "unit"
 * below), so a frame's value does not depend on the frames per call.  The kernels are
 * built for AVX-512, AVX2 + FMA and the baseline (das_kernels.h) and chosen at run time.
 * Points run in parallel, in tiles whose output rows are written contiguously; each thread
 * has its own scratch.  Ctrl-C is polled once per tile (common/interrupt.h); an interrupted
 * call leaves NaN in every output value.
 * Reference: Perrot et al., "So you think you can DAS?", Ultrasonics 111 (2021) 106309.
 */
#include "beamform/das_internal.h"
#include "beamform/das_isa.h"
#include "common/interrupt.h"

/* Let the compiler fuse a*b + c into FMA in the hot loops (ISO C mode would not). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=fast")
#endif

#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif


#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define USBEAM_DAS_MULTI_ISA 1
#else
#define USBEAM_DAS_MULTI_ISA 0
#endif



/* A block of a point's entries, as the kernels read them (layout in das_internal.h). */
typedef struct entries_view {
    const float *re_plane, *im_plane; /* staged data (IQ of n_frames >= 2: im rows n_frames past re) */
    const ptrdiff_t *row;             /* (n) staged offset of each entry's first tap row */
    const float *weight;              /* (n, weight_stride) */
    size_t n;                         /* entries */
    size_t frames;                    /* floats between the rows of two taps (staged rows) */
    int soa;                          /* IQ weights in runs of 16 (usbeam_das_weights_soa) */
} entries_view;

/* GCC/Clang vector extensions, mapped on the clone's instruction set.  A 64-byte vector is one
 * AVX-512 register; on the AVX2 and baseline clones GCC 12 often lowered it through the stack,
 * so their kernels and staging use vectors of their own register width (DAS_NARROW, below). */
typedef float frames16 __attribute__((vector_size(64)));
typedef float frames8 __attribute__((vector_size(32)));
typedef float floats4 __attribute__((vector_size(16)));

/* Unaligned loads / stores (macros: a function passing a vector by value would change ABI
 * between the clones). */
#define LOAD16(dst, src) memcpy(&(dst), (src), sizeof(frames16))
#define LOAD8(dst, src) memcpy(&(dst), (src), sizeof(frames8))
#define STORE8(dst, src) memcpy((dst), &(src), sizeof(frames8))
/* two 8-frame rows as one 16-lane vector */
#define LOAD_PAIR(dst, lo_src, hi_src)                                                        \
    do {                                                                                      \
        frames8 lo_, hi_;                                                                     \
        LOAD8(lo_, lo_src);                                                                   \
        LOAD8(hi_, hi_src);                                                                   \
        dst = __builtin_shufflevector(lo_, hi_, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15); \
    } while (0)
#define LOW8(v) __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7)
#define HIGH8(v) __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15)

/* Staging (das_kernels.h, stage_channel): complex samples move as 64-bit units, int16 rows
 * widen to float. */
typedef long long units8 __attribute__((vector_size(64)));
typedef short shorts8 __attribute__((vector_size(16)));
typedef int32_t lanes8 __attribute__((vector_size(32)));

/* T out[k] = lane k of every in[f]: an 8 x 8 transpose of 8-lane vectors in three rounds of
 * two-input shuffles (pairs, then pairs of pairs, then halves). */
#define TRANSPOSE8(T, in, out)                                                                     \
    do {                                                                                           \
        T a_[8], b_[8];                                                                            \
        _Pragma("GCC unroll 4") for (int j_ = 0; j_ < 8; j_ += 2) {                                \
            a_[j_] = __builtin_shufflevector(in[j_], in[j_ + 1], 0, 8, 2, 10, 4, 12, 6, 14);       \
            a_[j_ + 1] = __builtin_shufflevector(in[j_], in[j_ + 1], 1, 9, 3, 11, 5, 13, 7, 15);   \
        }                                                                                          \
        _Pragma("GCC unroll 2") for (int j_ = 0; j_ < 8; j_ += 4)                                  \
            _Pragma("GCC unroll 2") for (int h_ = 0; h_ < 2; ++h_) {                               \
                b_[j_ + h_] = __builtin_shufflevector(a_[j_ + h_], a_[j_ + h_ + 2], 0, 1, 8, 9, 4, 5, 12, 13); \
                b_[j_ + h_ + 2] = __builtin_shufflevector(a_[j_ + h_], a_[j_ + h_ + 2], 2, 3, 10, 11, 6, 7, 14, 15); \
            }                                                                                      \
        _Pragma("GCC unroll 4") for (int h_ = 0; h_ < 4; ++h_) {                                   \
            out[h_] = __builtin_shufflevector(b_[h_], b_[h_ + 4], 0, 1, 2, 3, 8, 9, 10, 11);       \
            out[h_ + 4] = __builtin_shufflevector(b_[h_], b_[h_ + 4], 4, 5, 6, 7, 12, 13, 14, 15); \
        }                                                                                          \
    } while (0)

/* A "unit" is one tap of one entry: unit u = entry u / TAPS, tap u % TAPS, its row
 * row[u / TAPS] + (u % TAPS) frames, its weight(s) at weight[u] (RF) or weight[2u, 2u + 1]
 * (IQ): the sums run over units.  Every kernel ADDS its sums to acc (a point's entries come in
 * blocks, one per transmit split at USBEAM_DAS_ENTRY_BLOCK, whatever the number of frames).
 *
 * One summation order for every frame, whichever kernel sums it (so a frame's value does not
 * depend on how many frames the call holds, and a record beamformed in chunks equals the
 * whole-record call bit for bit): within a block, unit u goes to chain u mod CHAINS (IQ 2,
 * RF 8), each chain adds its units in order from zero, and the chains meet in a fixed tree,
 *     RF:  ((c0 + c2) + (c4 + c6)) + ((c1 + c3) + (c5 + c7))
 *     IQ:  re = (rr0 - ri0) + (rr1 - ri1),  im = (ii0 + ir0) + (ii1 + ir1),
 * the tree the 8-frame kernels get for free (even chains in a vector's low half, odd in its
 * high half); then acc += block.  The chains are also what covers the FMA latency (4 cycles,
 * two ports: about eight independent sums in flight): IQ has four accumulators per chain
 * (rr, ii, ri, ir), RF one.  (Four IQ chains measured 9 % slower on 32 frames: their 32
 * accumulators do not fit the registers with two vectors per plane.)  The 1-frame path
 * (das_single.c) forms and sums in one loop and agrees with this to float rounding only. */
#define IQ_CHAINS 2
#define RF_CHAINS 8

/* unit W of a block of 16 NVZ frames into chain H (IQ: four accumulators per vector) */
#define WIDE_IQ_UNIT(TAPS, NVZ, H, W)                                                                       \
    {                                                                                                       \
        const size_t off_ = (size_t)v->row[(W) / TAPS] + ((W) % TAPS) * v->frames + f0;                    \
        const float wr_ = v->weight[2 * (W)], wi_ = v->weight[2 * (W) + 1];                                 \
        _Pragma("GCC unroll 4") for (int q_ = 0; q_ < NVZ; ++q_) {                                          \
            frames16 a_, b_;                                                                                \
            LOAD16(a_, v->re_plane + off_ + 16 * q_);                                                       \
            LOAD16(b_, v->im_plane + off_ + 16 * q_);                                                       \
            rr[H][q_] += wr_ * a_;                                                                          \
            ii[H][q_] += wr_ * b_;                                                                          \
            ri[H][q_] += wi_ * b_;                                                                          \
            ir[H][q_] += wi_ * a_;                                                                          \
        }                                                                                                   \
    }
#define WIDE_RF_UNIT(TAPS, NVZ, H, W)                                                                       \
    {                                                                                                       \
        const size_t off_ = (size_t)v->row[(W) / TAPS] + ((W) % TAPS) * v->frames + f0;                    \
        const float wk_ = v->weight[W];                                                                     \
        _Pragma("GCC unroll 4") for (int q_ = 0; q_ < NVZ; ++q_) {                                          \
            frames16 a_;                                                                                    \
            LOAD16(a_, v->re_plane + off_ + 16 * q_);                                                       \
            sum[H][q_] += wk_ * a_;                                                                         \
        }                                                                                                   \
    }

/* Frames f0 .. f0 + 16 NVZ - 1, IQ: NVZ 16-lane vectors per plane and unit, two chains of four
 * accumulators (16 of AVX-512's 32 registers for NVZ = 2). */
#define DEFINE_WIDE_IQ_KERNEL(TAPS, NVZ)                                                                    \
    static void DAS_ISA(iq_wide_##TAPS##_##NVZ)(const entries_view *v, size_t f0, float *acc_re, float *acc_im) \
    {                                                                                                       \
        frames16 rr[IQ_CHAINS][NVZ], ii[IQ_CHAINS][NVZ], ri[IQ_CHAINS][NVZ], ir[IQ_CHAINS][NVZ];            \
        for (int h = 0; h < IQ_CHAINS; ++h)                                                                 \
            for (int q = 0; q < NVZ; ++q) rr[h][q] = ii[h][q] = ri[h][q] = ir[h][q] = (frames16){0};        \
        const size_t units = v->n * TAPS;                                                                   \
        size_t u = 0;                                                                                       \
        for (; u + IQ_CHAINS <= units; u += IQ_CHAINS) {                                                    \
            _Pragma("GCC unroll 4") for (int h = 0; h < IQ_CHAINS; ++h) WIDE_IQ_UNIT(TAPS, NVZ, h, u + (size_t)h) \
        }                                                                                                   \
        _Pragma("GCC unroll 4") for (int h = 0; h < IQ_CHAINS; ++h) {                                       \
            if (u + (size_t)h < units) WIDE_IQ_UNIT(TAPS, NVZ, h, u + (size_t)h)                            \
        }                                                                                                   \
        for (int q = 0; q < NVZ; ++q) {                                                                     \
            const frames16 sum_re = (rr[0][q] - ri[0][q]) + (rr[1][q] - ri[1][q]);                          \
            const frames16 sum_im = (ii[0][q] + ir[0][q]) + (ii[1][q] + ir[1][q]);                          \
            frames16 old;                                                                                   \
            LOAD16(old, acc_re + 16 * q);                                                                   \
            old += sum_re;                                                                                  \
            memcpy(acc_re + 16 * q, &old, sizeof old);                                                      \
            LOAD16(old, acc_im + 16 * q);                                                                   \
            old += sum_im;                                                                                  \
            memcpy(acc_im + 16 * q, &old, sizeof old);                                                      \
        }                                                                                                   \
    }

/* Frames f0 .. f0 + 16 NVZ - 1, RF: NVZ 16-lane vectors per unit, eight chains. */
#define DEFINE_WIDE_RF_KERNEL(TAPS, NVZ)                                                                    \
    static void DAS_ISA(rf_wide_##TAPS##_##NVZ)(const entries_view *v, size_t f0, float *acc_re)           \
    {                                                                                                       \
        frames16 sum[RF_CHAINS][NVZ];                                                                       \
        for (int h = 0; h < RF_CHAINS; ++h)                                                                 \
            for (int q = 0; q < NVZ; ++q) sum[h][q] = (frames16){0};                                        \
        const size_t units = v->n * TAPS;                                                                   \
        size_t u = 0;                                                                                       \
        for (; u + RF_CHAINS <= units; u += RF_CHAINS) {                                                    \
            _Pragma("GCC unroll 8") for (int h = 0; h < RF_CHAINS; ++h) WIDE_RF_UNIT(TAPS, NVZ, h, u + (size_t)h) \
        }                                                                                                   \
        _Pragma("GCC unroll 8") for (int h = 0; h < RF_CHAINS; ++h) {                                       \
            if (u + (size_t)h < units) WIDE_RF_UNIT(TAPS, NVZ, h, u + (size_t)h)                            \
        }                                                                                                   \
        for (int q = 0; q < NVZ; ++q) {                                                                     \
            const frames16 total = ((sum[0][q] + sum[2][q]) + (sum[4][q] + sum[6][q]))                      \
                                   + ((sum[1][q] + sum[3][q]) + (sum[5][q] + sum[7][q]));                   \
            frames16 old;                                                                                   \
            LOAD16(old, acc_re + 16 * q);                                                                   \
            old += total;                                                                                   \
            memcpy(acc_re + 16 * q, &old, sizeof old);                                                      \
        }                                                                                                   \
    }

/* Frames f0 .. f0 + 7: two units share a 16-lane vector (the low half unit u, the high half
 * unit u + 1, so even chains sit in low halves and odd ones in high halves), and an 8-frame
 * row fills the vector.  The weights of units u and u + 1 are read together and permuted in
 * registers (PAIR_WEIGHTS; the scratch has room past the last entry, and an odd last unit
 * pairs with zero weights written there by beamform_point).  CONTIG: the two units are taps
 * k, k + 1 of one entry and rows are 8 frames long (n_frames = 8), so their rows are one
 * contiguous 16-float load (RF), or two, one a tap (IQ: PAIR_IQ_CONTIG_UNIT).  (AVX-512 only:
 * the narrower clones use DEFINE_NARROW_KERNELS.) */
#define DEFINE_PAIR_KERNELS(TAPS, CONTIG, NAME)                                                            \
    static void DAS_ISA(iq_##NAME##_##TAPS)(const entries_view *v, size_t f0, float *acc_re, float *acc_im) \
    {                                                                                                       \
        frames16 rr[IQ_CHAINS / 2], ii[IQ_CHAINS / 2], ri[IQ_CHAINS / 2], ir[IQ_CHAINS / 2];                \
        for (int h = 0; h < IQ_CHAINS / 2; ++h) rr[h] = ii[h] = ri[h] = ir[h] = (frames16){0};              \
        const size_t units = v->n * TAPS;                                                                   \
        size_t u = 0;                                                                                       \
        for (; u + IQ_CHAINS <= units; u += IQ_CHAINS) {                                                    \
            _Pragma("GCC unroll 2") for (int h = 0; h < IQ_CHAINS / 2; ++h) {                               \
                const size_t w = u + 2 * (size_t)h;                                                         \
                PAIR_IQ_UNIT(TAPS, CONTIG, h, w, w + 1)                                                     \
            }                                                                                               \
        }                                                                                                   \
        _Pragma("GCC unroll 2") for (int h = 0; h < IQ_CHAINS / 2; ++h) {                                   \
            const size_t w = u + 2 * (size_t)h;                                                             \
            if (w < units) {                                                                                \
                PAIR_IQ_UNIT(TAPS, CONTIG, h, w, w + 1 < units ? w + 1 : w)                                 \
            }                                                                                               \
        }                                                                                                   \
        frames8 sum_re, sum_im;                                                                             \
        if (CONTIG) {                                                                                       \
            CONTIG_IQ_SUMS(rr[0], ri[0], ii[0], ir[0], sum_re, sum_im)                                      \
        } else {                                                                                            \
            const frames16 re_ = rr[0] - ri[0], im_ = ii[0] + ir[0];                                        \
            sum_re = LOW8(re_) + HIGH8(re_);                                                                \
            sum_im = LOW8(im_) + HIGH8(im_);                                                                \
        }                                                                                                   \
        ADD_IQ_SUMS8(sum_re, sum_im)                                                                        \
    }                                                                                                       \
    static void DAS_ISA(rf_##NAME##_##TAPS)(const entries_view *v, size_t f0, float *acc_re)               \
    {                                                                                                       \
        frames16 sum[RF_CHAINS / 2];                                                                        \
        for (int h = 0; h < RF_CHAINS / 2; ++h) sum[h] = (frames16){0};                                     \
        const size_t units = v->n * TAPS;                                                                   \
        size_t u = 0;                                                                                       \
        for (; u + RF_CHAINS <= units; u += RF_CHAINS) {                                                    \
            _Pragma("GCC unroll 4") for (int h = 0; h < RF_CHAINS / 2; ++h) {                               \
                const size_t w = u + 2 * (size_t)h;                                                         \
                PAIR_RF_UNIT(TAPS, CONTIG, h, w, w + 1)                                                     \
            }                                                                                               \
        }                                                                                                   \
        _Pragma("GCC unroll 4") for (int h = 0; h < RF_CHAINS / 2; ++h) {                                   \
            const size_t w = u + 2 * (size_t)h;                                                             \
            if (w < units) PAIR_RF_UNIT(TAPS, CONTIG, h, w, w + 1 < units ? w + 1 : w)                      \
        }                                                                                                   \
        const frames16 total = (sum[0] + sum[1]) + (sum[2] + sum[3]);                                       \
        frames8 old;                                                                                        \
        LOAD8(old, acc_re);                                                                                 \
        old += LOW8(total) + HIGH8(total);                                                                  \
        STORE8(acc_re, old);                                                                                \
    }

/* PAIR_IQ_CONTIG_UNIT's accumulators (the same values as PAIR_IQ_UNIT's, halves exchanged) into
 * the 8 frames' sums, joined as every IQ kernel joins its chains */
#define CONTIG_IQ_SUMS(RR, RI, II, IR, SUM_RE, SUM_IM)                                                      \
    {                                                                                                       \
        SUM_RE = (LOW8(RR) - HIGH8(RI)) + (LOW8(II) - HIGH8(IR));                                           \
        SUM_IM = (HIGH8(RR) + LOW8(RI)) + (HIGH8(II) + LOW8(IR));                                           \
    }
/* acc_re / acc_im (8 frames) += the block's sums */
#define ADD_IQ_SUMS8(SUM_RE, SUM_IM)                                                                        \
    {                                                                                                       \
        frames8 old_;                                                                                       \
        LOAD8(old_, acc_re);                                                                                \
        old_ += (SUM_RE);                                                                                   \
        STORE8(acc_re, old_);                                                                               \
        LOAD8(old_, acc_im);                                                                                \
        old_ += (SUM_IM);                                                                                   \
        STORE8(acc_im, old_);                                                                               \
    }
/* rows of units W0 (low half) and W1 (high half) of plane X into the vector DST */
#define PAIR_ROWS(DST, X, TAPS, CONTIG, W0, W1)                                                             \
    {                                                                                                       \
        const size_t off0_ = (size_t)v->row[(W0) / TAPS] + ((W0) % TAPS) * v->frames + f0;                  \
        if (CONTIG) {                                                                                       \
            LOAD16(DST, (X) + off0_);                                                                       \
        } else {                                                                                            \
            const size_t off1_ = (size_t)v->row[(W1) / TAPS] + ((W1) % TAPS) * v->frames + f0;              \
            LOAD_PAIR(DST, (X) + off0_, (X) + off1_);                                                       \
        }                                                                                                   \
    }
#define PAIR_IQ_UNIT(TAPS, CONTIG, H, W0, W1)                                                               \
    if (CONTIG) {                                                                                           \
        PAIR_IQ_CONTIG_UNIT(TAPS, H, W0)                                                                    \
    } else /* the rows of units W0 and W1 in the halves of a and b */                                       \
    {                                                                                                       \
        frames16 wr, wi, a, b;                                                                              \
        PAIR_WEIGHTS(wr, wi, v->weight + 2 * (W0))                                                          \
        PAIR_ROWS(a, v->re_plane, TAPS, CONTIG, W0, W1)                                                     \
        PAIR_ROWS(b, v->im_plane, TAPS, CONTIG, W0, W1)                                                     \
        rr[H] += wr * a;                                                                                    \
        ii[H] += wr * b;                                                                                    \
        ri[H] += wi * b;                                                                                    \
        ir[H] += wi * a;                                                                                    \
    }
/* CONTIG, IQ: taps k and k + 1 of an entry of 8 frames are two interleaved rows (re of the 8
 * frames, then im: usbeam_das_staged_row_floats), each one 64-byte vector, a = (re, im) of
 * tap k, b of tap k + 1, their weights broadcast.  Each accumulator sums what PAIR_IQ_UNIT's
 * sums, in the same order: rr = (rr of tap k, ii of tap k), ii = (rr, ii of tap k + 1),
 * ri = (ir, ri of tap k), ir = (ir, ri of tap k + 1); the kernel's end takes the halves apart
 * (the same bits). */
#define PAIR_IQ_CONTIG_UNIT(TAPS, H, W0)                                                                    \
    {                                                                                                       \
        const size_t off_ = (size_t)v->row[(W0) / TAPS] + ((W0) % TAPS) * v->frames + f0;                   \
        const float *w_ = v->weight + 2 * (W0);                                                             \
        frames16 a, b;                                                                                      \
        LOAD16(a, v->re_plane + off_);                                                                      \
        LOAD16(b, v->re_plane + off_ + v->frames);                                                          \
        rr[H] += w_[0] * a;                                                                                 \
        ri[H] += w_[1] * a;                                                                                 \
        ii[H] += w_[2] * b;                                                                                 \
        ir[H] += w_[3] * b;                                                                                 \
    }
/* iq_pair8_2 over entries whose weights lie in runs of 16 (usbeam_das_weights_soa): the same
 * loads, products and sums in the same order (the same bits), each weight read from its run.
 * The interleaved layout cost the forming a 4 x 4 transpose of each 16 entries' weights
 * (linear_iq_entries_avx512: 16 shuffles, ~1 cycle an entry); this layout costs nothing. */
#define DEFINE_PAIR8_SOA_KERNEL()                                                                           \
    static void DAS_ISA(iq_pair8_soa_2)(const entries_view *v, size_t f0, float *acc_re, float *acc_im)    \
    {                                                                                                       \
        frames16 rr = {0}, ii = {0}, ri = {0}, ir = {0};                                                    \
        for (size_t e = 0; e < v->n; ++e) {                                                                 \
            const size_t off_ = (size_t)v->row[e] + f0;                                                     \
            const float *w_ = v->weight + 4 * (e & ~(size_t)15) + (e & 15);                                 \
            frames16 a, b;                                                                                  \
            LOAD16(a, v->re_plane + off_);                                                                  \
            LOAD16(b, v->re_plane + off_ + v->frames);                                                      \
            rr += w_[0] * a;                                                                                \
            ri += w_[16] * a;                                                                               \
            ii += w_[32] * b;                                                                               \
            ir += w_[48] * b;                                                                               \
        }                                                                                                   \
        frames8 sum_re, sum_im;                                                                             \
        CONTIG_IQ_SUMS(rr, ri, ii, ir, sum_re, sum_im)                                                      \
        ADD_IQ_SUMS8(sum_re, sum_im)                                                                        \
    }
#define PAIR_RF_UNIT(TAPS, CONTIG, H, W0, W1)                                                               \
    {                                                                                                       \
        frames16 wk, a;                                                                                     \
        PAIR_RF_WEIGHTS(wk, v->weight + (W0))                                                               \
        PAIR_ROWS(a, v->re_plane, TAPS, CONTIG, W0, W1)                                                     \
        sum[H] += wk * a;                                                                                   \
    }


/* AVX2 and the baseline: frames in blocks of the clone's own register width, DAS_NARROW
 * frames (AVX2 8, SSE 4), one vector per plane and unit.  The 16-lane vectors of the wide and
 * pair kernels are one AVX-512 register, but GCC 12 lowered them on the narrower clones
 * through the stack (accumulators stored and reloaded through general registers every unit):
 * a convex execute of 16 frames took 49.6 ms on the AVX2 copy and 48.3 ms on the baseline
 * against 4.0 ms on AVX-512, large-256 (8 frames) 999 against 94 ms (USBEAM_DAS_ISA=1, this
 * Zen 4); with these kernels 4.75, 12.5 and 131 ms (RESULTS.md, session 15).  The chains, their units (unit u to chain u mod CHAINS) and the tree that joins them
 * are the wide kernels': every frame is summed in the same order. */
#define NARROW_IQ_UNIT(TAPS, H, W)                                                                          \
    {                                                                                                       \
        const size_t off_ = (size_t)v->row[(W) / TAPS] + ((W) % TAPS) * v->frames + f0;                    \
        const float wr_ = v->weight[2 * (W)], wi_ = v->weight[2 * (W) + 1];                                 \
        NARROW_T a_, b_;                                                                                    \
        memcpy(&a_, v->re_plane + off_, sizeof a_);                                                         \
        memcpy(&b_, v->im_plane + off_, sizeof b_);                                                         \
        rr[H] += wr_ * a_;                                                                                  \
        ii[H] += wr_ * b_;                                                                                  \
        ri[H] += wi_ * b_;                                                                                  \
        ir[H] += wi_ * a_;                                                                                  \
    }
#define NARROW_RF_UNIT(TAPS, H, W)                                                                          \
    {                                                                                                       \
        const size_t off_ = (size_t)v->row[(W) / TAPS] + ((W) % TAPS) * v->frames + f0;                    \
        const float wk_ = v->weight[W];                                                                     \
        NARROW_T a_;                                                                                        \
        memcpy(&a_, v->re_plane + off_, sizeof a_);                                                         \
        sum[H] += wk_ * a_;                                                                                 \
    }
#define DEFINE_NARROW_KERNELS(TAPS)                                                                         \
    static void DAS_ISA(iq_narrow_##TAPS)(const entries_view *v, size_t f0, float *acc_re, float *acc_im)  \
    {                                                                                                       \
        NARROW_T rr[IQ_CHAINS], ii[IQ_CHAINS], ri[IQ_CHAINS], ir[IQ_CHAINS];                                \
        for (int h = 0; h < IQ_CHAINS; ++h) rr[h] = ii[h] = ri[h] = ir[h] = (NARROW_T){0};                  \
        const size_t units = v->n * TAPS;                                                                   \
        size_t u = 0;                                                                                       \
        for (; u + IQ_CHAINS <= units; u += IQ_CHAINS) {                                                    \
            _Pragma("GCC unroll 2") for (int h = 0; h < IQ_CHAINS; ++h) NARROW_IQ_UNIT(TAPS, h, u + (size_t)h) \
        }                                                                                                   \
        _Pragma("GCC unroll 2") for (int h = 0; h < IQ_CHAINS; ++h) {                                       \
            if (u + (size_t)h < units) NARROW_IQ_UNIT(TAPS, h, u + (size_t)h)                               \
        }                                                                                                   \
        const NARROW_T sum_re = (rr[0] - ri[0]) + (rr[1] - ri[1]), sum_im = (ii[0] + ir[0]) + (ii[1] + ir[1]); \
        NARROW_T old;                                                                                       \
        memcpy(&old, acc_re, sizeof old);                                                                   \
        old += sum_re;                                                                                      \
        memcpy(acc_re, &old, sizeof old);                                                                   \
        memcpy(&old, acc_im, sizeof old);                                                                   \
        old += sum_im;                                                                                      \
        memcpy(acc_im, &old, sizeof old);                                                                   \
    }                                                                                                       \
    static void DAS_ISA(rf_narrow_##TAPS)(const entries_view *v, size_t f0, float *acc_re)                 \
    {                                                                                                       \
        NARROW_T sum[RF_CHAINS];                                                                            \
        for (int h = 0; h < RF_CHAINS; ++h) sum[h] = (NARROW_T){0};                                         \
        const size_t units = v->n * TAPS;                                                                   \
        size_t u = 0;                                                                                       \
        for (; u + RF_CHAINS <= units; u += RF_CHAINS) {                                                    \
            _Pragma("GCC unroll 8") for (int h = 0; h < RF_CHAINS; ++h) NARROW_RF_UNIT(TAPS, h, u + (size_t)h) \
        }                                                                                                   \
        _Pragma("GCC unroll 8") for (int h = 0; h < RF_CHAINS; ++h) {                                       \
            if (u + (size_t)h < units) NARROW_RF_UNIT(TAPS, h, u + (size_t)h)                               \
        }                                                                                                   \
        const NARROW_T total = ((sum[0] + sum[2]) + (sum[4] + sum[6])) + ((sum[1] + sum[3]) + (sum[5] + sum[7])); \
        NARROW_T old;                                                                                       \
        memcpy(&old, acc_re, sizeof old);                                                                   \
        old += total;                                                                                       \
        memcpy(acc_re, &old, sizeof old);                                                                   \
    }

/* write_tile's copy of a frame's run of n floats from src to dst: the whole 64-byte lines of
 * dst by non-temporal stores, its partial first and last lines by ordinary ones (a dst not
 * 4-byte aligned all by ordinary ones).  Execute fences the streamed stores before it returns. */
#define DEFINE_STREAM_RUN(SUFFIX, LINE_STORE)                                                        \
    static inline void stream_run_##SUFFIX(float *dst, const float *src, size_t n)                    \
    {                                                                                                \
        size_t head = ((64 - ((uintptr_t)dst & 63)) & 63) / sizeof(float);                           \
        if (((uintptr_t)dst & 3) || head > n) head = n;                                              \
        memcpy(dst, src, head * sizeof(float));                                                      \
        size_t k = head;                                                                             \
        for (; k + 16 <= n; k += 16) LINE_STORE(dst + k, src + k);                                   \
        memcpy(dst + k, src + k, (n - k) * sizeof(float));                                           \
    }

/* The kernels, built once per instruction set (das_kernels.h) and chosen at run time:
 * AVX-512 (x86-64-v4: 16-lane vectors, the wide and pair kernels), AVX2 + FMA (x86-64-v3:
 * blocks of 8 frames) and the baseline (blocks of 4; the only copy off x86 and under ASan).  (GCC's target_clones would do this, but its resolver picked the baseline on the
 * development machine's KVM guest, AVX-512 and all: the dispatch is explicit instead.) */
#define DAS_ISA(name) name##_baseline
#define DAS_STREAMING 0
#define DAS_NARROW 4
#define NARROW_T floats4
#define stream_run(d, s, n) memcpy((d), (s), (n) * sizeof(float))
#include "beamform/das_kernels.h"
#undef DAS_ISA
#undef DAS_STREAMING
#undef DAS_NARROW
#undef NARROW_T
#undef stream_run
#if USBEAM_DAS_MULTI_ISA
#pragma GCC push_options
#pragma GCC target("avx2,fma,bmi,bmi2,popcnt,lzcnt,f16c,movbe")
#define DAS_ISA(name) name##_avx2
#define DAS_NARROW 8
#define NARROW_T frames8
#define DAS_STREAMING 1
#define LINE_STORE_AVX2(d, s) (_mm256_stream_ps((d), _mm256_loadu_ps(s)), _mm256_stream_ps((d) + 8, _mm256_loadu_ps((s) + 8)))
DEFINE_STREAM_RUN(avx2, LINE_STORE_AVX2)
#define stream_run stream_run_avx2
#include "beamform/das_kernels.h"
#undef DAS_ISA
#undef DAS_STREAMING
#undef DAS_NARROW
#undef NARROW_T
#undef stream_run
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx512cd,avx2,fma,bmi,bmi2,popcnt,lzcnt,f16c,movbe")
#define DAS_ISA(name) name##_avx512
#define DAS_NARROW 0
/* The pair kernels' weights of units u and u + 1 spread over a vector's halves: IQ (re, im,
 * re, im at SRC) into WR and WI, RF (two floats) into WK, by a 16- (8-) byte broadcast permuted
 * within 128-bit lanes.  The shuffles of a 16-float load that did this compiled to a 64-byte
 * load per shuffle, four units' weights, most often across a line (large-256, 8 frames:
 * 102.7 -> 95.9 ms, in-process A/B, the same bits). */
#define PAIR_WEIGHTS(WR, WI, SRC)                                                                           \
    {                                                                                                       \
        const __m512 wq_ = _mm512_broadcast_f32x4(_mm_loadu_ps(SRC));                                       \
        WR = (frames16)_mm512_permutevar_ps(wq_, _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2)); \
        WI = (frames16)_mm512_permutevar_ps(wq_, _mm512_setr_epi32(1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3)); \
    }
#define PAIR_RF_WEIGHTS(WK, SRC)                                                                            \
    {                                                                                                       \
        double pair_;                                                                                       \
        memcpy(&pair_, SRC, sizeof pair_);                                                                  \
        WK = (frames16)_mm512_permutevar_ps(_mm512_castpd_ps(_mm512_set1_pd(pair_)),                        \
                                            _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1)); \
    }
#define DAS_STREAMING 1
#define LINE_STORE_AVX512(d, s) _mm512_stream_ps((d), _mm512_loadu_ps(s))
DEFINE_STREAM_RUN(avx512, LINE_STORE_AVX512)
#define stream_run stream_run_avx512
#include "beamform/das_kernels.h"
#undef DAS_ISA
#undef DAS_STREAMING
#undef DAS_NARROW
#undef stream_run
#pragma GCC pop_options
#endif

/* One instruction set's copies of the execute's three passes. */
typedef struct das_isa_kernels {
    /* stage samples [first, end) of one channel of the input from row dst on (quarter: times j^n);
     * 0 when they hold a NaN or an infinity */
    int (*stage_channel)(const usbeam_das_params *prm, size_t n_frames, size_t row, const void *in, size_t ch,
                         size_t first, size_t end, size_t dst, int quarter, float *re, float *im);
    /* add a block of entries into all frames of one point */
    void (*beamform_entries)(const usbeam_das_plan *plan, const entries_view *v, size_t n_frames, float *acc_re,
                             float *acc_im);
    /* 1 when samples [first, n_samples) of one channel, which no tile reads, are all finite */
    int (*tail_finite)(const usbeam_das_params *prm, size_t n_frames, const void *in, size_t ch, size_t first);
    /* a tile of points x frames into out, frame-major */
    void (*write_tile)(int is_iq, size_t n_frames, size_t n_points, size_t p0, size_t m, const float *tile_re,
                       const float *tile_im, void *out);
} das_isa_kernels;

#define DAS_ISA_KERNELS(SUFFIX) {stage_channel_##SUFFIX, beamform_entries_##SUFFIX, tail_finite_##SUFFIX, write_tile_##SUFFIX}
static const das_isa_kernels *choose_kernels(void)
{
    static const das_isa_kernels baseline = DAS_ISA_KERNELS(baseline);
#if USBEAM_DAS_MULTI_ISA
    static const das_isa_kernels avx2 = DAS_ISA_KERNELS(avx2), avx512 = DAS_ISA_KERNELS(avx512);
    switch (usbeam_das_isa()) {
    case 2: return &avx512;
    case 1: return &avx2;
    default: break;
    }
#endif
    return &baseline;
}
#undef DAS_ISA_KERNELS


/* Staging in windows round a ring.  Execute copies the input into the staged (transmit,
 * element, sample, frame) planes a window of samples at a time, each window just ahead of the
 * tiles of points that read it (plan->tile_samples), and the tiles of one window run while
 * the next window is staged.  The windows go round a ring of `ring` rows per channel, row
 * s % ring for sample s, sized so that no window overwrites rows that a running tile still
 * reads.  The ring stays in cache, where a buffer of the whole record (26 MB for a convex
 * image of 16 frames) cost a read from DRAM on the way in, a write back on the way out, and
 * cache misses when the points read it: measured on that image, staging alone took 0.85 ms
 * and beamforming alone 1.4 ms, the two together 4.1-4.6 ms; with the ring 3.2 ms (windows
 * without a ring: 4.0 ms).  Rows ring .. ring + 3 repeat rows 0 .. 3 so that a tap run never
 * wraps, and rows ring + 4 .. ring + 7 are zeros, which out-of-range taps read (their weights
 * are 0).  Everything else stages the whole record first, rows = samples: records whose input
 * and staged copy fit in cache together (STAGE_AT_ONCE_BYTES, for a 32 MB L3; PWI_disk's 11 MB
 * of 32 frames measured 3 % slower round a ring), one frame (das_single.c reads rows =
 * samples), lane plans (no tile bounds), grids whose tiles each span most of the record or
 * whose ring would not fit in cache (RING_MAX_BYTES; measured 14 % slower on 11 plane waves x
 * 8 frames, whose ring of 811 rows was 73 MB), and IQ in rows of 8 frames (5 to 8 frames, the
 * pair kernels): those measured faster staged whole (session 31, in-process A/B, p10 ms, ring
 * against whole: 3 plane waves of 8 frames 28.5 / 29.0 against 23.3 / 23.8, the convex image
 * of 8 frames 6.0 / 6.1 against 4.9 / 4.7, 1 plane wave 7.2 against 7.3, 5 plane waves 46-47
 * in two runs and 32 in a third against 35-37), where 12 to 32 frames still gain from the
 * ring (3 plane waves of 12 frames 36.3 against 48.1, the convex image of 12, 16 and 32 frames
 * 4.5, 4.4 and 8.1 against 5.6, 5.6 and 10.4, 1 plane wave of 32 frames 21.5 against 25.9, RF
 * of 16 frames 18.8 against 21.2).
 * The samples past the last that any tile reads (the tail: past the deepest point's delays,
 * a third of the live configurations' 2048) are checked for NaN and inf as the input is read,
 * with the first window where it is the only one, and not staged: a 1-frame call with the lane
 * table (das_lanes.c, lane_reach), every ring, and every record staged whole with the tile
 * bounds (a plan with the table).  Staging them cost the copy's write on top of the read.
 * The gain is small: staging alone (live-1tx's 2 MiB, a grid of a few points) 39 -> 31 us
 * with the input in cache, 144 -> 112 us without; whole live-1tx / live-3tx calls within 1 %
 * (p10 1.158 -> 1.148 and 3.084 -> 3.059 ms, in-process A/B; 1.333 -> 1.328 and 3.488 ->
 * 3.454 ms with the caches flushed between calls); large-256 (staged whole, 1406 of 2048
 * samples) 76.2 -> 74.4 and 75.8 -> 73.6 ms (session 31, the two orders); no image changes a
 * bit. */
#define STAGE_AT_ONCE_BYTES ((size_t)12 << 20)
#define STAGE_WINDOW_BYTES ((size_t)1 << 20) /* staged bytes per window, about */
#define STAGE_WINDOWS_MAX 64
#define RING_MAX_BYTES ((size_t)8 << 20)
/* Records staged whole and larger than this have their staged lines prefetched in
 * beamform_points (those lines come from memory; a smaller record's are in cache, where the
 * prefetches cost more than they save: 1 plane wave of 8 frames, 25 MB, 10.3 against 9.7 ms),
 * in one of two ways:
 * - PREFETCH_LINES, IQ in rows of 8 frames (5 to 8 frames, a 64-byte row an entry's tap): the
 *   lines a subtile's entries of the next transmit read, each once (prefetch_transmit_lines).
 *   large-256 (in-process A/B, p10, session 32): 68.0 against 69.9 ms with no prefetch (the
 *   medians 70.2 against 74.2), in slower spells 74.4-76.1 against 87.8-87.9 (both orders)
 *   and 75.9 / 75.8 against 78.4 / 74.0 (medians 83.1 / 84.5 against 85.1 / 92.4); no table
 *   70.3 against 72.0, then 87.7 against 100.7; 5 plane waves of 8 frames (84 MB) 41.1
 *   against 44.3.  Prefetching every entry's rows a block ahead had measured
 *   slower there than none (session 31: 70.9-71.5 against 68.3-68.8 ms): ~5 reads of each
 *   line, two prefetches an entry, on load ports the 4-FMA entry already fills.
 * - PREFETCH_BLOCKS, the rest (16 and 32 frames, RF): each block of entries formed one block
 *   ahead of its sums and every line its taps read prefetched then.  There it measured 1-3 %
 *   ahead of PREFETCH_LINES (3 plane waves of 16 frames 37.4 / 38.2 against 38.0 / 40.4 ms,
 *   5 plane waves 60.6 against 60.9, 11 plane waves 135.4 against 138.6; RF, 11 plane waves
 *   of 8 frames, 42.5 against 42.9): an entry of 16 frames does twice the sums to hide them. */
enum { PREFETCH_NONE, PREFETCH_LINES, PREFETCH_BLOCKS };
#define PREFETCH_STAGED_BYTES ((size_t)64 << 20)

typedef struct stage_schedule {
    size_t n_windows;
    size_t first_tile[STAGE_WINDOWS_MAX + 1]; /* window w's tiles: [first_tile[w], first_tile[w + 1]) */
    size_t end[STAGE_WINDOWS_MAX];            /* samples before end[w] are staged before window w's
                                                 tiles run (round a ring: the last `ring` of them) */
    size_t tail;                              /* samples [tail, n_samples) are read by no tile: only
                                                 checked for NaN and inf (tail_finite) */
    size_t ring;                              /* rows of the ring; 0: none (row = sample) */
    size_t channel;                           /* staged floats per (transmit, element) */
    size_t row;                               /* staged floats per sample (usbeam_das_staged_row_floats) */
    size_t im_offset;                         /* floats from a re row to its im row */
    int prefetch;                             /* PREFETCH_NONE, _LINES or _BLOCKS (beamform_points) */
} stage_schedule;

static void plan_stage_windows(const usbeam_das_plan *plan, size_t n_frames, size_t n_tiles, stage_schedule *sched)
{
    const usbeam_das_params *prm = &plan->params;
    const size_t n_samples = prm->n_samples;
    const size_t sample_bytes = prm->n_transmits * prm->n_elements * n_frames * (plan->is_iq ? 8 : 4);
    sched->n_windows = 1;
    sched->first_tile[0] = 0;
    sched->first_tile[1] = n_tiles;
    sched->end[0] = sched->tail = n_samples;
    sched->ring = 0;
    sched->row = usbeam_das_staged_row_floats(plan->is_iq, n_frames);
    sched->channel = usbeam_das_channel_floats(n_samples, sched->row);
    sched->im_offset = plan->is_iq && n_frames >= 2 ? sched->row / 2 : plan->stage_plane; /* rows interleaved, or planes */
    /* staged all at once, and far more than the last-level cache holds: beamform_points
     * prefetches (the ring, when it is taken below, stays in cache; PREFETCH_STAGED_BYTES) */
    const char *prefetch_env = getenv("USBEAM_DAS_PREFETCH_STAGED_BYTES"); /* the tests: any record */
    const size_t prefetch_from = prefetch_env ? (size_t)strtoull(prefetch_env, NULL, 10) : PREFETCH_STAGED_BYTES;
    sched->prefetch = sample_bytes * n_samples <= prefetch_from             ? PREFETCH_NONE
                      : usbeam_das_iq_rows_of_8(plan->is_iq, sched->row) ? PREFETCH_LINES
                                                                          : PREFETCH_BLOCKS;
    if (n_frames == 1) sched->end[0] = sched->tail = usbeam_das_lanes_staged_samples(plan);
    if (plan->tile_samples) /* staged whole: the samples up to the last a tile reads (the tail is only checked) */
        sched->end[0] = sched->tail = plan->tile_reach;
    /* USBEAM_DAS_STAGE_AT_ONCE_BYTES overrides the threshold: the tests take small records round the ring */
    const char *at_once_env = getenv("USBEAM_DAS_STAGE_AT_ONCE_BYTES");
    const size_t at_once = at_once_env ? (size_t)strtoull(at_once_env, NULL, 10) : STAGE_AT_ONCE_BYTES;
    if (!plan->tile_samples || n_frames < 2 || sample_bytes * n_samples <= at_once ||
        usbeam_das_iq_rows_of_8(plan->is_iq, sched->row))
        return;
    stage_schedule win = *sched;
    /* windows of about STAGE_WINDOW_BYTES, at least 16 of them (a ring a few windows long must be
     * well short of the record) and at most STAGE_WINDOWS_MAX */
    size_t step = STAGE_WINDOW_BYTES / sample_bytes, staged = 0, reach = 0, w = 0;
    if (step > n_samples / 16) step = n_samples / 16;
    if (step < n_samples / STAGE_WINDOWS_MAX + 1) step = n_samples / STAGE_WINDOWS_MAX + 1;
    for (size_t k = 0; k < n_tiles && w + 1 < STAGE_WINDOWS_MAX; ++k) {
        const size_t need = (size_t)plan->tile_samples[2 * k + 1];
        reach = need > reach ? need : reach;
        if (reach - staged >= step) { /* window w: its tiles up to k */
            win.end[w] = reach;
            win.first_tile[++w] = k + 1;
            staged = reach;
        }
    }
    if (win.first_tile[w] < n_tiles) { /* the last window takes the tiles left */
        for (size_t k = win.first_tile[w]; k < n_tiles; ++k)
            reach = (size_t)plan->tile_samples[2 * k + 1] > reach ? (size_t)plan->tile_samples[2 * k + 1] : reach;
        win.end[w] = reach;
        win.first_tile[++w] = n_tiles;
    }
    win.n_windows = w;
    win.tail = reach;
    /* window v's tiles read from their least first sample up to end[v] while window v + 1 is
     * staged: the ring holds rows [least, end[v + 1]) (the tail comes after the last window) */
    size_t ring = 0;
    for (size_t v = 0; v < w; ++v) {
        size_t least = win.end[v];
        for (size_t k = win.first_tile[v]; k < win.first_tile[v + 1]; ++k) {
            const size_t first = (size_t)plan->tile_samples[2 * k];
            least = first < least ? first : least;
        }
        const size_t held = (v + 1 < w ? win.end[v + 1] : win.end[v]) - least;
        ring = held > ring ? held : ring;
    }
    if (w < 3 || ring * sample_bytes > RING_MAX_BYTES || 2 * (ring + 2 * USBEAM_DAS_RING_REPEATS) > n_samples) return;
    win.ring = ring;
    win.prefetch = PREFETCH_NONE;
    win.channel = usbeam_das_channel_floats(ring + 2 * USBEAM_DAS_RING_REPEATS, win.row);
    *sched = win;
}

/* Stage samples [first, end) of every channel (stage_channel in das_kernels.h, built per
 * instruction set) into rows (ring or not) from re_plane on (plan->stage, or a lane plan's frame
 * of its own), shared among the threads of the caller's parallel
 * region (an orphaned worksharing loop, nowait).  Adds to *bad the channels of the window
 * holding a NaN or an infinity, so bad data is refused without a separate pass over it.  With
 * `pad`, also zeroes what the kernels can read past the rows: the ring's zero rows, or one to
 * two samples past a channel's last (with weight 0), and up to 7 lanes of a frame block past a
 * plane's last channel (zeroed here rather than the whole buffer at plan creation, whose 26 MB
 * took 1.4 ms of a 6 ms convex plan; the pages are first touched by the threads that stage
 * into them). */
static void stage_window(const usbeam_das_plan *plan, const das_isa_kernels *kernels, const stage_schedule *sched,
                         size_t n_frames, const void *in, float *re_plane, size_t first, size_t end, int pad,
                         size_t tail_from, int quarter, size_t *bad)
{
    const usbeam_das_params *prm = &plan->params;
    const size_t channel = sched->channel, ring = sched->ring, row = sched->row;
    const ptrdiff_t n_channels = (ptrdiff_t)(prm->n_transmits * prm->n_elements);
    /* im planar: a plane of its own (every channel's im rows after all the re rows) */
    const int im_planar = plan->is_iq && n_frames == 1;
    float *im_plane = re_plane + plan->stage_plane;
    const size_t used = (ring ? ring + USBEAM_DAS_RING_REPEATS : prm->n_samples) * row;
#pragma omp for schedule(dynamic, 8) nowait
    for (ptrdiff_t ch = 0; ch < n_channels; ++ch) {
        float *re = re_plane + (size_t)ch * channel, *im = re + sched->im_offset;
        if (!ring) {
            *bad += !(kernels->stage_channel(prm, n_frames, row, in, (size_t)ch, first, end, first, quarter, re, im) &
                      kernels->tail_finite(prm, n_frames, in, (size_t)ch, tail_from));
        } else {
            int finite = 1;
            for (size_t n0 = first; n0 < end;) { /* the runs between wraps of the ring */
                const size_t slot = n0 % ring, n1 = end - n0 < ring - slot ? end : n0 + (ring - slot);
                finite &= kernels->stage_channel(prm, n_frames, row, in, (size_t)ch, n0, n1, slot, quarter, re, im);
                if (slot < USBEAM_DAS_RING_REPEATS) { /* the repeated rows past the ring */
                    const size_t last = n1 - n0 + slot < USBEAM_DAS_RING_REPEATS ? n1 - n0 + slot : USBEAM_DAS_RING_REPEATS;
                    memcpy(re + (ring + slot) * row, re + slot * row, (last - slot) * row * sizeof(float));
                    if (im_planar) memcpy(im + (ring + slot) * row, im + slot * row, (last - slot) * row * sizeof(float));
                }
                n0 = n1;
            }
            *bad += !(finite & kernels->tail_finite(prm, n_frames, in, (size_t)ch, tail_from));
        }
        if (pad) {
            memset(re + used, 0, (channel - used) * sizeof(float));
            if (im_planar) memset(im + used, 0, (channel - used) * sizeof(float));
            if (ch == n_channels - 1) { /* <= stage_plane - 32, or the interleaved rows' size (das_setup.c) */
                memset(re_plane + (size_t)n_channels * channel, 0, 32 * sizeof(float));
                if (im_planar) memset(im_plane + (size_t)n_channels * channel, 0, 32 * sizeof(float));
            }
        }
    }
}

/* The channels (transmit, element) holding a NaN or an infinity in any of the n_frames frames:
 * the count of the error message, on the refusal path only (staging flags the windows). */
static size_t count_bad_channels(const usbeam_das_params *prm, size_t n_frames, const void *in)
{
    const size_t n_channels = prm->n_transmits * prm->n_elements, n_samples = prm->n_samples;
    const size_t sample_bytes = usbeam_dtype_size((usbeam_dtype)prm->input_dtype);
    size_t count = 0;
    for (size_t ch = 0; ch < n_channels; ++ch) {
        int finite = 1;
        for (size_t f = 0; f < n_frames && finite; ++f)
            finite = !usbeam_count_nonfinite((const char *)in + (f * n_channels + ch) * n_samples * sample_bytes,
                                             (usbeam_dtype)prm->input_dtype, n_samples);
        count += !finite;
    }
    return count;
}

/* Transmit t's part of point p's delay, in samples from the first recorded (s = s_tx + s_rx) */
static inline double transmit_samples(const usbeam_das_plan *plan, size_t p, size_t t)
{
    return (plan->tx_time[p * plan->params.n_transmits + t] - plan->params.t0) * plan->params.fs;
}

/* Entries i0 .. of point i of the subtile (p = p0 + i) for transmit t, at most
 * USBEAM_DAS_ENTRY_BLOCK, formed into row / weight (das_delays.c); returns their count. */
static size_t form_block(const usbeam_das_plan *plan, const stage_schedule *sched, size_t p, size_t t, size_t i0,
                         const double *sample, const float *rx_re, const float *rx_im, const double *rotation_re,
                         const double *rotation_im, int soa, ptrdiff_t *row, float *weight)
{
    const usbeam_das_params *prm = &plan->params;
    const size_t count = (size_t)plan->aperture_count[p];
    const size_t n = count - i0 < USBEAM_DAS_ENTRY_BLOCK ? count - i0 : USBEAM_DAS_ENTRY_BLOCK;
    const ptrdiff_t channel = (ptrdiff_t)sched->channel;
    const ptrdiff_t row0 = ((ptrdiff_t)plan->aperture_first[p] + (ptrdiff_t)i0) * channel +
                           (ptrdiff_t)(t * prm->n_elements) * channel;
    const double s_tx = transmit_samples(plan, p, t);
    usbeam_das_transmit_entries(plan, n, sample + i0, rx_re + i0, rx_im ? rx_im + i0 : NULL, s_tx,
                                plan->is_iq ? (float)rotation_re[t] : 1.0f, plan->is_iq ? (float)rotation_im[t] : 0.0f,
                                row0, channel, (ptrdiff_t)sched->row, sched->ring, soa, row, weight);
    if (!soa) memset(weight + n * (size_t)plan->weight_stride, 0, 16 * sizeof(float)); /* pair kernels: past an odd last unit */
    return n;
}

/* PREFETCH_LINES: prefetch the staged lines that transmit t's entries of points p0 .. p0 + m - 1
 * read (a subtile: consecutive points, on a grid a row's).  Each line once: per element, the
 * rows from the least first tap to the greatest last tap of three of the points (the first,
 * the middle and the last with an aperture), one row wider each side for the dip of a receive
 * distance between them.  Along a grid row an element's first tap moves smoothly (at most ~2
 * rows a point on large-256), so those rows cover what the subtile reads: large-256 reads each
 * such line ~5 times per transmit (545 lines for 1475 entries; a model of its geometry), which
 * is why prefetching every entry's rows cost more than it saved there.  What does not fit that
 * picture is left to the hardware: an element span past PREFETCH_SPAN_MAX, or an element's
 * rows more than 4 a point apart. */
#define PREFETCH_SPAN_MAX 1024
static void prefetch_transmit_lines(const usbeam_das_plan *plan, const stage_schedule *sched, size_t p0, size_t m,
                                    size_t t, const double *const *sample)
{
    const usbeam_das_params *prm = &plan->params;
    size_t first = 0, last = m;
    while (first < m && plan->aperture_count[p0 + first] == 0) ++first;
    if (first == m) return;
    while (plan->aperture_count[p0 + last - 1] == 0) --last;
    size_t middle = (first + last - 1) / 2;
    while (plan->aperture_count[p0 + middle] == 0) ++middle; /* stops at last - 1 at the latest */
    const size_t picked[3] = {first, middle, last - 1};
    int32_t e_min = INT32_MAX, e_max = INT32_MIN;
    for (int j = 0; j < 3; ++j) {
        const size_t p = p0 + picked[j];
        const int32_t e0 = plan->aperture_first[p], e1 = e0 + plan->aperture_count[p] - 1;
        e_min = e0 < e_min ? e0 : e_min;
        e_max = e1 > e_max ? e1 : e_max;
    }
    if (e_max - e_min >= PREFETCH_SPAN_MAX) return;
    int32_t lo[PREFETCH_SPAN_MAX], hi[PREFETCH_SPAN_MAX]; /* element e_min + e: its first taps' rows */
    for (int32_t e = 0; e <= e_max - e_min; ++e) lo[e] = INT32_MAX, hi[e] = -1;
    const double top = (double)prm->n_samples - 1.0;
    for (int j = 0; j < 3; ++j) {
        const size_t i = picked[j], p = p0 + i;
        const double s_tx = transmit_samples(plan, p, t);
        const int32_t e0 = plan->aperture_first[p] - e_min, count = plan->aperture_count[p];
        for (int32_t k = 0; k < count; ++k) {
            const double s = s_tx + sample[i][k];
            const int32_t r = s < 0.0 ? 0 : (int32_t)(s < top ? s : top); /* out of range: clamped (no tap reads it) */
            lo[e0 + k] = r < lo[e0 + k] ? r : lo[e0 + k];
            hi[e0 + k] = r > hi[e0 + k] ? r : hi[e0 + k];
        }
    }
    const ptrdiff_t row = (ptrdiff_t)sched->row, rows = (ptrdiff_t)prm->n_samples;
    const float *channel = plan->stage + (ptrdiff_t)(t * prm->n_elements + (size_t)e_min) * (ptrdiff_t)sched->channel;
    const int32_t span_max = 4 * (int32_t)m; /* rows; wider: the points are not neighbours (Grid.points in any order) */
    for (int32_t e = 0; e <= e_max - e_min; ++e, channel += sched->channel) {
        if (hi[e] < 0 || hi[e] - lo[e] > span_max) continue;
        /* cubic's first tap is the row before floor(s) (das_delays.c ROW(SLOT(base - 1.0, ...))) */
        const ptrdiff_t first_tap = lo[e] - 1 - (plan->taps - 1) / 2, to = (ptrdiff_t)hi[e] + 1 + plan->taps;
        const ptrdiff_t from = first_tap > 0 ? first_tap : 0;
        const uintptr_t end = (uintptr_t)(channel + (to < rows ? to : rows) * row);
        for (uintptr_t line = (uintptr_t)(channel + from * row) & ~(uintptr_t)63; line < end; line += 64)
            __builtin_prefetch((const void *)line, 0, 1); /* prefetcht2: into L2 */
    }
}

/* Points p0 .. p0 + m - 1 (m <= plan->subtile_points), all frames, into acc_re / acc_im (point
 * i's frames from i * n_frames on, zeroed here).  Each point's receive part (from the table, or
 * computed into the thread's scratch) and its transmit rotations come first, TRANSMIT_ROTATIONS
 * at a time from one vectorised loop (one scalar sine and cosine per transmit took 3.4 % of
 * large-256); then, transmit by transmit, each point's entries, formed a block of at most
 * USBEAM_DAS_ENTRY_BLOCK at a time (das_delays.c) and summed (a block of its own per point and
 * transmit).  Why transmit by transmit: neighbouring points of a grid row read nearly the same
 * staged lines (rows a sample or two apart), and a point's entries of one transmit touch ~100
 * lines (large-256: 47 entries of two 64-byte rows, 6 KiB) where all its transmits touched
 * ~1000 (66 KiB, twice L1), so the next point finds more of its lines in L1.  large-256
 * (in-process A/B, the same blocks): a point at a time 95.3 ms, 16 points transmit by transmit
 * 80.4, 32 points 79.2; two transmits a block 96.0 against 92.9 for one (a slower spell);
 * against blocks that spanned a point's transmits (512 entries), ~85 -> ~80 ms, the images
 * within 4e-7 relative.
 * PREFETCH_LINES (IQ in rows of 8 frames: PREFETCH_STAGED_BYTES): before each transmit, the lines
 * the subtile's entries of the next transmit read (prefetch_transmit_lines).
 * PREFETCH_BLOCKS (the other records staged whole, far larger than the caches): each block is
 * formed one block ahead, into the scratch's second block, and every staged line its taps read
 * is prefetched then, a whole block's sums before they are needed.  The sums waited on those
 * lines (the loads that took half the pair kernel's samples in a profile); the kernels' own prefetch
 * of the entry 12 ahead within a block, which this replaces, left a block's first 12 entries
 * unfetched and covered too short a time.  large-256, the modes interleaved in one process
 * (medians of 60 calls, two runs; RESULTS.md session 30): 85.6 / 81.3 ms, against 98.8 / 93.2
 * with the kernels' prefetch and 105.0 / 92.8 with none.  Forming ahead without prefetching
 * measured 2 % slower than not; prefetching a record of 50 MB (3 plane waves of 8 frames) 9 %
 * slower, of 84-100 MB level, so only past PREFETCH_STAGED_BYTES.  (The next block's lines
 * prefetched by the kernels a unit at a time, spread over the block, measured 9 % slower than
 * all at once here.)  The requests are prefetcht2 (locality 1): prefetcht0 left ~60 % of
 * beamform_points' samples on the instruction after it, the requests waiting for L1's miss
 * buffers; with prefetcht2 large-256 measured 72.6 / 72.8 ms against 78.8 / 79.0 (in-process
 * A/B, p10, both orders; prefetcht1 74.1 / 74.4, prefetchnta 82.3), 5 plane waves of 8 frames
 * 33.6 against 36.6 (session 31); later in the same session, the machine's read bandwidth
 * down from 53 to 34 GB/s (another tenant), prefetcht2, prefetcht0 and no prefetch measured
 * level (p10 72.7 / 72.2 / 68.8, then 75.9 / 75.1 / 75.5 ms): what the prefetch gains varies
 * with the machine's state, prefetcht2 never measured slower than prefetcht0.  Below
 * PREFETCH_STAGED_BYTES it still costs (3 plane waves of 8 frames, 50 MB: 21.2 ms against
 * 19.8 without).  The blocks are summed in the same order either way: the same bits. */
#define TRANSMIT_ROTATIONS 32
static void beamform_points(const usbeam_das_plan *plan, const das_isa_kernels *kernels, const stage_schedule *sched,
                            float *scratch, size_t p0, size_t m, size_t n_frames, float *acc_re, float *acc_im)
{
    const usbeam_das_params *prm = &plan->params;
    const size_t n_tx = prm->n_transmits, widest_floats = usbeam_das_widest_floats(plan);
    const ptrdiff_t channel = (ptrdiff_t)sched->channel, transmit_stride = (ptrdiff_t)prm->n_elements * channel;
    double *rotations = usbeam_das_scratch_rotations(plan, scratch); /* point i: n_tx re, then n_tx im */
    ptrdiff_t *rows[2];
    float *weights[2];
    for (int b = 0; b < 2; ++b) {
        rows[b] = usbeam_das_scratch_entries(plan, scratch, b);
        weights[b] = (float *)(rows[b] + USBEAM_DAS_ENTRY_BLOCK);
    }
    const double *sample[USBEAM_DAS_SUBTILE_MAX];
    const float *rx_re[USBEAM_DAS_SUBTILE_MAX], *rx_im[USBEAM_DAS_SUBTILE_MAX];
    for (size_t i = 0; i < m; ++i) {
        const size_t p = p0 + i;
        for (size_t f = 0; f < n_frames; ++f) acc_re[i * n_frames + f] = acc_im[i * n_frames + f] = 0.0f;
        if (plan->aperture_count[p] == 0) continue;
        usbeam_das_receive_part(plan, p, scratch + i * 4 * widest_floats, &sample[i], &rx_re[i], &rx_im[i]);
        for (size_t t = 0; plan->is_iq && t < n_tx; t += TRANSMIT_ROTATIONS)
            usbeam_das_transmit_rotations(plan, p, t, n_tx - t < TRANSMIT_ROTATIONS ? n_tx - t : TRANSMIT_ROTATIONS,
                                          rotations + 2 * i * n_tx + t, rotations + (2 * i + 1) * n_tx + t);
    }
    if (n_frames == 1) { /* formed and summed in one loop */
        for (size_t t = 0; t < n_tx; ++t)
            for (size_t i = 0; i < m; ++i) {
                const size_t p = p0 + i, count = (size_t)plan->aperture_count[p];
                if (count == 0) continue;
                const double s_tx = transmit_samples(plan, p, t);
                const float rot_re = plan->is_iq ? (float)rotations[2 * i * n_tx + t] : 1.0f;
                const float rot_im = plan->is_iq ? (float)rotations[(2 * i + 1) * n_tx + t] : 0.0f;
                const ptrdiff_t row0 = (ptrdiff_t)plan->aperture_first[p] * channel + (ptrdiff_t)t * transmit_stride;
                usbeam_das_transmit_sum_single(plan, count, sample[i], rx_re[i], rx_im[i], s_tx, rot_re, rot_im, channel,
                                               plan->stage + row0, plan->stage + sched->im_offset + row0, acc_re + i, acc_im + i);
            }
        return;
    }
    /* an entry's taps read `taps` staged rows from its row on: the floats its prefetch covers */
    const size_t entry_floats = (size_t)plan->taps * sched->row;
    const int soa = usbeam_das_weights_soa(plan, sched->row);
    entries_view view = {plan->stage, plan->stage + sched->im_offset, NULL, NULL, 0, sched->row, soa};
    const int prefetch_lines = sched->prefetch == PREFETCH_LINES, prefetch_blocks = sched->prefetch == PREFETCH_BLOCKS;
    if (prefetch_lines) prefetch_transmit_lines(plan, sched, p0, m, 0, sample);
    for (size_t t = 0; t < n_tx; ++t) {
        if (prefetch_lines && t + 1 < n_tx) prefetch_transmit_lines(plan, sched, p0, m, t + 1, sample);
        /* the blocks in order: (i, i0) the one to sum, in buffer b (formed already where ahead) */
        size_t i = 0, i0 = 0, n = 0;
        int b = 0, ahead = 0;
        while (i < m && plan->aperture_count[p0 + i] == 0) ++i;
        while (i < m) {
            if (!ahead)
                n = form_block(plan, sched, p0 + i, t, i0, sample[i], rx_re[i], rx_im[i], rotations + 2 * i * n_tx,
                               rotations + (2 * i + 1) * n_tx, soa, rows[b], weights[b]);
            size_t next_i = i, next_i0 = i0 + n, next_n = 0;
            if (next_i0 >= (size_t)plan->aperture_count[p0 + i]) {
                next_i0 = 0;
                for (++next_i; next_i < m && plan->aperture_count[p0 + next_i] == 0;) ++next_i;
            }
            ahead = prefetch_blocks && next_i < m;
            if (ahead) {
                next_n = form_block(plan, sched, p0 + next_i, t, next_i0, sample[next_i], rx_re[next_i], rx_im[next_i],
                                    rotations + 2 * next_i * n_tx, rotations + (2 * next_i + 1) * n_tx, soa,
                                    rows[b ^ 1], weights[b ^ 1]);
                for (size_t k = 0; k < next_n; ++k) { /* every 64-byte line of the entry's rows */
                    const float *first = view.re_plane + rows[b ^ 1][k];
                    const uintptr_t last = (uintptr_t)(first + entry_floats - 1);
                    for (uintptr_t line = (uintptr_t)first & ~(uintptr_t)63; line <= last; line += 64)
                        __builtin_prefetch((const void *)line, 0, 1); /* prefetcht2 (above) */
                }
            }
            view.row = rows[b], view.weight = weights[b], view.n = n;
            kernels->beamform_entries(plan, &view, n_frames, acc_re + i * n_frames, acc_im + i * n_frames);
            i = next_i, i0 = next_i0;
            if (ahead) b ^= 1, n = next_n;
        }
    }
}

/* A lane plan's execute, in each thread of the caller's parallel region: the frames in blocks of
 * usbeam_das_lanes_frame_block, each block staged (frame f of the block lane_frame floats past
 * plan->stage: a plan holds one block's staging, not the call's), then its tiles, each of which
 * sums the block's frames one after the other and writes each frame's run of points as a 1-frame
 * call would.  A block of one frame is a 1-frame call: the frames as an outer loop measured
 * faster than a group's frames together wherever the group's rows come from a table (11 plane
 * waves, 4 frames: 62 against 90 ms; 3 plane waves, 6 frames: 23 against 30 ms; RESULTS.md
 * session 28), as a group then reads the windows of one frame's transmits, not of all of
 * them.  Where the rows are formed at execute, forming them once for a few frames pays
 * (usbeam_das_lanes_frame_block).  Stops at a block holding a NaN or an infinity (*bad_first). */
static void lanes_blocks(const usbeam_das_plan *plan, const das_isa_kernels *kernels, const stage_schedule *sched, int thread,
                         size_t n_frames, const void *in, size_t frame_bytes, int quarter, usbeam_interrupt *interrupt,
                         float *tile_re, float *tile_im, void *out, size_t *bad, int *bad_first)
{
    const usbeam_das_params *prm = &plan->params;
    const size_t n_points = prm->n_points, tile = USBEAM_DAS_POINT_TILE, n_tiles = (n_points + tile - 1) / tile;
    const size_t block = usbeam_das_lanes_frame_block(plan), value_bytes = plan->is_iq ? 8 : 4;
    for (size_t f0 = 0; f0 < n_frames; f0 += block) {
        const size_t frames = n_frames - f0 < block ? n_frames - f0 : block;
        for (size_t f = 0; f < frames; ++f)
            stage_window(plan, kernels, sched, 1, (const char *)in + (f0 + f) * frame_bytes,
                         plan->stage + f * plan->lane_frame, 0, sched->end[0], 1, sched->tail, quarter, bad);
        if (*bad) {
#pragma omp atomic write
            *bad_first = 1;
        }
#pragma omp barrier
        int stop;
#pragma omp atomic read
        stop = *bad_first;
        if (stop) return; /* the same in every thread: set before the barrier, not after it */
        /* (the implicit barrier at the loop's end: the next block is staged into the same rows) */
        /* the tiles, or (lane_items) a tile and the one that mirrors it, in one thread */
        const size_t n_items = plan->lane_items ? plan->lane_n_items : n_tiles;
#pragma omp for schedule(dynamic, 1)
        for (ptrdiff_t k = 0; k < (ptrdiff_t)n_items; ++k) {
            if (usbeam_interrupt_poll(interrupt)) continue;
            for (int half = 0; half < 2; ++half) {
                const ptrdiff_t at = plan->lane_items ? plan->lane_items[2 * k + half] : (half ? -1 : k);
                if (at < 0) break;
                const size_t p0 = (size_t)at * tile, m = n_points - p0 < tile ? n_points - p0 : tile;
                usbeam_das_tile_lanes(plan, thread, p0, m, frames, plan->stage, plan->stage + plan->stage_plane, tile_re, tile_im);
                for (size_t f = 0; f < frames; ++f)
                    kernels->write_tile(plan->is_iq, 1, n_points, p0, m, tile_re + f * tile, tile_im + f * tile,
                                        (char *)out + (f0 + f) * n_points * value_bytes);
            }
        }
    }
}

usbeam_status usbeam_das_staging(const usbeam_das_plan *plan, size_t n_frames, size_t *windows, size_t *ring_rows,
                                 size_t *staged_samples)
{
    if (!plan || !windows || !ring_rows) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "staging: NULL argument");
    if (plan->cuda) return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "staging: a CUDA plan stages nothing on the host");
    if (n_frames == 0 || n_frames > plan->params.n_frames)
        return usbeam_fail(USBEAM_ERR_INVALID_SHAPE, "n_frames must be in [1, %zu], the plan's capacity (got %zu)",
                           plan->params.n_frames, n_frames);
    stage_schedule sched;
    const size_t tile = USBEAM_DAS_POINT_TILE;
    plan_stage_windows(plan, usbeam_das_lanes_active(plan) ? 1 : n_frames, (plan->params.n_points + tile - 1) / tile, &sched);
    *windows = sched.n_windows;
    *ring_rows = sched.ring;
    if (staged_samples) *staged_samples = sched.tail;
    return USBEAM_OK;
}

usbeam_status usbeam_das_execute(usbeam_das_plan *plan, const void *in, void *out)
{
    if (!plan) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan must not be NULL");
    return usbeam_das_execute_frames(plan, plan->params.n_frames, in, out);
}

usbeam_status usbeam_das_execute_frames(usbeam_das_plan *plan, size_t n_frames, const void *in, void *out)
{
    if (!plan || !in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, in and out must not be NULL");
    const usbeam_das_params *prm = &plan->params;
    if (n_frames == 0 || n_frames > prm->n_frames)
        return usbeam_fail(USBEAM_ERR_INVALID_SHAPE, "n_frames must be in [1, %zu], the plan's capacity (got %zu)",
                           prm->n_frames, n_frames);
    if (plan->cuda) { /* device pointers; the CUDA twin runs whole batches of its capacity */
        if (n_frames != prm->n_frames)
            return usbeam_fail(USBEAM_ERR_INVALID_SHAPE, "n_frames must equal the CUDA plan's %zu frames (got %zu)",
                               prm->n_frames, n_frames);
        return usbeam_das_cuda_execute(plan->cuda, in, out);
    }
    const size_t n_points = prm->n_points;
    const das_isa_kernels *kernels = choose_kernels();

    /* Points go in tiles of USBEAM_DAS_POINT_TILE: each point's frames land in the thread's
     * tile, then every frame's run of the tile's points is written to out contiguously
     * (instead of n_frames scattered stores per point).  (A Z-order of the points, tried for
     * cache reuse, measured 5-35 % slower than the grid's own order: consecutive points of a
     * row read rows of the same elements a few samples apart, which the prefetchers follow.) */
    const size_t tile = USBEAM_DAS_POINT_TILE;
    const size_t n_tiles = (n_points + tile - 1) / tile;
    /* A lane plan (few frames, usbeam_das_lanes_wanted) stages each frame as a 1-frame call
     * would, lane_frame floats apart, a block of usbeam_das_lanes_frame_block frames at a time,
     * whose tiles sum those frames one after the other (lanes_blocks) */
    const int lanes = usbeam_das_lanes_active(plan);
    const size_t sample_bytes = usbeam_dtype_size((usbeam_dtype)prm->input_dtype);
    const size_t frame_bytes = prm->n_transmits * prm->n_elements * prm->n_samples * sample_bytes; /* one frame of the input */
    stage_schedule sched;
    plan_stage_windows(plan, lanes ? 1 : n_frames, n_tiles, &sched);
    const int quarter = usbeam_das_lanes_quarter(plan); /* the input staged in quarter turns */
    size_t bad_windows = 0; /* (channel, window) pairs holding a NaN or an infinity */
    int bad_first = 0;      /* in the first window (a lane plan: in a block): then no further tile runs */
    usbeam_interrupt interrupt; /* Ctrl-C between tiles (common/interrupt.h) */
    usbeam_interrupt_begin(&interrupt);
#pragma omp parallel num_threads(usbeam_team_size(plan->n_threads))
    {
#ifdef _OPENMP
        const int thread = omp_get_thread_num();
#else
        const int thread = 0;
#endif
        /* (point of the tile, frame): the kernels write each point's frames contiguously */
        float *tile_re = plan->tile + (size_t)thread * 2 * prm->n_frames * tile;
        float *tile_im = tile_re + prm->n_frames * tile;
        float *scratch = plan->scratch + (size_t)thread * plan->thread_floats;
        size_t bad = 0;
        if (lanes) {
            lanes_blocks(plan, kernels, &sched, thread, n_frames, in, frame_bytes, quarter, &interrupt, tile_re, tile_im,
                         out, &bad, &bad_first);
        } else {
            /* (the tail checked with the first window where that is the only one, the input read in one pass) */
            stage_window(plan, kernels, &sched, n_frames, in, plan->stage, 0, sched.end[0], 1,
                         sched.n_windows == 1 ? sched.tail : prm->n_samples, quarter, &bad);
            if (bad) {
#pragma omp atomic write
                bad_first = 1;
            }
#pragma omp barrier
            const size_t n_windows = bad_first ? 0 : sched.n_windows; /* the same in every thread */
            for (size_t w = 0; w < n_windows; ++w) {
                /* window w's tiles read staged samples up to end[w]; the next window's samples are
                 * other rows, staged meanwhile by the threads that run out of tiles */
#pragma omp for schedule(dynamic, 1) nowait
                for (ptrdiff_t k = (ptrdiff_t)sched.first_tile[w]; k < (ptrdiff_t)sched.first_tile[w + 1]; ++k) {
                    if (usbeam_interrupt_poll(&interrupt)) continue;
                    const size_t p0 = (size_t)k * tile, m = n_points - p0 < tile ? n_points - p0 : tile;
                    if (n_frames == 1 && usbeam_das_tile_single(plan, p0, m, scratch, plan->stage,
                                                                plan->stage + plan->stage_plane, tile_re, tile_im)) {
                        kernels->write_tile(plan->is_iq, n_frames, n_points, p0, m, tile_re, tile_im, out);
                        continue;
                    }
                    for (size_t i = 0; i < m; i += (size_t)plan->subtile_points)
                        beamform_points(plan, kernels, &sched, scratch, p0 + i,
                                        m - i < (size_t)plan->subtile_points ? m - i : (size_t)plan->subtile_points, n_frames,
                                        tile_re + i * n_frames, tile_im + i * n_frames);
                    /* transpose on the way out: each frame's run of m points is contiguous in out */
                    kernels->write_tile(plan->is_iq, n_frames, n_points, p0, m, tile_re, tile_im, out);
                }
                if (w + 1 < sched.n_windows)
                    stage_window(plan, kernels, &sched, n_frames, in, plan->stage, sched.end[w], sched.end[w + 1], 0,
                                 w + 2 == sched.n_windows ? sched.tail : prm->n_samples, quarter, &bad);
#pragma omp barrier
            }
        }
#if USBEAM_DAS_MULTI_ISA
        _mm_sfence(); /* write_tile's non-temporal stores: visible before the image is returned */
#endif
        if (bad) {
#pragma omp atomic
            bad_windows += bad;
        }
    }
    if (bad_windows) { /* refused; no partial image (tiles of earlier windows may have been written) */
        usbeam_interrupt_end(&interrupt);
        usbeam_fill_nan(out, n_frames * n_points * (plan->is_iq ? 2 : 1));
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "data contains NaN or infinite values (in %zu of %zu channels)",
                           count_bad_channels(prm, n_frames, in), prm->n_transmits * prm->n_elements);
    }
    usbeam_status st = usbeam_interrupt_end(&interrupt);
    if (st != USBEAM_OK) usbeam_fill_nan(out, n_frames * n_points * (plan->is_iq ? 2 : 1)); /* no partial image */
    return st;
}
