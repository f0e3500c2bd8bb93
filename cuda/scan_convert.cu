/*
 * scan_convert.cu - scan conversion of sector images, CUDA twin of csrc/bmode/scan_convert.c.
 *
 * Layout: in  (n_images, n_r, n_theta) uint8 or float32 on the device, theta fastest;
 *         out (n_images, n_points) of the same dtype on the device.
 * The table is the CPU plan's (each point's first polar neighbour, -1 outside the sector, and
 * its fractions (fr, ft), computed in double at plan creation), uploaded once; the kernel is
 * the CPU's bilinear mix (usbeam_bilinear_f / usbeam_round_u8, usbeam_math.h), so both
 * backends give the same float32 operations in the same order: bit-identical results.
 * One thread per (image, point), grid-stride; neighbouring threads read neighbouring polar
 * samples (rows of a Cartesian image sweep the sector), through the read-only cache.
 * Non-finite float input: the CPU refuses it before writing; here a thread that reads a NaN or
 * inf sample stores USBEAM_INPUT_FAULT_NONFINITE into the plan's mapped fault word (exec.cuh),
 * which usbeam.device reads once the work has finished (only samples a point reads count).
 * Stage: "scan_convert.interpolate".
 */
#include "runtime/exec.cuh"

#include "common/usbeam_math.h"

#include <math.h>
#include <stdint.h>

namespace {

enum { STAGE_INTERPOLATE = 0 };
const char *const STAGE_NAMES[] = {"scan_convert.interpolate"};
constexpr int THREADS = 256;

template <typename T>
__device__ __forceinline__ T convert(float v);
template <>
__device__ __forceinline__ float convert<float>(float v)
{
    return v;
}
template <>
__device__ __forceinline__ unsigned char convert<unsigned char>(float v)
{
    return usbeam_round_u8(v);
}

template <typename T>
__global__ void __launch_bounds__(THREADS) scan_convert_kernel(const T *__restrict__ in, T *__restrict__ out,
                                                               const int32_t *__restrict__ first,
                                                               const float2 *__restrict__ fraction, size_t n_points,
                                                               size_t total, size_t image_size, int n_theta, T fill,
                                                               unsigned *input_fault)
{
    bool non_finite = false;
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < total; k += (size_t)gridDim.x * blockDim.x) {
        const size_t q = k % n_points, img = k / n_points;
        const int32_t f = __ldg(&first[q]);
        if (f < 0) {
            out[k] = fill;
            continue;
        }
        const float2 w = __ldg(&fraction[q]);
        const T *s = in + img * image_size + (size_t)f;
        const float v00 = (float)__ldg(&s[0]), v01 = (float)__ldg(&s[1]);
        const float v10 = (float)__ldg(&s[n_theta]), v11 = (float)__ldg(&s[n_theta + 1]);
        if (sizeof(T) == sizeof(float))
            non_finite |= !(isfinite(v00) && isfinite(v01) && isfinite(v10) && isfinite(v11));
        out[k] = convert<T>(usbeam_bilinear_f(v00, v01, v10, v11, w.x, w.y));
    }
    if (non_finite) *(volatile unsigned *)input_fault = USBEAM_INPUT_FAULT_NONFINITE; /* mapped host word */
}

} // namespace

struct usbeam_scan_convert_cuda {
    usbeam_cuda_exec *exec;
    usbeam_scan_convert_params params;
    int32_t *first;          /* [n_points] device */
    float2 *fraction;        /* [n_points] device */
    float fill;
    unsigned *input_fault;   /* mapped host word (exec.cuh) */
    unsigned grid_cap;
};

extern "C" usbeam_status usbeam_scan_convert_cuda_create(const usbeam_scan_convert_tables *tables,
                                                         usbeam_scan_convert_cuda **out)
{
    if (!tables || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "tables and plan must not be NULL");
    *out = nullptr;
    usbeam_scan_convert_cuda *p = (usbeam_scan_convert_cuda *)usbeam_alloc(sizeof *p);
    if (!p) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "scan conversion CUDA plan");
    *p = usbeam_scan_convert_cuda{};
    p->params = *tables->params;
    p->fill = tables->fill;
    const size_t n = p->params.n_points;
    usbeam_status st = usbeam_cuda_exec_create(STAGE_NAMES, 1, &p->exec);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_alloc(p->exec, n * sizeof(int32_t), "scan conversion table", (void **)&p->first);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_upload(p->exec, p->first, tables->first, n * sizeof(int32_t));
    if (st == USBEAM_OK) st = usbeam_cuda_exec_alloc(p->exec, n * sizeof(float2), "scan conversion table", (void **)&p->fraction);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_upload(p->exec, p->fraction, tables->fraction, n * sizeof(float2));
    if (st == USBEAM_OK) st = usbeam_cuda_exec_input_fault_flag(p->exec, &p->input_fault);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_grid_cap(p->exec, &p->grid_cap);
    if (st != USBEAM_OK) {
        usbeam_scan_convert_cuda_destroy(p);
        return st;
    }
    *out = p;
    return USBEAM_OK;
}

extern "C" void usbeam_scan_convert_cuda_destroy(usbeam_scan_convert_cuda *p)
{
    if (!p) return;
    usbeam_cuda_exec_destroy(p->exec);
    usbeam_free(p);
}

extern "C" usbeam_cuda_exec *usbeam_scan_convert_cuda_exec(usbeam_scan_convert_cuda *p) { return p ? p->exec : nullptr; }

extern "C" usbeam_status usbeam_scan_convert_cuda_execute(usbeam_scan_convert_cuda *p, const void *in, void *out)
{
    if (!p || !in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, in and out must not be NULL");
    usbeam_status st = usbeam_cuda_exec_begin(p->exec);
    if (st != USBEAM_OK) return st;
    usbeam_cuda_exec *e = p->exec;
    const usbeam_scan_convert_params *prm = &p->params;
    const size_t total = prm->n_images * prm->n_points, image_size = prm->n_r * prm->n_theta;
    size_t blocks = (total + THREADS - 1) / THREADS;
    const unsigned grid = (unsigned)(blocks < p->grid_cap ? (blocks < 1 ? 1 : blocks) : p->grid_cap);
    cudaStream_t stream = usbeam_cuda_exec_cuda_stream(e);
    st = usbeam_cuda_stage_begin(e, STAGE_INTERPOLATE);
    if (st == USBEAM_OK) {
        if (prm->dtype == USBEAM_DTYPE_UINT8)
            scan_convert_kernel<unsigned char><<<grid, THREADS, 0, stream>>>(
                (const unsigned char *)in, (unsigned char *)out, p->first, p->fraction, prm->n_points, total, image_size,
                (int)prm->n_theta, (unsigned char)p->fill, p->input_fault);
        else
            scan_convert_kernel<float><<<grid, THREADS, 0, stream>>>((const float *)in, (float *)out, p->first,
                                                                     p->fraction, prm->n_points, total, image_size,
                                                                     (int)prm->n_theta, p->fill, p->input_fault);
        st = usbeam_cuda_check(cudaGetLastError(), "scan_convert_kernel launch", __FILE__, __LINE__);
    }
    if (st == USBEAM_OK) st = usbeam_cuda_stage_end(e, STAGE_INTERPOLATE);
    usbeam_cuda_exec_end(e);
    return st;
}
