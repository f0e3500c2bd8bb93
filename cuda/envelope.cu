/*
 * envelope.cu - the envelope (magnitude of the analytic signal) of real RF lines, CUDA twin of
 * csrc/bmode/envelope.c.
 *
 * Layout: in  float32 [n_outer][n_axis][n_inner] on the device, lines along the middle axis;
 *         out float32 envelope or complex64 analytic signal (interleaved re, im), same layout.
 * Method: as on the CPU, scipy.signal.hilbert's analytic signal x + j H x with H x the circular
 *         convolution of each line with the Hilbert kernel (usbeam_hilbert_kernel in
 *         common/usbeam_math.h, tabulated in double by envelope.c and uploaded at creation):
 *         y[i] = sum_m kernel[(i - m) mod n] x[m], summed in double over m = 0 .. n - 1, the
 *         CPU's order, so the two backends differ only by FMA contraction.
 * Stage: "envelope.hilbert", one thread per output value (grid-stride); consecutive threads
 *         take consecutive lines (the inner index), so each read of x[o][m][*] is coalesced
 *         and the kernel entry is the same for a warp (a broadcast).
 * Non-finite input: the CPU refuses it; here a thread whose sum is not finite (every sample
 *         of the line enters every sum: 0 * NaN is NaN) stores USBEAM_INPUT_FAULT_NONFINITE
 *         into the plan's mapped fault word (exec.cuh), read by usbeam.device once the work
 *         has finished; the outputs are NaN there, as the arithmetic makes them.
 */
#include "runtime/exec.cuh"

#include "common/usbeam_math.h"

namespace {

enum { STAGE_HILBERT = 0 };
const char *const STAGE_NAMES[] = {"envelope.hilbert"};
constexpr int THREADS = 256;

__global__ void envelope_kernel(const float *__restrict__ in, size_t n_outer, size_t n_axis, size_t n_inner,
                                const double *__restrict__ kernel, int analytic, float *__restrict__ out,
                                unsigned *input_fault)
{
    const size_t n_values = n_outer * n_axis * n_inner;
    bool non_finite = false;
    for (size_t v = (size_t)blockIdx.x * blockDim.x + threadIdx.x; v < n_values; v += (size_t)gridDim.x * blockDim.x) {
        const size_t j = v % n_inner, rest = v / n_inner;
        const size_t i = rest % n_axis, o = rest / n_axis;
        const float *line = in + o * n_axis * n_inner + j;
        double y = 0.0;
        for (size_t m = 0; m < n_axis; ++m) {
            const size_t d = i >= m ? i - m : i + n_axis - m; /* (i - m) mod n */
            y += kernel[d] * (double)line[m * n_inner];
        }
        non_finite |= !isfinite(y);
        const float x = in[v];
        if (analytic) {
            out[2 * v] = x;
            out[2 * v + 1] = (float)y;
        } else {
            out[v] = usbeam_envelope_magnitude((double)x, y);
        }
    }
    if (non_finite) *(volatile unsigned *)input_fault = USBEAM_INPUT_FAULT_NONFINITE; /* mapped host word */
}

} // namespace

struct usbeam_envelope_cuda {
    usbeam_cuda_exec *exec;
    usbeam_envelope_params params;
    double *kernel;        /* [n_axis] device: kernel[d], d = (i - m) mod n */
    unsigned *input_fault; /* mapped host word (exec.cuh) */
    unsigned grid_cap;     /* grid-stride launches: a few waves of the device */
};

extern "C" usbeam_status usbeam_envelope_cuda_create(const usbeam_envelope_params *params, const double *kernel,
                                                     usbeam_envelope_cuda **out)
{
    if (!params || !kernel || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "params, kernel and plan must not be NULL");
    *out = nullptr;
    usbeam_envelope_cuda *p = (usbeam_envelope_cuda *)usbeam_alloc(sizeof *p);
    if (!p) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "envelope CUDA plan");
    p->params = *params;
    usbeam_status st = usbeam_cuda_exec_create(STAGE_NAMES, 1, &p->exec);
    size_t bytes = 0;
    if (st == USBEAM_OK && usbeam_mul_size(params->n_axis, sizeof(double), &bytes) != 0)
        st = usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "n_axis: %zu is too large", params->n_axis);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_alloc(p->exec, bytes, "envelope kernel", (void **)&p->kernel);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_upload(p->exec, p->kernel, kernel, bytes);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_input_fault_flag(p->exec, &p->input_fault);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_grid_cap(p->exec, &p->grid_cap);
    if (st != USBEAM_OK) {
        usbeam_envelope_cuda_destroy(p);
        return st;
    }
    *out = p;
    return USBEAM_OK;
}

extern "C" void usbeam_envelope_cuda_destroy(usbeam_envelope_cuda *p)
{
    if (!p) return;
    usbeam_cuda_exec_destroy(p->exec);
    usbeam_free(p);
}

extern "C" usbeam_cuda_exec *usbeam_envelope_cuda_exec(usbeam_envelope_cuda *p) { return p ? p->exec : nullptr; }

static usbeam_status envelope_cuda_run(usbeam_envelope_cuda *p, const float *in, float *out)
{
    usbeam_cuda_exec *e = p->exec;
    cudaStream_t stream = usbeam_cuda_exec_cuda_stream(e);
    const usbeam_envelope_params *prm = &p->params;
    const size_t n_values = prm->n_outer * prm->n_axis * prm->n_inner;
    size_t blocks = (n_values + THREADS - 1) / THREADS;
    if (blocks > p->grid_cap) blocks = p->grid_cap;
    if (blocks < 1) blocks = 1;
    usbeam_status st = usbeam_cuda_stage_begin(e, STAGE_HILBERT);
    if (st != USBEAM_OK) return st;
    envelope_kernel<<<(unsigned)blocks, THREADS, 0, stream>>>(in, prm->n_outer, prm->n_axis, prm->n_inner, p->kernel,
                                                             prm->output == USBEAM_ENVELOPE_ANALYTIC, out,
                                                             p->input_fault);
    USBEAM_CUDA_TRY(cudaGetLastError());
    return usbeam_cuda_stage_end(e, STAGE_HILBERT);
}

extern "C" usbeam_status usbeam_envelope_cuda_execute(usbeam_envelope_cuda *p, const void *in, void *out)
{
    if (!p || !in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, in and out must not be NULL");
    usbeam_status st = usbeam_cuda_exec_begin(p->exec);
    if (st != USBEAM_OK) return st;
    st = envelope_cuda_run(p, (const float *)in, (float *)out);
    usbeam_cuda_exec_end(p->exec);
    return st;
}
