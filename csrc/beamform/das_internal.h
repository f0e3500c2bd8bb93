/*
 * das_internal.h - the DAS plan as the family's files share it (not part of the public
 * contract): das_setup.c (validation, plan create/destroy, transmit times, apertures,
 * table), das_delays.c (per-point delays and weights), das.c (execute).
 *
 * Entries: for point p, transmit t and element e of p's receive aperture (a contiguous
 * range [aperture_first[p], aperture_first[p] + aperture_count[p])), one entry holds the
 * first interpolation tap (a sample index, int32) and `weight_stride` float weights:
 * `taps` real weights (RF) or `taps` (re, im) pairs (IQ) in which the window and the IQ
 * phase rotation are already folded.  Out-of-range samples have zero weights and tap 0.
 * Entries of point p are ordered (transmit, element) and start at entry_offset[p].
 *
 * A CUDA plan (cuda != NULL) allocates only the geometry, transmit models and apertures its
 * twin uploads (handed over as a usbeam_das_tables, so cuda/das.cu never includes this
 * header), and frees them once the twin is created: after plan creation every pointer
 * below is NULL (nothing marked "CPU only" is ever allocated: no staging buffer, no transmit
 * times, no entries, no table or scratch).
 */
#ifndef USBEAM_DAS_INTERNAL_H
#define USBEAM_DAS_INTERNAL_H

#include "common/usbeam_internal.h"
#include "common/usbeam_math.h"

#define USBEAM_DAS_POINT_TILE 64 /* points per output tile in execute */

struct usbeam_das_plan {
    usbeam_das_params params;   /* scalars only: the pointers below are the plan's copies */
    double *element_x, *element_y, *element_z; /* (n_elements) each */
    double *points;             /* (n_points, 3) */
    usbeam_tx_model *tx;        /* (n_transmits) */
    double *tx_sources;         /* virtual sources of all SOURCES transmits, concatenated (3, n)
                                   blocks, each sorted by x */
    float *tx_sources_f;        /* the same in float, for the fast first pass of the min (CPU only) */
    double *tx_source_bounds;   /* (n_transmits, 3): min offset, min z, max z of its sources (CPU only) */
    int is_iq;
    int taps;                   /* interpolation taps per entry */
    int weight_stride;          /* floats per entry: taps (RF) or 2 taps (IQ) */
    double window_center, window_half_width; /* full aperture (f_number = 0) window mapping, m */
    int general;                /* 1: apertures from element normals (convex, matrix, any line
                                   that is not x strictly increasing with normals +z) */
    double *element_frame;      /* general: (9, n_elements) rows t1x t1y t1z t2x t2y t2z nx ny nz
                                   (usbeam_element_frame), so loops over elements vectorise */
    double *element_window;     /* general: (n_elements) full-aperture window (f_number = 0) */

    double *tx_time;            /* (n_points, n_transmits) transmit times, s (CPU only) */
    int32_t *aperture_first;    /* (n_points) */
    int32_t *aperture_count;    /* (n_points) */
    size_t *entry_offset;       /* (n_points + 1) (CPU only) */
    size_t n_entries;

    int has_table;              /* 1: entries precomputed; 0: computed per point in execute */
    int32_t *table_tap;         /* (n_entries) */
    float *table_weight;        /* (n_entries, weight_stride) */

    int n_threads;
    size_t thread_entries;      /* entries of one point at most (n_transmits * max count) */
    int32_t *thread_tap;        /* (n_threads, thread_entries), on-the-fly mode only */
    float *thread_weight;       /* (n_threads, thread_entries, weight_stride) */
    float *tile;                /* (n_threads, re/im, USBEAM_DAS_POINT_TILE, n_frames) output tiles */

    size_t stage_plane;         /* floats in one staged plane: n_tx * n_el * n_samples * capacity */
    float *stage;               /* (re plane, im plane if IQ): (transmit, element, sample, frame),
                                   frame the fastest, for the n_frames of the current call (CPU only) */
    usbeam_das_cuda *cuda;      /* USBEAM_BACKEND_CUDA: the twin in cuda/das.cu (owns the device geometry) */
};

/* Entries of point p into tap[] / weight[] (the layouts above); das_delays.c. */
void usbeam_das_point_entries(const usbeam_das_plan *plan, size_t p, int32_t *tap, float *weight);
/* Transmit time (s) of transmit t at point pt (x, y, z); das_delays.c. */
double usbeam_das_transmit_time(const usbeam_das_plan *plan, size_t t, const double *pt);

#endif
