/*
 * usbeam/acquire.h - stage 0, frames in: the live channel gather and Hadamard decode.
 *
 * RF -> [acquire] -> demod -> beamform -> bmode | doppler -> ai
 */
#ifndef USBEAM_ACQUIRE_H
#define USBEAM_ACQUIRE_H

#include "usbeam/core.h"
#include "usbeam/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Channel mapping of live frames, applied while a raw frame is copied into a session
 * slot, so only used channels travel on.
 * raw : one acquisition frame as the scanner holds it, MATLAB shape (n_rows, n_channels),
 *       n_rows = samples x acquisitions; any element strides (column-major Vantage RcvData:
 *       row_stride 1, channel_stride n_rows).
 * out : [n_acquisitions][n_elements][n_samples] C order: out[a][e][k] =
 *       raw[acquisition_row[a] + k][element_channel[e]].                                   */
typedef struct usbeam_live_gather_params {
    size_t n_rows, n_channels;          /* raw frame geometry */
    size_t n_acquisitions, n_elements, n_samples;
    const int32_t *element_channel;     /* [n_elements] 0-based channel of each element */
    const int64_t *acquisition_row;     /* [n_acquisitions] 0-based first raw row */
    usbeam_dtype dtype;                 /* INT16, FLOAT32 or FLOAT64; out has the same type */
} usbeam_live_gather_params;

typedef struct usbeam_live_gather_plan usbeam_live_gather_plan;
usbeam_status usbeam_live_gather_plan_create(const usbeam_live_gather_params *params,
                                             usbeam_live_gather_plan **plan);
/* row_stride, channel_stride: element strides of raw.  The plan has no scratch: one plan
 * may execute from several threads at once. */
usbeam_status usbeam_live_gather_execute(const usbeam_live_gather_plan *plan, const void *raw,
                                         ptrdiff_t row_stride, ptrdiff_t channel_stride, void *out);
void usbeam_live_gather_plan_destroy(usbeam_live_gather_plan *plan);

/* Hadamard aperture-encoding matrices and decoding along the transmit axis.
 * Orders: 2^k, 12*2^k, 20*2^k, at most USBEAM_HADAMARD_MAX_ORDER (1 is the trivial [1]).
 * The matrix of each order (the contract between scanner and decoder): entries +-1,
 * H H^T = n I, built as S_{2^k} (x) B where S is the natural-order Sylvester matrix
 * (S_{2m} = [[S, S], [S, -S]]) and B is [1], the Paley I matrix of q = 11 (n = 12) or of
 * q = 19 (n = 20): B = I + [[0, 1^T], [-1, Q]], Q[i][j] = chi(j - i), chi the quadratic
 * character mod q.  Transmit t fires element e with polarity H[t][e]; decoding is
 * out[e] = (1/n) sum_t H[t][e] in[t]. */
#define USBEAM_HADAMARD_MAX_ORDER 256

/* 1 when order has a Hadamard matrix in usbeam, else 0. */
int usbeam_hadamard_order_supported(size_t order);
/* Fill matrix[order*order] (row-major, row = transmit, column = element) with +-1. */
usbeam_status usbeam_hadamard_matrix(size_t order, int8_t *matrix);

typedef enum usbeam_hadamard_algorithm {
    USBEAM_HADAMARD_DIRECT = 0, /* dense (1/n) H^T x, O(n^2) per sample, any matrix */
    USBEAM_HADAMARD_FAST = 1,   /* butterflies over the Sylvester factor, O(n log n) for 2^k;
                                   only for the matrices of usbeam_hadamard_matrix */
    USBEAM_HADAMARD_GEMM = 2    /* CUDA backend only: cuBLAS SGEMM (full FP32, never TF32) on a
                                   float32 copy of int16 or float32 data (cuda/hadamard.cu) */
} usbeam_hadamard_algorithm;

typedef struct usbeam_hadamard_params {
    size_t order;            /* n: length of the transmit axis */
    const int8_t *matrix;    /* NULL: usbeam_hadamard_matrix(order); else n*n entries +-1 with
                                H H^T = n I (copied by plan_create) */
    size_t n_outer;          /* product of the dimensions before the transmit axis (>= 1) */
    size_t n_inner;          /* product of the dimensions after it (>= 1) */
    usbeam_dtype in_dtype;   /* INT16, INT32 or FLOAT32 */
    usbeam_dtype out_dtype;  /* FLOAT32, or INT32 for integer input (rounded to nearest,
                                ties away from zero; exact for encoded integer data) */
    usbeam_hadamard_algorithm algorithm;
    int transmit_last;       /* 0: out has the layout of in, (outer, n, inner);
                                1: out is (outer, inner, n): the decoded values of one
                                sample are contiguous */
} usbeam_hadamard_params;

typedef struct usbeam_hadamard_plan usbeam_hadamard_plan;
usbeam_status usbeam_hadamard_plan_create(const usbeam_hadamard_params *params, usbeam_backend backend,
                                          usbeam_hadamard_plan **plan);
/* in: in_dtype[n_outer][order][n_inner]; out: out_dtype, layout per transmit_last. */
usbeam_status usbeam_hadamard_execute(usbeam_hadamard_plan *plan, const void *in, void *out);
void usbeam_hadamard_plan_destroy(usbeam_hadamard_plan *plan);

/* The CUDA execution state of a plan (NULL for a CPU plan): usbeam/device.h. */
struct usbeam_hadamard_plan;
usbeam_cuda_exec *usbeam_hadamard_plan_cuda(struct usbeam_hadamard_plan *plan);

#ifdef __cplusplus
}
#endif
#endif /* USBEAM_ACQUIRE_H */
