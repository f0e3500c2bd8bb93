/*
 * clutter.cu - clutter (wall) filter along slow time, CUDA twin of csrc/clutter.c for the
 * projection filters 'mean' and 'poly' (least-squares polynomial regression, Hoeks et al.
 * 1991; Kadi & Loupas 1995): y = x - Q Q^T x per pixel, with Q the orthonormal Legendre
 * basis that clutter.c builds in double at plan creation (uploaded once).
 *
 * Layout: in, out complex64 [n_frames][n_pixels] on the device (slow time leading); out may
 *         alias in (every coefficient of a pixel is formed before its first output is written,
 *         and a pixel is read and written by one thread only).
 *         basis double [n_basis][n_frames] on the device (real: Legendre polynomials).
 * Stage:  "clutter.project": one thread per pixel (consecutive threads read consecutive
 *         pixels of a frame: coalesced), coefficients in registers, double accumulation in
 *         the CPU's order (coefficients k by k over t, then the reconstruction frame by
 *         frame over k), so the two backends agree to the float32 rounding of the output.
 *
 * Not on CUDA (plan create refuses them with USBEAM_ERR_UNSUPPORTED): the SVD filter (Gram
 * matrix + eigen-decomposition) and the IIR filter (state kept on the device between blocks).
 */
#include "exec.cuh"

namespace {

constexpr int THREADS = 256;
constexpr int MAX_BASIS = 32; /* coefficients per pixel held in registers / local memory */
const char *const STAGE_NAMES[] = {"clutter.project"};

__global__ void project_kernel(const float2 *in, float2 *out, const double *__restrict__ basis, int n_basis,
                               size_t n_frames, size_t n_pixels)
{
    for (size_t q = (size_t)blockIdx.x * blockDim.x + threadIdx.x; q < n_pixels;
         q += (size_t)gridDim.x * blockDim.x) {
        double coef_re[MAX_BASIS], coef_im[MAX_BASIS];
        for (int k = 0; k < n_basis; ++k) {
            const double *b = basis + (size_t)k * n_frames;
            double cr = 0.0, ci = 0.0;
            for (size_t t = 0; t < n_frames; ++t) {
                const float2 x = in[t * n_pixels + q];
                cr += (double)x.x * b[t];
                ci += (double)x.y * b[t];
            }
            coef_re[k] = cr;
            coef_im[k] = ci;
        }
        for (size_t t = 0; t < n_frames; ++t) {
            double ar = 0.0, ai = 0.0;
            for (int k = 0; k < n_basis; ++k) {
                const double b = basis[(size_t)k * n_frames + t];
                ar += coef_re[k] * b;
                ai += coef_im[k] * b;
            }
            const float2 x = in[t * n_pixels + q];
            out[t * n_pixels + q] = make_float2((float)((double)x.x - ar), (float)((double)x.y - ai));
        }
    }
}

} // namespace

struct usbeam_clutter_cuda {
    usbeam_cuda_exec *exec;
    size_t n_frames, n_pixels;
    int n_basis;
    double *basis; /* device [n_basis][n_frames] */
    unsigned grid;
};

extern "C" usbeam_status usbeam_clutter_cuda_create(const usbeam_clutter_params *params, const double *basis,
                                                    int n_basis, usbeam_clutter_cuda **out)
{
    if (!params || !basis || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "params, basis and plan must not be NULL");
    *out = nullptr;
    if (n_basis < 1 || n_basis > MAX_BASIS)
        return usbeam_fail(USBEAM_ERR_UNSUPPORTED, "poly_order: at most %d on CUDA (got %d)", MAX_BASIS - 1,
                           n_basis - 1);
    usbeam_clutter_cuda *p = (usbeam_clutter_cuda *)usbeam_alloc(sizeof *p);
    if (!p) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "clutter CUDA plan");
    p->n_frames = params->n_frames;
    p->n_pixels = params->n_pixels;
    p->n_basis = n_basis;
    const size_t bytes = (size_t)n_basis * params->n_frames * sizeof(double); /* n_frames <= 4096: no overflow */
    usbeam_status st = usbeam_cuda_exec_create(STAGE_NAMES, 1, &p->exec);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_alloc(p->exec, bytes, "clutter basis", (void **)&p->basis);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_upload(p->exec, p->basis, basis, bytes);
    if (st == USBEAM_OK) {
        int sms = 0;
        st = usbeam_cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount,
                                                      usbeam_cuda_exec_device(p->exec)),
                               "cudaDeviceGetAttribute", __FILE__, __LINE__);
        size_t blocks = (p->n_pixels + THREADS - 1) / THREADS, cap = (size_t)(sms > 0 ? sms : 1) * 8u;
        p->grid = (unsigned)(blocks < cap ? blocks : cap);
    }
    if (st != USBEAM_OK) {
        usbeam_clutter_cuda_destroy(p);
        return st;
    }
    *out = p;
    return USBEAM_OK;
}

extern "C" void usbeam_clutter_cuda_destroy(usbeam_clutter_cuda *p)
{
    if (!p) return;
    usbeam_cuda_exec_destroy(p->exec);
    usbeam_free(p);
}

extern "C" usbeam_cuda_exec *usbeam_clutter_cuda_exec(usbeam_clutter_cuda *p) { return p ? p->exec : nullptr; }

static usbeam_status clutter_cuda_run(usbeam_clutter_cuda *p, const float2 *in, float2 *out)
{
    usbeam_cuda_exec *e = p->exec;
    usbeam_status st = usbeam_cuda_stage_begin(e, 0);
    if (st != USBEAM_OK) return st;
    project_kernel<<<p->grid, THREADS, 0, usbeam_cuda_exec_cuda_stream(e)>>>(in, out, p->basis, p->n_basis,
                                                                             p->n_frames, p->n_pixels);
    USBEAM_CUDA_TRY(cudaGetLastError());
    return usbeam_cuda_stage_end(e, 0);
}

extern "C" usbeam_status usbeam_clutter_cuda_execute(usbeam_clutter_cuda *p, const void *in, void *out)
{
    if (!p || !in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, in and out must not be NULL");
    usbeam_status st = usbeam_cuda_exec_begin(p->exec);
    if (st != USBEAM_OK) return st;
    st = clutter_cuda_run(p, (const float2 *)in, (float2 *)out);
    usbeam_cuda_exec_end(p->exec);
    return st;
}
