/*
 * graph.cu - CUDA graphs of a chain of plans (usbeam.Pipeline(capture_graph=True)): the
 * work the plans queue on one stream is captured once (cudaStreamBeginCapture in
 * thread-local mode, so an accidental allocation or host synchronisation during the capture
 * is an error, not a silent hole in the graph), instantiated, and replayed with one launch
 * per call.  The kernels' arguments (device pointers, sizes) are frozen at capture: the
 * chain must read and write the same buffers on every replay.  The plans' stage events are
 * recorded with cudaEventRecordExternal while capturing (cuda/runtime/exec.cu), which makes
 * them event-record nodes: every replay records them, so per-stage times from CUDA events
 * are the last replay's (the plans, which own the events, must outlive the graph).  (A plain
 * cudaEventRecord in a capturing stream adds no node and leaves the event unusable outside
 * the capture: cudaErrorCapturedEvent.)  The buffers' last-use events are not recorded in a
 * capture (memory.cu, usbeam_event_record): the graph's owner marks its buffers used after
 * each launch, as Pipeline does.  NVTX
 * ranges are host-side and mark the capture only.  Stream-ordered allocation in a capture
 * would add allocation nodes; usbeam_device_alloc refuses it.
 */
#include "runtime/cuda_common.cuh"

extern "C" usbeam_status usbeam_graph_capture_begin(void *stream)
{
    if (!stream) return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "stream: the legacy default stream cannot be captured");
    USBEAM_CUDA_TRY(cudaStreamBeginCapture((cudaStream_t)stream, cudaStreamCaptureModeThreadLocal));
    return USBEAM_OK;
}

extern "C" usbeam_status usbeam_graph_capture_end(void *stream, void **graph_exec)
{
    if (!graph_exec) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "graph_exec must not be NULL");
    *graph_exec = nullptr;
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture((cudaStream_t)stream, &graph);
    if (ended != cudaSuccess) {
        /* an invalidated capture ends here: read its error, which would otherwise stay the
         * runtime's last error and fail the next kernel launch's check (the next plan call) */
        (void)cudaGetLastError();
        if (graph) (void)cudaGraphDestroy(graph);
        return usbeam_cuda_check(ended, "cudaStreamEndCapture", __FILE__, __LINE__);
    }
    cudaGraphExec_t exec = nullptr;
    const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
    if (instantiated != cudaSuccess) (void)cudaGetLastError(); /* as above: not the next call's error */
    (void)cudaGraphDestroy(graph); /* the executable graph keeps what it needs */
    if (instantiated == cudaSuccess) *graph_exec = (void *)exec;
    return usbeam_cuda_check(instantiated, "cudaGraphInstantiate", __FILE__, __LINE__);
}

extern "C" void usbeam_graph_capture_abort(void *stream)
{
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing((cudaStream_t)stream, &status) != cudaSuccess || status == cudaStreamCaptureStatusNone) {
        (void)cudaGetLastError();
        return;
    }
    cudaGraph_t graph = nullptr;
    if (cudaStreamEndCapture((cudaStream_t)stream, &graph) == cudaSuccess && graph) (void)cudaGraphDestroy(graph);
    (void)cudaGetLastError(); /* an invalidated capture leaves a sticky-free error: clear it */
}

extern "C" usbeam_status usbeam_graph_launch(void *graph_exec, void *stream)
{
    if (!graph_exec) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "graph: not captured");
    USBEAM_CUDA_TRY(cudaGraphLaunch((cudaGraphExec_t)graph_exec, (cudaStream_t)stream));
    return USBEAM_OK;
}

extern "C" void usbeam_graph_destroy(void *graph_exec)
{
    if (graph_exec) (void)cudaGraphExecDestroy((cudaGraphExec_t)graph_exec);
}
