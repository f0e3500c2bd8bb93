/*
 * das_kernels.h - the DAS execute kernels of das.c, instantiated once per instruction set:
 * das.c includes this file several times, each time under its own `#pragma GCC target` and
 * with DAS_ISA(name) naming that copy (no include guard on purpose).  The kernels are the
 * macros of das.c; this file lists the variants and the frame-block driver.
 */
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


/* Add a block of entries into all frames (n_frames >= 2) of one point (acc_re / acc_im): blocks of 32
 * (RF) and 16 frames, then 8; the last n_frames % 8 frames by an 8-frame block whose extra
 * lanes read past the row (into the next row, or the staging buffer's padding: finite values)
 * and are not stored.  Every kernel sums a frame in the same order (das.c), so the split of
 * the frames into blocks does not change any frame's value. */
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
    switch (plan->taps + 8 * (n_frames == 8)) {                                                 \
    case 1: case 9: plan->is_iq ? DAS_ISA(iq_pair_1)(v, f0, RE, IM) : DAS_ISA(rf_pair_1)(v, f0, RE); break;       \
    case 2: plan->is_iq ? DAS_ISA(iq_pair_2)(v, f0, RE, IM) : DAS_ISA(rf_pair_2)(v, f0, RE); break;               \
    case 10: plan->is_iq ? DAS_ISA(iq_pair8_2)(v, f0, RE, IM) : DAS_ISA(rf_pair8_2)(v, f0, RE); break;            \
    case 12: plan->is_iq ? DAS_ISA(iq_pair8_4)(v, f0, RE, IM) : DAS_ISA(rf_pair8_4)(v, f0, RE); break;            \
    default: plan->is_iq ? DAS_ISA(iq_pair_4)(v, f0, RE, IM) : DAS_ISA(rf_pair_4)(v, f0, RE); break;              \
    }
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
#undef RUN_WIDE_IQ
#undef RUN_WIDE_RF
#undef RUN_PAIR
}

