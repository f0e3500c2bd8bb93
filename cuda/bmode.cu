/*
 * bmode.cu - B-mode display (envelope and log compression), CUDA twin of csrc/bmode.c.
 *
 * Layout: in  complex64 [n_images][image_size] on the device (interleaved re, im float32)
 *         out uint8 or float32 [n_images][image_size] on the device.
 * Units:  dynamic range in dB; dB output is 20 log10(|IQ| / ref) = 10 log10(|IQ|^2 / ref^2).
 * Semantics (identical to the CPU backend, PyMUST bmode): the reference power is the max of
 * |IQ|^2 over the whole array (or per image, or the square of a fixed reference); the uint8
 * level is 255 (dB - 10 log10(ref^2) + DR) / DR clipped to [0, 255] and truncated; the dB
 * output is floored at -DR; an all-zero image has reference +inf, so every pixel is at the
 * bottom.  uint8, as on the CPU, is the threshold definition: level k iff
 * |IQ|^2 >= ref^2 10^((k - 255) DR / 2550), with the 255 factors 10^(...) computed once on
 * the host by the CPU's expression (uploaded at plan creation) and multiplied by the same
 * double reference power; |IQ|^2 of float parts is exact in double (no rounding to differ
 * by, FMA or not), so the levels are the CPU's bit for bit (NaN -> 0, inf -> 255).
 * A double log10 gives the first guess, which the exact thresholds settle.  The dB output
 * takes 10 log10 in double on both sides (last-ulp differences of two libm's: tolerances.py,
 * bmode_cuda_db_abs).
 *
 * Stages: "bmode.max" (grid-stride max of |IQ|^2 per reference block: warp shuffles, one
 * atomicMax per warp on the IEEE bits, which order like the values for non-negative
 * doubles; NaN is ignored as in the CPU loop; then 10 log10 of each block's max, once) and
 * "bmode.compress" (grid-stride, one pixel per thread per pass).
 * Non-finite input: the CPU refuses it (ValueError naming image); here the compress pass,
 * which reads every pixel whatever the reference, checks |IQ|^2 (a double sum of float
 * squares is non-finite exactly when a part is) and each thread that met one stores
 * USBEAM_INPUT_FAULT_NONFINITE once into the plan's mapped fault word (exec.cuh), which
 * usbeam.device reads once the work has finished.  The levels and dB values are unchanged.
 */
#include "runtime/exec.cuh"

#include <math.h>

namespace {

enum { STAGE_MAX = 0, STAGE_COMPRESS = 1 };
const char *const STAGE_NAMES[] = {"bmode.max", "bmode.compress"};
constexpr int THREADS = 256;

__device__ __forceinline__ double sample_power(const float2 *iq, size_t i)
{
    const float2 z = iq[i];
    const double re = z.x, im = z.y;
    return re * re + im * im;
}

/* best_bits[block] = max |IQ|^2 over each block of block_size values (blockIdx.y = block). */
__global__ void max_power_kernel(const float2 *__restrict__ iq, size_t block_size,
                                 unsigned long long *__restrict__ best_bits)
{
    const size_t block = blockIdx.y;
    const float2 *values = iq + block * block_size;
    double best = 0.0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < block_size; i += (size_t)gridDim.x * blockDim.x) {
        const double p = sample_power(values, i);
        best = p > best ? p : best; /* NaN never wins, as on the CPU */
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        const double other = __shfl_down_sync(0xffffffffu, best, offset);
        best = other > best ? other : best;
    }
    if ((threadIdx.x & 31) == 0) atomicMax(&best_bits[block], (unsigned long long)__double_as_longlong(best));
}

/* ref_power[r] = max |IQ|^2 of reference block r, +inf for an all-zero block (so that every
 * pixel of it lands at the bottom of the range, as on the CPU), and ref_db[r] its 10 log10. */
__global__ void reference_kernel(const unsigned long long *__restrict__ best_bits, size_t n_references,
                                 double *__restrict__ ref_power, double *__restrict__ ref_db)
{
    for (size_t r = (size_t)blockIdx.x * blockDim.x + threadIdx.x; r < n_references; r += (size_t)gridDim.x * blockDim.x) {
        double power = __longlong_as_double((long long)best_bits[r]);
        if (!(power > 0.0)) power = INFINITY;
        ref_power[r] = power;
        ref_db[r] = 10.0 * log10(power);
    }
}

/* The reference of pixel i: a fixed one (computed on the host, as the CPU does), the global
 * max, or its image's max. */
__device__ __forceinline__ double pixel_reference(const double *table, double fixed, int use_fixed, int per_image,
                                                  size_t i, size_t image_size)
{
    return use_fixed ? fixed : table[per_image ? i / image_size : 0];
}

/* factor[k] = 10^((k - 255) DR / 2550), k = 1..255, from the host (factor[0] unused). */
__global__ void compress_uint8_kernel(const float2 *__restrict__ iq, size_t n, size_t image_size,
                                      const double *__restrict__ ref_power, const double *__restrict__ ref_db,
                                      double fixed_power, double fixed_ref_db, int use_fixed, int per_image,
                                      double range_db, const double *__restrict__ factor,
                                      unsigned char *__restrict__ out, unsigned *input_fault)
{
    const double scale = 255.0 / range_db;
    bool non_finite = false;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const double power = sample_power(iq, i);
        non_finite |= !isfinite(power);
        const double reference = pixel_reference(ref_power, fixed_power, use_fixed, per_image, i, image_size);
        const double guess = (10.0 * log10(power) - pixel_reference(ref_db, fixed_ref_db, use_fixed, per_image, i,
                                                                      image_size) + range_db) * scale;
        int level = guess >= 255.0 ? 255 : (guess > 0.0 ? (int)guess : 0); /* -inf and NaN: 0 */
        /* the CPU's thresholds, reference x factor (one double product, as there) */
        while (level < 255 && power >= reference * factor[level + 1]) ++level;
        while (level > 0 && !(power >= reference * factor[level])) --level;
        out[i] = (unsigned char)level;
    }
    if (non_finite) *(volatile unsigned *)input_fault = USBEAM_INPUT_FAULT_NONFINITE; /* mapped host word */
}

__global__ void compress_db_kernel(const float2 *__restrict__ iq, size_t n, size_t image_size,
                                   const double *__restrict__ ref_db, double fixed_ref_db, int use_fixed,
                                   int per_image, double range_db, float *__restrict__ out,
                                   unsigned *input_fault)
{
    bool non_finite = false;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const double reference = pixel_reference(ref_db, fixed_ref_db, use_fixed, per_image, i, image_size);
        const double power = sample_power(iq, i);
        non_finite |= !isfinite(power);
        const double db = 10.0 * log10(power) - reference;
        out[i] = (float)(db > -range_db ? db : -range_db);
    }
    if (non_finite) *(volatile unsigned *)input_fault = USBEAM_INPUT_FAULT_NONFINITE; /* mapped host word */
}

unsigned grid_for(size_t n, unsigned cap)
{
    size_t blocks = (n + THREADS - 1) / THREADS;
    if (blocks < 1) blocks = 1;
    return (unsigned)(blocks < cap ? blocks : cap);
}

} // namespace

struct usbeam_bmode_cuda {
    usbeam_cuda_exec *exec;
    usbeam_bmode_params params;
    size_t image_size;
    size_t n_references;              /* blocks with their own max: n_images or 1 */
    unsigned long long *best_bits;    /* [n_references] device, max |IQ|^2 as IEEE bits */
    double *ref_power;                /* [n_references] device, that max (+inf for 0) */
    double *ref_db;                   /* [n_references] device, 10 log10 of it */
    double *factor;                   /* [256] device, uint8 threshold factors (host pow) */
    unsigned *input_fault;            /* mapped host word (exec.cuh) */
    unsigned grid_cap;                /* grid-stride launches: a few waves of the device */
};

extern "C" usbeam_status usbeam_bmode_cuda_create(const usbeam_bmode_params *params, usbeam_bmode_cuda **out)
{
    if (!params || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "params and plan must not be NULL");
    *out = nullptr;
    usbeam_bmode_cuda *p = (usbeam_bmode_cuda *)usbeam_alloc(sizeof *p);
    if (!p) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "bmode CUDA plan");
    p->params = *params;
    p->image_size = params->n_values / params->n_images;
    p->n_references = params->per_image ? params->n_images : 1;
    if (p->n_references > 65535u) { /* one grid row per reference block */
        usbeam_free(p);
        return usbeam_fail(USBEAM_ERR_UNSUPPORTED, "n_images: %zu per-image references, at most 65535 on CUDA",
                           params->n_images);
    }
    usbeam_status st = usbeam_cuda_exec_create(STAGE_NAMES, 2, &p->exec);
    size_t bytes = 0;
    if (st == USBEAM_OK && usbeam_mul_size(p->n_references, sizeof(unsigned long long), &bytes) != 0)
        st = usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "n_images: %zu is too large", p->n_references);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_alloc(p->exec, bytes, "bmode reference", (void **)&p->best_bits);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_alloc(p->exec, bytes, "bmode reference", (void **)&p->ref_db);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_alloc(p->exec, bytes, "bmode reference", (void **)&p->ref_power);
    if (st == USBEAM_OK && params->output == USBEAM_BMODE_UINT8) {
        double factor[256];
        factor[0] = 0.0; /* level 0 needs nothing: never read */
        for (int k = 1; k < 256; ++k) factor[k] = pow(10.0, (double)(k - 255) * params->dynamic_range_db / 2550.0);
        st = usbeam_cuda_exec_alloc(p->exec, sizeof factor, "bmode thresholds", (void **)&p->factor);
        if (st == USBEAM_OK) st = usbeam_cuda_exec_upload(p->exec, p->factor, factor, sizeof factor);
    }
    if (st == USBEAM_OK) st = usbeam_cuda_exec_input_fault_flag(p->exec, &p->input_fault);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_grid_cap(p->exec, &p->grid_cap);
    if (st != USBEAM_OK) {
        usbeam_bmode_cuda_destroy(p);
        return st;
    }
    *out = p;
    return USBEAM_OK;
}

extern "C" void usbeam_bmode_cuda_destroy(usbeam_bmode_cuda *p)
{
    if (!p) return;
    usbeam_cuda_exec_destroy(p->exec);
    usbeam_free(p);
}

extern "C" usbeam_cuda_exec *usbeam_bmode_cuda_exec(usbeam_bmode_cuda *p) { return p ? p->exec : nullptr; }

static usbeam_status bmode_cuda_run(usbeam_bmode_cuda *p, const float2 *iq, void *out)
{
    usbeam_cuda_exec *e = p->exec;
    cudaStream_t stream = usbeam_cuda_exec_cuda_stream(e);
    const usbeam_bmode_params *prm = &p->params;
    const double fixed_power = prm->reference * prm->reference;
    if (fixed_power == 0.0) {
        usbeam_status st = usbeam_cuda_stage_begin(e, STAGE_MAX);
        if (st != USBEAM_OK) return st;
        USBEAM_CUDA_TRY(cudaMemsetAsync(p->best_bits, 0, p->n_references * sizeof(unsigned long long), stream));
        const size_t block_size = prm->per_image ? p->image_size : prm->n_values;
        unsigned per_block = grid_for(block_size, p->grid_cap);
        /* every reference block gets a share of the device, at least one CUDA block */
        if (p->n_references > 1) {
            size_t share = p->grid_cap / p->n_references;
            per_block = (unsigned)(share < 1 ? 1 : (share < per_block ? share : per_block));
        }
        dim3 grid(per_block, (unsigned)p->n_references);
        max_power_kernel<<<grid, THREADS, 0, stream>>>(iq, block_size, p->best_bits);
        USBEAM_CUDA_TRY(cudaGetLastError());
        reference_kernel<<<grid_for(p->n_references, p->grid_cap), THREADS, 0, stream>>>(
            p->best_bits, p->n_references, p->ref_power, p->ref_db);
        USBEAM_CUDA_TRY(cudaGetLastError());
        if ((st = usbeam_cuda_stage_end(e, STAGE_MAX)) != USBEAM_OK) return st;
    }
    usbeam_status st = usbeam_cuda_stage_begin(e, STAGE_COMPRESS);
    if (st != USBEAM_OK) return st;
    const unsigned grid = grid_for(prm->n_values, p->grid_cap);
    const int use_fixed = fixed_power > 0.0;
    const double fixed_ref_db = use_fixed ? 10.0 * log10(fixed_power) : 0.0; /* host libm, as the CPU */
    if (prm->output == USBEAM_BMODE_UINT8)
        compress_uint8_kernel<<<grid, THREADS, 0, stream>>>(iq, prm->n_values, p->image_size, p->ref_power, p->ref_db,
                                                            fixed_power, fixed_ref_db, use_fixed, prm->per_image,
                                                            prm->dynamic_range_db, p->factor, (unsigned char *)out,
                                                            p->input_fault);
    else
        compress_db_kernel<<<grid, THREADS, 0, stream>>>(iq, prm->n_values, p->image_size, p->ref_db, fixed_ref_db,
                                                         use_fixed, prm->per_image, prm->dynamic_range_db,
                                                         (float *)out, p->input_fault);
    USBEAM_CUDA_TRY(cudaGetLastError());
    return usbeam_cuda_stage_end(e, STAGE_COMPRESS);
}

extern "C" usbeam_status usbeam_bmode_cuda_execute(usbeam_bmode_cuda *p, const void *in, void *out)
{
    if (!p || !in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, in and out must not be NULL");
    usbeam_status st = usbeam_cuda_exec_begin(p->exec);
    if (st != USBEAM_OK) return st;
    st = bmode_cuda_run(p, (const float2 *)in, out);
    usbeam_cuda_exec_end(p->exec);
    return st;
}
