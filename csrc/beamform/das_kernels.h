/*
 * das_kernels.h - the DAS execute kernels of das.c, instantiated once per instruction set:
 * das.c includes this file several times, each time under its own `#pragma GCC target` and
 * with DAS_ISA(name) naming that copy (no include guard on purpose).  The kernels are the
 * macros of das.c; this file lists the variants and the frame-block driver, and holds the two
 * copies in and out: staging a channel of the input and writing a tile of points to the image.
 */
#if DAS_NARROW
DEFINE_NARROW_KERNELS(1)
DEFINE_NARROW_KERNELS(2)
DEFINE_NARROW_KERNELS(4)
#else
DEFINE_WIDE_IQ_KERNEL(1, 2)
DEFINE_WIDE_IQ_KERNEL(1, 1)
DEFINE_WIDE_IQ_KERNEL(2, 2)
DEFINE_WIDE_IQ_KERNEL(2, 1)
DEFINE_WIDE_IQ_KERNEL(4, 2)
DEFINE_WIDE_IQ_KERNEL(4, 1)
DEFINE_WIDE_RF_KERNEL(1, 2)
DEFINE_WIDE_RF_KERNEL(1, 1)
DEFINE_WIDE_RF_KERNEL(2, 2)
DEFINE_WIDE_RF_KERNEL(2, 1)
DEFINE_WIDE_RF_KERNEL(4, 2)
DEFINE_WIDE_RF_KERNEL(4, 1)
DEFINE_PAIR_KERNELS(1, 0, pair)
DEFINE_PAIR_KERNELS(2, 0, pair)
DEFINE_PAIR_KERNELS(4, 0, pair)
DEFINE_PAIR_KERNELS(2, 1, pair8)
DEFINE_PAIR_KERNELS(4, 1, pair8)
DEFINE_PAIR8_SOA_KERNEL()
#endif


/* Add a block of entries into all frames (n_frames >= 2) of one point (acc_re / acc_im): blocks
 * of 32 (RF) and 16 frames, then 8 (AVX-512; the AVX2 and baseline clones: blocks of
 * DAS_NARROW); the last frames by a whole block whose extra lanes read past the row (into the
 * next row, or the staging buffer's padding: finite values) and are not stored.  Every kernel
 * sums a frame in the same order (das.c), so the split of the frames into blocks does not
 * change any frame's value. */
static void DAS_ISA(beamform_entries)(const usbeam_das_plan *plan, const entries_view *v, size_t n_frames, float *acc_re,
                             float *acc_im)
{
    size_t f0 = 0;
#define RUN_WIDE_IQ(NVZ, RE, IM)                                                                \
    switch (plan->taps) {                                                                       \
    case 1: DAS_ISA(iq_wide_1_##NVZ)(v, f0, RE, IM); break;                                     \
    case 2: DAS_ISA(iq_wide_2_##NVZ)(v, f0, RE, IM); break;                                     \
    default: DAS_ISA(iq_wide_4_##NVZ)(v, f0, RE, IM); break;                                    \
    }
#define RUN_WIDE_RF(NVZ, RE)                                                                    \
    switch (plan->taps) {                                                                       \
    case 1: DAS_ISA(rf_wide_1_##NVZ)(v, f0, RE); break;                                         \
    case 2: DAS_ISA(rf_wide_2_##NVZ)(v, f0, RE); break;                                         \
    default: DAS_ISA(rf_wide_4_##NVZ)(v, f0, RE); break;                                        \
    }
#define RUN_PAIR(RE, IM)                                                                        \
    switch (plan->taps + 8 * (v->frames == (plan->is_iq ? 16u : 8u))) { /* rows of 8 frames */    \
    case 1: case 9: plan->is_iq ? DAS_ISA(iq_pair_1)(v, f0, RE, IM) : DAS_ISA(rf_pair_1)(v, f0, RE); break;       \
    case 2: plan->is_iq ? DAS_ISA(iq_pair_2)(v, f0, RE, IM) : DAS_ISA(rf_pair_2)(v, f0, RE); break;               \
    case 10: plan->is_iq ? (v->soa ? DAS_ISA(iq_pair8_soa_2)(v, f0, RE, IM) : DAS_ISA(iq_pair8_2)(v, f0, RE, IM))   \
                         : DAS_ISA(rf_pair8_2)(v, f0, RE); break;                                             \
    case 12: plan->is_iq ? DAS_ISA(iq_pair8_4)(v, f0, RE, IM) : DAS_ISA(rf_pair8_4)(v, f0, RE); break;            \
    default: plan->is_iq ? DAS_ISA(iq_pair_4)(v, f0, RE, IM) : DAS_ISA(rf_pair_4)(v, f0, RE); break;              \
    }
#if DAS_NARROW
#define RUN_NARROW(RE, IM)                                                                      \
    switch (plan->taps) {                                                                       \
    case 1: plan->is_iq ? DAS_ISA(iq_narrow_1)(v, f0, RE, IM) : DAS_ISA(rf_narrow_1)(v, f0, RE); break; \
    case 2: plan->is_iq ? DAS_ISA(iq_narrow_2)(v, f0, RE, IM) : DAS_ISA(rf_narrow_2)(v, f0, RE); break; \
    default: plan->is_iq ? DAS_ISA(iq_narrow_4)(v, f0, RE, IM) : DAS_ISA(rf_narrow_4)(v, f0, RE); break; \
    }
    for (; f0 + DAS_NARROW <= n_frames; f0 += DAS_NARROW) RUN_NARROW(acc_re + f0, acc_im + f0)
    if (f0 < n_frames) {
        float last_re[DAS_NARROW] = {0}, last_im[DAS_NARROW] = {0};
        RUN_NARROW(last_re, last_im)
        for (size_t f = f0; f < n_frames; ++f) {
            acc_re[f] += last_re[f - f0];
            acc_im[f] += last_im[f - f0];
        }
    }
#undef RUN_NARROW
#else
    if (plan->is_iq) {
        for (; f0 + 32 <= n_frames; f0 += 32) RUN_WIDE_IQ(2, acc_re + f0, acc_im + f0)
        for (; f0 + 16 <= n_frames; f0 += 16) RUN_WIDE_IQ(1, acc_re + f0, acc_im + f0)
    } else {
        for (; f0 + 32 <= n_frames; f0 += 32) RUN_WIDE_RF(2, acc_re + f0)
        for (; f0 + 16 <= n_frames; f0 += 16) RUN_WIDE_RF(1, acc_re + f0)
    }
    for (; f0 + 8 <= n_frames; f0 += 8) RUN_PAIR(acc_re + f0, acc_im + f0)
    if (f0 < n_frames) {
        float last_re[8] = {0}, last_im[8] = {0};
        RUN_PAIR(last_re, last_im)
        for (size_t f = f0; f < n_frames; ++f) {
            acc_re[f] += last_re[f - f0];
            acc_im[f] += last_im[f - f0];
        }
    }
#endif
#undef RUN_WIDE_IQ
#undef RUN_WIDE_RF
#undef RUN_PAIR
}



/* Stage samples [first, end) of one channel (transmit, element) of the input into rows dst,
 * dst + 1, ... of re / im, row_floats apart (usbeam_das_staged_row_floats: im may be re +
 * n_frames): rows of frames f0 .. f0 + 7 for samples n0 .. n0 + 7 go through an
 * 8 x 8 transpose in registers (complex samples moved as 64-bit units, then split into re and
 * im rows); frames past the last whole block of 8 go 8 samples at a time, and the samples
 * past the window's last whole block of 8 one value at a time.  Returns 1 when every sample
 * staged is finite (x - x is 0 only for finite x; int16 always is).  `quarter` (complex input of
 * one frame, usbeam_das_lanes_quarter): sample n is staged times j^n, exactly (a quarter turn
 * exchanges re and im and negates one).
 * (The scalar copy it replaces ran at 5-7 GB/s: strided single stores, and input rows of 32
 * frames a multiple of 4 KiB apart fighting for the same L1 sets.) */
static int DAS_ISA(stage_channel)(const usbeam_das_params *prm, size_t n_frames, size_t row_floats, const void *in,
                                  size_t ch, size_t first, size_t end, size_t dst, int quarter, float *re, float *im)
{
    re += dst * row_floats; /* row n of the window lands in row n - first of these */
    im += dst * row_floats;
    const size_t n_samples = prm->n_samples;
    const size_t frame_stride = prm->n_transmits * prm->n_elements * n_samples; /* input samples per frame */
    const size_t whole_frames = n_frames / 8 * 8, whole_samples = first + (end - first) / 8 * 8;
    const int dtype = (int)prm->input_dtype;
    frames8 bad8 = {0};  /* sums of x - x over the vector part: 0 unless a NaN or inf passed */
    float bad1 = 0.0f;   /* the same over the scalar part */
    /* The next channel's samples of the same frames are fetched while this one is staged.  A
     * window gives each (channel, frame) a run of a few cache lines only, from as many pages as
     * there are frames, too short for the hardware prefetchers: the loads below waited on memory
     * (the perf samples of the staging sat on them).  One channel ahead is about a microsecond,
     * more than the memory's latency; two or four channels ahead measured slower.  (Convex C5-2v,
     * 16 frames, 1 MiB windows of 64 samples: 4.36 -> 4.21 ms a call, 4.74 -> 4.62 ms with the
     * caches flushed between calls, in-process A/B.)  Complex input only: RF records of 16 frames
     * (float32, int16; runs of 512 bytes too) gained nothing and int16 lost 1 %, also with one
     * request per line; and runs of whole pages the prefetchers follow (large-256, staged at
     * once: 1 % slower). */
    const char *next = dtype == USBEAM_DTYPE_COMPLEX64 && (end - first) * 8 <= 4096 &&
                               ch + 1 < prm->n_transmits * prm->n_elements
                           ? (const char *)in + (ch + 1) * n_samples * 8 /* complex64: 8 bytes a sample */
                           : NULL;
#define PREFETCH_NEXT_CHANNEL(F, N0)                                                             \
    do {                                                                                        \
        const char *p_ = next + ((F) * frame_stride + (N0)) * 8;                                \
        __builtin_prefetch(p_, 0, 3);                                                           \
        __builtin_prefetch(p_ + 63, 0, 3); /* a step's 8 samples may cross a line */            \
    } while (0)
    for (size_t f0 = 0; f0 < whole_frames; f0 += 8) {
        for (size_t n0 = first; n0 < whole_samples; n0 += 8) {
            if (next) _Pragma("GCC unroll 8") for (size_t f = 0; f < 8; ++f) PREFETCH_NEXT_CHANNEL(f0 + f, n0);
            if (dtype == USBEAM_DTYPE_COMPLEX64 && DAS_NARROW > 0) {
                /* two 8 x 8 float transposes of 4 samples each (frames x (re, im) of 4
                 * samples): 32-byte vectors only, which the narrower clones keep in registers
                 * (the 64-byte ones below went through the stack there: AVX2 staging 4.3 ms
                 * of a 9.8 ms convex execute) */
                for (size_t h = 0; h < 8; h += 4) {
                    frames8 row[8], t[8];
                    _Pragma("GCC unroll 8") for (int f = 0; f < 8; ++f) {
                        LOAD8(row[f], (const float *)in + 2 * ((f0 + (size_t)f) * frame_stride + ch * n_samples + n0 + h));
                        bad8 += row[f] - row[f];
                    }
                    TRANSPOSE8(frames8, row, t);
                    for (int k = 0; k < 4; ++k) { /* t[2k], t[2k + 1]: re, im of frames f0 .. f0 + 7 at n0 + h + k */
                        STORE8(re + (n0 + h - first + (size_t)k) * row_floats + f0, t[2 * k]);
                        STORE8(im + (n0 + h - first + (size_t)k) * row_floats + f0, t[2 * k + 1]);
                    }
                }
            } else if (dtype == USBEAM_DTYPE_COMPLEX64) {
                units8 row[8], t[8];
                for (int f = 0; f < 8; ++f) {
                    frames16 v;
                    LOAD16(v, (const float *)in + 2 * ((f0 + (size_t)f) * frame_stride + ch * n_samples + n0));
                    const frames16 d = v - v;
                    bad8 += LOW8(d) + HIGH8(d);
                    row[f] = (units8)v;
                }
                TRANSPOSE8(units8, row, t);
                for (int k = 0; k < 8; ++k) { /* t[k]: (re, im) of frames f0 .. f0 + 7 at sample n0 + k */
                    const frames16 pair = (frames16)t[k];
                    const frames8 r = __builtin_shufflevector(pair, pair, 0, 2, 4, 6, 8, 10, 12, 14);
                    const frames8 i = __builtin_shufflevector(pair, pair, 1, 3, 5, 7, 9, 11, 13, 15);
                    STORE8(re + (n0 - first + (size_t)k) * row_floats + f0, r);
                    STORE8(im + (n0 - first + (size_t)k) * row_floats + f0, i);
                }
            } else {
                frames8 row[8], t[8];
                for (int f = 0; f < 8; ++f) {
                    const size_t src = (f0 + (size_t)f) * frame_stride + ch * n_samples + n0;
                    if (dtype == USBEAM_DTYPE_FLOAT32) {
                        LOAD8(row[f], (const float *)in + src);
                        bad8 += row[f] - row[f];
                    } else {
                        shorts8 s;
                        memcpy(&s, (const int16_t *)in + src, sizeof s);
                        row[f] = __builtin_convertvector(s, frames8);
                    }
                }
                TRANSPOSE8(frames8, row, t);
                for (int k = 0; k < 8; ++k) STORE8(re + (n0 - first + (size_t)k) * row_floats + f0, t[k]);
            }
        }
    }
    /* frames past the whole blocks (all of them when there are fewer than 8, as in live
     * imaging): 8 samples of one frame a step, stored one frame apart (contiguous for a
     * single frame).  One value at a time, as first written, each sample waited on the one
     * before through the finiteness sum: 14 % of a live-1tx call in `perf record`, 3-5 % now. */
    /* quarter: sample first + k (and every 8 on) turns by j^(first + k): re and im exchanged
     * where that is odd, re negated at turns 1 and 2, im at 2 and 3 */
    lanes8 exchange = {0}, negate_re = {0}, negate_im = {0};
    for (int k = 0; quarter && k < 8; ++k) {
        const int turn = (int)((first + (size_t)k) & 3);
        exchange[k] = turn & 1 ? -1 : 0;
        negate_re[k] = turn == 1 || turn == 2 ? INT32_MIN : 0;
        negate_im[k] = turn >= 2 ? INT32_MIN : 0;
    }
    for (size_t f = whole_frames; f < n_frames; ++f) {
        const size_t src = f * frame_stride + ch * n_samples;
        for (size_t n0 = first; n0 < whole_samples; n0 += 8) {
            if (next) PREFETCH_NEXT_CHANNEL(f, n0);
            frames8 r, i = {0};
            if (dtype == USBEAM_DTYPE_COMPLEX64 && DAS_NARROW > 0) { /* 32-byte vectors, as above */
                frames8 lo, hi;
                LOAD8(lo, (const float *)in + 2 * (src + n0));
                LOAD8(hi, (const float *)in + 2 * (src + n0) + 8);
                bad8 += (lo - lo) + (hi - hi);
                r = __builtin_shufflevector(lo, hi, 0, 2, 4, 6, 8, 10, 12, 14);
                i = __builtin_shufflevector(lo, hi, 1, 3, 5, 7, 9, 11, 13, 15);
            } else if (dtype == USBEAM_DTYPE_COMPLEX64) {
                frames16 v;
                LOAD16(v, (const float *)in + 2 * (src + n0));
                const frames16 d = v - v;
                bad8 += LOW8(d) + HIGH8(d);
                r = __builtin_shufflevector(v, v, 0, 2, 4, 6, 8, 10, 12, 14);
                i = __builtin_shufflevector(v, v, 1, 3, 5, 7, 9, 11, 13, 15);
            } else if (dtype == USBEAM_DTYPE_FLOAT32) {
                LOAD8(r, (const float *)in + src + n0);
                bad8 += r - r;
            } else {
                shorts8 s;
                memcpy(&s, (const int16_t *)in + src + n0, sizeof s);
                r = __builtin_convertvector(s, frames8);
            }
            if (quarter && dtype == USBEAM_DTYPE_COMPLEX64) { /* (one frame: no whole blocks above) */
                const lanes8 bits_re = (lanes8)r, bits_im = (lanes8)i;
                r = (frames8)(((bits_im & exchange) | (bits_re & ~exchange)) ^ negate_re);
                i = (frames8)(((bits_re & exchange) | (bits_im & ~exchange)) ^ negate_im);
            }
            float *re_row = re + (n0 - first) * row_floats + f, *im_row = im + (n0 - first) * row_floats + f;
            if (row_floats == 1) {
                STORE8(re_row, r);
                if (dtype == USBEAM_DTYPE_COMPLEX64) STORE8(im_row, i);
            } else {
                for (int k = 0; k < 8; ++k) re_row[(size_t)k * row_floats] = r[k];
                if (dtype == USBEAM_DTYPE_COMPLEX64)
                    for (int k = 0; k < 8; ++k) im_row[(size_t)k * row_floats] = i[k];
            }
        }
    }
    /* the rest, one value at a time: the last n_samples % 8 samples of every frame */
    for (size_t f = 0; f < n_frames; ++f) {
        const size_t src = f * frame_stride + ch * n_samples;
        for (size_t n = whole_samples; n < end; ++n) {
            if (dtype == USBEAM_DTYPE_COMPLEX64) {
                const float *x = (const float *)in + 2 * (src + n);
                const int turn = quarter ? (int)(n & 3) : 0;
                re[(n - first) * row_floats + f] = turn == 0 ? x[0] : (turn == 1 ? -x[1] : (turn == 2 ? -x[0] : x[1]));
                im[(n - first) * row_floats + f] = turn == 0 ? x[1] : (turn == 1 ? x[0] : (turn == 2 ? -x[1] : -x[0]));
                bad1 += (x[0] - x[0]) + (x[1] - x[1]);
            } else if (dtype == USBEAM_DTYPE_FLOAT32) {
                const float x = ((const float *)in)[src + n];
                re[(n - first) * row_floats + f] = x;
                bad1 += x - x;
            } else {
                re[(n - first) * row_floats + f] = (float)((const int16_t *)in)[src + n];
            }
        }
    }
#undef PREFETCH_NEXT_CHANNEL
    int finite = bad1 == 0.0f;
    for (int k = 0; k < 8; ++k) finite &= bad8[k] == 0.0f;
    return finite;
}


/* Samples [first, n_samples) of channel ch in every frame, which no tile reads (das.c, the
 * tail): 1 when all are finite, as stage_channel's sums of x - x tell for the samples it stages,
 * here in four independent vectors of the clone's width so that the loads bound it (the
 * baseline's scalar loop in finite.c, shared with the other families, took 52 us where staging
 * the same 2 MiB took 40, input in cache).  int16 is always finite. */
#if DAS_NARROW
#define TAIL_T NARROW_T
#else
#define TAIL_T frames16
#endif
static int DAS_ISA(tail_finite)(const usbeam_das_params *prm, size_t n_frames, const void *in, size_t ch, size_t first)
{
    if (prm->input_dtype == USBEAM_DTYPE_INT16 || first >= prm->n_samples) return 1;
    const size_t n_samples = prm->n_samples, n_channels = prm->n_transmits * prm->n_elements;
    const size_t per_sample = prm->input_dtype == USBEAM_DTYPE_COMPLEX64 ? 2 : 1, n = (n_samples - first) * per_sample;
    const size_t width = sizeof(TAIL_T) / sizeof(float);
    TAIL_T sum[4];
    for (int k = 0; k < 4; ++k) sum[k] = (TAIL_T){0};
    float sum1 = 0.0f;
    for (size_t f = 0; f < n_frames; ++f) {
        const float *x = (const float *)in + ((f * n_channels + ch) * n_samples + first) * per_sample;
        size_t i = 0;
        for (; i + 4 * width <= n; i += 4 * width)
            for (int k = 0; k < 4; ++k) {
                TAIL_T v;
                memcpy(&v, x + i + (size_t)k * width, sizeof v);
                sum[k] += v - v;
            }
        for (; i < n; ++i) sum1 += x[i] - x[i];
    }
    const TAIL_T all = (sum[0] + sum[1]) + (sum[2] + sum[3]);
    int finite = sum1 == 0.0f;
    for (size_t k = 0; k < width; ++k) finite &= all[k] == 0.0f;
    return finite;
}
#undef TAIL_T


/* Write a tile of m points x n_frames (tile_re / tile_im: point-major, as the kernels left it)
 * to out (n_frames, n_points) from point p0: blocks of 8 points x 8 frames through the 8 x 8
 * transpose in registers (IQ: re and im rows then interleaved into complex64), the rest one
 * value at a time.  (The scalar copy stored one float at a time with a stride, ~7 % of an
 * execute of 16 frames.)
 * Where the instruction set streams (DAS_STREAMING) and m is a multiple of 8, each block of 8
 * frames is assembled in `runs` and its frames' runs go out by non-temporal stores
 * (stream_run): ordinary stores first read every output line from memory, since the input
 * streamed through in between has evicted the image (convex, 16 frames, 4 MiB out: write_tile
 * 0.48 ms of 4.4; streamed 4.34 -> 4.12 ms, 4.56 -> 4.29 ms with np.abs(out) read after each
 * call; outputs of 0.25-8 MiB with inputs of 1.6-25 MiB gained 1-7 %, none lost). */
static void DAS_ISA(write_tile)(int is_iq, size_t n_frames, size_t n_points, size_t p0, size_t m,
                                const float *tile_re, const float *tile_im, void *out)
{
    if (n_frames == 1) { /* the tile's values are the image's run: copied, or interleaved 8 at a time (one value at a
                          * time took 4.8 % of a live-1tx execute) */
        if (!is_iq) {
            memcpy((float *)out + p0, tile_re, m * sizeof(float));
            return;
        }
        float *dst = (float *)out + 2 * p0;
        size_t i = 0;
        for (; i + 8 <= m; i += 8) {
            frames8 re, im;
            LOAD8(re, tile_re + i);
            LOAD8(im, tile_im + i);
            const frames8 lo = __builtin_shufflevector(re, im, 0, 8, 1, 9, 2, 10, 3, 11);
            const frames8 hi = __builtin_shufflevector(re, im, 4, 12, 5, 13, 6, 14, 7, 15);
            STORE8(dst + 2 * i, lo);
            STORE8(dst + 2 * i + 8, hi);
        }
        for (; i < m; ++i) dst[2 * i] = tile_re[i], dst[2 * i + 1] = tile_im[i];
        return;
    }
    const size_t whole_frames = n_frames / 8 * 8, whole_points = m / 8 * 8;
    const size_t item = is_iq ? 2 : 1; /* floats per value */
    const int stream = DAS_STREAMING && whole_points == m;
    float runs[8 * 2 * USBEAM_DAS_POINT_TILE] __attribute__((aligned(64)));
    for (size_t f0 = 0; f0 < whole_frames; f0 += 8) {
        float *run[8]; /* frame f0 + f's run of the tile's points: in out, or in runs to be streamed */
        for (int f = 0; f < 8; ++f)
            run[f] = stream ? runs + (size_t)f * item * m : (float *)out + item * ((f0 + (size_t)f) * n_points + p0);
        for (size_t i0 = 0; i0 < whole_points; i0 += 8) {
            frames8 row[8], re_t[8];
            _Pragma("GCC unroll 8") for (int i = 0; i < 8; ++i) LOAD8(row[i], tile_re + (i0 + (size_t)i) * n_frames + f0);
            TRANSPOSE8(frames8, row, re_t); /* re_t[f]: points i0 .. i0 + 7 of frame f0 + f */
            if (is_iq) {
                frames8 im_t[8];
                _Pragma("GCC unroll 8") for (int i = 0; i < 8; ++i) LOAD8(row[i], tile_im + (i0 + (size_t)i) * n_frames + f0);
                TRANSPOSE8(frames8, row, im_t);
                _Pragma("GCC unroll 8") for (int f = 0; f < 8; ++f) {
                    if (DAS_NARROW) { /* 32-byte vectors on the narrower clones (das.c) */
                        const frames8 lo = __builtin_shufflevector(re_t[f], im_t[f], 0, 8, 1, 9, 2, 10, 3, 11);
                        const frames8 hi = __builtin_shufflevector(re_t[f], im_t[f], 4, 12, 5, 13, 6, 14, 7, 15);
                        STORE8(run[f] + 2 * i0, lo);
                        STORE8(run[f] + 2 * i0 + 8, hi);
                        continue;
                    }
                    const frames16 pair = __builtin_shufflevector(re_t[f], im_t[f], 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5,
                                                                  13, 6, 14, 7, 15);
                    memcpy(run[f] + 2 * i0, &pair, sizeof pair);
                }
            } else {
                for (int f = 0; f < 8; ++f) STORE8(run[f] + i0, re_t[f]);
            }
        }
        for (int f = 0; stream && f < 8; ++f)
            stream_run((float *)out + item * ((f0 + (size_t)f) * n_points + p0), run[f], item * m);
    }
    for (size_t f = 0; f < n_frames; ++f) {
        const size_t first = f < whole_frames ? whole_points : 0;
        if (is_iq) {
            float *dst = (float *)out + 2 * (f * n_points + p0);
            for (size_t i = first; i < m; ++i) {
                dst[2 * i] = tile_re[i * n_frames + f];
                dst[2 * i + 1] = tile_im[i * n_frames + f];
            }
        } else {
            float *dst = (float *)out + f * n_points + p0;
            for (size_t i = first; i < m; ++i) dst[i] = tile_re[i * n_frames + f];
        }
    }
}
