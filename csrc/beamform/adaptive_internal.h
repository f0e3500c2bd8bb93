/*
 * adaptive_internal.h - the adaptive beamformers' plan (csrc/beamform/adaptive.c; not part of
 * the public contract).  It holds a CPU DAS plan for the geometry and apertures, the DAS
 * whole entries of every point (das_internal.h, usbeam_das_entry_table) when they fit the
 * budget, the F-DMAS filter and per-thread scratch.  A CUDA plan keeps only `cuda` (the twin
 * in cuda/adaptive.cu owns device copies of the table) and the filter design.
 */
#ifndef USBEAM_ADAPTIVE_INTERNAL_H
#define USBEAM_ADAPTIVE_INTERNAL_H

#include "beamform/adaptive_math.h"
#include "beamform/das_internal.h"

struct usbeam_adaptive_plan {
    usbeam_adaptive_params params;  /* scalars; das pointers NULL (the DAS plan has the copies) */
    usbeam_das_plan *das;           /* CPU plan of one frame: apertures and entries (NULL for CUDA) */
    int kind, is_iq;                /* USBEAM_ADAPTIVE_INT16/FLOAT32/COMPLEX64, IQ input */
    int n_offsets, centre;          /* 2K + 1 sample offsets, K */
    int widest, widest_subarray;    /* largest aperture and MV subarray over the points */
    double *fir_design;             /* F-DMAS g[k], k = -K..K: (re[n_offsets], im[n_offsets]) */
    double *fir_re, *fir_im;        /* the same reversed (multiplies offset o), NULL unless F-DMAS */
    int n_threads;
    size_t thread_values;           /* complex doubles of scratch per thread */
    usbeam_adaptive_cplx *scratch;  /* (n_threads, thread_values) */
    usbeam_das_entry_table entries; /* offsets, and tap / weight when within max_table_bytes */
    int32_t *thread_tap;            /* (n_threads, das->max_point_entries) without a table */
    float *thread_weight;           /* (n_threads, das->max_point_entries, weight_stride) */
    usbeam_adaptive_cuda *cuda;     /* USBEAM_BACKEND_CUDA: the twin */
};

#endif
