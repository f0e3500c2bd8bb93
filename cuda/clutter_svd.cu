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
 *                        complex128 (exact, zero-padded to whole slices) and multiplied with
 *                        cublasZgemmStridedBatched, one batch entry per pixel slice (split-K by
 *                        hand: a plain cublasZherk/Zgemm of an n x n result over 32768 pixels
 *                        keeps a few thread blocks busy walking k; slices give ~4096/n blocks'
 *                        worth of independent GEMMs), partial Grams accumulated per slice over
 *                        the chunks, then summed slice by slice in a fixed order (deterministic)
 *                        by gram_reduce_kernel; CUBLAS_PEDANTIC_MATH.  Why not single precision:
 *                        a float32 Gram carries errors ~ eps_f sqrt(n_pixels) lambda_max in every
 *                        entry, which blurs components more than ~55 dB below the tissue, a range
 *                        Doppler ensembles reach; the chunk bounds the widened scratch (SVD_CHUNK).
 *   "clutter.svd.eigen": one thread block: G's upper triangle loaded, Hermitian Jacobi in the
 *                        parallel round-robin ordering of csrc/jacobi_math.h (n/2 disjoint rotations per
 *                        step, each computed and applied by its own group of threads: columns,
 *                        barrier, rows, barrier), sweeps until the off-diagonal energy is below
 *                        the CPU's relative threshold; eigenvalues ranked in parallel (the CPU's
 *                        stable descending order), singular values, each eigenvector's mean
 *                        Doppler frequency in parallel, cut-offs, and the n_frames x n_frames
 *                        projector P (double, stored complex64 column-major): V_K V_K^H, or
 *                        I - V_R V_R^H when fewer components are removed than kept (as the CPU
 *                        projects on the smaller set).  A, B (the half-rotated A U) and V live in
 *                        shared memory up to n = 69 on sm_90, in global memory (L2) above.
 *   "clutter.svd.apply": out = C P, cublasCgemm (pedantic math).
 * Why a one-block Jacobi in double rather than cuSOLVER (heevd/heevj): n_frames <= 128 here
 * (Doppler ensembles); one block needs no new library, no workspace query and no host
 * synchronisation (graph capture holds), and its per-pair code is the host's
 * (usbeam_jacobi_round_robin, checked against the CPU's cyclic Jacobi by tests/c/test_jacobi.c).
 * The rotation order differs from the CPU's cyclic one, so the two backends agree on eigenvalues
 * to rounding and on eigenvectors up to rounding / eigenvalue gap (a projector on a whole
 * degenerate cluster is unaffected).
 * Cost of the eigen stage (an estimate: not run on a GPU yet).  A sweep is n - 1 steps (n even,
 * n for odd n) of two __syncthreads each, plus one block reduction (the convergence test);
 * a step is a dependent chain of: 3 loads of A, the rotation (2 sqrt + 3 div in double, ~0.2 us),
 * the column updates (ceil(n / group) rows per thread), barrier, the row updates, barrier: ~0.4 us
 * in shared memory, ~1.5 us with A, B, V in L2 (n > 69).  Measured on the host (test_jacobi),
 * Doppler-like ensembles converge in 7 sweeps at n = 32 and 9 at n = 128 (random spectra: <= 9;
 * repeated or 120 dB graded spectra ~20, as the CPU's ordering).  So ~7 x 31 x 0.4 us ~ 0.1 ms at
 * n = 32 (512 threads, one per (pair, row)), ~8 x 63 x 0.5 us ~ 0.25 ms at n = 64, and
 * ~9 x 127 x 1.5 us ~ 1.7 ms at n = 128 (1024 threads, 8 rows each), against ~10 ms and ~0.2 s for
 * the former one-rotation-at-a-time kernel (n(n-1)/2 rotations x 4 barriers per sweep).  The
 * ranking, frequencies and projector are O(n^2) to O(n^3 / threads) work, a few us.
 * Gram stage (estimate too): the widening reads 8 and writes 16 bytes per sample, the GEMM reads
 * the 16 again (~40 bytes per sample: ~15 us for 32 frames x 65536 pixels at ~3 TB/s), and its
 * 8 n^2 flops per pixel in double (~0.5 GFLOP at n = 32, ~8.6 GFLOP at n = 128 for 65536 pixels)
 * run on ~4096/n x (n/32)^2 independent tiles instead of the ~(n/32)^2 of one Zherk.
 * The precision gap to the CPU is the float32 projector and product (cublasCgemm; the CPU
 * projects in double): see tests/tolerances.py, family cuda.
 */
#include "runtime/cublas_plan.cuh"
#include "doppler/jacobi_math.h"

#include <cublas_v2.h>

namespace {

constexpr int MAX_FRAMES = USBEAM_JACOBI_MAX_N;
constexpr int EIGEN_MAX_THREADS = 1024;
constexpr int WIDEN_THREADS = 256;
/* cuBLAS workspace owned by the plan (NVIDIA's recommendation for Hopper): no allocation by
 * cuBLAS inside execute, so a CUDA-graph capture of the chain (DopplerPipeline) holds. */
constexpr size_t SVD_CHUNK = 32768; /* pixels per Gram chunk: <= 64 MiB of complex128 at 128 frames */
constexpr int GRAM_SLICE_TARGET = 4096; /* slices per chunk ~ this / n_frames: ~64 KiB x n of partials */
constexpr size_t GRAM_MIN_SLICE = 64;   /* pixels: below this a slice is too short to be worth a GEMM */
constexpr int REDUCE_THREADS = 256;
constexpr double PI = 3.14159265358979323846;
const char *const STAGE_NAMES[] = {"clutter.svd.gram", "clutter.svd.eigen", "clutter.svd.apply"};
enum { STAGE_GRAM = 0, STAGE_EIGEN = 1, STAGE_APPLY = 2 };

/* The head of the eigen kernel's dynamic shared memory; A, B, V follow it when they fit (the
 * kernel has no static shared memory, so its whole opt-in size is this dynamic block). */
struct EigenShared {
    double warp_sums[EIGEN_MAX_THREADS / 32];
    double eigval[MAX_FRAMES];
    double frequency[MAX_FRAMES]; /* mean Doppler frequency of eigenvector k, fraction of the PRF */
    int order[MAX_FRAMES];        /* eigen indices by descending eigenvalue */
    int basis_cols[MAX_FRAMES];
    int n_basis, subtract;
};
static_assert(sizeof(EigenShared) % alignof(usbeam_zd) == 0, "A, B, V follow EigenShared aligned");

/* Sum of one double per thread, the same value in every thread (blockDim.x a multiple of 32):
 * warp shuffles, then every thread adds the warp sums in the same order. */
__device__ double block_sum(double x, double *warp_sums)
{
    for (int offset = 16; offset > 0; offset /= 2) x += __shfl_down_sync(0xffffffffu, x, offset);
    if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = x;
    __syncthreads();
    double total = 0.0;
    for (int w = 0; w < (int)blockDim.x / 32; ++w) total += warp_sums[w];
    __syncthreads(); /* warp_sums is reused by the next call */
    return total;
}

/* wide[t][i] = in[t][first + i] in double for i < count, 0 for count <= i < padded (column-major
 * chunk, leading dimension padded); frame t = blockIdx.y, so no 64-bit division per element. */
__global__ void widen_kernel(const float2 *in, double2 *wide, size_t n_pixels, size_t first, size_t count,
                             size_t padded)
{
    const size_t t = blockIdx.y;
    const float2 *src = in + t * n_pixels + first;
    double2 *dst = wide + t * padded;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < padded; i += (size_t)gridDim.x * blockDim.x) {
        const float2 x = i < count ? src[i] : make_float2(0.0f, 0.0f);
        dst[i] = make_double2(x.x, x.y);
    }
}

/* gram[e] = sum over slices s (in order) of partial[s][e], e < nn (column-major n x n). */
__global__ void gram_reduce_kernel(const double2 *partial, double2 *gram, int nn, int slices)
{
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < nn; e += gridDim.x * blockDim.x) {
        double2 sum = partial[e];
        for (int s = 1; s < slices; ++s) {
            const double2 x = partial[(size_t)s * nn + e];
            sum.x += x.x;
            sum.y += x.y;
        }
        gram[e] = sum;
    }
}

/* One block of blockDim.x threads (a multiple of 32, >= the pairs of a step).
 * gram: G column-major (G(r, c) at c * n + r); its upper triangle is read and mirrored.
 * a, b, v: device scratch usbeam_zd [n][n] each (csrc/jacobi_math.h), used when in_shared is
 *          0; otherwise the three live in dynamic shared memory.
 * singular: [n] descending; cuts: [low, high] used; projector: complex64 [n][n] column-major
 *          (P(s, t) at t * n + s).
 * Thread group `slot` (group = blockDim.x / pairs threads) owns pair `slot` of every step: it
 * computes that rotation (each thread of the group alike, from the same A) and applies it to
 * the rows (lane, lane + group, ...) of the pair's columns, then to the columns of its rows. */
__global__ void __launch_bounds__(EIGEN_MAX_THREADS)
eigen_kernel(const double2 *gram, usbeam_zd *a_global, usbeam_zd *b_global, usbeam_zd *v_global, int n,
             int in_shared, int low_param, int high_param, double auto_frequency, double *singular, int *cuts,
             float2 *projector)
{
    extern __shared__ double eigen_shared[];
    EigenShared &sh = *(EigenShared *)eigen_shared;
    usbeam_zd *jacobi_shared = (usbeam_zd *)(eigen_shared + sizeof(EigenShared) / sizeof(double));
    const int tid = threadIdx.x, threads = blockDim.x;
    const int nn = n * n;
    usbeam_zd *a = in_shared ? jacobi_shared : a_global;
    usbeam_zd *b = in_shared ? jacobi_shared + nn : b_global;
    usbeam_zd *v = in_shared ? jacobi_shared + 2 * nn : v_global;

    double local = 0.0;
    for (int i = tid; i < nn; i += threads) {
        const int r = i / n, c = i % n;
        const double2 g = r <= c ? gram[c * n + r] : gram[r * n + c];
        usbeam_zd x = usbeam_zd_make(g.x, r <= c ? g.y : -g.y);
        if (r == c) x.im = 0.0;
        a[i] = x;
        v[i] = usbeam_zd_make(r == c ? 1.0 : 0.0, 0.0);
        local += usbeam_zd_norm2(x);
    }
    const double total = block_sum(local, sh.warp_sums); /* its barriers also publish a and v */
    /* a non-finite input gives a non-finite Gram: no rotation then, and NaN frequencies and
     * projector below, so the output is NaN (as the CPU's, whose Jacobi spreads the NaN) rather
     * than a projection on the unrotated basis */
    const bool finite = isfinite(total);

    const int pairs = usbeam_jacobi_pairs(n), steps = usbeam_jacobi_steps(n);
    const int group = threads / pairs, slot = tid / group, lane = tid % group;
    const bool rotating = slot < pairs; /* the threads beyond pairs * group only help in the reductions */
    for (int sweep = 0; finite && total > 0.0 && sweep < USBEAM_JACOBI_MAX_SWEEPS; ++sweep) {
        local = 0.0;
        for (int i = tid; i < nn; i += threads)
            if (i % n > i / n) local += usbeam_zd_norm2(a[i]);
        if (block_sum(local, sh.warp_sums) <= USBEAM_JACOBI_TOLERANCE * total) break; /* uniform */
        for (int step = 0; step < steps; ++step) {
            int p = 0, q = 0;
            usbeam_jacobi_rotation u = {1.0, 0.0, {1.0, 0.0}, 0};
            if (rotating) { /* reads A, writes B and V */
                usbeam_jacobi_pair(n, step, slot, &p, &q);
                u = usbeam_jacobi_rotation_for(a, n, p, q, total);
                usbeam_jacobi_columns(a, b, v, n, p, q, &u, lane, group);
            }
            __syncthreads();
            if (rotating) usbeam_jacobi_rows(b, a, n, p, q, &u, lane, group); /* reads B, writes A */
            __syncthreads();
        }
    }

    /* NaN (from a non-finite input) ranks as -inf: the ranks stay a permutation, so every index
     * read below is in range whatever the input */
    for (int k = tid; k < n; k += threads) sh.eigval[k] = isnan(a[k * n + k].re) ? -INFINITY : a[k * n + k].re;
    __syncthreads();
    for (int k = tid; k < n; k += threads) {
        /* rank in a stable descending order: the CPU's insertion sort, computed in parallel */
        const double lambda = sh.eigval[k];
        int rank = 0;
        for (int j = 0; j < n; ++j) rank += sh.eigval[j] > lambda || (sh.eigval[j] == lambda && j < k);
        sh.order[rank] = k;
        singular[rank] = lambda > 0.0 ? sqrt(lambda) : 0.0;
        double2 r = make_double2(0.0, 0.0); /* lag-one autocorrelation of eigenvector k, as the CPU */
        for (int t = 0; t + 1 < n; ++t) {
            const usbeam_zd x = usbeam_zd_mul(v[(t + 1) * n + k], usbeam_zd_make(v[t * n + k].re, -v[t * n + k].im));
            r.x += x.re;
            r.y += x.im;
        }
        sh.frequency[k] = finite ? fabs(atan2(r.y, r.x)) / (2.0 * PI) : NAN;
    }
    __syncthreads();
    if (tid == 0) { /* O(n) scans */
        const int high = high_param < 0 ? n - 1 : high_param;
        int low = low_param;
        if (low < 0) {
            low = 0;
            while (low < n && sh.frequency[sh.order[low]] < auto_frequency) ++low;
        }
        cuts[0] = low;
        cuts[1] = high;
        const int n_keep = low <= high ? high - low + 1 : 0;
        sh.subtract = n - n_keep <= n_keep; /* project on the smaller set, as the CPU */
        sh.n_basis = 0;
        for (int k = 0; k < n; ++k) {
            const int kept = k >= low && k <= high;
            if (kept != sh.subtract) sh.basis_cols[sh.n_basis++] = sh.order[k];
        }
    }
    __syncthreads();
    for (int i = tid; i < nn; i += threads) {
        const int t = i / n, s = i % n; /* column-major: P(s, t) */
        double2 sum = make_double2(0.0, 0.0);
        for (int k = 0; k < sh.n_basis; ++k) {
            const int col = sh.basis_cols[k];
            const usbeam_zd x = usbeam_zd_mul(v[s * n + col], usbeam_zd_make(v[t * n + col].re, -v[t * n + col].im));
            sum.x += x.re;
            sum.y += x.im;
        }
        if (sh.subtract) sum = make_double2((s == t ? 1.0 : 0.0) - sum.x, -sum.y);
        if (!finite) sum = make_double2(NAN, NAN);
        projector[i] = make_float2((float)sum.x, (float)sum.y);
    }
}

/* Threads of the eigen kernel for n frames: about one per (pair, row) of a phase, whole warps,
 * at least 64 (the reductions), at most EIGEN_MAX_THREADS. */
int eigen_threads(int n)
{
    int want = usbeam_jacobi_pairs(n) * n;
    want = (want + 31) / 32 * 32;
    return want < 64 ? 64 : want > EIGEN_MAX_THREADS ? EIGEN_MAX_THREADS : want;
}

} // namespace

struct usbeam_clutter_svd_cuda {
    usbeam_cuda_exec *exec;
    cublasHandle_t cublas;
    int n_frames, n_pixels, low, high;
    int executed; /* svd_info refuses a plan not executed yet, as the CPU does */
    double auto_frequency;
    size_t chunk;                       /* pixels per Gram chunk (the last may be shorter) */
    int slices;                         /* GEMM batch entries per chunk */
    size_t slice;                       /* pixels per slice; chunk <= slices * slice = padded */
    unsigned widen_grid;
    double2 *gram, *wide;               /* device: [n][n], [n_frames][padded] */
    double2 *partial;                   /* device: [slices][n][n], one partial Gram per slice */
    float2 *projector, *product;        /* device: [n][n], [n_frames][n_pixels] */
    usbeam_zd *a, *b, *v;               /* device Jacobi scratch [n][n] (unused when in_shared) */
    int eigen_threads, in_shared;       /* eigen kernel: block size; A, B, V in shared memory */
    size_t eigen_shared_bytes;          /* its dynamic shared memory */
    double *singular;                   /* device [n] */
    int *cuts;                          /* device [2] */
    void *cublas_workspace;             /* device USBEAM_CUBLAS_WORKSPACE_BYTES */
};

/* A, B and V go to shared memory when they fit the block's opt-in limit (n <= 69 on sm_90, where
 * 227 KiB are allowed) and to global memory (L2-resident: 768 KiB at n = 128) otherwise.  The
 * kernel's dynamic limit is raised to the device's whole opt-in size, the same for every plan,
 * so one plan cannot lower another's. */
static usbeam_status eigen_placement(usbeam_clutter_svd_cuda *p)
{
    const size_t matrices = 3 * (size_t)p->n_frames * (size_t)p->n_frames * sizeof(usbeam_zd);
    const size_t optin = (size_t)usbeam_cuda_exec_max_shared_optin(p->exec);
    p->in_shared = sizeof(EigenShared) + matrices <= optin;
    p->eigen_shared_bytes = sizeof(EigenShared) + (p->in_shared ? matrices : 0);
    if (p->eigen_shared_bytes > 48 * 1024)
        USBEAM_CUDA_TRY(cudaFuncSetAttribute(eigen_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)optin));
    return USBEAM_OK;
}

extern "C" usbeam_status usbeam_clutter_svd_cuda_create(const usbeam_clutter_params *params,
                                                        usbeam_clutter_svd_cuda **out)
{
    if (!params || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "params and plan must not be NULL");
    *out = nullptr;
    if (params->n_frames > (size_t)MAX_FRAMES)
        return usbeam_fail(USBEAM_ERR_UNSUPPORTED, "n_frames: the SVD filter on CUDA takes at most %d frames (got %zu)",
                           MAX_FRAMES, params->n_frames);
    if (params->n_frames < 1 || params->n_pixels < 1)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "n_frames, n_pixels: the ensemble is empty");
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
    /* equal chunks (no short tail chunk of mostly padding), each cut into equal slices */
    const size_t n_chunks = (params->n_pixels + SVD_CHUNK - 1) / SVD_CHUNK;
    p->chunk = (params->n_pixels + n_chunks - 1) / n_chunks;
    size_t slices = (size_t)(GRAM_SLICE_TARGET / p->n_frames);
    const size_t max_slices = (p->chunk + GRAM_MIN_SLICE - 1) / GRAM_MIN_SLICE;
    slices = slices < 1 ? 1 : slices > max_slices ? max_slices : slices;
    p->slice = (p->chunk + slices - 1) / slices;
    p->slices = (int)((p->chunk + p->slice - 1) / p->slice); /* every slice holds pixels of the chunk */
    const size_t padded = (size_t)p->slices * p->slice;
    const size_t widen_blocks = (padded + WIDEN_THREADS - 1) / WIDEN_THREADS; /* per frame */
    p->widen_grid = (unsigned)(widen_blocks < 128 ? widen_blocks : 128);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_alloc(p->exec, nn * sizeof(double2), "SVD Gram", (void **)&p->gram);
    if (st == USBEAM_OK)
        st = usbeam_cuda_exec_alloc(p->exec, (size_t)p->slices * nn * sizeof(double2), "SVD partial Grams",
                                    (void **)&p->partial);
    if (st == USBEAM_OK)
        st = usbeam_cuda_exec_alloc(p->exec, padded * params->n_frames * sizeof(double2), "SVD widened chunk",
                                    (void **)&p->wide);
    if (st == USBEAM_OK)
        st = usbeam_cuda_exec_alloc(p->exec, nn * sizeof(float2), "SVD projector", (void **)&p->projector);
    p->eigen_threads = eigen_threads(p->n_frames);
    if (st == USBEAM_OK) st = eigen_placement(p);
    for (int m = 0; st == USBEAM_OK && !p->in_shared && m < 3; ++m)
        st = usbeam_cuda_exec_alloc(p->exec, nn * sizeof(usbeam_zd), "SVD Jacobi",
                                    (void **)(m == 0 ? &p->a : m == 1 ? &p->b : &p->v));
    if (st == USBEAM_OK)
        st = usbeam_cuda_exec_alloc(p->exec, params->n_frames * sizeof(double), "SVD values", (void **)&p->singular);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_alloc(p->exec, 2 * sizeof(int), "SVD cut-offs", (void **)&p->cuts);
    if (st == USBEAM_OK)
        st = usbeam_cuda_exec_alloc(p->exec, product_bytes, "SVD in-place product", (void **)&p->product);
    if (st == USBEAM_OK) st = usbeam_cublas_plan_create(p->exec, &p->cublas, &p->cublas_workspace);
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
    const cuComplex c_one = make_cuComplex(1.0f, 0.0f), c_zero = make_cuComplex(0.0f, 0.0f);
    usbeam_status st = usbeam_cuda_stage_begin(e, STAGE_GRAM);
    if (st != USBEAM_OK) return st;
    cudaStream_t stream = usbeam_cuda_exec_cuda_stream(e);
    /* per execute: the caller may have moved the plan to another stream (set_stream) */
    if ((st = usbeam_cublas_plan_bind(p->cublas, p->cublas_workspace, stream)) != USBEAM_OK) return st;
    const size_t padded = (size_t)p->slices * p->slice;
    const cuDoubleComplex z_one = make_cuDoubleComplex(1.0, 0.0), z_zero = make_cuDoubleComplex(0.0, 0.0);
    for (size_t first = 0; first < (size_t)m; first += p->chunk) {
        const size_t count = (size_t)m - first < p->chunk ? (size_t)m - first : p->chunk;
        widen_kernel<<<dim3(p->widen_grid, (unsigned)n), WIDEN_THREADS, 0, stream>>>(in, p->wide, (size_t)m, first,
                                                                                    count, padded);
        USBEAM_CUDA_TRY(cudaGetLastError());
        /* partial[s] (+)= W_s^H W_s, W_s = rows [s slice, (s + 1) slice) of the chunk (zero padding adds 0) */
        USBEAM_CUBLAS_TRY(cublasZgemmStridedBatched(
            p->cublas, CUBLAS_OP_C, CUBLAS_OP_N, n, n, (int)p->slice, &z_one, (const cuDoubleComplex *)p->wide,
            (int)padded, (long long)p->slice, (const cuDoubleComplex *)p->wide, (int)padded, (long long)p->slice,
            first == 0 ? &z_zero : &z_one, (cuDoubleComplex *)p->partial, n, (long long)n * n, p->slices));
    }
    const int nn = n * n;
    gram_reduce_kernel<<<(nn + REDUCE_THREADS - 1) / REDUCE_THREADS, REDUCE_THREADS, 0, stream>>>(p->partial, p->gram,
                                                                                                 nn, p->slices);
    USBEAM_CUDA_TRY(cudaGetLastError());
    if ((st = usbeam_cuda_stage_end(e, STAGE_GRAM)) != USBEAM_OK) return st;
    if ((st = usbeam_cuda_stage_begin(e, STAGE_EIGEN)) != USBEAM_OK) return st;
    eigen_kernel<<<1, p->eigen_threads, p->eigen_shared_bytes, stream>>>(p->gram, p->a, p->b, p->v, n, p->in_shared,
                                                                        p->low, p->high, p->auto_frequency,
                                                                        p->singular, p->cuts, p->projector);
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
