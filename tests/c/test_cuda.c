/*
 * test_cuda.c - the CUDA entry points of the C API in the build `make ctest` makes (the C core
 * without the CUDA module: csrc/cuda_seam.c with no table installed): every one answers
 * USBEAM_ERR_NO_BACKEND with a message,
 * NULL frees are no-ops, and asking a family for the CUDA backend fails cleanly without
 * leaving a plan behind.  (With CUDA the same API is exercised from Python on a GPU:
 * tests/test_cuda_*.py.)  Prints "N passed, N failed".
 */
#include "usbeam.h"

#include <stdio.h>
#include <string.h>

#include "check.h"

static int says_no_cuda(usbeam_status st)
{
    return st == USBEAM_ERR_NO_BACKEND && strstr(usbeam_last_error(), "without CUDA") != NULL;
}

static void test_memory_and_streams(void)
{
    void *ptr = &ptr;
    char host[16] = {0};
    CHECK(says_no_cuda(usbeam_device_malloc(0, 64, &ptr)));
    CHECK(ptr == NULL);
    ptr = &ptr;
    CHECK(says_no_cuda(usbeam_pinned_malloc(64, &ptr)));
    CHECK(ptr == NULL);
    CHECK(usbeam_device_free(NULL) == USBEAM_OK);
    CHECK(usbeam_pinned_free(NULL) == USBEAM_OK);
    CHECK(usbeam_event_wait_destroy(NULL) == USBEAM_OK);
    CHECK(says_no_cuda(usbeam_copy_to_device(host, host, sizeof host, NULL)));
    CHECK(says_no_cuda(usbeam_copy_to_host(host, host, sizeof host, NULL)));
    CHECK(says_no_cuda(usbeam_copy_device(host, host, sizeof host, NULL)));
    CHECK(says_no_cuda(usbeam_stream_wait(NULL, NULL)));
    CHECK(says_no_cuda(usbeam_stream_synchronize(NULL)));
    int device = 7;
    CHECK(says_no_cuda(usbeam_pointer_device(host, &device)));
    CHECK(device == -1);
    size_t n = 3;
    CHECK(says_no_cuda(usbeam_cuda_exec_timings(NULL, 0, NULL, NULL, &n)));
    CHECK(n == 0);
    CHECK(usbeam_cuda_exec_stream(NULL) == NULL && usbeam_cuda_exec_device(NULL) == -1);
    CHECK(usbeam_cuda_exec_device_bytes(NULL) == 0);
}

static void test_family_dispatch(void)
{
    usbeam_bmode_plan *bmode = (usbeam_bmode_plan *)&passed;
    usbeam_bmode_params bp = {.n_values = 8, .n_images = 1, .dynamic_range_db = 40.0};
    CHECK(says_no_cuda(usbeam_bmode_plan_create(&bp, USBEAM_BACKEND_CUDA, &bmode)));
    CHECK(bmode == NULL);
    CHECK(usbeam_bmode_plan_create(&bp, (usbeam_backend)7, &bmode) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "backend") != NULL);
    /* a CPU plan has no CUDA state */
    CHECK(usbeam_bmode_plan_create(&bp, USBEAM_BACKEND_CPU, &bmode) == USBEAM_OK);
    CHECK(usbeam_bmode_plan_cuda(bmode) == NULL);
    usbeam_bmode_plan_destroy(bmode);

    usbeam_rf2iq_plan *rf2iq = NULL;
    usbeam_rf2iq_params rp = {.n_lines = 2, .n_samples = 64, .input_dtype = USBEAM_DTYPE_FLOAT32, .fs = 20e6,
                              .fc = 5e6, .filter = USBEAM_RF2IQ_BUTTER, .order = 5, .wn = 0.3, .decimation = 1};
    CHECK(says_no_cuda(usbeam_rf2iq_plan_create(&rp, USBEAM_BACKEND_CUDA, &rf2iq)));
    CHECK(rf2iq == NULL);
    CHECK(usbeam_rf2iq_plan_create(&rp, USBEAM_BACKEND_CPU, &rf2iq) == USBEAM_OK);
    CHECK(usbeam_rf2iq_plan_cuda(rf2iq) == NULL);
    usbeam_rf2iq_plan_destroy(rf2iq);
    CHECK(usbeam_bmode_plan_cuda(NULL) == NULL && usbeam_rf2iq_plan_cuda(NULL) == NULL);

    const double elements[6] = {-1e-4, 0.0, 0.0, 1e-4, 0.0, 0.0}, point[3] = {0.0, 0.0, 5e-3};
    const usbeam_transmit plane = {.kind = USBEAM_TRANSMIT_PLANE_WAVE};
    usbeam_das_params dp = {.n_elements = 2, .element_positions = elements, .n_transmits = 1, .transmits = &plane,
                            .n_points = 1, .points = point, .n_frames = 1, .n_samples = 64, .fs = 20e6, .fc = 5e6,
                            .c = 1540.0, .interpolation = USBEAM_DAS_LINEAR, .input_dtype = USBEAM_DTYPE_COMPLEX64};
    usbeam_das_plan *das = (usbeam_das_plan *)&passed;
    CHECK(says_no_cuda(usbeam_das_plan_create(&dp, USBEAM_BACKEND_CUDA, &das)));
    CHECK(das == NULL);
    CHECK(usbeam_das_plan_create(&dp, USBEAM_BACKEND_CPU, &das) == USBEAM_OK);
    CHECK(usbeam_das_plan_cuda(das) == NULL);
    usbeam_das_plan_destroy(das);
    CHECK(usbeam_das_plan_cuda(NULL) == NULL);

    usbeam_hadamard_params hp = {.order = 8, .n_outer = 2, .n_inner = 3, .in_dtype = USBEAM_DTYPE_INT16,
                                 .out_dtype = USBEAM_DTYPE_FLOAT32, .algorithm = USBEAM_HADAMARD_FAST};
    usbeam_hadamard_plan *hadamard = (usbeam_hadamard_plan *)&passed;
    CHECK(says_no_cuda(usbeam_hadamard_plan_create(&hp, USBEAM_BACKEND_CUDA, &hadamard)));
    CHECK(hadamard == NULL);
    hp.algorithm = USBEAM_HADAMARD_GEMM; /* cuBLAS: CUDA only, refused on the CPU */
    CHECK(usbeam_hadamard_plan_create(&hp, USBEAM_BACKEND_CPU, &hadamard) == USBEAM_ERR_UNSUPPORTED);
    CHECK(strstr(usbeam_last_error(), "gemm") != NULL);
    hp.algorithm = USBEAM_HADAMARD_DIRECT;
    CHECK(usbeam_hadamard_plan_create(&hp, USBEAM_BACKEND_CPU, &hadamard) == USBEAM_OK);
    CHECK(usbeam_hadamard_plan_cuda(hadamard) == NULL);
    usbeam_hadamard_plan_destroy(hadamard);
    CHECK(usbeam_hadamard_plan_cuda(NULL) == NULL);

    usbeam_rca_params cp;
    memset(&cp, 0, sizeof cp);
    cp.method = USBEAM_RCA_FORCES;
    cp.n_columns = cp.n_rows = cp.n_acquisitions = cp.n_channels = 4;
    cp.pitch_x = cp.pitch_y = 3e-4;
    for (int i = 0; i < 4; ++i) cp.world_to_array[5 * i] = cp.voxel_to_world[5 * i] = 1.0;
    cp.n_frames = 1;
    cp.n_samples = 64;
    cp.fs = 20e6;
    cp.c = 1540.0;
    cp.interpolation = 1;
    cp.n_i = cp.n_j = cp.n_k = 1;
    usbeam_rca_plan *rca = (usbeam_rca_plan *)&passed;
    CHECK(says_no_cuda(usbeam_rca_plan_create(&cp, USBEAM_BACKEND_CUDA, &rca)));
    CHECK(rca == NULL);
    CHECK(usbeam_rca_plan_create(&cp, USBEAM_BACKEND_CPU, &rca) == USBEAM_OK);
    CHECK(usbeam_rca_plan_cuda(rca) == NULL);
    usbeam_rca_plan_destroy(rca);
    CHECK(usbeam_rca_plan_cuda(NULL) == NULL);

    double gbps = 1.0;
    CHECK(says_no_cuda(usbeam_cuda_d2d_bandwidth(0, 1024, 3, &gbps)));
    CHECK(gbps == 0.0);
}

int main(void)
{
    if (usbeam_built_with_cuda()) {
        printf("0 passed, 0 failed (built with CUDA: these checks are for the CPU-only build)\n");
        return 0;
    }
    test_memory_and_streams();
    test_family_dispatch();
    return check_summary();
}
