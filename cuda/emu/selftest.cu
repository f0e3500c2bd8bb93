/*
 * selftest.cu - what the CUDA emulator promises, checked (tests/device/test_cuda_emulator.py builds this
 * with translate.py + g++ against runtime.cpp and runs one scenario per process).  Each
 * scenario is valid or deliberately wrong CUDA; a wrong one must fail the way the emulator
 * documents (an error code, a fault, stale or poisoned data), or the emulator would let that
 * class of bug through to a GPU.  Prints one line "<scenario>: <result>"; exit 0 unless a
 * check inside the scenario itself fails (exit 1) or the process is killed by a fault.
 */
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

__global__ void block_sum(const float *in, float *out, int n)
{
    __shared__ float partial[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    partial[threadIdx.x] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride >= 32; stride /= 2) {
        if ((int)threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x < 32) {
        float v = partial[threadIdx.x];
        for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
        if (threadIdx.x == 0) atomicAdd(out, v);
    }
}

__global__ void fill(float *out, int n, float value)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = value;
}

__global__ void write_at(float *out, int index) { out[index] = 1.0f; }

__global__ void uses_shared(float *out)
{
    extern __shared__ float scratch[];
    scratch[threadIdx.x] = (float)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = scratch[blockDim.x - 1 - threadIdx.x];
}

__global__ void __launch_bounds__(128) bounded(float *out) { out[threadIdx.x] = 0.0f; }

__global__ void divergent_barrier(float *out)
{
    if (threadIdx.x < 16) __syncthreads(); /* the other half of the warp never arrives ... */
    else __syncwarp();                     /* ... and this half waits for the first: a hang */
    out[threadIdx.x] = 0.0f;
}

/* Block 0 publishes a value that the other blocks read: right only if block 0 runs first,
 * which no GPU promises. */
__global__ void first_block_publishes(float *shared_value, float *out)
{
    if (blockIdx.x == 0) {
        if (threadIdx.x == 0) *shared_value = 42.0f;
        return;
    }
    if (threadIdx.x == 0) out[blockIdx.x] = *shared_value;
}

/* One __shared__ slot used by every thread as if it were its own: each thread writes it and
 * reads it back with no barrier, so another thread's write can come in between on a GPU. */
__global__ void shared_scratch_race(const float *in, float *out)
{
    __shared__ float scratch;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    scratch = in[i] * 2.0f;
    const float twice = scratch;
    out[i] = twice;
}

__global__ void real_parts(const float2 *in, float *out) { out[threadIdx.x] = in[threadIdx.x].x; }

/* A float2 load through a pointer the kernel derives itself, 4 bytes past an aligned one. */
__global__ void shifted_complex_load(const float *in, float *out)
{
    const float2 *pairs = (const float2 *)(in + 1);
    out[threadIdx.x] = __ldg(&pairs[threadIdx.x]).y;
}

int fail(const char *scenario, const char *what)
{
    printf("%s: FAILED %s\n", scenario, what);
    return 1;
}

float *device_floats(int n)
{
    void *p = nullptr;
    if (cudaMalloc(&p, (size_t)n * sizeof(float)) != cudaSuccess) return nullptr;
    return (float *)p;
}

} // namespace

int main(int argc, char **argv)
{
    if (argc != 2) return 2;
    const char *s = argv[1];
    const int n = 1000;
    float *d = device_floats(n);
    float *pinned = nullptr;
    cudaMallocHost((void **)&pinned, n * sizeof(float));

    if (!strcmp(s, "reduction")) { /* barriers, shared memory, shuffles and atomics work */
        float host[n], *sum = device_floats(1), zero = 0.0f, got = 0.0f, want = 0.0f;
        for (int i = 0; i < n; ++i) want += host[i] = (float)(i % 7);
        cudaMemcpy(d, host, sizeof host, cudaMemcpyHostToDevice);
        cudaMemcpy(sum, &zero, sizeof zero, cudaMemcpyHostToDevice);
        block_sum<<<(n + 255) / 256, 256>>>(d, sum, n);
        cudaMemcpy(&got, sum, sizeof got, cudaMemcpyDeviceToHost);
        if (cudaGetLastError() != cudaSuccess || got != want) return fail(s, "wrong sum");
        printf("%s: %g\n", s, got);
    } else if (!strcmp(s, "poison")) { /* never-written device memory reads as 0xFF (NaN) */
        cudaMemcpy(pinned, d, n * sizeof(float), cudaMemcpyDeviceToHost);
        unsigned bits;
        memcpy(&bits, &pinned[n / 2], 4);
        printf("%s: %08x\n", s, bits);
    } else if (!strcmp(s, "out_of_bounds")) { /* a write past the allocation faults */
        float *exact = device_floats(1024); /* 4 KiB: ends at the guard page */
        write_at<<<1, 1>>>(exact, 1024 + 16);
        cudaDeviceSynchronize();
        printf("%s: not caught\n", s);
    } else if (!strcmp(s, "host_dereference")) { /* host code reading device memory faults */
        fill<<<4, 256>>>(d, n, 2.0f);
        cudaDeviceSynchronize();
        printf("%s: read %g, not caught\n", s, (double)d[3]);
    } else if (!strcmp(s, "missing_sync")) { /* reading a pinned result before the stream ran */
        cudaStream_t stream;
        cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
        pinned[0] = -1.0f;
        fill<<<4, 256, 0, stream>>>(d, n, 3.0f);
        cudaMemcpyAsync(pinned, d, n * sizeof(float), cudaMemcpyDeviceToHost, stream);
        float early = pinned[0];
        cudaStreamSynchronize(stream);
        printf("%s: before %g after %g\n", s, early, pinned[0]);
    } else if (!strcmp(s, "cross_stream")) { /* another stream's work is ordered only by an event */
        cudaStream_t a, b;
        cudaEvent_t done;
        cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
        cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
        cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
        fill<<<4, 256, 0, a>>>(d, n, 4.0f);
        cudaMemcpyAsync(pinned, d, n * sizeof(float), cudaMemcpyDeviceToHost, b); /* no wait */
        cudaStreamSynchronize(b);
        float unordered = pinned[0];
        cudaEventRecord(done, a);
        cudaStreamWaitEvent(b, done, 0);
        cudaMemcpyAsync(pinned, d, n * sizeof(float), cudaMemcpyDeviceToHost, b);
        cudaStreamSynchronize(b);
        printf("%s: without event %g, with event %g\n", s, unordered, pinned[0]);
    } else if (!strcmp(s, "shared_limit")) { /* > 48 KiB of dynamic shared memory needs the opt-in */
        const size_t bytes = 64 * 1024;
        uses_shared<<<1, 32, bytes>>>(d);
        cudaError_t before = cudaGetLastError();
        cudaFuncSetAttribute(uses_shared, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
        uses_shared<<<1, 32, bytes>>>(d);
        cudaError_t after = cudaGetLastError();
        printf("%s: %s then %s\n", s, cudaGetErrorName(before), cudaGetErrorName(after));
    } else if (!strcmp(s, "launch_bounds")) {
        bounded<<<1, 256>>>(d);
        printf("%s: %s\n", s, cudaGetErrorName(cudaGetLastError()));
    } else if (!strcmp(s, "host_pointer_argument")) { /* pageable host memory passed to a kernel */
        float *host = (float *)malloc(n * sizeof(float));
        fill<<<4, 256>>>(host, n, 1.0f);
        printf("%s: %s\n", s, cudaGetErrorName(cudaGetLastError()));
    } else if (!strcmp(s, "copy_overrun")) { /* a copy longer than the allocation */
        static float host[2 * n];
        cudaError_t e = cudaMemcpy(d, host, sizeof host, cudaMemcpyHostToDevice);
        printf("%s: %s\n", s, cudaGetErrorName(e));
    } else if (!strcmp(s, "capture_allocation")) { /* no allocation inside a thread-local capture */
        cudaStream_t stream;
        cudaGraph_t graph = nullptr;
        cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
        cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
        void *p = nullptr;
        cudaError_t e = cudaMalloc(&p, 64);
        cudaError_t end = cudaStreamEndCapture(stream, &graph);
        printf("%s: %s, end %s\n", s, cudaGetErrorName(e), cudaGetErrorName(end));
    } else if (!strcmp(s, "capture_query")) { /* an event query inside a capture, then relaxed */
        cudaStream_t stream;
        cudaGraph_t graph = nullptr;
        cudaEvent_t before;
        cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
        cudaEventCreate(&before);
        cudaEventRecord(before, stream);
        cudaStreamSynchronize(stream);
        cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
        cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
        cudaThreadExchangeStreamCaptureMode(&mode);
        cudaError_t relaxed = cudaEventQuery(before);
        cudaThreadExchangeStreamCaptureMode(&mode);
        cudaError_t end_relaxed = cudaStreamEndCapture(stream, &graph);
        cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
        cudaError_t plain = cudaEventQuery(before);
        cudaError_t end_plain = cudaStreamEndCapture(stream, &graph);
        printf("%s: relaxed %s, end %s; plain %s, end %s\n", s, cudaGetErrorName(relaxed), cudaGetErrorName(end_relaxed),
               cudaGetErrorName(plain), cudaGetErrorName(end_plain));
    } else if (!strcmp(s, "graph_replay")) { /* a captured chain replays with its frozen arguments */
        cudaStream_t stream;
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
        cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
        fill<<<4, 256, 0, stream>>>(d, n, 5.0f);
        cudaMemcpyAsync(pinned, d, n * sizeof(float), cudaMemcpyDeviceToHost, stream);
        cudaStreamEndCapture(stream, &graph);
        cudaGraphInstantiate(&exec, graph, 0);
        pinned[n - 1] = 0.0f;
        cudaGraphLaunch(exec, stream);
        cudaStreamSynchronize(stream);
        printf("%s: %g\n", s, pinned[n - 1]);
    } else if (!strcmp(s, "captured_event")) { /* plain vs external records inside a capture */
        cudaStream_t stream;
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        cudaEvent_t plain, external;
        cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
        cudaEventCreate(&plain);
        cudaEventCreate(&external);
        cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
        cudaEventRecord(plain, stream);
        fill<<<4, 256, 0, stream>>>(d, n, 5.0f);
        cudaEventRecordWithFlags(external, stream, cudaEventRecordExternal);
        cudaStreamEndCapture(stream, &graph);
        cudaGraphInstantiate(&exec, graph, 0);
        cudaGraphLaunch(exec, stream);
        cudaStreamSynchronize(stream);
        cudaError_t q_plain = cudaEventQuery(plain), q_external = cudaEventQuery(external);
        printf("%s: plain %s, external %s\n", s, cudaGetErrorName(q_plain), cudaGetErrorName(q_external));
    } else if (!strcmp(s, "destroyed_event_node")) { /* an event-record node whose event is gone */
        cudaStream_t stream;
        cudaGraph_t graph;
        cudaGraphExec_t exec = nullptr;
        cudaEvent_t external;
        cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
        cudaEventCreate(&external);
        cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
        fill<<<4, 256, 0, stream>>>(d, n, 5.0f);
        cudaEventRecordWithFlags(external, stream, cudaEventRecordExternal);
        cudaEventDestroy(external); /* on an H200 the instantiation then crashed */
        cudaError_t ended = cudaStreamEndCapture(stream, &graph);
        cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
        printf("%s: end %s, instantiate %s\n", s, cudaGetErrorName(ended), cudaGetErrorName(instantiated));
    } else if (!strcmp(s, "free_async_early")) { /* a stream-ordered free not ordered after the kernel */
        cudaStream_t work, other;
        cudaStreamCreateWithFlags(&work, cudaStreamNonBlocking);
        cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking);
        float *buffer = nullptr;
        cudaMallocAsync((void **)&buffer, n * sizeof(float), work);
        fill<<<4, 256, 0, work>>>(buffer, n, 1.0f);
        cudaFreeAsync(buffer, other); /* missing: cudaStreamWaitEvent(other, <event after fill>) */
        cudaStreamSynchronize(other);
        cudaStreamSynchronize(work); /* the kernel runs on freed memory */
        printf("%s: not caught\n", s);
    } else if (!strcmp(s, "alloc_async_unordered")) { /* stream-ordered memory used on another stream too early */
        cudaStream_t alloc, work;
        cudaStreamCreateWithFlags(&alloc, cudaStreamNonBlocking);
        cudaStreamCreateWithFlags(&work, cudaStreamNonBlocking);
        float *buffer = nullptr;
        cudaMallocAsync((void **)&buffer, n * sizeof(float), alloc);
        fill<<<4, 256, 0, work>>>(buffer, n, 1.0f); /* missing: an event from alloc */
        cudaStreamSynchronize(work);
        printf("%s: not caught\n", s);
    } else if (!strcmp(s, "free_async_ordered")) { /* the same, correctly ordered */
        cudaStream_t work, other;
        cudaEvent_t done;
        cudaStreamCreateWithFlags(&work, cudaStreamNonBlocking);
        cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking);
        cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
        float *buffer = nullptr;
        cudaMallocAsync((void **)&buffer, n * sizeof(float), work);
        fill<<<4, 256, 0, work>>>(buffer, n, 2.0f);
        cudaMemcpyAsync(pinned, buffer, n * sizeof(float), cudaMemcpyDeviceToHost, work);
        cudaEventRecord(done, work);
        cudaStreamWaitEvent(other, done, 0);
        cudaError_t e = cudaFreeAsync(buffer, other);
        cudaStreamSynchronize(other);
        printf("%s: %s %g\n", s, cudaGetErrorName(e), pinned[n - 1]);
    } else if (!strcmp(s, "legacy_memset_unordered")) { /* cudaMemset, consumed on a non-blocking stream */
        cudaStream_t stream;
        cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
        fill<<<4, 256>>>(d, n, 5.0f);
        cudaDeviceSynchronize();
        cudaMemset(d, 0, n * sizeof(float)); /* asynchronous to the host, on the legacy stream */
        cudaMemcpyAsync(pinned, d, n * sizeof(float), cudaMemcpyDeviceToHost, stream); /* no order on it */
        cudaStreamSynchronize(stream);
        printf("%s: %g\n", s, pinned[0]);
    } else if (!strcmp(s, "legacy_upload_unordered")) { /* pageable cudaMemcpy, consumed on a non-blocking stream */
        static float host[n];
        for (int i = 0; i < n; ++i) host[i] = 7.0f;
        cudaStream_t stream;
        cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
        cudaMemset(d, 0, n * sizeof(float));
        /* CUDA synchronises the legacy stream (the memset is done), stages host[] and returns:
         * the write to d lands in legacy-stream order, which `stream` does not wait for */
        cudaMemcpy(d, host, n * sizeof(float), cudaMemcpyHostToDevice);
        cudaMemcpyAsync(pinned, d, n * sizeof(float), cudaMemcpyDeviceToHost, stream);
        cudaStreamSynchronize(stream);
        printf("%s: %g\n", s, pinned[0]);
    } else if (!strcmp(s, "legacy_upload_ordered")) { /* what orders a pageable upload before other work */
        static float host[n];
        cudaStream_t blocking, other;
        cudaEvent_t uploaded;
        cudaStreamCreate(&blocking);
        cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking);
        cudaEventCreateWithFlags(&uploaded, cudaEventDisableTiming);
        float *second = device_floats(n), got[6] = {0};
        auto upload = [&](float value) {
            for (int i = 0; i < n; ++i) host[i] = value;
            cudaMemcpy(d, host, n * sizeof(float), cudaMemcpyHostToDevice);
            for (int i = 0; i < n; ++i) host[i] = -1.0f; /* the source may change once the call returns */
        };
        auto read_on = [&](cudaStream_t stream, int k) {
            cudaMemcpyAsync(pinned, d, n * sizeof(float), cudaMemcpyDeviceToHost, stream);
            cudaStreamSynchronize(stream);
            got[k] = pinned[n - 1];
        };
        upload(1.0f);
        read_on(blocking, 0); /* a blocking stream waits for the legacy stream */
        upload(2.0f);
        cudaStreamSynchronize(cudaStreamLegacy);
        read_on(other, 1);
        upload(3.0f);
        cudaDeviceSynchronize();
        read_on(other, 2);
        upload(4.0f);
        cudaEventRecord(uploaded, cudaStreamLegacy);
        cudaStreamWaitEvent(other, uploaded, 0);
        read_on(other, 3);
        upload(5.0f);
        cudaMemcpy(second, host, sizeof(float), cudaMemcpyHostToDevice); /* syncs the legacy stream first */
        read_on(other, 4);
        upload(6.0f);
        cudaMemcpy(&got[5], d + n - 1, sizeof(float), cudaMemcpyDeviceToHost); /* legacy stream, in order */
        printf("%s: %g %g %g %g %g %g\n", s, got[0], got[1], got[2], got[3], got[4], got[5]);
    } else if (!strcmp(s, "block_order")) { /* a kernel that needs block 0 to run first */
        const int blocks = 64;
        float *shared_value = device_floats(1), *out = device_floats(blocks);
        first_block_publishes<<<blocks, 32>>>(shared_value, out);
        cudaMemcpy(pinned, out, blocks * sizeof(float), cudaMemcpyDeviceToHost);
        int saw = 0;
        for (int b = 1; b < blocks; ++b) saw += pinned[b] == 42.0f;
        printf("%s: %d of %d blocks saw block 0's value\n", s, saw, blocks - 1);
    } else if (!strcmp(s, "shared_race")) { /* threads share a __shared__ slot without a barrier */
        const int threads = 256, blocks = 4, total = threads * blocks;
        static float host[threads * blocks];
        float *in = device_floats(total), *out = device_floats(total);
        for (int i = 0; i < total; ++i) host[i] = (float)i;
        cudaMemcpy(in, host, sizeof host, cudaMemcpyHostToDevice);
        shared_scratch_race<<<blocks, threads>>>(in, out);
        cudaMemcpy(host, out, sizeof host, cudaMemcpyDeviceToHost);
        int wrong = 0;
        for (int i = 0; i < total; ++i) wrong += host[i] != 2.0f * (float)i;
        printf("%s: %d of %d wrong\n", s, wrong, total);
    } else if (!strcmp(s, "misaligned_argument")) { /* a complex64 view 4 bytes into a float buffer */
        real_parts<<<1, 32>>>((const float2 *)(d + 1), d + 100);
        cudaError_t launch = cudaGetLastError(), sync = cudaDeviceSynchronize();
        void *p = nullptr;
        cudaError_t later = cudaMalloc(&p, 64); /* sticky: the context is gone */
        printf("%s: %s, %s, later %s\n", s, cudaGetErrorName(launch), cudaGetErrorName(sync), cudaGetErrorName(later));
    } else if (!strcmp(s, "misaligned_load")) { /* a misaligned float2 load inside the kernel */
        shifted_complex_load<<<1, 32>>>(d, d + 100);
        cudaError_t launch = cudaGetLastError(), sync = cudaDeviceSynchronize();
        printf("%s: %s, %s\n", s, cudaGetErrorName(launch), cudaGetErrorName(sync));
    } else if (!strcmp(s, "divergent_barrier")) {
        divergent_barrier<<<1, 32>>>(d);
        cudaDeviceSynchronize();
        printf("%s: not caught\n", s);
    } else {
        return 2;
    }
    return 0;
}
