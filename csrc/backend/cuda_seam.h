/*
 * cuda_seam.h - the ONE seam between the C library (csrc/, always built, no CUDA) and its CUDA
 * backend (cuda/, built into the optional extension module usbeam._cuda when nvcc is present).
 *
 * Every function that csrc/ calls in cuda/ (the twins' create/execute/destroy, device memory,
 * streams, events, graphs, the live ring) is listed once in USBEAM_CUDA_ENTRY_POINTS.  From
 * that list:
 *   - usbeam._core (csrc/cuda_seam.c) defines each function as a forwarder through a table of
 *     function pointers; until the table is installed every forwarder gives its fallback
 *     (USBEAM_ERR_NO_BACKEND with the reason the backend is absent, a NULL frees being a no-op,
 *     outputs cleared), so the CPU library never links a CUDA library and imports everywhere;
 *   - usbeam._cuda (cuda/cuda_module.c) fills the table with the real functions and hands it
 *     over in a capsule when Python loads the backend on first use (usbeam._backend.load_cuda);
 *   - the signature string of the list is compared at installation, so a _cuda built from other
 *     sources than _core is refused instead of being called with the wrong arguments.
 * Adding a twin entry point is one line here.
 *
 * X(return type, name, (parameters), (arguments), fallback expression) for functions returning
 * a value; XV(name, (parameters), (arguments)) for void functions (a no-op when absent).
 * USBEAM_SEAM_MISSING records "<function>: the CUDA backend is not available (<reason>)".
 */
#ifndef USBEAM_CUDA_SEAM_H
#define USBEAM_CUDA_SEAM_H

#include <stdarg.h>
#include <stdint.h>

#include "common/usbeam_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Set *p to v when p is not NULL (an output the CUDA function would have written). */
#define USBEAM_SEAM_CLEAR(p, v) ((p) ? (void)(*(p) = (v)) : (void)0)
#define USBEAM_SEAM_MISSING usbeam_cuda_missing(__func__)

/* clang-format off */
#define USBEAM_CUDA_ENTRY_POINTS(X, XV) \
    /* declared in usbeam.h */ \
    X(usbeam_status, usbeam_copy_device, (void *dst_device, const void *src_device, size_t bytes, void *stream), (dst_device, src_device, bytes, stream), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_copy_to_device, (void *dst_device, const void *src_host, size_t bytes, void *stream), (dst_device, src_host, bytes, stream), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_copy_to_host, (void *dst_host, const void *src_device, size_t bytes, void *stream), (dst_host, src_device, bytes, stream), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_cuda_d2d_bandwidth, (int device, size_t bytes, int repeats, double *gbps), (device, bytes, repeats, gbps), (USBEAM_SEAM_CLEAR(gbps, 0.0), USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_cuda_device_count, (int *count), (count), (count ? (*count = 0, USBEAM_OK) : usbeam_fail(USBEAM_ERR_NULL_POINTER, "count is NULL"))) \
    X(usbeam_status, usbeam_cuda_device_info, (int device, usbeam_device_info *info), (device, info), (USBEAM_SEAM_MISSING)) \
    X(int, usbeam_cuda_exec_device, (const usbeam_cuda_exec *exec), (exec), (-1)) \
    X(size_t, usbeam_cuda_exec_device_bytes, (const usbeam_cuda_exec *exec), (exec), (0)) \
    X(usbeam_status, usbeam_cuda_exec_set_stream, (usbeam_cuda_exec *exec, void *stream), (exec, stream), (USBEAM_SEAM_MISSING)) \
    X(void *, usbeam_cuda_exec_stream, (const usbeam_cuda_exec *exec), (exec), (NULL)) \
    X(unsigned, usbeam_cuda_exec_take_input_faults, (usbeam_cuda_exec *exec), (exec), (0u)) \
    X(usbeam_status, usbeam_cuda_exec_timings, (usbeam_cuda_exec *exec, size_t capacity, const char **names, float *ms, size_t *n_stages), (exec, capacity, names, ms, n_stages), (USBEAM_SEAM_CLEAR(n_stages, 0), USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_cuda_float16_to_float32, (const void *in, void *out, size_t n, void *stream), (in, out, n, stream), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_cuda_float32_to_float16, (const void *in, void *out, size_t n, void *stream), (in, out, n, stream), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_cuda_mask_argmax, (const void *scores, usbeam_dtype dtype, size_t n_images, size_t n_classes, size_t n_pixels, int32_t *labels, void *stream), (scores, dtype, n_images, n_classes, n_pixels, labels, stream), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_cuda_mask_threshold, (const void *values, usbeam_dtype dtype, size_t n, double threshold, uint8_t *mask, void *stream), (values, dtype, n, threshold, mask, stream), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_cuda_regionprops_basic, (const int32_t *labels, size_t height, size_t width, size_t n_labels, int32_t *area, int32_t *bbox, double *centroid, void *stream), (labels, height, width, n_labels, area, bbox, centroid, stream), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_device_alloc, (int device, size_t bytes, void *stream, void **ptr, int *pooled), (device, bytes, stream, ptr, pooled), (USBEAM_SEAM_CLEAR(ptr, NULL), USBEAM_SEAM_CLEAR(pooled, 0), USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_device_free, (void *ptr), (ptr), (ptr ? USBEAM_SEAM_MISSING : USBEAM_OK)) \
    X(usbeam_status, usbeam_device_free_after, (int device, void *ptr, void *event, int after_legacy), (device, ptr, event, after_legacy), (ptr ? USBEAM_SEAM_MISSING : USBEAM_OK)) \
    XV(usbeam_event_destroy, (void *event), (event)) \
    X(usbeam_status, usbeam_event_query, (void *event, int *complete), (event, complete), (USBEAM_SEAM_CLEAR(complete, 1), event ? USBEAM_SEAM_MISSING : USBEAM_OK)) \
    X(usbeam_status, usbeam_event_record, (void **event, void *stream), (event, stream), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_event_wait_destroy, (void *event), (event), (event ? USBEAM_SEAM_MISSING : USBEAM_OK)) \
    XV(usbeam_graph_capture_abort, (void *stream), (stream)) \
    X(usbeam_status, usbeam_graph_capture_begin, (void *stream), (stream), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_graph_capture_end, (void *stream, void **graph_exec), (stream, graph_exec), (USBEAM_SEAM_CLEAR(graph_exec, NULL), USBEAM_SEAM_MISSING)) \
    XV(usbeam_graph_destroy, (void *graph_exec), (graph_exec)) \
    X(usbeam_status, usbeam_graph_launch, (void *graph_exec, void *stream), (graph_exec, stream), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_live_cuda_h2d_bandwidth, (int device, size_t bytes, int repeats, double *gbps), (device, bytes, repeats, gbps), (USBEAM_SEAM_CLEAR(gbps, 0.0), USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_live_cuda_ring_acquire, (usbeam_live_cuda_ring *ring, int slot, void **device, void **stream), (ring, slot, device, stream), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_live_cuda_ring_compute_seconds, (usbeam_live_cuda_ring *ring, int slot, double *seconds), (ring, slot, seconds), (USBEAM_SEAM_MISSING)) \
    X(int, usbeam_live_cuda_ring_count, (void), (), (0)) \
    X(usbeam_status, usbeam_live_cuda_ring_create, (int device, int n_slots, size_t slot_bytes, usbeam_live_cuda_ring **ring), (device, n_slots, slot_bytes, ring), (USBEAM_SEAM_CLEAR(ring, NULL), USBEAM_SEAM_MISSING)) \
    XV(usbeam_live_cuda_ring_destroy, (usbeam_live_cuda_ring *ring), (ring)) \
    X(usbeam_status, usbeam_live_cuda_ring_host_slot, (usbeam_live_cuda_ring *ring, int slot, void **host), (ring, slot, host), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_live_cuda_ring_query, (usbeam_live_cuda_ring *ring, int slot, int *done), (ring, slot, done), (USBEAM_SEAM_CLEAR(done, 0), USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_live_cuda_ring_release, (usbeam_live_cuda_ring *ring, int slot), (ring, slot), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_live_cuda_ring_synchronize, (usbeam_live_cuda_ring *ring), (ring), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_live_cuda_ring_upload, (usbeam_live_cuda_ring *ring, int slot, size_t bytes), (ring, slot, bytes), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_live_cuda_ring_upload_seconds, (usbeam_live_cuda_ring *ring, int slot, double *seconds), (ring, slot, seconds), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_pointer_device, (const void *ptr, int *device), (ptr, device), (USBEAM_SEAM_CLEAR(device, -1), USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_stream_capturing, (void *stream, int *capturing), (stream, capturing), (USBEAM_SEAM_CLEAR(capturing, 0), USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_stream_query, (void *stream, int *idle), (stream, idle), (USBEAM_SEAM_CLEAR(idle, 1), USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_stream_synchronize, (void *stream), (stream), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_stream_wait, (void *consumer, void *producer), (consumer, producer), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_device_malloc, (int device, size_t bytes, void **ptr), (device, bytes, ptr), (USBEAM_SEAM_CLEAR(ptr, NULL), USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_pinned_malloc, (size_t bytes, void **ptr), (bytes, ptr), (USBEAM_SEAM_CLEAR(ptr, NULL), USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_pinned_free, (void *ptr), (ptr), (ptr ? USBEAM_SEAM_MISSING : USBEAM_OK)) \
    /* declared in usbeam_internal.h */ \
    X(usbeam_status, usbeam_bmode_cuda_create, (const usbeam_bmode_params *params, usbeam_bmode_cuda **plan), (params, plan), (USBEAM_SEAM_CLEAR(plan, NULL), USBEAM_SEAM_MISSING)) \
    XV(usbeam_bmode_cuda_destroy, (usbeam_bmode_cuda *plan), (plan)) \
    X(usbeam_cuda_exec *, usbeam_bmode_cuda_exec, (usbeam_bmode_cuda *plan), (plan), (NULL)) \
    X(usbeam_status, usbeam_bmode_cuda_execute, (usbeam_bmode_cuda *plan, const void *in, void *out), (plan, in, out), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_scan_convert_cuda_create, (const usbeam_scan_convert_tables *tables, usbeam_scan_convert_cuda **plan), (tables, plan), (USBEAM_SEAM_CLEAR(plan, NULL), USBEAM_SEAM_MISSING)) \
    XV(usbeam_scan_convert_cuda_destroy, (usbeam_scan_convert_cuda *plan), (plan)) \
    X(usbeam_cuda_exec *, usbeam_scan_convert_cuda_exec, (usbeam_scan_convert_cuda *plan), (plan), (NULL)) \
    X(usbeam_status, usbeam_scan_convert_cuda_execute, (usbeam_scan_convert_cuda *plan, const void *in, void *out), (plan, in, out), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_envelope_cuda_create, (const usbeam_envelope_params *params, const double *kernel, usbeam_envelope_cuda **plan), (params, kernel, plan), (USBEAM_SEAM_CLEAR(plan, NULL), USBEAM_SEAM_MISSING)) \
    XV(usbeam_envelope_cuda_destroy, (usbeam_envelope_cuda *plan), (plan)) \
    X(usbeam_cuda_exec *, usbeam_envelope_cuda_exec, (usbeam_envelope_cuda *plan), (plan), (NULL)) \
    X(usbeam_status, usbeam_envelope_cuda_execute, (usbeam_envelope_cuda *plan, const void *in, void *out), (plan, in, out), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_clutter_cuda_create, (const usbeam_clutter_params *params, const double *basis, int n_basis, usbeam_clutter_cuda **plan), (params, basis, n_basis, plan), (USBEAM_SEAM_CLEAR(plan, NULL), USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_clutter_cuda_create_iir, (const usbeam_clutter_params *params, int n_sections, const int *section_order, const double *sos_b, const double *sos_a, int n_state, size_t init_frames, const double *natural_q, const double *state_gain, usbeam_clutter_cuda **plan), (params, n_sections, section_order, sos_b, sos_a, n_state, init_frames, natural_q, state_gain, plan), (USBEAM_SEAM_CLEAR(plan, NULL), USBEAM_SEAM_MISSING)) \
    XV(usbeam_clutter_cuda_destroy, (usbeam_clutter_cuda *plan), (plan)) \
    X(usbeam_cuda_exec *, usbeam_clutter_cuda_exec, (usbeam_clutter_cuda *plan), (plan), (NULL)) \
    X(usbeam_status, usbeam_clutter_cuda_execute, (usbeam_clutter_cuda *plan, const void *in, void *out), (plan, in, out), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_clutter_cuda_reset, (usbeam_clutter_cuda *plan), (plan), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_clutter_svd_cuda_create, (const usbeam_clutter_params *params, usbeam_clutter_svd_cuda **plan), (params, plan), (USBEAM_SEAM_CLEAR(plan, NULL), USBEAM_SEAM_MISSING)) \
    XV(usbeam_clutter_svd_cuda_destroy, (usbeam_clutter_svd_cuda *plan), (plan)) \
    X(usbeam_cuda_exec *, usbeam_clutter_svd_cuda_exec, (usbeam_clutter_svd_cuda *plan), (plan), (NULL)) \
    X(usbeam_status, usbeam_clutter_svd_cuda_execute, (usbeam_clutter_svd_cuda *plan, const void *in, void *out), (plan, in, out), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_clutter_svd_cuda_info, (usbeam_clutter_svd_cuda *plan, double *singular_values, int *low, int *high), (plan, singular_values, low, high), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_color_cuda_create, (const usbeam_color_params *params, const double *window_z, const double *window_x, double nyquist, usbeam_color_cuda **plan), (params, window_z, window_x, nyquist, plan), (USBEAM_SEAM_CLEAR(plan, NULL), USBEAM_SEAM_MISSING)) \
    XV(usbeam_color_cuda_destroy, (usbeam_color_cuda *plan), (plan)) \
    X(usbeam_cuda_exec *, usbeam_color_cuda_exec, (usbeam_color_cuda *plan), (plan), (NULL)) \
    X(usbeam_status, usbeam_color_cuda_execute, (usbeam_color_cuda *plan, const void *in, float *velocity, float *variance, float *power), (plan, in, velocity, variance, power), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_das_cuda_create, (const usbeam_das_tables *tables, usbeam_das_cuda **plan), (tables, plan), (USBEAM_SEAM_CLEAR(plan, NULL), USBEAM_SEAM_MISSING)) \
    XV(usbeam_das_cuda_destroy, (usbeam_das_cuda *plan), (plan)) \
    X(usbeam_cuda_exec *, usbeam_das_cuda_exec, (usbeam_das_cuda *plan), (plan), (NULL)) \
    X(usbeam_status, usbeam_das_cuda_execute, (usbeam_das_cuda *plan, const void *in, void *out), (plan, in, out), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_adaptive_cuda_create, (const usbeam_adaptive_tables *tables, usbeam_adaptive_cuda **plan), (tables, plan), (USBEAM_SEAM_CLEAR(plan, NULL), USBEAM_SEAM_MISSING)) \
    XV(usbeam_adaptive_cuda_destroy, (usbeam_adaptive_cuda *plan), (plan)) \
    X(usbeam_cuda_exec *, usbeam_adaptive_cuda_exec, (usbeam_adaptive_cuda *plan), (plan), (NULL)) \
    X(usbeam_status, usbeam_adaptive_cuda_execute, (usbeam_adaptive_cuda *plan, size_t n_frames, const void *in, void *out), (plan, n_frames, in, out), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_das_sparse_cuda_create, (const usbeam_das_params *params, const usbeam_das_sparse_view *csr, usbeam_das_sparse_cuda **plan), (params, csr, plan), (USBEAM_SEAM_CLEAR(plan, NULL), USBEAM_SEAM_MISSING)) \
    XV(usbeam_das_sparse_cuda_destroy, (usbeam_das_sparse_cuda *plan), (plan)) \
    X(usbeam_cuda_exec *, usbeam_das_sparse_cuda_exec, (usbeam_das_sparse_cuda *plan), (plan), (NULL)) \
    X(usbeam_status, usbeam_das_sparse_cuda_execute, (usbeam_das_sparse_cuda *plan, const void *in, void *out), (plan, in, out), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_doppler_display_cuda_create, (const usbeam_doppler_display_params *params, usbeam_doppler_display_cuda **plan), (params, plan), (USBEAM_SEAM_CLEAR(plan, NULL), USBEAM_SEAM_MISSING)) \
    XV(usbeam_doppler_display_cuda_destroy, (usbeam_doppler_display_cuda *plan), (plan)) \
    X(usbeam_cuda_exec *, usbeam_doppler_display_cuda_exec, (usbeam_doppler_display_cuda *plan), (plan), (NULL)) \
    X(usbeam_status, usbeam_doppler_display_cuda_execute, (usbeam_doppler_display_cuda *plan, const float *velocity, const float *power, float *out_velocity, float *out_power, uint8_t *mask), (plan, velocity, power, out_velocity, out_power, mask), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_doppler_display_cuda_reset, (usbeam_doppler_display_cuda *plan), (plan), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_hadamard_cuda_create, (const usbeam_hadamard_params *params, const int8_t *matrix, size_t base_order, usbeam_hadamard_cuda **plan), (params, matrix, base_order, plan), (USBEAM_SEAM_CLEAR(plan, NULL), USBEAM_SEAM_MISSING)) \
    XV(usbeam_hadamard_cuda_destroy, (usbeam_hadamard_cuda *plan), (plan)) \
    X(usbeam_cuda_exec *, usbeam_hadamard_cuda_exec, (usbeam_hadamard_cuda *plan), (plan), (NULL)) \
    X(usbeam_status, usbeam_hadamard_cuda_execute, (usbeam_hadamard_cuda *plan, const void *in, void *out), (plan, in, out), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_power_cuda_create, (const usbeam_power_params *params, usbeam_power_cuda **plan), (params, plan), (USBEAM_SEAM_CLEAR(plan, NULL), USBEAM_SEAM_MISSING)) \
    XV(usbeam_power_cuda_destroy, (usbeam_power_cuda *plan), (plan)) \
    X(usbeam_cuda_exec *, usbeam_power_cuda_exec, (usbeam_power_cuda *plan), (plan), (NULL)) \
    X(usbeam_status, usbeam_power_cuda_execute, (usbeam_power_cuda *plan, const void *in, float *out), (plan, in, out), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_rca_cuda_create, (const usbeam_rca_tables *tables, usbeam_rca_cuda **plan), (tables, plan), (USBEAM_SEAM_CLEAR(plan, NULL), USBEAM_SEAM_MISSING)) \
    XV(usbeam_rca_cuda_destroy, (usbeam_rca_cuda *plan), (plan)) \
    X(usbeam_cuda_exec *, usbeam_rca_cuda_exec, (usbeam_rca_cuda *plan), (plan), (NULL)) \
    X(usbeam_status, usbeam_rca_cuda_execute, (usbeam_rca_cuda *plan, const void *in, void *out), (plan, in, out), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_rf2iq_cuda_create, (const usbeam_rf2iq_params *params, const usbeam_rf2iq_tables *tables, usbeam_rf2iq_cuda **plan), (params, tables, plan), (USBEAM_SEAM_CLEAR(plan, NULL), USBEAM_SEAM_MISSING)) \
    XV(usbeam_rf2iq_cuda_destroy, (usbeam_rf2iq_cuda *plan), (plan)) \
    X(usbeam_cuda_exec *, usbeam_rf2iq_cuda_exec, (usbeam_rf2iq_cuda *plan), (plan), (NULL)) \
    X(usbeam_status, usbeam_rf2iq_cuda_execute, (usbeam_rf2iq_cuda *plan, const void *in, void *out), (plan, in, out), (USBEAM_SEAM_MISSING)) \
    /* declared in usbeam_internal.h (AI hand-off) */ \
    X(usbeam_status, usbeam_components_cuda_create, (const usbeam_components_params *params, usbeam_components_cuda **plan), (params, plan), (USBEAM_SEAM_CLEAR(plan, NULL), USBEAM_SEAM_MISSING)) \
    XV(usbeam_components_cuda_destroy, (usbeam_components_cuda *plan), (plan)) \
    X(usbeam_cuda_exec *, usbeam_components_cuda_exec, (usbeam_components_cuda *plan), (plan), (NULL)) \
    X(usbeam_status, usbeam_components_cuda_execute, (usbeam_components_cuda *plan, usbeam_components_operation operation, const uint8_t *mask, void *out, int32_t *counts, size_t min_area), (plan, operation, mask, out, counts, min_area), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_detect_cuda_create, (const usbeam_detect_params *params, usbeam_detect_cuda **plan), (params, plan), (USBEAM_SEAM_CLEAR(plan, NULL), USBEAM_SEAM_MISSING)) \
    XV(usbeam_detect_cuda_destroy, (usbeam_detect_cuda *plan), (plan)) \
    X(usbeam_cuda_exec *, usbeam_detect_cuda_exec, (usbeam_detect_cuda *plan), (plan), (NULL)) \
    X(usbeam_status, usbeam_detect_cuda_execute, (usbeam_detect_cuda *plan, const void *raw, void *detections, void *counts), (plan, raw, detections, counts), (USBEAM_SEAM_MISSING)) \
    X(usbeam_status, usbeam_preprocess_cuda_create, (const usbeam_preprocess_params *params, const usbeam_preprocess_tables *tables, usbeam_preprocess_cuda **plan), (params, tables, plan), (USBEAM_SEAM_CLEAR(plan, NULL), USBEAM_SEAM_MISSING)) \
    XV(usbeam_preprocess_cuda_destroy, (usbeam_preprocess_cuda *plan), (plan)) \
    X(usbeam_cuda_exec *, usbeam_preprocess_cuda_exec, (usbeam_preprocess_cuda *plan), (plan), (NULL)) \
    X(usbeam_status, usbeam_preprocess_cuda_execute, (usbeam_preprocess_cuda *plan, const void *in, void *out), (plan, in, out), (USBEAM_SEAM_MISSING))
/* clang-format on */

/* What usbeam._core lends the CUDA module: the per-thread error message lives in _core, so a
 * failure inside a CUDA function reads the same as one in the C library. */
typedef struct usbeam_host_services {
    usbeam_status (*vfail)(usbeam_status status, const char *format, va_list args);
    void *(*alloc)(size_t bytes);
    void (*free)(void *ptr);
} usbeam_host_services;

#define USBEAM_SEAM_MEMBER(ret, name, params, args, fallback) ret(*name) params;
#define USBEAM_SEAM_MEMBER_V(name, params, args) void(*name) params;
typedef struct usbeam_cuda_api {
    const char *signature;                               /* USBEAM_CUDA_SEAM_SIGNATURE of the build */
    int emulated;                                        /* the CPU emulator of cuda/emu, a test build */
    int cuda_runtime_version;                            /* CUDART_VERSION it was compiled with */
    const char *architectures;                           /* the -gencode list it carries */
    void (*connect)(const usbeam_host_services *host);   /* called once, before any entry point */
    USBEAM_CUDA_ENTRY_POINTS(USBEAM_SEAM_MEMBER, USBEAM_SEAM_MEMBER_V)
} usbeam_cuda_api;
#undef USBEAM_SEAM_MEMBER
#undef USBEAM_SEAM_MEMBER_V

#define USBEAM_SEAM_STR2(...) #__VA_ARGS__
#define USBEAM_SEAM_STR(...) USBEAM_SEAM_STR2(__VA_ARGS__)
#define USBEAM_SEAM_SIG(ret, name, params, args, fallback) ret name params;
#define USBEAM_SEAM_SIG_V(name, params, args) void name params;
#define USBEAM_CUDA_SEAM_SIGNATURE USBEAM_SEAM_STR(USBEAM_CUDA_ENTRY_POINTS(USBEAM_SEAM_SIG, USBEAM_SEAM_SIG_V))

/* _core side (csrc/cuda_seam.c). */
/* Record "<function>: the CUDA backend is not available (<reason>)" and return NO_BACKEND. */
usbeam_status usbeam_cuda_missing(const char *function);
/* Install the CUDA module's table (checks its signature; the error names the mismatch). */
usbeam_status usbeam_cuda_install(const usbeam_cuda_api *api);
/* The installed table, or NULL. */
const usbeam_cuda_api *usbeam_cuda_installed(void);
/* Why the backend is absent, as Python found out (one line; copied). */
void usbeam_cuda_set_unavailable(const char *reason);
const char *usbeam_cuda_unavailable_reason(void);

#ifdef __cplusplus
}
#endif
#endif /* USBEAM_CUDA_SEAM_H */
