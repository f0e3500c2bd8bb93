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

/* After a call queued on another stream than the plan's own one: the plan returns to `home`
 * (usbeam_cuda_exec_set_stream: home then waits, on the device, for the call), so it keeps no
 * reference to a stream its caller may destroy after the call, and its next call, whatever its
 * stream, comes after this one (the plan's device scratch serves one execute at a time).
 * Inside a CUDA graph capture of the current stream the plan stays on it: work outside a
 * capture may not wait on captured work (it would join the capture); the captured stream is
 * then the plan's stream, as after usbeam_cuda_exec_set_stream.  home NULL: stay. */
static inline usbeam_status ai_return_to(usbeam_cuda_exec *exec, void *home)
{
    void *const current = exec ? usbeam_cuda_exec_stream(exec) : NULL;
    if (!exec || !home || current == home) return USBEAM_OK;
    int capturing = 0;
    if (usbeam_stream_capturing(current, &capturing) != USBEAM_OK) capturing = 0; /* the switch says why */
    return capturing ? USBEAM_OK : usbeam_cuda_exec_set_stream(exec, home);
}

/* One execute of a CUDA plan queued on `stream` (the deprecated stream-taking C entries): the
 * plan switches to it (which first waits for the work queued so far on the plan's stream),
 * runs, and returns as ai_return_to says.  stream NULL, or the plan's stream: as it is.  The
 * execute's status wins over the return's. */
static inline usbeam_status ai_execute_on_stream(usbeam_cuda_exec *exec, void *stream,
                                                 usbeam_status (*execute)(void *context), void *context)
{
    void *const home = exec ? usbeam_cuda_exec_stream(exec) : NULL;
    if (!exec || !stream || stream == home) return execute(context);
    usbeam_status st = usbeam_cuda_exec_set_stream(exec, stream);
    if (st != USBEAM_OK) return st;
    st = execute(context);
    usbeam_status back = ai_return_to(exec, home);
    return st != USBEAM_OK ? st : back;
}

/* The backend argument of the AI plan constructors: CPU or CUDA, named in the message. */
static inline usbeam_status ai_check_backend(usbeam_backend backend)
{
    if (backend != USBEAM_BACKEND_CPU && backend != USBEAM_BACKEND_CUDA)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "backend: unknown value %d", (int)backend);
    return USBEAM_OK;
}

#endif
