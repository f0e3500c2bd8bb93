/*
 * cub/cub.cuh - the CUB device-wide algorithms usbeam uses, for USBEAM_CUDA=emu builds (see
 * ../../cuda_emu.h).  The two-phase temp-storage protocol is kept (a null d_temp_storage asks
 * for the size; the storage must then be device memory of at least that size); the work goes
 * on the stream like any other.  SortKeys sorts ascending on bits [begin_bit, end_bit) of the
 * unsigned key, stably (a segment with end <= begin is empty, as CUB documents; one outside
 * the key arrays aborts, as the fault it would be); ExclusiveSum is a plain prefix sum whose
 * pointer operands must lie in device memory.
 */
#ifndef USBEAM_EMU_CUB_CUH
#define USBEAM_EMU_CUB_CUH

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <type_traits>

namespace cub {

namespace detail {
constexpr size_t EMU_TEMP_BYTES = 256;
inline cudaError_t temp_check(void *d_temp_storage, size_t temp_storage_bytes)
{
    if (temp_storage_bytes < EMU_TEMP_BYTES || !::usbeam_emu::is_device_range(d_temp_storage, EMU_TEMP_BYTES))
        return cudaErrorInvalidValue;
    return cudaSuccess;
}
}

struct DeviceSegmentedRadixSort {
    template <class Key, class Offset>
    static cudaError_t SortKeys(void *d_temp_storage, size_t &temp_storage_bytes, const Key *d_keys_in, Key *d_keys_out,
                                int num_items, int num_segments, Offset d_begin_offsets, Offset d_end_offsets,
                                int begin_bit = 0, int end_bit = sizeof(Key) * 8, cudaStream_t stream = 0)
    {
        static_assert(std::is_unsigned_v<Key>, "the emulated SortKeys takes unsigned keys");
        if (!d_temp_storage) {
            temp_storage_bytes = detail::EMU_TEMP_BYTES;
            return cudaSuccess;
        }
        if (cudaError_t e = detail::temp_check(d_temp_storage, temp_storage_bytes)) return e;
        if (!::usbeam_emu::is_device_range(d_keys_in, sizeof(Key) * num_items) ||
            !::usbeam_emu::is_device_range(d_keys_out, sizeof(Key) * num_items))
            return cudaErrorInvalidValue;
        return ::usbeam_emu::enqueue_work(stream, [=]() {
            auto bits = [=](Key k) {
                Key shifted = (Key)(k >> begin_bit);
                int width = end_bit - begin_bit;
                return width >= (int)(sizeof(Key) * 8) ? shifted : (Key)(shifted & (((Key)1 << width) - 1));
            };
            for (int s = 0; s < num_segments; ++s) {
                long long b = d_begin_offsets[s], e = d_end_offsets[s];
                /* CUB: a segment whose end is not past its begin is empty (std::copy on a
                 * reversed range would be undefined here) */
                if (e <= b) continue;
                if (b < 0 || e > num_items) {
                    /* CUB would read and write outside the key arrays: a fault on a GPU */
                    fprintf(stderr, "[usbeam cuda emulator] SortKeys: segment %d [%lld, %lld) outside 0 .. %d\n", s, b,
                            e, num_items);
                    std::abort();
                }
                std::copy(d_keys_in + b, d_keys_in + e, d_keys_out + b);
                std::stable_sort(d_keys_out + b, d_keys_out + e, [&](Key x, Key y) { return bits(x) < bits(y); });
            }
        });
    }
};

struct DeviceScan {
    template <class In, class Out>
    static cudaError_t ExclusiveSum(void *d_temp_storage, size_t &temp_storage_bytes, In d_in, Out d_out, int num_items,
                                    cudaStream_t stream = 0)
    {
        if (!d_temp_storage) {
            temp_storage_bytes = detail::EMU_TEMP_BYTES;
            return cudaSuccess;
        }
        if (cudaError_t e = detail::temp_check(d_temp_storage, temp_storage_bytes)) return e;
        if constexpr (std::is_pointer_v<In>)
            if (!::usbeam_emu::is_device_range(d_in, sizeof(*d_in) * (size_t)num_items)) return cudaErrorInvalidValue;
        if constexpr (std::is_pointer_v<Out>)
            if (!::usbeam_emu::is_device_range(d_out, sizeof(*d_out) * (size_t)num_items)) return cudaErrorInvalidValue;
        return ::usbeam_emu::enqueue_work(stream, [=]() {
            using T = std::decay_t<decltype(*d_out)>;
            T running = T(0);
            for (int i = 0; i < num_items; ++i) {
                T v = (T)d_in[i];
                d_out[i] = running;
                running += v;
            }
        });
    }
};

} /* namespace cub */
#endif
