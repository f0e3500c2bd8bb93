/*
 * clutter_svd.cu - SVD clutter filter (Demené et al., IEEE TMI 2015), CUDA twin of
 * csrc/clutter_svd.c, same semantics: the Casorati matrix C (n_pixels x n_frames) is the input
 * as stored, its temporal singular vectors are the eigenvectors of the Gram matrix C^H C, the
 * components low..high (0 = largest singular value) are kept, and the automatic low cut-off
 * removes the leading components whose mean Doppler frequency |arg sum_t v[t+1] conj(v[t])| / 2pi
 * is below svd_auto_frequency (Yu & Lovstakken 2010; Baranger et al. 2018; see clutter.c).
 *
 * Layout: in, out complex64 [n_frames][n_pixels] on the device = C column-major with leading
 *         dimension n_pixels; out may alias in (the product then goes through a scratch copy).
 * Stages, all on the plan's stream (no host round trip inside execute):
 *   "clutter.svd.gram":  G = C^H C in double, as the CPU: pixel chunks of C widened to
 *                        complex128 (exact) and accumulated with cublasZherk (upper triangle,
 *                        CUBLAS_PEDANTIC_MATH).  Why not cublasCherk: a float32 Gram carries
 *                        errors ~ eps_f sqrt(n_pixels) lambda_max in every entry, which blurs
 *                        components more than ~55 dB below the tissue, a range Doppler
 *                        ensembles reach; the chunk bounds the widened scratch (SVD_CHUNK).
 *   "clutter.svd.eigen": one thread block: G widened to double, Hermitian cyclic Jacobi in the
 *                        CPU's rotation order (each rotation's row/column updates spread over the
 *                        block), eigenvalues sorted descending, singular values, cut-offs, and
 *                        the n_frames x n_frames projector P (double, stored complex64
 *                        column-major): V_K V_K^H, or I - V_R V_R^H when fewer components are
 *                        removed than kept (as the CPU projects on the smaller set).
 *   "clutter.svd.apply": out = C P, cublasCgemm (pedantic math).
 * Why a one-block Jacobi in double rather than cuSOLVER (heevd/heevj): n_frames <= 128 here
 * (Doppler ensembles), the matrix is at most 256 KiB in double and lives in global memory/L2;
 * one block needs no new library, no workspace query and no host synchronisation, and it
 * reproduces the CPU reference's rotation sequence, so near-degenerate eigenvectors come out
 * alike on both backends.  Cost (not measured: never run on a GPU yet): each rotation is a
 * few dependent global-memory steps and barriers, estimated ~2-3 us, so ~10 ms per execute at
 * n = 32 and ~0.2 s at n = 128 (n(n-1)/2 rotations x ~8-10 sweeps).  If that matters, a
 * parallel round-robin ordering (n/2 disjoint rotations at once) is the next step, at the
 * price of a rotation order different from the CPU's.
 * The precision gap to the CPU is the float32 projector and product (cublasCgemm; the CPU
 * projects in double): see tests/tolerances.py, family cuda.
 */
#include "exec.cuh"

#include <cublas_v2.h>

namespace {

constexpr int EIGEN_THREADS = 256;
constexpr int MAX_FRAMES = 128;
constexpr int JACOBI_MAX_SWEEPS = 60;
constexpr int WIDEN_THREADS = 256;
/* cuBLAS workspace owned by the plan (NVIDIA's recommendation for Hopper): no allocation by
 * cuBLAS inside execute, so a CUDA-graph capture of the chain (DopplerPipeline) holds. */
constexpr size_t CUBLAS_WORKSPACE_BYTES = 32u << 20;
constexpr size_t SVD_CHUNK = 32768; /* pixels per Gram chunk: <= 64 MiB of complex128 at 128 frames */
constexpr double PI = 3.14159265358979323846;
const char *const STAGE_NAMES[] = {"clutter.svd.gram", "clutter.svd.eigen", "clutter.svd.apply"};
enum { STAGE_GRAM = 0, STAGE_EIGEN = 1, STAGE_APPLY = 2 };

__device__ double2 cmul(double2 x, double2 y) { return make_double2(x.x * y.x - x.y * y.y, x.x * y.y + x.y * y.x); }
__device__ double2 cconj(double2 x) { return make_double2(x.x, -x.y); }
__device__ double2 cscale(double s, double2 x) { return make_double2(s * x.x, s * x.y); }
__device__ double2 csub(double2 x, double2 y) { return make_double2(x.x - y.x, x.y - y.y); }
__device__ double2 cadd(double2 x, double2 y) { return make_double2(x.x + y.x, x.y + y.y); }
__device__ double cnorm2(double2 x) { return x.x * x.x + x.y * x.y; }

/* Block-wide sum of one double per thread (blockDim.x == EIGEN_THREADS). */
__device__ double block_sum(double x, double *scratch)
{
    scratch[threadIdx.x] = x;
    __syncthreads();
    for (int stride = EIGEN_THREADS / 2; stride > 0; stride /= 2) {
        if ((int)threadIdx.x < stride) scratch[threadIdx.x] += scratch[threadIdx.x + stride];
        __syncthreads();
    }
    const double total = scratch[0];
    __syncthreads();
    return total;
}

/* wide[t][i] = in[t][first + i] in double, i < count (column-major chunk, leading dim count) */
__global__ void widen_kernel(const float2 *in, double2 *wide, size_t n_frames, size_t n_pixels, size_t first,
                             size_t count)
{
    for (size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x; j < n_frames * count;
         j += (size_t)gridDim.x * blockDim.x) {
        const size_t t = j / count, i = j % count;
        const float2 x = in[t * n_pixels + first + i];
        wide[j] = make_double2(x.x, x.y);
    }
}

/* a, v: device scratch double2 [n][n] row-major (a destroyed); singular: [n] descending;
 * cuts: [low, high] used; projector: complex64 [n][n] column-major (P(s, t) at t * n + s). */
__global__ void __launch_bounds__(EIGEN_THREADS)
eigen_kernel(const double2 *gram, double2 *a, double2 *v, int n, int low_param, int high_param, double auto_frequency,
             double *singular, int *cuts, float2 *projector)
{
    __shared__ double scratch[EIGEN_THREADS];
    __shared__ double rot_c, rot_s;
    __shared__ double2 rot_phase;
    __shared__ int rot_skip;
    __shared__ double eigval[MAX_FRAMES];
    __shared__ int order[MAX_FRAMES], basis_cols[MAX_FRAMES], n_basis, subtract;
    const int tid = threadIdx.x;
    const int nn = n * n;

    /* cublasZherk wrote the upper triangle, column-major: G(r, c) at c * n + r, r <= c */
    double local = 0.0;
    for (int i = tid; i < nn; i += EIGEN_THREADS) {
        const int r = i / n, c = i % n;
        const double2 g = r <= c ? gram[c * n + r] : gram[r * n + c];
        double2 x = make_double2(g.x, r <= c ? g.y : -g.y);
        if (r == c) x.y = 0.0;
        a[i] = x;
        v[i] = make_double2(r == c ? 1.0 : 0.0, 0.0);
        local += cnorm2(x);
    }
    const double total = block_sum(local, scratch);

    for (int sweep = 0; total > 0.0 && sweep < JACOBI_MAX_SWEEPS; ++sweep) {
        local = 0.0;
        for (int i = tid; i < nn; i += EIGEN_THREADS)
            if (i % n > i / n) local += cnorm2(a[i]);
        if (block_sum(local, scratch) <= 1e-30 * total) break;
        for (int p = 0; p + 1 < n; ++p) {
            for (int q = p + 1; q < n; ++q) {
                if (tid == 0) {
                    const double2 apq = a[p * n + q];
                    const double h = sqrt(cnorm2(apq));
                    rot_skip = h <= 1e-300 || h * h <= 1e-34 * total;
                    if (!rot_skip) {
                        const double app = a[p * n + p].x, aqq = a[q * n + q].x;
                        const double theta = (aqq - app) / (2.0 * h);
                        const double t = (theta >= 0 ? 1.0 : -1.0) / (fabs(theta) + sqrt(theta * theta + 1.0));
                        rot_c = 1.0 / sqrt(t * t + 1.0);
                        rot_s = t * rot_c;
                        rot_phase = cscale(1.0 / h, apq);
                    }
                }
                __syncthreads();
                if (rot_skip) { /* uniform; the barrier keeps thread 0 from rewriting it before all read it */
                    __syncthreads();
                    continue;
                }
                const double c = rot_c, s = rot_s;
                const double2 phase = rot_phase, w = cconj(phase);
                const double2 sw = cscale(s, w), cw = cscale(c, w), sph = cscale(s, phase), cph = cscale(c, phase);
                for (int r = tid; r < n; r += EIGEN_THREADS) { /* A <- A U, V <- V U (columns) */
                    const double2 arp = a[r * n + p], arq = a[r * n + q];
                    a[r * n + p] = csub(cscale(c, arp), cmul(sw, arq));
                    a[r * n + q] = cadd(cscale(s, arp), cmul(cw, arq));
                    const double2 vrp = v[r * n + p], vrq = v[r * n + q];
                    v[r * n + p] = csub(cscale(c, vrp), cmul(sw, vrq));
                    v[r * n + q] = cadd(cscale(s, vrp), cmul(cw, vrq));
                }
                __syncthreads();
                for (int r = tid; r < n; r += EIGEN_THREADS) { /* A <- U^H A (rows) */
                    const double2 apr = a[p * n + r], aqr = a[q * n + r];
                    a[p * n + r] = csub(cscale(c, apr), cmul(sph, aqr));
                    a[q * n + r] = cadd(cscale(s, apr), cmul(cph, aqr));
                }
                __syncthreads();
                if (tid == 0) {
                    a[p * n + q] = a[q * n + p] = make_double2(0.0, 0.0);
                    a[p * n + p].y = 0.0;
                    a[q * n + q].y = 0.0;
                }
                __syncthreads();
            }
        }
    }

    if (tid == 0) {
        for (int k = 0; k < n; ++k) {
            eigval[k] = a[k * n + k].x;
            order[k] = k;
        }
        for (int i = 1; i < n; ++i) { /* insertion sort by descending eigenvalue, as the CPU */
            const int key = order[i];
            int j = i;
            while (j > 0 && eigval[order[j - 1]] < eigval[key]) {
                order[j] = order[j - 1];
                --j;
            }
            order[j] = key;
        }
        for (int k = 0; k < n; ++k) {
            const double lambda = eigval[order[k]];
            singular[k] = lambda > 0.0 ? sqrt(lambda) : 0.0;
        }
        const int high = high_param < 0 ? n - 1 : high_param;
        int low = low_param;
        if (low < 0) {
            low = 0;
            while (low < n) {
                const int col = order[low];
                double2 r = make_double2(0.0, 0.0);
                for (int t = 0; t + 1 < n; ++t) r = cadd(r, cmul(v[(t + 1) * n + col], cconj(v[t * n + col])));
                if (fabs(atan2(r.y, r.x)) / (2.0 * PI) >= auto_frequency) break;
                ++low;
            }
        }
        cuts[0] = low;
        cuts[1] = high;
        const int n_keep = low <= high ? high - low + 1 : 0;
        subtract = n - n_keep <= n_keep;
        n_basis = 0;
        for (int k = 0; k < n; ++k) {
            const int kept = k >= low && k <= high;
            if (kept != subtract) basis_cols[n_basis++] = order[k];
        }
    }
    __syncthreads();
    for (int i = tid; i < nn; i += EIGEN_THREADS) {
        const int t = i / n, s = i % n; /* column-major: P(s, t) */
        double2 sum = make_double2(0.0, 0.0);
        for (int k = 0; k < n_basis; ++k) sum = cadd(sum, cmul(v[s * n + basis_cols[k]], cconj(v[t * n + basis_cols[k]])));
        if (subtract) sum = make_double2((s == t ? 1.0 : 0.0) - sum.x, -sum.y);
        projector[i] = make_float2((float)sum.x, (float)sum.y);
    }
}

} // namespace

struct usbeam_clutter_svd_cuda {
    usbeam_cuda_exec *exec;
    cublasHandle_t cublas;
    int n_frames, n_pixels, low, high;
    int executed; /* svd_info refuses a plan not executed yet, as the CPU does */
    double auto_frequency;
    size_t chunk;                       /* pixels per Gram chunk */
    unsigned widen_grid;
    double2 *gram, *wide;               /* device: [n][n], [n_frames][chunk] */
    float2 *projector, *product;        /* device: [n][n], [n_frames][n_pixels] */
    double2 *a, *v;                     /* device Jacobi scratch [n][n] */
    double *singular;                   /* device [n] */
    int *cuts;                          /* device [2] */
    void *cublas_workspace;             /* device CUBLAS_WORKSPACE_BYTES */
};

extern "C" usbeam_status usbeam_clutter_svd_cuda_create(const usbeam_clutter_params *params,
                                                        usbeam_clutter_svd_cuda **out)
{
    if (!params || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "params and plan must not be NULL");
    *out = nullptr;
    if (params->n_frames > (size_t)MAX_FRAMES)
        return usbeam_fail(USBEAM_ERR_UNSUPPORTED, "n_frames: the SVD filter on CUDA takes at most %d frames (got %zu)",
                           MAX_FRAMES, params->n_frames);
    if (params->n_pixels > (size_t)INT32_MAX)
        return usbeam_fail(USBEAM_ERR_UNSUPPORTED, "n_pixels: at most 2^31-1 for the SVD filter on CUDA");
    size_t product_bytes;
    if (usbeam_mul_size3(params->n_frames, params->n_pixels, sizeof(float2), &product_bytes) != 0)
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "n_pixels: %zu is too large", params->n_pixels);
    usbeam_clutter_svd_cuda *p = (usbeam_clutter_svd_cuda *)usbeam_alloc(sizeof *p);
    if (!p) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "clutter SVD CUDA plan");
    memset(p, 0, sizeof *p);
    p->n_frames = (int)params->n_frames;
    p->n_pixels = (int)params->n_pixels;
    p->low = params->svd_low;
    p->high = params->svd_high;
    p->auto_frequency = params->svd_auto_frequency;
    const size_t nn = params->n_frames * params->n_frames;
    usbeam_status st = usbeam_cuda_exec_create(STAGE_NAMES, 3, &p->exec);
    p->chunk = params->n_pixels < SVD_CHUNK ? params->n_pixels : SVD_CHUNK;
    const size_t widen_blocks = (p->chunk * params->n_frames + WIDEN_THREADS - 1) / WIDEN_THREADS;
    p->widen_grid = (unsigned)(widen_blocks < 4096 ? widen_blocks : 4096);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_alloc(p->exec, nn * sizeof(double2), "SVD Gram", (void **)&p->gram);
    if (st == USBEAM_OK)
        st = usbeam_cuda_exec_alloc(p->exec, p->chunk * params->n_frames * sizeof(double2), "SVD widened chunk",
                                    (void **)&p->wide);
    if (st == USBEAM_OK)
        st = usbeam_cuda_exec_alloc(p->exec, nn * sizeof(float2), "SVD projector", (void **)&p->projector);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_alloc(p->exec, nn * sizeof(double2), "SVD Jacobi", (void **)&p->a);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_alloc(p->exec, nn * sizeof(double2), "SVD Jacobi", (void **)&p->v);
    if (st == USBEAM_OK)
        st = usbeam_cuda_exec_alloc(p->exec, params->n_frames * sizeof(double), "SVD values", (void **)&p->singular);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_alloc(p->exec, 2 * sizeof(int), "SVD cut-offs", (void **)&p->cuts);
    if (st == USBEAM_OK)
        st = usbeam_cuda_exec_alloc(p->exec, product_bytes, "SVD in-place product", (void **)&p->product);
    if (st == USBEAM_OK)
        st = usbeam_cuda_exec_alloc(p->exec, CUBLAS_WORKSPACE_BYTES, "cuBLAS workspace", &p->cublas_workspace);
    if (st == USBEAM_OK)
        st = usbeam_cublas_check((int)cublasCreate(&p->cublas), "cublasCreate", __FILE__, __LINE__);
    if (st == USBEAM_OK)
        st = usbeam_cublas_check((int)cublasSetMathMode(p->cublas, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode",
                                 __FILE__, __LINE__);
    if (st == USBEAM_OK)
        st = usbeam_cublas_check((int)cublasSetStream(p->cublas, usbeam_cuda_exec_cuda_stream(p->exec)),
                                 "cublasSetStream", __FILE__, __LINE__);
    if (st != USBEAM_OK) {
        usbeam_clutter_svd_cuda_destroy(p);
        return st;
    }
    *out = p;
    return USBEAM_OK;
}

extern "C" void usbeam_clutter_svd_cuda_destroy(usbeam_clutter_svd_cuda *p)
{
    if (!p) return;
    if (p->cublas) cublasDestroy(p->cublas);
    usbeam_cuda_exec_destroy(p->exec);
    usbeam_free(p);
}

extern "C" usbeam_cuda_exec *usbeam_clutter_svd_cuda_exec(usbeam_clutter_svd_cuda *p) { return p ? p->exec : nullptr; }

static usbeam_status svd_run(usbeam_clutter_svd_cuda *p, const float2 *in, float2 *out)
{
    usbeam_cuda_exec *e = p->exec;
    const int n = p->n_frames, m = p->n_pixels;
    const double one = 1.0, zero = 0.0;
    const cuComplex c_one = make_cuComplex(1.0f, 0.0f), c_zero = make_cuComplex(0.0f, 0.0f);
    usbeam_status st = usbeam_cuda_stage_begin(e, STAGE_GRAM);
    if (st != USBEAM_OK) return st;
    cudaStream_t stream = usbeam_cuda_exec_cuda_stream(e);
    /* per execute: the caller may have moved the plan to another stream (set_stream) */
    USBEAM_CUBLAS_TRY(cublasSetStream(p->cublas, stream));
    USBEAM_CUBLAS_TRY(cublasSetWorkspace(p->cublas, p->cublas_workspace, CUBLAS_WORKSPACE_BYTES)); /* reset by SetStream */
    for (size_t first = 0; first < (size_t)m; first += p->chunk) {
        const size_t count = (size_t)m - first < p->chunk ? (size_t)m - first : p->chunk;
        widen_kernel<<<p->widen_grid, WIDEN_THREADS, 0, stream>>>(in, p->wide, (size_t)n, (size_t)m, first, count);
        USBEAM_CUDA_TRY(cudaGetLastError());
        USBEAM_CUBLAS_TRY(cublasZherk(p->cublas, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_C, n, (int)count, &one,
                                      (const cuDoubleComplex *)p->wide, (int)count, first == 0 ? &zero : &one,
                                      (cuDoubleComplex *)p->gram, n));
    }
    if ((st = usbeam_cuda_stage_end(e, STAGE_GRAM)) != USBEAM_OK) return st;
    if ((st = usbeam_cuda_stage_begin(e, STAGE_EIGEN)) != USBEAM_OK) return st;
    eigen_kernel<<<1, EIGEN_THREADS, 0, stream>>>(
        p->gram, p->a, p->v, n, p->low, p->high, p->auto_frequency, p->singular, p->cuts, p->projector);
    USBEAM_CUDA_TRY(cudaGetLastError());
    if ((st = usbeam_cuda_stage_end(e, STAGE_EIGEN)) != USBEAM_OK) return st;
    if ((st = usbeam_cuda_stage_begin(e, STAGE_APPLY)) != USBEAM_OK) return st;
    float2 *target = in == out ? p->product : out; /* GEMM operands must not overlap its output */
    USBEAM_CUBLAS_TRY(cublasCgemm(p->cublas, CUBLAS_OP_N, CUBLAS_OP_N, m, n, n, &c_one, (const cuComplex *)in, m,
                                  (const cuComplex *)p->projector, n, &c_zero, (cuComplex *)target, m));
    if (target != out)
        USBEAM_CUDA_TRY(cudaMemcpyAsync(out, target, (size_t)n * (size_t)m * sizeof(float2), cudaMemcpyDeviceToDevice,
                                        usbeam_cuda_exec_cuda_stream(e)));
    return usbeam_cuda_stage_end(e, STAGE_APPLY);
}

extern "C" usbeam_status usbeam_clutter_svd_cuda_execute(usbeam_clutter_svd_cuda *p, const void *in, void *out)
{
    if (!p || !in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, in and out must not be NULL");
    usbeam_status st = usbeam_cuda_exec_begin(p->exec);
    if (st != USBEAM_OK) return st;
    st = svd_run(p, (const float2 *)in, (float2 *)out);
    usbeam_cuda_exec_end(p->exec);
    if (st == USBEAM_OK) p->executed = 1;
    return st;
}

/* Outside execute: waits for the plan's stream, then copies what the last execute used. */
extern "C" usbeam_status usbeam_clutter_svd_cuda_info(usbeam_clutter_svd_cuda *p, double *singular_values,
                                                      int *low, int *high)
{
    if (!p) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan must not be NULL");
    if (!p->executed) return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "plan: not executed yet");
    usbeam_status st = usbeam_cuda_exec_begin(p->exec);
    if (st != USBEAM_OK) return st;
    int cuts[2] = {0, 0};
    st = usbeam_cuda_check(cudaStreamSynchronize(usbeam_cuda_exec_cuda_stream(p->exec)), "cudaStreamSynchronize",
                           __FILE__, __LINE__);
    if (st == USBEAM_OK && singular_values)
        st = usbeam_cuda_check(cudaMemcpy(singular_values, p->singular, (size_t)p->n_frames * sizeof(double),
                                          cudaMemcpyDeviceToHost),
                               "cudaMemcpy", __FILE__, __LINE__);
    if (st == USBEAM_OK)
        st = usbeam_cuda_check(cudaMemcpy(cuts, p->cuts, sizeof cuts, cudaMemcpyDeviceToHost), "cudaMemcpy", __FILE__,
                               __LINE__);
    usbeam_cuda_exec_end(p->exec);
    if (st != USBEAM_OK) return st;
    if (low) *low = cuts[0];
    if (high) *high = cuts[1];
    return USBEAM_OK;
}
