/*
 * cuda_emu.h - force-included (g++ -include) before every CUDA source (cuda/NAME.cu) when usbeam is built with
 * USBEAM_CUDA=emu: the CUDA keywords, built-in variables, intrinsics and the launch object
 * that translate.py substitutes for <<<...>>>.  Together with runtime.cpp, cublas.cpp and
 * include/cub/cub.cuh it runs the CUDA backend, unchanged, on the CPU.
 *
 * What it proves: indexing, the algorithm, the order of work on streams and events (work is
 * deferred until a synchronisation that orders it), API usage and launch limits, bounds of
 * device allocations (guard pages), reads of never-written device memory (0xFF poison),
 * misaligned pointer arguments, and independence of the block order.
 * What it cannot: speed, most data races between GPU threads (threads of a block run one at a
 * time between barriers, in a shuffled order; the stress mode adds random switches between
 * statements), warp-synchronous assumptions beyond __syncwarp/__shfl_*_sync, or numerical
 * differences of the GPU's own math library.  README.md states the whole contract and lists every call and
 * intrinsic emulated; MODES.md what each check catches.
 *
 * Model: a launch is one closure on the stream's queue.  When run, blocks execute one after
 * another in a shuffled order; the threads of a block are fibers that switch only at
 * __syncthreads, __syncwarp and warp shuffles (and, in the stress mode, at the switch points
 * translate.py inserts).  threadIdx & co are globals the scheduler sets before resuming a
 * fiber (the barrier functions are out-of-line calls, so the compiler reloads them afterwards).
 */
#ifndef USBEAM_CUDA_EMU_H
#define USBEAM_CUDA_EMU_H

#define __global__
#define __device__
#define __host__
#define __shared__ static
#define __constant__ static
#define __grid_constant__
#define __managed__

#include <cuda_runtime.h>

#undef __launch_bounds__
#define __launch_bounds__(...)

#ifdef __cplusplus
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

namespace usbeam_emu {

extern uint3 g_threadIdx, g_blockIdx;
extern dim3 g_blockDim, g_gridDim;

void syncthreads();
void syncwarp(unsigned mask);
/* The warp's lanes exchange `bytes` of value; *result gets lane src_lane's value. */
void shuffle(unsigned mask, const void *value, void *result, unsigned bytes, int mode, int delta, int width);
void *dynamic_shared();

/* Switch points (USBEAM_EMU_POINT(), inserted by translate.py): a flag test, and in the stress
 * mode (USBEAM_EMU_STRESS=1) maybe a switch to another thread of the block. */
extern std::atomic<bool> g_stress_active;
void stress_switch();
inline void point()
{
    if (__builtin_expect(g_stress_active.load(std::memory_order_relaxed), 0)) stress_switch();
}
/* A device access at an address that is not a multiple of its alignment: a sticky
 * cudaErrorMisalignedAddress, as the GPU's fault would be. */
void misaligned_access(const void *ptr, size_t align, const char *what);
template <class T>
inline void check_aligned(const T *p, const char *what)
{
    if ((uintptr_t)p % alignof(T) != 0) misaligned_access(p, alignof(T), what);
}

struct LaunchConfig {
    dim3 grid, block;
    size_t shared_bytes;
    cudaStream_t stream;
    const char *name, *file;
    int line;
    int max_threads; /* the kernel's __launch_bounds__, or 1024 */
};

/* Checks a pointer argument (null, device memory or pinned host memory) and records a
 * launch error naming the kernel and argument otherwise; a pointer that is not a multiple of
 * `align` (its pointee's alignment) is a sticky cudaErrorMisalignedAddress. */
bool check_kernel_pointer(const LaunchConfig &cfg, const void *kernel, int index, const void *ptr, size_t align,
                          const char *type);
void submit_kernel(const LaunchConfig &cfg, const void *kernel, std::function<void()> body);
/* For the emulated libraries (cuBLAS, CUB): queue work on a stream; check a device range. */
cudaError_t enqueue_work(cudaStream_t stream, std::function<void()> work);
bool is_device_range(const void *ptr, size_t bytes);

/* The alignment a GPU needs for loads and stores through a T*: alignof(T), which the CUDA
 * headers give their vector types on the host too (float2 8, float4 / double2 / int4 16). */
template <class T>
constexpr size_t pointee_alignment()
{
    using U = std::remove_cv_t<std::remove_pointer_t<T>>;
    if constexpr (std::is_void_v<U> || std::is_function_v<U>) return 1;
    else return alignof(U);
}
template <class T>
inline bool check_argument(const LaunchConfig &cfg, const void *kernel, int index, const T &value)
{
    if constexpr (std::is_pointer_v<T>)
        return check_kernel_pointer(cfg, kernel, index, (const void *)value, pointee_alignment<T>(),
                                    __PRETTY_FUNCTION__);
    else return true;
}

template <class... P>
struct BoundKernel {
    LaunchConfig cfg;
    void (*fn)(P...);

    template <class... A>
    void operator()(A &&...a) const
    {
        static_assert(sizeof...(A) == sizeof...(P), "kernel launched with the wrong number of arguments");
        /* Kernel parameters are copies taken at launch, converted to the parameter types. */
        std::tuple<std::decay_t<P>...> args(static_cast<std::decay_t<P>>(std::forward<A>(a))...);
        bool ok = true;
        std::apply([&](const auto &...v) {
            int i = 0;
            ((ok = check_argument(cfg, (const void *)fn, i++, v) && ok), ...);
        }, args);
        if (!ok) return;
        auto f = fn;
        submit_kernel(cfg, (const void *)fn, [f, args]() { std::apply(f, args); });
    }
};

struct Launch {
    LaunchConfig cfg;
    Launch(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream, const char *name, const char *file,
           int line, int max_threads = 1024)
        : cfg{grid, block, shared_bytes, stream, name, file, line, max_threads}
    {
    }
    template <class... P>
    BoundKernel<P...> with(void (*fn)(P...)) const
    {
        return BoundKernel<P...>{cfg, fn};
    }
};

} /* namespace usbeam_emu */

/* The runtime's template overload (nvcc only) that takes the kernel itself. */
template <class... P>
inline cudaError_t cudaFuncSetAttribute(void (*kernel)(P...), cudaFuncAttribute attr, int value)
{
    return ::cudaFuncSetAttribute((const void *)kernel, attr, value);
}

#define threadIdx (::usbeam_emu::g_threadIdx)
#define blockIdx (::usbeam_emu::g_blockIdx)
#define blockDim (::usbeam_emu::g_blockDim)
#define gridDim (::usbeam_emu::g_gridDim)
constexpr int warpSize = 32;

inline void __syncthreads() { ::usbeam_emu::syncthreads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { ::usbeam_emu::syncwarp(mask); }
inline void __threadfence() { ::usbeam_emu::point(); }
inline void __threadfence_block() { ::usbeam_emu::point(); }
#define USBEAM_EMU_POINT() ::usbeam_emu::point()

/* Warp shuffles: mode 0 from lane `arg`, 1 down by `arg`, 2 up by `arg`, 3 xor `arg`. */
template <class T>
inline T shuffle_value(unsigned mask, T value, int mode, int arg, int width)
{
    T out;
    ::usbeam_emu::shuffle(mask, &value, &out, sizeof(T), mode, arg, width);
    return out;
}
template <class T>
inline T __shfl_sync(unsigned mask, T value, int src_lane, int width = 32) { return shuffle_value(mask, value, 0, src_lane, width); }
template <class T>
inline T __shfl_down_sync(unsigned mask, T value, unsigned delta, int width = 32) { return shuffle_value(mask, value, 1, (int)delta, width); }
template <class T>
inline T __shfl_up_sync(unsigned mask, T value, unsigned delta, int width = 32) { return shuffle_value(mask, value, 2, (int)delta, width); }
template <class T>
inline T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = 32) { return shuffle_value(mask, value, 3, lane_mask, width); }

/* Atomics: the threads of the emulated device never run at the same time, so an atomic is a
 * plain read-modify-write that returns the old value.  A switch point comes before it (the
 * stress mode), and its address must be aligned, as on a GPU. */
template <class T, class F>
inline T atomic_update(T *address, F update)
{
    ::usbeam_emu::point();
    ::usbeam_emu::check_aligned(address, "an atomic");
    T old = *address;
    *address = update(old);
    return old;
}
template <class T> inline T atomicAdd(T *a, T v) { return atomic_update(a, [v](T o) { return o + v; }); }
template <class T> inline T atomicSub(T *a, T v) { return atomic_update(a, [v](T o) { return o - v; }); }
template <class T> inline T atomicMax(T *a, T v) { return atomic_update(a, [v](T o) { return v > o ? v : o; }); }
template <class T> inline T atomicMin(T *a, T v) { return atomic_update(a, [v](T o) { return v < o ? v : o; }); }
template <class T> inline T atomicExch(T *a, T v) { return atomic_update(a, [v](T) { return v; }); }
template <class T> inline T atomicOr(T *a, T v) { return atomic_update(a, [v](T o) { return o | v; }); }
template <class T> inline T atomicAnd(T *a, T v) { return atomic_update(a, [v](T o) { return o & v; }); }
template <class T> inline T atomicCAS(T *a, T compare, T v) { return atomic_update(a, [=](T o) { return o == compare ? v : o; }); }

/* Intrinsics with an explicit rounding mode: the host's IEEE operations (built with
 * -ffp-contract=off, so nothing is fused that the CUDA source did not fuse). */
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __log10f(float x) { return std::log10(x); }
inline float __sinf(float x) { return std::sin(x); }
inline float __cosf(float x) { return std::cos(x); }
inline float __powf(float x, float y) { return std::pow(x, y); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : (x == x ? x : 0.0f)); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
/* sin(pi x), cos(pi x) through double: correctly rounded, where the device's are within 1 ulp */
inline float cospif(float x) { return (float)std::cos(3.14159265358979323846 * (double)x); }
inline float sinpif(float x) { return (float)std::sin(3.14159265358979323846 * (double)x); }
inline void sincospif(float x, float *s, float *c) { *s = sinpif(x); *c = cospif(x); }
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
inline int __float2int_rn(float x) { return (int)std::nearbyint(x); }
inline int __double2int_rn(double x) { return (int)std::nearbyint(x); }

inline unsigned __float_as_uint(float x) { unsigned u; std::memcpy(&u, &x, 4); return u; }
inline float __uint_as_float(unsigned u) { float x; std::memcpy(&x, &u, 4); return x; }
inline int __float_as_int(float x) { int u; std::memcpy(&u, &x, 4); return u; }
inline float __int_as_float(int u) { float x; std::memcpy(&x, &u, 4); return x; }
inline long long __double_as_longlong(double x) { long long u; std::memcpy(&u, &x, 8); return u; }
inline double __longlong_as_double(long long u) { double x; std::memcpy(&x, &u, 8); return x; }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
/* CUDA's global min/max overloads (mixed int/unsigned resolve to the common type). */
template <class A, class B>
inline std::common_type_t<A, B> min(A a, B b)
{
    return b < a ? (std::common_type_t<A, B>)b : (std::common_type_t<A, B>)a;
}
template <class A, class B>
inline std::common_type_t<A, B> max(A a, B b)
{
    return a < b ? (std::common_type_t<A, B>)b : (std::common_type_t<A, B>)a;
}

template <class T>
inline T __ldg(const T *p)
{
    ::usbeam_emu::check_aligned(p, "__ldg");
    return *p;
}
/* streaming (evict-first) load and store: only a cache hint on a GPU */
template <class T>
inline T __ldcs(const T *p)
{
    ::usbeam_emu::check_aligned(p, "__ldcs");
    return *p;
}
template <class T>
inline void __stcs(T *p, T v)
{
    ::usbeam_emu::check_aligned(p, "__stcs");
    *p = v;
}

#endif /* __cplusplus */
#endif
