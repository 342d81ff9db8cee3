/*
 * test_optim_math.c - the per-row optimizer rules of db/optim_math.h and
 * the host-side facts of db/optim.c.
 *
 * Two references, both written here from docs/engine.md and not from the
 * header:
 *   - ref_*: the documented float32 operation order, on separate arrays
 *     (not the row layout), one column at a time.  The header must agree
 *     bit for bit over several steps.
 *   - lit_*: the textbook formula of each optimizer in double, applied
 *     for one step from the header's own float state.  The header must
 *     agree within float rounding (relative 1e-6 of the terms involved),
 *     which catches a documented order that is faithfully implemented but
 *     computes the wrong thing.
 */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <emdb/db.h>

#include "db/optim_math.h"

#define MAXDIM 64
#define ROWS 3
#define STEPS 7

static uint32_t bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

/* Deterministic test data in [-1, 1), with exact zeros sprinkled in so
 * that columns without gradient are exercised too. */
static float data(uint32_t a, uint32_t b, uint32_t c)
{
	uint64_t x = ((uint64_t)a * 1000003u + b) * 1000033u + c + 1;
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	if (x % 7 == 0)
		return 0.0f;
	return (float)((double)(x >> 11) / 4503599627370496.0 - 1.0);
}

/* ---- the documented order, on separate arrays ------------------------ */

typedef struct ref_row {
	float w[MAXDIM];
	float s1[MAXDIM]; /* sum, m or z */
	float s2[MAXDIM]; /* v or n      */
	float acc;        /* row-wise    */
} ref_row;

static void ref_init(const emdb_optimizer *o, uint32_t dim, ref_row *r)
{
	for (uint32_t c = 0; c < dim; c++) {
		r->s1[c] = 0.0f;
		r->s2[c] = 0.0f;
	}
	r->acc = 0.0f;
	if (o->kind == EMDB_OPT_ADAGRAD)
		for (uint32_t c = 0; c < dim; c++)
			r->s1[c] = (float)o->initial_accumulator;
	if (o->kind == EMDB_OPT_ROWWISE_ADAGRAD)
		r->acc = (float)o->initial_accumulator;
	if (o->kind == EMDB_OPT_FTRL)
		for (uint32_t c = 0; c < dim; c++)
			r->s2[c] = (float)o->initial_accumulator;
}

static void ref_step(const emdb_optimizer *o, uint64_t t, uint32_t dim, ref_row *r,
		     const float *g)
{
	float lr = (float)o->lr, eps = (float)o->eps;

	switch (o->kind) {
	case EMDB_OPT_SGD:
		for (uint32_t c = 0; c < dim; c++)
			r->w[c] = fmaf(-lr, g[c], r->w[c]);
		break;
	case EMDB_OPT_ADAGRAD: {
		float clr = (float)(o->lr / (1.0 + ((double)t - 1.0) * o->lr_decay));
		for (uint32_t c = 0; c < dim; c++) {
			r->s1[c] = fmaf(g[c], g[c], r->s1[c]);
			float q = g[c] / (sqrtf(r->s1[c]) + eps);
			r->w[c] = fmaf(-clr, q, r->w[c]);
		}
		break;
	}
	case EMDB_OPT_ROWWISE_ADAGRAD: {
		float q = 0.0f;
		for (uint32_t c = 0; c < dim; c++)
			q = fmaf(g[c], g[c], q);
		r->acc = r->acc + q / (float)dim;
		float mult = lr / (sqrtf(r->acc) + eps);
		for (uint32_t c = 0; c < dim; c++)
			r->w[c] = fmaf(-mult, g[c], r->w[c]);
		break;
	}
	case EMDB_OPT_ADAM: {
		double bc1 = 1.0 - pow(o->beta1, (double)t);
		double bc2 = 1.0 - pow(o->beta2, (double)t);
		float step_size = (float)(o->lr * sqrt(bc2) / bc1);
		float omb1 = (float)(1.0 - o->beta1), omb2 = (float)(1.0 - o->beta2);
		for (uint32_t c = 0; c < dim; c++) {
			r->s1[c] = fmaf(g[c] - r->s1[c], omb1, r->s1[c]);
			r->s2[c] = fmaf(fmaf(g[c], g[c], -r->s2[c]), omb2, r->s2[c]);
			float q = r->s1[c] / (sqrtf(r->s2[c]) + eps);
			r->w[c] = fmaf(-step_size, q, r->w[c]);
		}
		break;
	}
	case EMDB_OPT_FTRL: {
		float alpha = lr, beta = (float)o->beta, l1 = (float)o->l1, l2 = (float)o->l2;
		for (uint32_t c = 0; c < dim; c++) {
			float n_new = fmaf(g[c], g[c], r->s2[c]);
			float sigma = (sqrtf(n_new) - sqrtf(r->s2[c])) / alpha;
			r->s1[c] = r->s1[c] + fmaf(-sigma, r->w[c], g[c]);
			r->s2[c] = n_new;
			float den = (beta + sqrtf(n_new)) / alpha + l2;
			float d = fabsf(r->s1[c]) - l1;
			if (d > 0.0f)
				r->w[c] = r->s1[c] > 0.0f ? -(d / den) : d / den;
			else
				r->w[c] = 0.0f;
		}
		break;
	}
	}
}

/* ---- the textbook formulas in double, one step ----------------------- */

static void expect_close(float got, double want, double scale, const char *what,
			 uint32_t c, uint64_t t)
{
	double tol = 1e-6 * fmax(fabs(want), scale) + 1e-37;

	cr_expect(fabs((double)got - want) <= tol, "step %llu %s[%u]: %.9g, want %.12g (tol %g)",
		  (unsigned long long)t, what, c, got, want, tol);
}

/* row: the header's float row after step t; before: the same row before
 * it.  Recomputes step t in double from `before` and compares. */
static void lit_check(const emdb_optimizer *o, uint64_t t, uint32_t dim, const float *before,
		      const float *row, const float *g)
{
	const float *w0 = before, *w1 = row;

	switch (o->kind) {
	case EMDB_OPT_SGD:
		for (uint32_t c = 0; c < dim; c++) {
			double d = o->lr * g[c];
			expect_close(w1[c], w0[c] - d, fabs(w0[c]) + fabs(d), "w", c, t);
		}
		break;
	case EMDB_OPT_ADAGRAD: {
		double clr = o->lr / (1 + (double)(t - 1) * o->lr_decay);
		for (uint32_t c = 0; c < dim; c++) {
			double sum = (double)before[dim + c] + (double)g[c] * g[c];
			double d = clr * g[c] / (sqrt(sum) + o->eps);
			expect_close(row[dim + c], sum, sum, "sum", c, t);
			expect_close(w1[c], w0[c] - d, fabs(w0[c]) + fabs(d), "w", c, t);
		}
		break;
	}
	case EMDB_OPT_ROWWISE_ADAGRAD: {
		double sq = 0;
		for (uint32_t c = 0; c < dim; c++)
			sq += (double)g[c] * g[c];
		double acc = before[dim] + sq / dim;
		double mult = o->lr / (sqrt(acc) + o->eps);
		expect_close(row[dim], acc, acc, "acc", 0, t);
		for (uint32_t c = 0; c < dim; c++) {
			double d = mult * g[c];
			expect_close(w1[c], w0[c] - d, fabs(w0[c]) + fabs(d), "w", c, t);
		}
		break;
	}
	case EMDB_OPT_ADAM: {
		double step_size = o->lr * sqrt(1 - pow(o->beta2, (double)t)) /
				   (1 - pow(o->beta1, (double)t));
		for (uint32_t c = 0; c < dim; c++) {
			double m0 = before[dim + c], v0 = before[2 * dim + c];
			double m = m0 + (g[c] - m0) * (1 - o->beta1);
			double v = v0 + ((double)g[c] * g[c] - v0) * (1 - o->beta2);
			double d = step_size * m / (sqrt(v) + o->eps);
			expect_close(row[dim + c], m, fabs(m0) + fabs(g[c]), "m", c, t);
			expect_close(row[2 * dim + c], v, v0 + (double)g[c] * g[c], "v", c, t);
			/* The float m and v feed the float w; their own rounding
			 * (relative 1e-7) is part of the scale. */
			expect_close(w1[c], w0[c] - d, fabs(w0[c]) + 4 * fabs(d), "w", c, t);
		}
		break;
	}
	case EMDB_OPT_FTRL: {
		double alpha = o->lr;
		for (uint32_t c = 0; c < dim; c++) {
			double z0 = before[dim + c], n0 = before[2 * dim + c];
			double gg = (double)g[c] * g[c];
			double sigma = (sqrt(n0 + gg) - sqrt(n0)) / alpha;
			double z = z0 + g[c] - sigma * w0[c];
			double n = n0 + gg;
			double den = (o->beta + sqrt(n)) / alpha + o->l2;
			double sgn = z > 0 ? 1.0 : -1.0;
			double w = fabs(z) <= o->l1 ? 0.0 : -(z - sgn * o->l1) / den;
			/* sqrt(n + g*g) - sqrt(n) cancels: its float error is
			 * relative to sqrt(n), not to sigma. */
			double zscale = fabs(z0) + fabs(g[c]) +
					(sqrt(n0 + gg) / alpha) * fabs(w0[c]);
			expect_close(row[dim + c], z, zscale, "z", c, t);
			expect_close(row[2 * dim + c], n, n, "n", c, t);
			expect_close(w1[c], w, 4 * (zscale + o->l1) / den, "w", c, t);
		}
		break;
	}
	}
}

/* ---- driving the header ---------------------------------------------- */

static void run_rule(const emdb_optimizer *o, uint32_t dim)
{
	uint32_t sf = emdb_optimizer_state_floats(o->kind, dim);
	float rows[ROWS][3 * MAXDIM + 1], before[3 * MAXDIM + 1], g[MAXDIM];
	ref_row ref[ROWS];
	char why[160];

	cr_assert_eq(emdb__optimizer_check(o, why, sizeof(why)), EMDB_OK, "%s", why);
	cr_assert_leq(dim, MAXDIM);
	for (uint32_t r = 0; r < ROWS; r++) {
		for (uint32_t c = 0; c < dim; c++)
			rows[r][c] = ref[r].w[c] = 0.1f * data(1, r, c);
		emdb_opt_init_state(o->kind, o, dim, rows[r] + dim);
		ref_init(o, dim, &ref[r]);
	}

	for (uint64_t t = 1; t <= STEPS; t++) {
		emdb_opt_scalars s;

		emdb_opt_scalars_for_step(o, t, dim, &s);
		for (uint32_t r = 0; r < ROWS; r++) {
			/* Row 2 gets a gradient only every other step, as a row
			 * that is not pushed skips Updates; the step count still
			 * advances for it. */
			if (r == 2 && t % 2 == 0)
				continue;
			for (uint32_t c = 0; c < dim; c++)
				g[c] = (r == 1 && t == 3) ? 0.0f : data(2 + (uint32_t)t, r, c);
			memcpy(before, rows[r], (dim + sf) * sizeof(float));
			switch (o->kind) {
			case EMDB_OPT_SGD:
				emdb_opt_sgd_row(&s, dim, rows[r], g);
				break;
			case EMDB_OPT_ADAGRAD:
				emdb_opt_adagrad_row(&s, dim, rows[r], g);
				break;
			case EMDB_OPT_ROWWISE_ADAGRAD:
				emdb_opt_rowwise_adagrad_row(&s, dim, rows[r], g);
				break;
			case EMDB_OPT_ADAM:
				emdb_opt_adam_row(&s, dim, rows[r], g);
				break;
			case EMDB_OPT_FTRL:
				emdb_opt_ftrl_row(&s, dim, rows[r], g);
				break;
			}
			ref_step(o, t, dim, &ref[r], g);
			lit_check(o, t, dim, before, rows[r], g);

			/* Bit for bit against the documented order. */
			for (uint32_t c = 0; c < dim; c++) {
				cr_assert_eq(bits(rows[r][c]), bits(ref[r].w[c]),
					     "%s dim %u step %llu row %u w[%u]: %a, want %a",
					     emdb_optimizer_name(o->kind), dim,
					     (unsigned long long)t, r, c, rows[r][c], ref[r].w[c]);
				if (o->kind != EMDB_OPT_SGD && o->kind != EMDB_OPT_ROWWISE_ADAGRAD)
					cr_assert_eq(bits(rows[r][dim + c]), bits(ref[r].s1[c]),
						     "%s step %llu state1[%u]: %a, want %a",
						     emdb_optimizer_name(o->kind),
						     (unsigned long long)t, c, rows[r][dim + c],
						     ref[r].s1[c]);
				if (o->kind == EMDB_OPT_ADAM || o->kind == EMDB_OPT_FTRL)
					cr_assert_eq(bits(rows[r][2 * dim + c]), bits(ref[r].s2[c]),
						     "%s step %llu state2[%u]: %a, want %a",
						     emdb_optimizer_name(o->kind),
						     (unsigned long long)t, c, rows[r][2 * dim + c],
						     ref[r].s2[c]);
			}
			if (o->kind == EMDB_OPT_ROWWISE_ADAGRAD)
				cr_assert_eq(bits(rows[r][dim]), bits(ref[r].acc), "acc %a, want %a",
					     rows[r][dim], ref[r].acc);
		}
	}
}

static const uint32_t test_dims[] = { 1, 3, 8, 17, 64 };

static void run_all_dims(const emdb_optimizer *o)
{
	for (size_t i = 0; i < sizeof(test_dims) / sizeof(test_dims[0]); i++)
		run_rule(o, test_dims[i]);
}

static emdb_optimizer defaults(emdb_opt_kind kind)
{
	emdb_optimizer o;
	cr_assert_eq(emdb_optimizer_defaults(kind, &o), EMDB_OK);
	return o;
}

Test(rule, sgd)
{
	emdb_optimizer o = defaults(EMDB_OPT_SGD);
	run_all_dims(&o);
	o.lr = 0.37;
	run_all_dims(&o);
}

Test(rule, adagrad)
{
	emdb_optimizer o = defaults(EMDB_OPT_ADAGRAD);
	run_all_dims(&o);
	o.lr = 0.2;
	o.lr_decay = 0.15;
	o.initial_accumulator = 0.3;
	o.eps = 1e-6;
	run_all_dims(&o);
}

Test(rule, rowwise_adagrad)
{
	emdb_optimizer o = defaults(EMDB_OPT_ROWWISE_ADAGRAD);
	run_all_dims(&o);
	o.lr = 0.05;
	o.initial_accumulator = 0.02;
	o.eps = 0;
	run_all_dims(&o);
}

Test(rule, adam)
{
	emdb_optimizer o = defaults(EMDB_OPT_ADAM);
	run_all_dims(&o);
	o.lr = 0.01;
	o.beta1 = 0.5;
	o.beta2 = 0.9;
	o.eps = 1e-4;
	run_all_dims(&o);
	o.beta1 = 0;
	run_all_dims(&o);
}

Test(rule, ftrl)
{
	emdb_optimizer o = defaults(EMDB_OPT_FTRL);
	run_all_dims(&o);
	o.lr = 0.1;
	o.beta = 0.5;
	o.l1 = 0.05;
	o.l2 = 0.2;
	o.initial_accumulator = 0.0;
	run_all_dims(&o);
	o.beta = 0;
	o.initial_accumulator = 0.01;
	o.l2 = 0;
	run_all_dims(&o);
}

/* A large l1 zeroes every weight: the zero is +0, never -0 or NaN. */
Test(rule, ftrl_l1_gives_positive_zero)
{
	emdb_optimizer o = defaults(EMDB_OPT_FTRL);
	emdb_opt_scalars s;
	float row[3 * 8], g[8];

	o.l1 = 100.0;
	for (uint32_t c = 0; c < 8; c++) {
		row[c] = 0.5f * data(7, 0, c);
		g[c] = data(8, 0, c);
	}
	g[0] = 0.0f;
	emdb_opt_init_state(EMDB_OPT_FTRL, &o, 8, row + 8);
	emdb_opt_scalars_for_step(&o, 1, 8, &s);
	emdb_opt_ftrl_row(&s, 8, row, g);
	for (uint32_t c = 0; c < 8; c++)
		cr_expect_eq(bits(row[c]), 0u, "w[%u] = %a", c, row[c]);
}

/* Only the row passed in changes; its neighbours in memory do not. */
Test(rule, touches_only_its_row)
{
	static const emdb_opt_kind kinds[] = { EMDB_OPT_SGD, EMDB_OPT_ADAGRAD,
					       EMDB_OPT_ROWWISE_ADAGRAD, EMDB_OPT_ADAM,
					       EMDB_OPT_FTRL };
	for (size_t k = 0; k < 5; k++) {
		emdb_optimizer o = defaults(kinds[k]);
		uint32_t dim = 5, sf = emdb_optimizer_state_floats(kinds[k], dim);
		float buf[3 * 16], g[5];
		emdb_opt_scalars s;

		for (size_t i = 0; i < 3 * 16; i++)
			buf[i] = -7.0f;
		for (uint32_t c = 0; c < dim; c++)
			g[c] = 1.0f + c;
		float *row = buf + 16;
		for (uint32_t c = 0; c < dim; c++)
			row[c] = 0.25f;
		emdb_opt_init_state(kinds[k], &o, dim, row + dim);
		emdb_opt_scalars_for_step(&o, 1, dim, &s);
		switch (kinds[k]) {
		case EMDB_OPT_SGD: emdb_opt_sgd_row(&s, dim, row, g); break;
		case EMDB_OPT_ADAGRAD: emdb_opt_adagrad_row(&s, dim, row, g); break;
		case EMDB_OPT_ROWWISE_ADAGRAD: emdb_opt_rowwise_adagrad_row(&s, dim, row, g); break;
		case EMDB_OPT_ADAM: emdb_opt_adam_row(&s, dim, row, g); break;
		case EMDB_OPT_FTRL: emdb_opt_ftrl_row(&s, dim, row, g); break;
		}
		for (size_t i = 0; i < 16; i++)
			cr_expect_eq(buf[i], -7.0f);
		for (size_t i = 16 + dim + sf; i < 3 * 16; i++)
			cr_expect_eq(buf[i], -7.0f, "%s wrote past its row at %zu",
				     emdb_optimizer_name(kinds[k]), i - 16);
		for (uint32_t c = 0; c < dim; c++)
			cr_expect(isfinite(row[c]) && row[c] != 0.25f, "%s w[%u] = %g",
				  emdb_optimizer_name(kinds[k]), c, row[c]);
	}
}

/* ---- scalars and state ----------------------------------------------- */

Test(scalars, per_step)
{
	emdb_optimizer o = defaults(EMDB_OPT_ADAM);
	emdb_opt_scalars s;

	emdb_opt_scalars_for_step(&o, 1, 16, &s);
	cr_expect_eq(s.lr, (float)(0.001 * sqrt(1 - 0.999) / (1 - 0.9)));
	cr_expect_eq(s.eps, 1e-8f);
	cr_expect_eq(s.omb1, (float)(1 - 0.9));
	cr_expect_eq(s.omb2, (float)(1 - 0.999));
	/* Late in training the bias corrections vanish. */
	emdb_opt_scalars_for_step(&o, 100000000, 16, &s);
	cr_expect_eq(s.lr, 0.001f);

	o = defaults(EMDB_OPT_ADAGRAD);
	o.lr = 0.5;
	o.lr_decay = 0.25;
	emdb_opt_scalars_for_step(&o, 1, 16, &s);
	cr_expect_eq(s.lr, 0.5f);
	emdb_opt_scalars_for_step(&o, 5, 16, &s);
	cr_expect_eq(s.lr, 0.25f);

	o = defaults(EMDB_OPT_ROWWISE_ADAGRAD);
	emdb_opt_scalars_for_step(&o, 3, 48, &s);
	cr_expect_eq(s.dim, 48.0f);
	cr_expect_eq(s.lr, 0.01f);
	cr_expect_eq(s.eps, 1e-8f);

	o = defaults(EMDB_OPT_FTRL);
	o.l1 = 0.125;
	o.l2 = 2;
	emdb_opt_scalars_for_step(&o, 9, 4, &s);
	cr_expect_eq(s.lr, 0.05f);
	cr_expect_eq(s.beta, 1.0f);
	cr_expect_eq(s.l1, 0.125f);
	cr_expect_eq(s.l2, 2.0f);
}

Test(scalars, init_state)
{
	emdb_optimizer o;
	float st[2 * 6 + 1];

	o = defaults(EMDB_OPT_SGD);
	st[0] = 9.0f;
	emdb_opt_init_state(EMDB_OPT_SGD, &o, 6, st);
	cr_expect_eq(st[0], 9.0f, "SGD has no state to write");

	o = defaults(EMDB_OPT_ADAGRAD);
	o.initial_accumulator = 0.75;
	for (int i = 0; i < 13; i++)
		st[i] = 9.0f;
	emdb_opt_init_state(EMDB_OPT_ADAGRAD, &o, 6, st);
	for (int i = 0; i < 6; i++)
		cr_expect_eq(st[i], 0.75f);
	cr_expect_eq(st[6], 9.0f);

	o = defaults(EMDB_OPT_ROWWISE_ADAGRAD);
	o.initial_accumulator = 0.5;
	st[1] = 9.0f;
	emdb_opt_init_state(EMDB_OPT_ROWWISE_ADAGRAD, &o, 6, st);
	cr_expect_eq(st[0], 0.5f);
	cr_expect_eq(st[1], 9.0f);

	o = defaults(EMDB_OPT_ADAM);
	for (int i = 0; i < 13; i++)
		st[i] = 9.0f;
	emdb_opt_init_state(EMDB_OPT_ADAM, &o, 6, st);
	for (int i = 0; i < 12; i++)
		cr_expect_eq(bits(st[i]), 0u);
	cr_expect_eq(st[12], 9.0f);

	o = defaults(EMDB_OPT_FTRL);
	for (int i = 0; i < 13; i++)
		st[i] = 9.0f;
	emdb_opt_init_state(EMDB_OPT_FTRL, &o, 6, st);
	for (int i = 0; i < 6; i++) {
		cr_expect_eq(bits(st[i]), 0u);
		cr_expect_eq(st[6 + i], 0.1f);
	}
	cr_expect_eq(st[12], 9.0f);
}

/* ---- defaults, names, sizes ------------------------------------------ */

Test(facts, defaults)
{
	emdb_optimizer o;

	memset(&o, 0x55, sizeof(o));
	cr_assert_eq(emdb_optimizer_defaults(EMDB_OPT_SGD, &o), EMDB_OK);
	cr_expect(o.kind == EMDB_OPT_SGD && o.lr == 0.01 && o.eps == 0 && o.beta1 == 0 &&
		  o.beta2 == 0 && o.lr_decay == 0 && o.initial_accumulator == 0 && o.beta == 0 &&
		  o.l1 == 0 && o.l2 == 0);

	memset(&o, 0x55, sizeof(o));
	cr_assert_eq(emdb_optimizer_defaults(EMDB_OPT_ADAGRAD, &o), EMDB_OK);
	cr_expect(o.kind == EMDB_OPT_ADAGRAD && o.lr == 0.01 && o.lr_decay == 0 &&
		  o.initial_accumulator == 0 && o.eps == 1e-10 && o.beta1 == 0 && o.beta2 == 0 &&
		  o.beta == 0 && o.l1 == 0 && o.l2 == 0);

	memset(&o, 0x55, sizeof(o));
	cr_assert_eq(emdb_optimizer_defaults(EMDB_OPT_ROWWISE_ADAGRAD, &o), EMDB_OK);
	cr_expect(o.kind == EMDB_OPT_ROWWISE_ADAGRAD && o.lr == 0.01 && o.eps == 1e-8 &&
		  o.initial_accumulator == 0 && o.lr_decay == 0 && o.beta1 == 0 &&
		  o.beta2 == 0 && o.beta == 0 && o.l1 == 0 && o.l2 == 0);

	memset(&o, 0x55, sizeof(o));
	cr_assert_eq(emdb_optimizer_defaults(EMDB_OPT_ADAM, &o), EMDB_OK);
	cr_expect(o.kind == EMDB_OPT_ADAM && o.lr == 0.001 && o.beta1 == 0.9 &&
		  o.beta2 == 0.999 && o.eps == 1e-8 && o.lr_decay == 0 &&
		  o.initial_accumulator == 0 && o.beta == 0 && o.l1 == 0 && o.l2 == 0);

	memset(&o, 0x55, sizeof(o));
	cr_assert_eq(emdb_optimizer_defaults(EMDB_OPT_FTRL, &o), EMDB_OK);
	cr_expect(o.kind == EMDB_OPT_FTRL && o.lr == 0.05 && o.beta == 1.0 && o.l1 == 0 &&
		  o.l2 == 0 && o.initial_accumulator == 0.1 && o.eps == 0 && o.beta1 == 0 &&
		  o.beta2 == 0 && o.lr_decay == 0);

	cr_expect_eq(emdb_optimizer_defaults((emdb_opt_kind)0, &o), EMDB_ERR_INVALID);
	cr_expect_neq(strstr(emdb_last_error(), "kind"), NULL, "%s", emdb_last_error());
	cr_expect_eq(emdb_optimizer_defaults((emdb_opt_kind)6, &o), EMDB_ERR_INVALID);
	cr_expect_eq(emdb_optimizer_defaults(EMDB_OPT_SGD, NULL), EMDB_ERR_INVALID);
}

Test(facts, names_and_state_floats)
{
	cr_expect_str_eq(emdb_optimizer_name(EMDB_OPT_SGD), "sgd");
	cr_expect_str_eq(emdb_optimizer_name(EMDB_OPT_ADAGRAD), "adagrad");
	cr_expect_str_eq(emdb_optimizer_name(EMDB_OPT_ROWWISE_ADAGRAD), "rowwise_adagrad");
	cr_expect_str_eq(emdb_optimizer_name(EMDB_OPT_ADAM), "adam");
	cr_expect_str_eq(emdb_optimizer_name(EMDB_OPT_FTRL), "ftrl");
	cr_expect_null(emdb_optimizer_name((emdb_opt_kind)0));
	cr_expect_null(emdb_optimizer_name((emdb_opt_kind)99));

	cr_expect_eq(emdb_optimizer_state_floats(EMDB_OPT_SGD, 64), 0);
	cr_expect_eq(emdb_optimizer_state_floats(EMDB_OPT_ADAGRAD, 64), 64);
	cr_expect_eq(emdb_optimizer_state_floats(EMDB_OPT_ROWWISE_ADAGRAD, 64), 1);
	cr_expect_eq(emdb_optimizer_state_floats(EMDB_OPT_ADAM, 64), 128);
	cr_expect_eq(emdb_optimizer_state_floats(EMDB_OPT_FTRL, 64), 128);
	cr_expect_eq(emdb_optimizer_state_floats(EMDB_OPT_ADAM, EMDB_DIM_MAX), 2u * EMDB_DIM_MAX);
	cr_expect_eq(emdb_optimizer_state_floats(EMDB_OPT_ROWWISE_ADAGRAD, 1), 1);
	cr_expect_eq(emdb_optimizer_state_floats((emdb_opt_kind)0, 64), 0);
	cr_expect_eq(emdb_optimizer_state_floats((emdb_opt_kind)7, 64), 0);
}

/* ---- validation ------------------------------------------------------ */

struct bad_opt {
	emdb_opt_kind kind;
	const char *field; /* must appear in the message */
	double *(*pick)(emdb_optimizer *);
	double value;
};

static double *f_lr(emdb_optimizer *o) { return &o->lr; }
static double *f_eps(emdb_optimizer *o) { return &o->eps; }
static double *f_beta1(emdb_optimizer *o) { return &o->beta1; }
static double *f_beta2(emdb_optimizer *o) { return &o->beta2; }
static double *f_lr_decay(emdb_optimizer *o) { return &o->lr_decay; }
static double *f_acc(emdb_optimizer *o) { return &o->initial_accumulator; }
static double *f_beta(emdb_optimizer *o) { return &o->beta; }
static double *f_l1(emdb_optimizer *o) { return &o->l1; }
static double *f_l2(emdb_optimizer *o) { return &o->l2; }

Test(check, optimizer_rejects_bad_fields)
{
	const struct bad_opt bad[] = {
		{ EMDB_OPT_SGD, "lr", f_lr, 0.0 },
		{ EMDB_OPT_SGD, "lr", f_lr, -0.1 },
		{ EMDB_OPT_SGD, "lr", f_lr, NAN },
		{ EMDB_OPT_SGD, "lr", f_lr, INFINITY },
		{ EMDB_OPT_SGD, "lr", f_lr, 1e300 },  /* beyond float   */
		{ EMDB_OPT_SGD, "lr", f_lr, 1e-50 },  /* rounds to 0    */
		{ EMDB_OPT_ADAGRAD, "lr", f_lr, -1.0 },
		{ EMDB_OPT_ADAGRAD, "lr_decay", f_lr_decay, -0.5 },
		{ EMDB_OPT_ADAGRAD, "lr_decay", f_lr_decay, NAN },
		{ EMDB_OPT_ADAGRAD, "eps", f_eps, -1e-10 },
		{ EMDB_OPT_ADAGRAD, "eps", f_eps, 0.0 },  /* with initial_accumulator 0 */
		{ EMDB_OPT_ADAGRAD, "initial_accumulator", f_acc, -0.1 },
		{ EMDB_OPT_ADAGRAD, "initial_accumulator", f_acc, INFINITY },
		{ EMDB_OPT_ROWWISE_ADAGRAD, "eps", f_eps, NAN },
		{ EMDB_OPT_ROWWISE_ADAGRAD, "eps", f_eps, 0.0 },
		{ EMDB_OPT_ROWWISE_ADAGRAD, "initial_accumulator", f_acc, -1.0 },
		{ EMDB_OPT_ADAM, "lr", f_lr, 0.0 },
		{ EMDB_OPT_ADAM, "beta1", f_beta1, 1.0 },
		{ EMDB_OPT_ADAM, "beta1", f_beta1, -0.1 },
		{ EMDB_OPT_ADAM, "beta1", f_beta1, NAN },
		{ EMDB_OPT_ADAM, "beta2", f_beta2, 1.0 },
		{ EMDB_OPT_ADAM, "beta2", f_beta2, 2.0 },
		{ EMDB_OPT_ADAM, "eps", f_eps, -1.0 },
		{ EMDB_OPT_ADAM, "eps", f_eps, 0.0 },
		{ EMDB_OPT_FTRL, "alpha", f_lr, 0.0 },
		{ EMDB_OPT_FTRL, "beta", f_beta, -1.0 },
		{ EMDB_OPT_FTRL, "l1", f_l1, -0.01 },
		{ EMDB_OPT_FTRL, "l1", f_l1, NAN },
		{ EMDB_OPT_FTRL, "l2", f_l2, INFINITY },
		{ EMDB_OPT_FTRL, "initial_accumulator", f_acc, -0.1 },
	};
	char why[160];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		emdb_optimizer o = defaults(bad[i].kind);
		*bad[i].pick(&o) = bad[i].value;
		memset(why, 'x', sizeof(why));
		cr_expect_eq(emdb__optimizer_check(&o, why, sizeof(why)), EMDB_ERR_INVALID,
			     "case %zu (%s %s = %g) accepted", i, emdb_optimizer_name(bad[i].kind),
			     bad[i].field, bad[i].value);
		cr_expect_neq(memchr(why, '\0', sizeof(why)), NULL, "case %zu: unterminated", i);
		cr_expect_neq(strstr(why, bad[i].field), NULL, "case %zu: '%s' lacks '%s'", i,
			      why, bad[i].field);
		cr_expect_neq(strstr(why, emdb_optimizer_name(bad[i].kind)), NULL,
			      "case %zu: '%s' lacks the optimizer", i, why);
	}
}

Test(check, optimizer_accepts)
{
	static const emdb_opt_kind kinds[] = { EMDB_OPT_SGD, EMDB_OPT_ADAGRAD,
					       EMDB_OPT_ROWWISE_ADAGRAD, EMDB_OPT_ADAM,
					       EMDB_OPT_FTRL };
	char why[160];
	emdb_optimizer o;

	for (size_t i = 0; i < 5; i++) {
		o = defaults(kinds[i]);
		cr_expect_eq(emdb__optimizer_check(&o, why, sizeof(why)), EMDB_OK, "%s: %s",
			     emdb_optimizer_name(kinds[i]), why);
		cr_expect_str_eq(why, "");
	}
	/* Fields the kind does not use are ignored. */
	o = defaults(EMDB_OPT_SGD);
	o.eps = NAN;
	o.beta1 = 5;
	o.l1 = -1;
	cr_expect_eq(emdb__optimizer_check(&o, why, sizeof(why)), EMDB_OK, "%s", why);
	/* eps 0 is fine where the accumulator cannot be 0. */
	o = defaults(EMDB_OPT_ADAGRAD);
	o.eps = 0;
	o.initial_accumulator = 0.1;
	cr_expect_eq(emdb__optimizer_check(&o, why, sizeof(why)), EMDB_OK, "%s", why);
	o = defaults(EMDB_OPT_ADAM);
	o.beta1 = 0;
	o.beta2 = 0;
	cr_expect_eq(emdb__optimizer_check(&o, why, sizeof(why)), EMDB_OK, "%s", why);
	/* FTRL needs one of beta, l2, initial_accumulator above 0. */
	o = defaults(EMDB_OPT_FTRL);
	o.beta = 0;
	cr_expect_eq(emdb__optimizer_check(&o, why, sizeof(why)), EMDB_OK, "%s", why);
	o.initial_accumulator = 0;
	cr_expect_eq(emdb__optimizer_check(&o, why, sizeof(why)), EMDB_ERR_INVALID);
	cr_expect_neq(strstr(why, "beta"), NULL, "%s", why);
	o.l2 = 0.5;
	cr_expect_eq(emdb__optimizer_check(&o, why, sizeof(why)), EMDB_OK, "%s", why);
}

Test(check, optimizer_odd_calls)
{
	emdb_optimizer o;
	char why[12];

	memset(&o, 0, sizeof(o));
	cr_expect_eq(emdb__optimizer_check(&o, why, sizeof(why)), EMDB_ERR_INVALID);
	cr_expect_eq(strlen(why), sizeof(why) - 1, "truncated, terminated: '%s'", why);
	o.kind = (emdb_opt_kind)42;
	cr_expect_eq(emdb__optimizer_check(&o, NULL, 0), EMDB_ERR_INVALID);
	cr_expect_eq(emdb__optimizer_check(NULL, why, sizeof(why)), EMDB_ERR_INVALID);
	o = defaults(EMDB_OPT_ADAM);
	o.beta1 = 1;
	cr_expect_eq(emdb__optimizer_check(&o, NULL, 0), EMDB_ERR_INVALID);
}

Test(check, init)
{
	struct {
		emdb_init_kind kind;
		double a, b;
		int ok;
		const char *field;
	} cases[] = {
		{ EMDB_INIT_ZEROS, NAN, INFINITY, 1, NULL },
		{ EMDB_INIT_UNIFORM, -0.05, 0.05, 1, NULL },
		{ EMDB_INIT_UNIFORM, 0.1, 0.1, 0, "high" },
		{ EMDB_INIT_UNIFORM, 1.0, -1.0, 0, "high" },
		{ EMDB_INIT_UNIFORM, NAN, 1.0, 0, "low" },
		{ EMDB_INIT_UNIFORM, 0.0, INFINITY, 0, "high" },
		{ EMDB_INIT_UNIFORM, -1e300, 0.0, 0, "low" },
		{ EMDB_INIT_NORMAL, 0.0, 0.01, 1, NULL },
		{ EMDB_INIT_NORMAL, 5.0, 0.0, 1, NULL },
		{ EMDB_INIT_NORMAL, 0.0, -0.01, 0, "std" },
		{ EMDB_INIT_NORMAL, 0.0, NAN, 0, "std" },
		{ EMDB_INIT_NORMAL, INFINITY, 1.0, 0, "mean" },
		{ (emdb_init_kind)3, 0.0, 1.0, 0, "kind" },
		{ (emdb_init_kind)-1, 0.0, 1.0, 0, "kind" },
	};
	char why[160];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		emdb_init in = { cases[i].kind, cases[i].a, cases[i].b };
		int rc = emdb__init_check(&in, why, sizeof(why));
		if (cases[i].ok) {
			cr_expect_eq(rc, EMDB_OK, "case %zu: %s", i, why);
		} else {
			cr_expect_eq(rc, EMDB_ERR_INVALID, "case %zu accepted", i);
			cr_expect_neq(strstr(why, cases[i].field), NULL, "case %zu: '%s' lacks '%s'",
				      i, why, cases[i].field);
		}
	}
	cr_expect_eq(emdb__init_check(NULL, why, sizeof(why)), EMDB_ERR_INVALID);
}
