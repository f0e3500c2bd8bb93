/*
 * clutter_internal.h - what the clutter-filter sources share.  clutter.c (plan, polynomial
 * basis, dispatch) is the top and calls down into the three below it, which never call up:
 * clutter_project.c (the projection kernel, basis orthonormalisation, thread count),
 * clutter_svd.c (Gram matrix, Jacobi, then the projection) and clutter_iir.c (Butterworth
 * design, projection initialisation and the streaming filter).  The algorithms and array
 * layouts are described at the top of clutter.c.
 */
#ifndef USBEAM_CLUTTER_INTERNAL_H
#define USBEAM_CLUTTER_INTERNAL_H

#include "common/interrupt.h"
#include "common/usbeam_internal.h"

#include <complex.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#define CLUTTER_PI 3.14159265358979323846
#define PIXEL_BLOCK 64         /* pixels per inner block: fits the per-thread scratch in L1/L2 */
/* The SVD filter's Gram matrix is summed in this many partial sums, each over a fixed run of
 * pixel blocks, then added in slot order: the same bits whatever the team size (a plan made
 * with 2 threads and run with 1, or a batch worker with a thread limit, gives the same
 * filter), and enough slots to keep 32 threads busy. */
#define GRAM_SLOTS 32
#define IIR_MAX_ORDER 10

/* Hot per-block kernels are built twice on x86-64 Linux with GCC, baseline and x86-64-v3
 * (AVX2 + FMA), and the loader picks the one the CPU runs (function multi-versioning);
 * elsewhere, and under the sanitizers, the baseline only.  Same double arithmetic up to FMA
 * contraction (differences ~1e-16 relative). */
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__)
#define CLUTTER_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define CLUTTER_CLONES
#endif

typedef double complex zdouble;

/* C11's CMPLX where the C library lacks it (glibc defines it for GCC only): a complex is an
 * array of two doubles (C11 6.2.5), so the parts are stored as such, with no I * im product
 * to turn an infinite part into NaN. */
#ifndef CMPLX
static inline zdouble usbeam_cmplx(double re, double im)
{
    union {
        zdouble z;
        double parts[2];
    } u;
    u.parts[0] = re;
    u.parts[1] = im;
    return u.z;
}
#define CMPLX(re, im) usbeam_cmplx((re), (im))
#endif

/* Complex product without the C99 Annex G inf/NaN recovery (__muldc3): the operands here are
 * finite by construction, and the library call dominated the Jacobi sweeps. */
static inline zdouble zmul(zdouble a, zdouble b)
{
    return CMPLX(creal(a) * creal(b) - cimag(a) * cimag(b), creal(a) * cimag(b) + cimag(a) * creal(b));
}

struct usbeam_clutter_plan {
    usbeam_clutter_params params;
    int n_threads;
    /* projection filters (MEAN, POLY, SVD): basis (n_frames x n_basis, column-major by
     * component: basis[k*n_frames + t]) and whether the output keeps (0) or removes (1) it */
    zdouble *basis;
    int n_basis;
    int subtract;
    zdouble *coef;            /* per thread: n_frames * PIXEL_BLOCK (CPU plans only) */
    /* SVD */
    zdouble *gram;            /* n_frames^2 */
    zdouble *gram_partial;    /* per slot (GRAM_SLOTS): (n_frames rounded up to even)^2 */
    double *block_re, *block_im; /* per thread: (n_frames rounded up to even) * PIXEL_BLOCK */
    zdouble *eigvec;          /* n_frames^2, column k = eigenvector k */
    double *eigval;           /* n_frames */
    double *singular_values;  /* n_frames, descending */
    int *order;               /* n_frames: eigen indices by descending eigenvalue */
    int last_low, last_high;
    /* IIR */
    int n_sections;
    int section_order[IIR_MAX_ORDER];   /* 1 or 2 */
    double sos_b[IIR_MAX_ORDER][3], sos_a[IIR_MAX_ORDER][3];
    int n_state;              /* = iir_order */
    double *state;            /* [n_state][2 (re, im)][n_pixels] (CPU plans only: on CUDA, on the device) */
    double *state_next;       /* same: execute writes the new state here, swapped in if the block was finite */
    size_t init_frames;       /* L */
    double *natural_q;        /* L x n_state: orthonormal basis of the natural responses */
    double *state_gain;       /* n_state x L: state correction per unit of zero-state output */
    double *y0;               /* per thread: [2][L][PIXEL_BLOCK] (CPU plans only) */
    int started;              /* 0 until the first execute after create/reset */
    usbeam_clutter_cuda *cuda; /* backend CUDA ('mean', 'poly', 'iir'): the twin in cuda/clutter.cu */
    usbeam_clutter_svd_cuda *svd_cuda; /* backend CUDA, 'svd': the twin in cuda/clutter_svd.cu */
};


static inline int clutter_thread_id(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* clutter_project.c.  OpenMP's maximum team size (1 without OpenMP): the plan sizes its
 * per-thread scratch by it. */
int clutter_max_threads(void);
/* Modified Gram-Schmidt, twice, on the m columns of a (n x m, column-major); -1 when a column
 * is numerically dependent. */
int clutter_orthonormalise(double *a, size_t n, int m);
/* The pixel-block loops below poll interrupt (common/interrupt.h) and skip the rest of their
 * blocks once it is stopped; the caller (usbeam_clutter_execute) then fills out with NaN and
 * commits no IIR state. */
/* out = in - C B B^H (p->subtract) or C B B^H, with B = p->basis (n_frames x p->n_basis).
 * Returns 1 when a coefficient of component 0 was NaN or inf (polynomial bases: a non-finite
 * sample); out is then partly written. */
int clutter_apply_projection(usbeam_clutter_plan *p, const float *in, float *out, usbeam_interrupt *interrupt);
/* clutter_svd.c.  SVD filter: Gram matrix, eigen-decomposition, cut-offs, then the projection. */
/* USBEAM_ERR_INVALID_ARGUMENT when the ensemble holds NaN or inf (out untouched). */
usbeam_status clutter_svd_filter(usbeam_clutter_plan *p, const float *in, float *out, usbeam_interrupt *interrupt);
/* clutter_iir.c.  IIR: section coefficients from the parameters; projection-initialisation tables. */
void clutter_iir_design(usbeam_clutter_plan *p);
usbeam_status clutter_iir_prepare_projection(usbeam_clutter_plan *p);
/* Filters one block from p->state into p->state_next (the caller swaps them); returns 1 when
 * a sample was NaN or inf (out is then partly written, p->state untouched). */
int clutter_iir_filter(usbeam_clutter_plan *p, const float *in, float *out, usbeam_interrupt *interrupt);

#endif
