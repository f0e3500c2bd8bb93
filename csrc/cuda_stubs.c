/*
 * cuda_stubs.c - the CUDA entry points of a build without nvcc (USBEAM_HAVE_CUDA undefined):
 * every one fails with USBEAM_ERR_NO_BACKEND and a message saying why, so the CPU-only
 * library links, and asking for the CUDA backend is an error, never a crash.
 * With CUDA the same functions live in cuda/memory.cu, cuda/exec.cu and cuda/<family>.cu.
 */
#include "usbeam_internal.h"

#ifndef USBEAM_HAVE_CUDA

static usbeam_status no_cuda(const char *what)
{
    return usbeam_fail(USBEAM_ERR_NO_BACKEND, "%s: usbeam was built without CUDA (no nvcc at build time)", what);
}

usbeam_status usbeam_device_malloc(int device, size_t bytes, void **ptr)
{
    (void)device;
    (void)bytes;
    if (ptr) *ptr = NULL;
    return no_cuda("device_malloc");
}
usbeam_status usbeam_device_free(void *ptr) { return ptr ? no_cuda("device_free") : USBEAM_OK; }
usbeam_status usbeam_pinned_malloc(size_t bytes, void **ptr)
{
    (void)bytes;
    if (ptr) *ptr = NULL;
    return no_cuda("pinned_malloc");
}
usbeam_status usbeam_pinned_free(void *ptr) { return ptr ? no_cuda("pinned_free") : USBEAM_OK; }
usbeam_status usbeam_copy_to_device(void *dst, const void *src, size_t bytes, void *stream)
{
    (void)dst, (void)src, (void)bytes, (void)stream;
    return no_cuda("copy_to_device");
}
usbeam_status usbeam_copy_to_host(void *dst, const void *src, size_t bytes, void *stream)
{
    (void)dst, (void)src, (void)bytes, (void)stream;
    return no_cuda("copy_to_host");
}
usbeam_status usbeam_copy_device(void *dst, const void *src, size_t bytes, void *stream)
{
    (void)dst, (void)src, (void)bytes, (void)stream;
    return no_cuda("copy_device");
}
usbeam_status usbeam_cuda_d2d_bandwidth(int device, size_t bytes, int repeats, double *gbps)
{
    (void)device, (void)bytes, (void)repeats;
    if (gbps) *gbps = 0.0;
    return no_cuda("d2d_bandwidth");
}
usbeam_status usbeam_stream_wait(void *consumer, void *producer)
{
    (void)consumer, (void)producer;
    return no_cuda("stream_wait");
}
usbeam_status usbeam_pointer_device(const void *ptr, int *device)
{
    (void)ptr;
    if (device) *device = -1;
    return no_cuda("pointer_device");
}
usbeam_status usbeam_stream_synchronize(void *stream)
{
    (void)stream;
    return no_cuda("stream_synchronize");
}
usbeam_status usbeam_event_record(void **event, void *stream)
{
    (void)event, (void)stream;
    return no_cuda("event_record");
}
usbeam_status usbeam_event_wait_destroy(void *event) { return event ? no_cuda("event_wait_destroy") : USBEAM_OK; }
usbeam_status usbeam_device_alloc(int device, size_t bytes, void *stream, void **ptr, int *pooled)
{
    (void)device, (void)bytes, (void)stream;
    if (ptr) *ptr = NULL;
    if (pooled) *pooled = 0;
    return no_cuda("device_alloc");
}
usbeam_status usbeam_device_free_after(int device, void *ptr, void *event, int after_legacy)
{
    (void)device, (void)event, (void)after_legacy;
    return ptr ? no_cuda("device_free_after") : USBEAM_OK;
}
usbeam_status usbeam_event_query(void *event, int *complete)
{
    if (complete) *complete = 1;
    return event ? no_cuda("event_query") : USBEAM_OK;
}
void usbeam_event_destroy(void *event) { (void)event; }
usbeam_status usbeam_stream_query(void *stream, int *idle)
{
    (void)stream;
    if (idle) *idle = 1;
    return no_cuda("stream_query");
}
usbeam_status usbeam_stream_capturing(void *stream, int *capturing)
{
    (void)stream;
    if (capturing) *capturing = 0;
    return no_cuda("stream_capturing");
}
usbeam_status usbeam_graph_capture_begin(void *stream)
{
    (void)stream;
    return no_cuda("graph_capture_begin");
}
usbeam_status usbeam_graph_capture_end(void *stream, void **graph_exec)
{
    (void)stream;
    if (graph_exec) *graph_exec = NULL;
    return no_cuda("graph_capture_end");
}
void usbeam_graph_capture_abort(void *stream) { (void)stream; }
usbeam_status usbeam_graph_launch(void *graph_exec, void *stream)
{
    (void)graph_exec, (void)stream;
    return no_cuda("graph_launch");
}
void usbeam_graph_destroy(void *graph_exec) { (void)graph_exec; }

usbeam_status usbeam_cuda_exec_set_stream(usbeam_cuda_exec *exec, void *stream)
{
    (void)exec, (void)stream;
    return no_cuda("set_stream");
}
void *usbeam_cuda_exec_stream(const usbeam_cuda_exec *exec)
{
    (void)exec;
    return NULL;
}
int usbeam_cuda_exec_device(const usbeam_cuda_exec *exec)
{
    (void)exec;
    return -1;
}
usbeam_status usbeam_cuda_exec_timings(usbeam_cuda_exec *exec, size_t capacity, const char **names, float *ms,
                                       size_t *n_stages)
{
    (void)exec, (void)capacity, (void)names, (void)ms;
    if (n_stages) *n_stages = 0;
    return no_cuda("timings");
}
size_t usbeam_cuda_exec_device_bytes(const usbeam_cuda_exec *exec)
{
    (void)exec;
    return 0;
}
unsigned usbeam_cuda_exec_take_input_faults(usbeam_cuda_exec *exec)
{
    (void)exec;
    return 0u;
}

usbeam_status usbeam_bmode_cuda_create(const usbeam_bmode_params *params, usbeam_bmode_cuda **plan)
{
    (void)params;
    if (plan) *plan = NULL;
    return no_cuda("backend: bmode on CUDA");
}
usbeam_status usbeam_bmode_cuda_execute(usbeam_bmode_cuda *plan, const void *in, void *out)
{
    (void)plan, (void)in, (void)out;
    return no_cuda("bmode execute on CUDA");
}
void usbeam_bmode_cuda_destroy(usbeam_bmode_cuda *plan) { (void)plan; }
usbeam_cuda_exec *usbeam_bmode_cuda_exec(usbeam_bmode_cuda *plan)
{
    (void)plan;
    return NULL;
}

usbeam_status usbeam_color_cuda_create(const usbeam_color_params *params, const double *window_z,
                                       const double *window_x, double nyquist, usbeam_color_cuda **plan)
{
    (void)params, (void)window_z, (void)window_x, (void)nyquist;
    if (plan) *plan = NULL;
    return no_cuda("backend: color Doppler on CUDA");
}
usbeam_status usbeam_color_cuda_execute(usbeam_color_cuda *plan, const void *in, float *velocity, float *variance,
                                        float *power)
{
    (void)plan, (void)in, (void)velocity, (void)variance, (void)power;
    return no_cuda("color Doppler execute on CUDA");
}
void usbeam_color_cuda_destroy(usbeam_color_cuda *plan) { (void)plan; }
usbeam_cuda_exec *usbeam_color_cuda_exec(usbeam_color_cuda *plan)
{
    (void)plan;
    return NULL;
}
usbeam_status usbeam_power_cuda_create(const usbeam_power_params *params, usbeam_power_cuda **plan)
{
    (void)params;
    if (plan) *plan = NULL;
    return no_cuda("backend: power Doppler on CUDA");
}
usbeam_status usbeam_power_cuda_execute(usbeam_power_cuda *plan, const void *in, float *out)
{
    (void)plan, (void)in, (void)out;
    return no_cuda("power Doppler execute on CUDA");
}
void usbeam_power_cuda_destroy(usbeam_power_cuda *plan) { (void)plan; }
usbeam_cuda_exec *usbeam_power_cuda_exec(usbeam_power_cuda *plan)
{
    (void)plan;
    return NULL;
}
usbeam_status usbeam_doppler_display_cuda_create(const usbeam_doppler_display_params *params,
                                                 usbeam_doppler_display_cuda **plan)
{
    (void)params;
    if (plan) *plan = NULL;
    return no_cuda("backend: Doppler display on CUDA");
}
usbeam_status usbeam_doppler_display_cuda_execute(usbeam_doppler_display_cuda *plan, const float *velocity,
                                                  const float *power, float *out_velocity, float *out_power,
                                                  uint8_t *mask)
{
    (void)plan, (void)velocity, (void)power, (void)out_velocity, (void)out_power, (void)mask;
    return no_cuda("Doppler display execute on CUDA");
}
usbeam_status usbeam_doppler_display_cuda_reset(usbeam_doppler_display_cuda *plan)
{
    (void)plan;
    return no_cuda("Doppler display reset on CUDA");
}
void usbeam_doppler_display_cuda_destroy(usbeam_doppler_display_cuda *plan) { (void)plan; }
usbeam_cuda_exec *usbeam_doppler_display_cuda_exec(usbeam_doppler_display_cuda *plan)
{
    (void)plan;
    return NULL;
}
usbeam_status usbeam_clutter_cuda_create(const usbeam_clutter_params *params, const double *basis, int n_basis,
                                         usbeam_clutter_cuda **plan)
{
    (void)params, (void)basis, (void)n_basis;
    if (plan) *plan = NULL;
    return no_cuda("backend: clutter filter on CUDA");
}
usbeam_status usbeam_clutter_cuda_execute(usbeam_clutter_cuda *plan, const void *in, void *out)
{
    (void)plan, (void)in, (void)out;
    return no_cuda("clutter filter execute on CUDA");
}
void usbeam_clutter_cuda_destroy(usbeam_clutter_cuda *plan) { (void)plan; }
usbeam_status usbeam_clutter_cuda_create_iir(const usbeam_clutter_params *params, int n_sections,
                                             const int *section_order, const double *sos_b, const double *sos_a,
                                             int n_state, size_t init_frames, const double *natural_q,
                                             const double *state_gain, usbeam_clutter_cuda **plan)
{
    (void)params, (void)n_sections, (void)section_order, (void)sos_b, (void)sos_a, (void)n_state;
    (void)init_frames, (void)natural_q, (void)state_gain;
    if (plan) *plan = NULL;
    return no_cuda("backend: clutter filter on CUDA");
}
usbeam_status usbeam_clutter_cuda_reset(usbeam_clutter_cuda *plan)
{
    (void)plan;
    return no_cuda("clutter reset on CUDA");
}
usbeam_cuda_exec *usbeam_clutter_cuda_exec(usbeam_clutter_cuda *plan)
{
    (void)plan;
    return NULL;
}
usbeam_status usbeam_clutter_svd_cuda_create(const usbeam_clutter_params *params, usbeam_clutter_svd_cuda **plan)
{
    (void)params;
    if (plan) *plan = NULL;
    return no_cuda("backend: SVD clutter filter on CUDA");
}
usbeam_status usbeam_clutter_svd_cuda_execute(usbeam_clutter_svd_cuda *plan, const void *in, void *out)
{
    (void)plan, (void)in, (void)out;
    return no_cuda("SVD clutter filter execute on CUDA");
}
usbeam_status usbeam_clutter_svd_cuda_info(usbeam_clutter_svd_cuda *plan, double *singular_values, int *low,
                                           int *high)
{
    (void)plan, (void)singular_values, (void)low, (void)high;
    return no_cuda("SVD clutter filter info on CUDA");
}
void usbeam_clutter_svd_cuda_destroy(usbeam_clutter_svd_cuda *plan) { (void)plan; }
usbeam_cuda_exec *usbeam_clutter_svd_cuda_exec(usbeam_clutter_svd_cuda *plan)
{
    (void)plan;
    return NULL;
}

usbeam_status usbeam_rf2iq_cuda_create(const usbeam_rf2iq_params *params, const usbeam_rf2iq_tables *tables,
                                       usbeam_rf2iq_cuda **plan)
{
    (void)params, (void)tables;
    if (plan) *plan = NULL;
    return no_cuda("backend: rf2iq on CUDA");
}
usbeam_status usbeam_rf2iq_cuda_execute(usbeam_rf2iq_cuda *plan, const void *in, void *out)
{
    (void)plan, (void)in, (void)out;
    return no_cuda("rf2iq execute on CUDA");
}
void usbeam_rf2iq_cuda_destroy(usbeam_rf2iq_cuda *plan) { (void)plan; }
usbeam_cuda_exec *usbeam_rf2iq_cuda_exec(usbeam_rf2iq_cuda *plan)
{
    (void)plan;
    return NULL;
}

usbeam_status usbeam_das_cuda_create(const struct usbeam_das_plan *plan, usbeam_das_cuda **cuda)
{
    (void)plan;
    if (cuda) *cuda = NULL;
    return no_cuda("backend: das on CUDA");
}
usbeam_status usbeam_das_cuda_execute(usbeam_das_cuda *plan, const void *in, void *out)
{
    (void)plan, (void)in, (void)out;
    return no_cuda("das execute on CUDA");
}
void usbeam_das_cuda_destroy(usbeam_das_cuda *plan) { (void)plan; }
usbeam_cuda_exec *usbeam_das_cuda_exec(usbeam_das_cuda *plan)
{
    (void)plan;
    return NULL;
}

usbeam_status usbeam_hadamard_cuda_create(const usbeam_hadamard_params *params, const int8_t *matrix,
                                          size_t base_order, usbeam_hadamard_cuda **plan)
{
    (void)params, (void)matrix, (void)base_order;
    if (plan) *plan = NULL;
    return no_cuda("backend: hadamard on CUDA");
}
usbeam_status usbeam_hadamard_cuda_execute(usbeam_hadamard_cuda *plan, const void *in, void *out)
{
    (void)plan, (void)in, (void)out;
    return no_cuda("hadamard execute on CUDA");
}
void usbeam_hadamard_cuda_destroy(usbeam_hadamard_cuda *plan) { (void)plan; }
usbeam_cuda_exec *usbeam_hadamard_cuda_exec(usbeam_hadamard_cuda *plan)
{
    (void)plan;
    return NULL;
}

usbeam_status usbeam_rca_cuda_create(const usbeam_rca_tables *tables, usbeam_rca_cuda **plan)
{
    (void)tables;
    if (plan) *plan = NULL;
    return no_cuda("backend: rca on CUDA");
}
usbeam_status usbeam_rca_cuda_execute(usbeam_rca_cuda *plan, const void *in, void *out)
{
    (void)plan, (void)in, (void)out;
    return no_cuda("rca execute on CUDA");
}
void usbeam_rca_cuda_destroy(usbeam_rca_cuda *plan) { (void)plan; }
usbeam_cuda_exec *usbeam_rca_cuda_exec(usbeam_rca_cuda *plan)
{
    (void)plan;
    return NULL;
}

#else
/* ISO C forbids an empty translation unit. */
typedef int usbeam_cuda_stubs_unused;
#endif
