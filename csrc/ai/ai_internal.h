/*
 * ai_internal.h - what the AI hand-off plans (csrc/ai/preprocess.c, detect.c, segment.c) and
 * their bindings (csrc/python/py_ai.c, py_segment.c) share beyond the common internal header.
 * The CUDA twins are entry points of the one CUDA seam (backend/cuda_seam.h), declared with the
 * other twins in common/usbeam_internal.h; the per-sample math both sides run is in ai_math.h.
 */
#ifndef USBEAM_AI_INTERNAL_H
#define USBEAM_AI_INTERNAL_H

#include "common/usbeam_internal.h"

#include <stdint.h>

/* CUDA's legacy default stream, cudaStreamLegacy, a handle CUDA fixes at 0x1 (driver_types.h:
 * "#define cudaStreamLegacy ((cudaStream_t)0x1)"); csrc/ includes no CUDA header.  The
 * stream-taking AI entries read a NULL stream as this one, where usbeam_cuda_exec_set_stream
 * reads NULL as the plan's own stream. */
#define AI_LEGACY_STREAM ((void *)(uintptr_t)1)

/* One execute of a CUDA plan queued on `stream` (the stream-taking entries: the deprecated
 * *_execute_async and the Python bindings' stream= argument), by the plan's execution state:
 *   - stream NULL, or the plan's stream already: execute(context) as it is;
 *   - otherwise the plan switches to `stream` (which first waits, on the device, for the work
 *     queued so far on the plan's stream: the plan's device scratch serves one execute at a
 *     time), runs, and switches back (the plan's stream then waits for this execute).  So the
 *     plan keeps no reference to a stream the caller may destroy after the call, as these
 *     entries never did, and its calls are ordered whatever their streams.
 *   - inside a CUDA graph capture of `stream` the plan stays on it: work outside a capture may
 *     not wait on captured work (it would join the capture).  The caller keeps that stream
 *     alive until the plan's next execute or its destruction, as for usbeam_cuda_exec_set_stream.
 * The execute's status wins over the switch back's. */
static inline usbeam_status ai_execute_on_stream(usbeam_cuda_exec *exec, void *stream,
                                                 usbeam_status (*execute)(void *context), void *context)
{
    void *const home = exec ? usbeam_cuda_exec_stream(exec) : NULL;
    if (!exec || !stream || stream == home) return execute(context);
    int capturing = 0; /* asked first, so that a failed query cannot hide the execute's message */
    if (usbeam_stream_capturing(stream, &capturing) != USBEAM_OK) {
        usbeam_clear_error(); /* the switch below reports a stream CUDA does not know */
        capturing = 0;
    }
    usbeam_status st = usbeam_cuda_exec_set_stream(exec, stream);
    if (st != USBEAM_OK) return st;
    st = execute(context);
    if (!capturing) {
        usbeam_status back = usbeam_cuda_exec_set_stream(exec, home);
        if (st == USBEAM_OK) st = back;
    }
    return st;
}

/* The backend argument of the AI plan constructors: CPU or CUDA, named in the message. */
static inline usbeam_status ai_check_backend(usbeam_backend backend)
{
    if (backend != USBEAM_BACKEND_CPU && backend != USBEAM_BACKEND_CUDA)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "backend: unknown value %d", (int)backend);
    return USBEAM_OK;
}

#endif
