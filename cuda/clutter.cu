/*
 * clutter.cu - clutter (wall) filter along slow time, CUDA twin of csrc/clutter.c for the
 * projection filters 'mean' and 'poly' (least-squares polynomial regression, Hoeks et al.
 * 1991; Kadi & Loupas 1995): y = x - Q Q^T x per pixel, with Q the orthonormal Legendre
 * basis that clutter.c builds in double at plan creation (uploaded once), and of the IIR
 * Butterworth high-pass of csrc/clutter_iir.c (design, references and the projection
 * initialisation of Chornoboy 1990 there): second-order sections in transposed direct form
 * II, double state per pixel kept on the device between executes (a stream filtered block by
 * block equals the whole record), the projection tables uploaded once.
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
 * Stage "clutter.iir": one thread per (pixel, real/imaginary part), the CPU's operation order;
 *         the zero-state outputs of the first L frames of a record go to device scratch
 *         (double [2][L][n_pixels]) until the projection initialisation rewrites them.
 *         State: double [n_state][2][n_pixels] on the device, twice, zeroed by reset.
 *         NaN or inf (the CPU refuses the block and keeps its state): the kernel reads the
 *         current state buffer and writes the other one, flags a non-finite sample it read
 *         in a device word, and a one-thread kernel queued after it makes the new buffer
 *         current (and the record started) only when the block was finite.  So such a block
 *         leaves the state and the projection initialisation as they were, as on the CPU,
 *         with no host round trip (graph capture included); its output is what the
 *         arithmetic gives (NaN / inf where the bad sample reaches), and nothing is reported:
 *         the plan's host fault word (exec.cuh) would stay set inside DopplerPipeline, which
 *         reports its rf through the beamformer's word only.
 *
 * algorithm GEMM (usbeam_clutter_params.algorithm; the kernel above stays the default: it reads
 *         the ensemble once and accumulates in double, where GEMM makes two passes over it and
 *         sums in float32): the same projection through cuBLAS, also timed as stage
 *         "clutter.project" so the two paths compare directly.  Q is real, so the complex64
 *         ensemble is the real column-major (2 n_pixels x n_frames) matrix X (ld 2 n_pixels):
 *         C = X Q (2 n_pixels x n_basis, plan-owned scratch), then Y = X - C Q^T with Y
 *         initialised to X (a device copy; none when out aliases in).  Q float [n_basis][n_frames]
 *         = column-major (n_frames x n_basis), rounded from the double basis at plan creation.
 *         CUBLAS_PEDANTIC_MATH (full FP32, never TF32), a plan-owned handle and workspace (set
 *         again after every cublasSetStream, which resets it): execute allocates nothing, so a
 *         CUDA-graph capture can hold it.
 *
 * The SVD filter (Gram matrix + eigen-decomposition) has its own twin, cuda/clutter_svd.cu.
 */
#include "runtime/cublas_plan.cuh"

#include <cublas_v2.h>

namespace {

constexpr int THREADS = 256;
constexpr int MAX_BASIS = 32; /* coefficients per pixel held in registers / local memory */
const char *const STAGE_NAMES[] = {"clutter.project", "clutter.iir"};
enum { STAGE_PROJECT = 0, STAGE_IIR = 1 };
/* as in cuda/hadamard.cu: without a plan-owned workspace cuBLAS takes one from its pool inside
 * execute, which a graph capture cannot hold */
constexpr int IIR_MAX_SECTIONS = 10;

struct IirSections {
    int n_sections;
    int order[IIR_MAX_SECTIONS]; /* 1 or 2 */
    double b[IIR_MAX_SECTIONS][3], a[IIR_MAX_SECTIONS][3];
};

/* x: interleaved float32 [n_frames][n_pixels][2]; i in [0, 2 n_pixels) = part * n_pixels + q. */
/* control (device): [0] which state buffer is current, [1] set when this block read NaN/inf,
 * [2] whether the record has started (no projection initialisation then). */
enum { CONTROL_CURRENT = 0, CONTROL_BAD = 1, CONTROL_STARTED = 2, CONTROL_WORDS = 3 };

/* init_frames: L of the projection initialisation (0 without it), applied while the record
 * has not started. */
__global__ void iir_kernel(const float *in, float *out, size_t n_frames, size_t n_pixels, IirSections sec,
                           int n_state, double *state0, double *state1, int *control, size_t init_frames,
                           double *__restrict__ y0, const double *__restrict__ natural_q,
                           const double *__restrict__ state_gain)
{
    const int current = control[CONTROL_CURRENT];
    const double *from = current ? state1 : state0;
    double *to = current ? state0 : state1;
    const size_t L = control[CONTROL_STARTED] ? 0 : init_frames;
    bool non_finite = false;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < 2 * n_pixels;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t part = i / n_pixels, q = i % n_pixels;
        double z[2 * IIR_MAX_SECTIONS];
        for (int j = 0; j < n_state; ++j) z[j] = from[((size_t)j * 2 + part) * n_pixels + q];
        double *y0p = L ? y0 + part * L * n_pixels + q : nullptr; /* [u] at y0p[u * n_pixels] */
        for (size_t t = 0; t < n_frames; ++t) {
            double v = in[2 * (t * n_pixels + q) + part];
            non_finite |= !(v - v == 0.0);
            int slot = 0;
            for (int s = 0; s < sec.n_sections; ++s) {
                const double *b = sec.b[s], *a = sec.a[s];
                const double w = b[0] * v + z[slot];
                if (sec.order[s] == 2) {
                    z[slot] = b[1] * v - a[1] * w + z[slot + 1];
                    z[slot + 1] = b[2] * v - a[2] * w;
                } else {
                    z[slot] = b[1] * v - a[1] * w;
                }
                v = w;
                slot += sec.order[s];
            }
            if (t < L)
                y0p[t * n_pixels] = v;
            else
                out[2 * (t * n_pixels + q) + part] = (float)v;
            if (L && t + 1 == L) {
                /* projection initialisation, as on the CPU: move the state with the uncorrected
                 * y0 first, then remove the natural-response part of the first L outputs */
                for (int j = 0; j < n_state; ++j)
                    for (size_t u = 0; u < L; ++u) z[j] += state_gain[(size_t)j * L + u] * y0p[u * n_pixels];
                for (int k = 0; k < n_state; ++k) {
                    const double *qk = natural_q + (size_t)k * L;
                    double coef = 0.0;
                    for (size_t u = 0; u < L; ++u) coef += qk[u] * y0p[u * n_pixels];
                    for (size_t u = 0; u < L; ++u) y0p[u * n_pixels] -= qk[u] * coef;
                }
                for (size_t u = 0; u < L; ++u) out[2 * (u * n_pixels + q) + part] = (float)y0p[u * n_pixels];
            }
        }
        for (int j = 0; j < n_state; ++j) to[((size_t)j * 2 + part) * n_pixels + q] = z[j];
    }
    if (non_finite) control[CONTROL_BAD] = 1; /* every writer stores the same value */
}

/* After iir_kernel, one thread: a finite block's state becomes current and starts the record. */
__global__ void iir_commit_kernel(int *control)
{
    if (!control[CONTROL_BAD]) {
        control[CONTROL_CURRENT] ^= 1;
        control[CONTROL_STARTED] = 1;
    }
    control[CONTROL_BAD] = 0;
}

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
    /* algorithm GEMM */
    cublasHandle_t cublas;
    float *basis_float;     /* device [n_basis][n_frames] */
    float *coef;            /* device, column-major (2 n_pixels x n_basis) */
    void *cublas_workspace; /* device, USBEAM_CUBLAS_WORKSPACE_BYTES */
    unsigned grid;
    /* IIR */
    int iir;
    IirSections sections;
    int n_state, projection;
    size_t init_frames;        /* L */
    double *state, *state_next; /* device [n_state][2][n_pixels] each: current and next, chosen by control */
    int *control;              /* device [CONTROL_WORDS] (see iir_kernel) */
    double *y0;                /* device [2][L][n_pixels] (projection initialisation only) */
    double *natural_q, *state_gain; /* device [n_state][L] each */
};

static usbeam_status clutter_cuda_grid(usbeam_clutter_cuda *p, size_t n_threads)
{
    unsigned cap = 1;
    usbeam_status st = usbeam_cuda_exec_grid_cap(p->exec, &cap);
    size_t blocks = (n_threads + THREADS - 1) / THREADS;
    p->grid = (unsigned)(blocks < cap ? blocks : cap);
    return st;
}

extern "C" usbeam_status usbeam_clutter_cuda_create_iir(const usbeam_clutter_params *params, int n_sections,
                                                        const int *section_order, const double *sos_b,
                                                        const double *sos_a, int n_state, size_t init_frames,
                                                        const double *natural_q, const double *state_gain,
                                                        usbeam_clutter_cuda **out)
{
    if (!params || !section_order || !sos_b || !sos_a || !out)
        return usbeam_fail(USBEAM_ERR_NULL_POINTER, "IIR design and plan must not be NULL");
    *out = nullptr;
    if (n_sections < 1 || n_sections > IIR_MAX_SECTIONS || n_state < 1 || n_state > 2 * IIR_MAX_SECTIONS)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "iir_order: %d sections, %d states", n_sections, n_state);
    const int projection = init_frames > 0;
    if (projection && (!natural_q || !state_gain))
        return usbeam_fail(USBEAM_ERR_NULL_POINTER, "projection tables must not be NULL");
    usbeam_clutter_cuda *p = (usbeam_clutter_cuda *)usbeam_alloc(sizeof *p);
    if (!p) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "clutter CUDA plan");
    p->n_frames = params->n_frames;
    p->n_pixels = params->n_pixels;
    p->iir = 1;
    p->sections.n_sections = n_sections;
    for (int s = 0; s < n_sections; ++s) {
        p->sections.order[s] = section_order[s];
        for (int c = 0; c < 3; ++c) {
            p->sections.b[s][c] = sos_b[3 * s + c];
            p->sections.a[s][c] = sos_a[3 * s + c];
        }
    }
    p->n_state = n_state;
    p->projection = projection;
    p->init_frames = init_frames;
    size_t state_bytes = 0, y0_bytes = 0;
    usbeam_status st = usbeam_cuda_exec_create(STAGE_NAMES, 2, &p->exec);
    if (st == USBEAM_OK && (usbeam_mul_size3((size_t)n_state * 2, p->n_pixels, sizeof(double), &state_bytes) != 0 ||
                            usbeam_mul_size3(2 * init_frames, p->n_pixels, sizeof(double), &y0_bytes) != 0))
        st = usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "n_pixels: %zu is too large", p->n_pixels);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_alloc(p->exec, state_bytes, "IIR state", (void **)&p->state);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_alloc(p->exec, state_bytes, "IIR state", (void **)&p->state_next);
    if (st == USBEAM_OK)
        st = usbeam_cuda_exec_alloc(p->exec, CONTROL_WORDS * sizeof(int), "IIR control", (void **)&p->control);
    /* zeroed in the plan's stream order: a legacy-stream cudaMemset is not ordered before the
     * first filter kernel, which runs on the plan's non-blocking stream */
    if (st == USBEAM_OK) st = usbeam_cuda_exec_zero(p->exec, p->state, state_bytes);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_zero(p->exec, p->state_next, state_bytes);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_zero(p->exec, p->control, CONTROL_WORDS * sizeof(int));
    if (st == USBEAM_OK && projection) {
        const size_t table = (size_t)n_state * init_frames * sizeof(double);
        st = usbeam_cuda_exec_alloc(p->exec, y0_bytes, "IIR initialisation scratch", (void **)&p->y0);
        if (st == USBEAM_OK) st = usbeam_cuda_exec_alloc(p->exec, table, "IIR tables", (void **)&p->natural_q);
        if (st == USBEAM_OK) st = usbeam_cuda_exec_alloc(p->exec, table, "IIR tables", (void **)&p->state_gain);
        if (st == USBEAM_OK) st = usbeam_cuda_exec_upload(p->exec, p->natural_q, natural_q, table);
        if (st == USBEAM_OK) st = usbeam_cuda_exec_upload(p->exec, p->state_gain, state_gain, table);
    }
    if (st == USBEAM_OK) st = clutter_cuda_grid(p, 2 * p->n_pixels);
    if (st != USBEAM_OK) {
        usbeam_clutter_cuda_destroy(p);
        return st;
    }
    *out = p;
    return USBEAM_OK;
}

extern "C" usbeam_status usbeam_clutter_cuda_reset(usbeam_clutter_cuda *p)
{
    if (!p) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan must not be NULL");
    if (!p->iir) return USBEAM_OK;
    usbeam_status st = usbeam_cuda_exec_begin(p->exec);
    if (st != USBEAM_OK) return st;
    /* queued on the plan's stream: ordered after the blocks already queued, no host wait; both
     * state buffers and the control words (current 0, not started) */
    cudaStream_t stream = usbeam_cuda_exec_cuda_stream(p->exec);
    const size_t state_bytes = (size_t)p->n_state * 2 * p->n_pixels * sizeof(double);
    st = usbeam_cuda_check(cudaMemsetAsync(p->state, 0, state_bytes, stream), "cudaMemsetAsync", __FILE__, __LINE__);
    if (st == USBEAM_OK)
        st = usbeam_cuda_check(cudaMemsetAsync(p->state_next, 0, state_bytes, stream), "cudaMemsetAsync", __FILE__,
                               __LINE__);
    if (st == USBEAM_OK)
        st = usbeam_cuda_check(cudaMemsetAsync(p->control, 0, CONTROL_WORDS * sizeof(int), stream),
                               "cudaMemsetAsync", __FILE__, __LINE__);
    usbeam_cuda_exec_end(p->exec);
    return st;
}

static usbeam_status create_gemm(usbeam_clutter_cuda *p, const double *basis)
{
    if (p->n_pixels > (size_t)INT32_MAX / 2)
        return usbeam_fail(USBEAM_ERR_UNSUPPORTED, "algorithm 'gemm': n_pixels must be < 2^30 (got %zu)", p->n_pixels);
    const size_t values = (size_t)p->n_basis * p->n_frames; /* n_frames <= 4096: no overflow */
    float *host = (float *)usbeam_alloc(values * sizeof(float));
    if (!host) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "clutter GEMM basis");
    for (size_t i = 0; i < values; ++i) host[i] = (float)basis[i];
    usbeam_status st = usbeam_cuda_exec_alloc(p->exec, values * sizeof(float), "clutter GEMM basis",
                                              (void **)&p->basis_float);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_upload(p->exec, p->basis_float, host, values * sizeof(float));
    usbeam_free(host);
    size_t bytes = 0;
    if (st == USBEAM_OK && usbeam_mul_size3(2 * p->n_pixels, (size_t)p->n_basis, sizeof(float), &bytes) != 0)
        st = usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "n_pixels: %zu is too large", p->n_pixels);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_alloc(p->exec, bytes, "clutter GEMM coefficients", (void **)&p->coef);
    if (st != USBEAM_OK) return st;
    return usbeam_cublas_plan_create(p->exec, &p->cublas, &p->cublas_workspace);
}

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
    if (st == USBEAM_OK && params->algorithm == USBEAM_CLUTTER_GEMM) st = create_gemm(p, basis);
    if (st == USBEAM_OK) st = clutter_cuda_grid(p, p->n_pixels);
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
    if (p->cublas) (void)cublasDestroy(p->cublas);
    usbeam_cuda_exec_destroy(p->exec); /* waits for queued work, frees the device buffers */
    usbeam_free(p);
}

extern "C" usbeam_cuda_exec *usbeam_clutter_cuda_exec(usbeam_clutter_cuda *p) { return p ? p->exec : nullptr; }

/* C = X Q, then Y = X - C Q^T (see the file comment for the real column-major views). */
static usbeam_status project_gemm(usbeam_clutter_cuda *p, const float2 *in, float2 *out, cudaStream_t stream)
{
    const int rows = (int)(2 * p->n_pixels), frames = (int)p->n_frames, k = p->n_basis;
    const float one = 1.0f, zero = 0.0f, minus_one = -1.0f;
    if (out != in)
        USBEAM_CUDA_TRY(cudaMemcpyAsync(out, in, p->n_frames * p->n_pixels * sizeof(float2), cudaMemcpyDeviceToDevice,
                                        stream));
    usbeam_status st = usbeam_cublas_plan_bind(p->cublas, p->cublas_workspace, stream);
    if (st != USBEAM_OK) return st;
    USBEAM_CUBLAS_TRY(cublasSgemm(p->cublas, CUBLAS_OP_N, CUBLAS_OP_N, rows, k, frames, &one, (const float *)in, rows,
                                  p->basis_float, frames, &zero, p->coef, rows));
    USBEAM_CUBLAS_TRY(cublasSgemm(p->cublas, CUBLAS_OP_N, CUBLAS_OP_T, rows, frames, k, &minus_one, p->coef, rows,
                                  p->basis_float, frames, &one, (float *)out, rows));
    return USBEAM_OK;
}

static usbeam_status clutter_cuda_run(usbeam_clutter_cuda *p, const float2 *in, float2 *out)
{
    usbeam_cuda_exec *e = p->exec;
    cudaStream_t stream = usbeam_cuda_exec_cuda_stream(e);
    if (p->iir) {
        usbeam_status st = usbeam_cuda_stage_begin(e, STAGE_IIR);
        if (st != USBEAM_OK) return st;
        const size_t L = p->projection ? p->init_frames : 0; /* the kernel skips it once started */
        iir_kernel<<<p->grid, THREADS, 0, stream>>>((const float *)in, (float *)out, p->n_frames, p->n_pixels,
                                                    p->sections, p->n_state, p->state, p->state_next, p->control, L,
                                                    p->y0, p->natural_q, p->state_gain);
        USBEAM_CUDA_TRY(cudaGetLastError());
        iir_commit_kernel<<<1, 1, 0, stream>>>(p->control);
        USBEAM_CUDA_TRY(cudaGetLastError());
        return usbeam_cuda_stage_end(e, STAGE_IIR);
    }
    usbeam_status st = usbeam_cuda_stage_begin(e, STAGE_PROJECT);
    if (st != USBEAM_OK) return st;
    if (p->cublas) {
        if ((st = project_gemm(p, in, out, stream)) != USBEAM_OK) return st;
        return usbeam_cuda_stage_end(e, STAGE_PROJECT);
    }
    project_kernel<<<p->grid, THREADS, 0, stream>>>(in, out, p->basis, p->n_basis, p->n_frames, p->n_pixels);
    USBEAM_CUDA_TRY(cudaGetLastError());
    return usbeam_cuda_stage_end(e, STAGE_PROJECT);
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
