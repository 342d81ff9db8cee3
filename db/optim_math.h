/*
 * optim_math.h - the per-row optimizer rules, one function per optimizer.
 *
 * Update walks thousands of rows with the same optimizer, so the kind is
 * dispatched once by the caller and each per-row function is a plain loop
 * over the columns that the compiler can vectorize.  The per-Update
 * scalars (bias corrections, decayed rates) are computed once per Update
 * by emdb_opt_scalars_for_step, in double, then rounded to float; the
 * per-column arithmetic is float32 only.
 *
 * A row is `dim` float weights followed by its optimizer state:
 *   SGD               nothing
 *   Adagrad           sum[dim]
 *   row-wise Adagrad  acc[1]
 *   Adam              m[dim], then v[dim]
 *   FTRL              z[dim], then n[dim]
 *
 * Invariants:
 *   1. Each function performs exactly the float32 operations, in the order,
 *      written in docs/engine.md, "Optimizers".  Every product that feeds a
 *      sum is an explicit fmaf(), so results do not depend on whether the
 *      compiler contracts a*b+c (gcc -ffp-contract=fast under -std=gnu11,
 *      nvcc by default) or on the presence of FMA hardware.
 *   2. A function touches only the row and gradient it is given; rows are
 *      independent, so any order or any number of threads gives the same
 *      result.
 *   3. Everything is EMDB_HD static inline with no globals and no libc call
 *      outside <math.h>, so the same code compiles for CUDA kernels.
 *
 * Vectorization note: gcc vectorizes the sqrtf of these loops only under
 * -fno-math-errno (with errno semantics it keeps a libm call for negative
 * arguments, which cannot occur here).  The results are the same either way.
 */
#ifndef EMDB_OPTIM_MATH_H
#define EMDB_OPTIM_MATH_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include <emdb/db.h>

#include "base/hd.h"

/* Per-Update constants of one table, in float. */
typedef struct emdb_opt_scalars {
	float lr;    /* the step's rate: lr (SGD, row-wise Adagrad), clr
			(Adagrad), step_size (Adam), alpha (FTRL)          */
	float eps;   /* Adagrad, row-wise Adagrad, Adam                   */
	float omb1;  /* Adam: 1 - beta1                                   */
	float omb2;  /* Adam: 1 - beta2                                   */
	float beta;  /* FTRL                                              */
	float l1;    /* FTRL                                              */
	float l2;    /* FTRL                                              */
	float dim;   /* row-wise Adagrad: the row's dim, exact in float   */
} emdb_opt_scalars;

/* Constants for the Update that advanced the table to `step` (1 for the
 * first Update).  o must have passed emdb__optimizer_check.  Fields the
 * kind does not use are 0. */
EMDB_HD static inline void emdb_opt_scalars_for_step(const emdb_optimizer *o,
						     uint64_t step,
						     uint32_t dim,
						     emdb_opt_scalars *s)
{
	double t = (double)step;

	s->lr = 0.0f;
	s->eps = 0.0f;
	s->omb1 = 0.0f;
	s->omb2 = 0.0f;
	s->beta = 0.0f;
	s->l1 = 0.0f;
	s->l2 = 0.0f;
	s->dim = 0.0f;
	switch (o->kind) {
	case EMDB_OPT_SGD:
		s->lr = (float)o->lr;
		break;
	case EMDB_OPT_ADAGRAD:
		s->lr = (float)(o->lr / (1.0 + (t - 1.0) * o->lr_decay));
		s->eps = (float)o->eps;
		break;
	case EMDB_OPT_ROWWISE_ADAGRAD:
		s->lr = (float)o->lr;
		s->eps = (float)o->eps;
		s->dim = (float)dim;
		break;
	case EMDB_OPT_ADAM:
		s->lr = (float)(o->lr * sqrt(1.0 - pow(o->beta2, t)) /
				(1.0 - pow(o->beta1, t)));
		s->eps = (float)o->eps;
		s->omb1 = (float)(1.0 - o->beta1);
		s->omb2 = (float)(1.0 - o->beta2);
		break;
	case EMDB_OPT_FTRL:
		s->lr = (float)o->lr;
		s->beta = (float)o->beta;
		s->l1 = (float)o->l1;
		s->l2 = (float)o->l2;
		break;
	}
}

/* A new row's optimizer state: the accumulators start at
 * initial_accumulator, everything else at 0. */
EMDB_HD static inline void emdb_opt_init_state(emdb_opt_kind kind,
					       const emdb_optimizer *o,
					       uint32_t dim, float *state)
{
	float acc0 = (float)o->initial_accumulator;

	switch (kind) {
	case EMDB_OPT_ADAGRAD:
		for (uint32_t c = 0; c < dim; c++)
			state[c] = acc0;
		break;
	case EMDB_OPT_ROWWISE_ADAGRAD:
		state[0] = acc0;
		break;
	case EMDB_OPT_ADAM:
		for (uint32_t c = 0; c < 2 * dim; c++)
			state[c] = 0.0f;
		break;
	case EMDB_OPT_FTRL:
		for (uint32_t c = 0; c < dim; c++) {
			state[c] = 0.0f;
			state[dim + c] = acc0;
		}
		break;
	case EMDB_OPT_SGD:
	default:
		break;
	}
}

/*
 * The column loops.  Weights, state and gradient are distinct arrays, which
 * __restrict__ tells the compiler so that it vectorizes without runtime
 * overlap checks; the scalars arrive by value so that stores to float
 * arrays cannot be thought to change them.
 */

EMDB_HD static inline void emdb__sgd_cols(uint32_t dim, float *__restrict__ w,
					  const float *__restrict__ g, float lr)
{
	for (uint32_t c = 0; c < dim; c++)
		w[c] = fmaf(-lr, g[c], w[c]);
}

EMDB_HD static inline void emdb__adagrad_cols(uint32_t dim,
					      float *__restrict__ w,
					      float *__restrict__ sum,
					      const float *__restrict__ g,
					      float clr, float eps)
{
	for (uint32_t c = 0; c < dim; c++) {
		float gc = g[c];
		float sc = fmaf(gc, gc, sum[c]);

		sum[c] = sc;
		w[c] = fmaf(-clr, gc / (sqrtf(sc) + eps), w[c]);
	}
}

/* Row-wise Adagrad's reduction: adds the row's mean squared gradient to
 * acc[0] and returns the row's multiplier.  In column order: the
 * definition, and what one device thread per row reproduces (the CUDA
 * tier runs this in one lane and the column loop in all). */
EMDB_HD static inline float emdb__rowwise_adagrad_mult(uint32_t dim,
						       float *__restrict__ acc,
						       const float *__restrict__ g,
						       float lr, float eps,
						       float fdim)
{
	float sq = 0.0f;
	float a;

	for (uint32_t c = 0; c < dim; c++)
		sq = fmaf(g[c], g[c], sq);
	a = acc[0] + sq / fdim;
	acc[0] = a;
	return lr / (sqrtf(a) + eps);
}

EMDB_HD static inline void emdb__rowwise_adagrad_cols(uint32_t dim,
						      float *__restrict__ w,
						      float *__restrict__ acc,
						      const float *__restrict__ g,
						      float lr, float eps,
						      float fdim)
{
	emdb__sgd_cols(dim, w, g, emdb__rowwise_adagrad_mult(dim, acc, g, lr, eps, fdim));
}

EMDB_HD static inline void emdb__adam_cols(uint32_t dim, float *__restrict__ w,
					   float *__restrict__ m,
					   float *__restrict__ v,
					   const float *__restrict__ g,
					   float step_size, float eps,
					   float omb1, float omb2)
{
	for (uint32_t c = 0; c < dim; c++) {
		float gc = g[c];
		float mc = fmaf(gc - m[c], omb1, m[c]);
		float vc = fmaf(fmaf(gc, gc, -v[c]), omb2, v[c]);

		m[c] = mc;
		v[c] = vc;
		w[c] = fmaf(-step_size, mc / (sqrtf(vc) + eps), w[c]);
	}
}

EMDB_HD static inline void emdb__ftrl_cols(uint32_t dim, float *__restrict__ w,
					   float *__restrict__ z,
					   float *__restrict__ n,
					   const float *__restrict__ g,
					   float alpha, float beta, float l1,
					   float l2)
{
	for (uint32_t c = 0; c < dim; c++) {
		float gc = g[c];
		float nc = n[c];
		float nn = fmaf(gc, gc, nc);
		float sn = sqrtf(nn);
		float sigma = (sn - sqrtf(nc)) / alpha;
		float zc = z[c] + fmaf(-sigma, w[c], gc);
		float den = (beta + sn) / alpha + l2;
		float d = fabsf(zc) - l1;
		float t = d > 0.0f ? d : 0.0f;

		z[c] = zc;
		n[c] = nn;
		/* -(z - sign(z)*l1) / den when |z| > l1, else 0, without a
		 * branch: the division is done for every column (den > 0 is
		 * guaranteed by emdb__optimizer_check, so 0/den is 0), and
		 * + 0.0f turns the -0 of copysign into the documented +0. */
		w[c] = copysignf(t / den, -zc) + 0.0f;
	}
}

/*
 * The per-row updates.  row points at the row's dim weights, its state
 * follows them (layout above); g is the row's summed gradient, dim floats,
 * not overlapping the row.  s comes from emdb_opt_scalars_for_step for
 * this Update and the row's optimizer.
 */

EMDB_HD static inline void emdb_opt_sgd_row(const emdb_opt_scalars *s,
					    uint32_t dim, float *row,
					    const float *g)
{
	emdb__sgd_cols(dim, row, g, s->lr);
}

EMDB_HD static inline void emdb_opt_adagrad_row(const emdb_opt_scalars *s,
						uint32_t dim, float *row,
						const float *g)
{
	emdb__adagrad_cols(dim, row, row + dim, g, s->lr, s->eps);
}

EMDB_HD static inline void emdb_opt_rowwise_adagrad_row(const emdb_opt_scalars *s,
							uint32_t dim, float *row,
							const float *g)
{
	emdb__rowwise_adagrad_cols(dim, row, row + dim, g, s->lr, s->eps,
				   s->dim);
}

EMDB_HD static inline void emdb_opt_adam_row(const emdb_opt_scalars *s,
					     uint32_t dim, float *row,
					     const float *g)
{
	emdb__adam_cols(dim, row, row + dim, row + 2 * (size_t)dim, g, s->lr,
			s->eps, s->omb1, s->omb2);
}

EMDB_HD static inline void emdb_opt_ftrl_row(const emdb_opt_scalars *s,
					     uint32_t dim, float *row,
					     const float *g)
{
	emdb__ftrl_cols(dim, row, row + dim, row + 2 * (size_t)dim, g, s->lr,
			s->beta, s->l1, s->l2);
}

/* Validation of an optimizer and an initializer, in db/optim.c.  Return
 * EMDB_OK, or EMDB_ERR_INVALID with a message naming the bad field written
 * to why[why_len] (always NUL-terminated when why_len > 0; why may be NULL
 * when why_len is 0).  They do not touch emdb_last_error().  Host only. */
#ifdef __cplusplus
extern "C" {
#endif
int emdb__optimizer_check(const emdb_optimizer *o, char *why, size_t why_len);
int emdb__init_check(const emdb_init *i, char *why, size_t why_len);
#ifdef __cplusplus
}
#endif

#endif
