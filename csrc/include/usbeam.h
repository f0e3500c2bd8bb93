/*
 * usbeam.h - the public C contract of usbeam.
 *
 * Every kernel family follows one shape (after FFTW / FINUFFT):
 *
 *   usbeam_status usbeam_<family>_plan_create(const usbeam_<family>_params *params,
 *                                             usbeam_backend backend,
 *                                             usbeam_<family>_plan **plan);
 *   usbeam_status usbeam_<family>_execute(usbeam_<family>_plan *plan, const void *in, void *out);
 *   void          usbeam_<family>_plan_destroy(usbeam_<family>_plan *plan);   (safe on NULL)
 *
 * - Parameter structs are plain C, in SI units (s, m, Hz, rad); each field says its
 *   units and shape.  plan_create copies everything it needs: no user pointer is
 *   kept after it returns.
 * - Geometry-dependent work (delays, apodization, filter taps, index tables) is done
 *   once in plan_create, in double precision.
 * - execute allocates nothing; its scratch space belongs to the plan.  Different
 *   plans may execute concurrently from different threads; one plan may not.
 * - Every call returns a usbeam_status.  On failure usbeam_last_error() gives a
 *   message for the calling thread that names the offending parameter.
 * - Floating-point input data holding NaN or inf is refused by the CPU backend's execute
 *   (USBEAM_ERR_INVALID_ARGUMENT, "<name> contains NaN or infinite values (...)"); out is then
 *   untouched (das, rca, the SVD clutter filter, detect) or filled with NaN (0 for uint8
 *   B-mode), and persistent state (the IIR clutter filter's) is left as it was.
 *
 * Arrays are C-order with the fastest axis last, e.g. channel data
 * (n_frames, n_transmits, n_elements, n_samples), which is MATLAB's column-major
 * (n_samples, n_elements, n_transmits, n_frames) without a copy.
 * Complex data is interleaved (re, im) float32 pairs ("complex64").
 *
 * This header contains no CUDA types: device pointers travel as void *.
 *
 * This umbrella header includes the whole API; each stage has its own header, in flow order:
 *   usbeam/core.h      status codes, errors, backends, dtypes, threads
 *   usbeam/device.h    device memory, streams, events, graphs, CUDA execution state, live ring
 *   usbeam/acquire.h   stage 0: live channel gather, Hadamard decode
 *   usbeam/demod.h     stage 1: RF -> IQ
 *   usbeam/beamform.h  stage 2: delay-and-sum (linear arrays), row-column arrays
 *   usbeam/bmode.h     stage 3a: B-mode
 *   usbeam/doppler.h   stage 3b: clutter filters, color / power Doppler, display
 *   usbeam/ai.h        stage 4: model input, detection, segmentation
 */
#ifndef USBEAM_H
#define USBEAM_H

#include "usbeam/core.h"
#include "usbeam/device.h"
#include "usbeam/acquire.h"
#include "usbeam/demod.h"
#include "usbeam/beamform.h"
#include "usbeam/bmode.h"
#include "usbeam/doppler.h"
#include "usbeam/ai.h"

#endif /* USBEAM_H */
