/*
 * optim.c - the optimizers' and initializers' host-side facts: defaults,
 * state sizes, names, and validation of hyperparameters.
 *
 * The arithmetic lives in db/optim_math.h and db/init_math.h (inline, also
 * for devices); this file holds what is looked up once per table, so that
 * the per-row code never checks a hyperparameter.
 *
 * Invariants:
 *   1. A configuration that passes emdb__optimizer_check or
 *      emdb__init_check has every field its kind uses finite, in range and
 *      representable as a float, so the float scalars derived from it are
 *      finite.  Fields the kind does not use are ignored, as torch ignores
 *      what an optimizer does not take.
 *   2. A configuration that passes also never divides 0 by 0 in a rule:
 *      a column whose gradients have all been 0 keeps a positive
 *      denominator through eps, the initial accumulator or FTRL's beta/l2.
 *   3. The defaults are torch's where torch has the optimizer (FBGEMM's for
 *      row-wise Adagrad, TensorFlow's FTRL initial accumulator otherwise),
 *      and every default passes the check.
 *
 * No state: every function is pure and thread-safe.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <emdb/db.h>

#include "base/error_int.h"
#include "db/optim_math.h"

int emdb_optimizer_defaults(emdb_opt_kind kind, emdb_optimizer *opt)
{
	emdb_optimizer o;

	if (!opt)
		return emdb__seterr(EMDB_ERR_INVALID, "optimizer defaults: NULL output");
	memset(&o, 0, sizeof(o));
	o.kind = kind;
	switch (kind) {
	case EMDB_OPT_SGD:
		o.lr = 0.01;
		break;
	case EMDB_OPT_ADAGRAD:
		o.lr = 0.01;
		o.eps = 1e-10;
		break;
	case EMDB_OPT_ROWWISE_ADAGRAD:
		o.lr = 0.01;
		o.eps = 1e-8;
		break;
	case EMDB_OPT_ADAM:
		o.lr = 0.001;
		o.beta1 = 0.9;
		o.beta2 = 0.999;
		o.eps = 1e-8;
		break;
	case EMDB_OPT_FTRL:
		o.lr = 0.05;
		o.beta = 1.0;
		o.initial_accumulator = 0.1;
		break;
	default:
		return emdb__seterr(EMDB_ERR_INVALID, "optimizer kind %d is unknown",
				    (int)kind);
	}
	*opt = o;
	return EMDB_OK;
}

uint32_t emdb_optimizer_state_floats(emdb_opt_kind kind, uint32_t dim)
{
	switch (kind) {
	case EMDB_OPT_SGD:
		return 0;
	case EMDB_OPT_ADAGRAD:
		return dim;
	case EMDB_OPT_ROWWISE_ADAGRAD:
		return 1;
	case EMDB_OPT_ADAM:
	case EMDB_OPT_FTRL:
		return 2 * dim;
	}
	return 0;
}

const char *emdb_optimizer_name(emdb_opt_kind kind)
{
	switch (kind) {
	case EMDB_OPT_SGD:
		return "sgd";
	case EMDB_OPT_ADAGRAD:
		return "adagrad";
	case EMDB_OPT_ROWWISE_ADAGRAD:
		return "rowwise_adagrad";
	case EMDB_OPT_ADAM:
		return "adam";
	case EMDB_OPT_FTRL:
		return "ftrl";
	}
	return NULL;
}

/* Writes "<what> <field> must be <rule>, got <x>" and returns INVALID. */
static int reject(char *why, size_t why_len, const char *what,
		  const char *field, const char *rule, double x)
{
	if (why_len > 0)
		snprintf(why, why_len, "%s %s must be %s, got %.17g", what, field,
			 rule, x);
	return EMDB_ERR_INVALID;
}

/* Finite and within float range ("finite" in messages): the per-row code
 * works in float, and a double that rounds to infinity would poison every
 * row it touches. */
static int float_ok(double x)
{
	return isfinite(x) && fabs(x) <= FLT_MAX;
}

static int nonneg_ok(double x)
{
	return float_ok(x) && x >= 0.0;
}

/* [0, 1): beta = 1 would divide by zero in Adam's bias correction. */
static int beta_ok(double x)
{
	return x >= 0.0 && x < 1.0;
}

/* The smallest denominator of FTRL's weight formula, at n =
 * initial_accumulator, in the float arithmetic of emdb__ftrl_cols.  It only
 * grows with n, so when it is > 0 every weight is finite. */
static float ftrl_min_den(const emdb_optimizer *o)
{
	float alpha = (float)o->lr;

	return ((float)o->beta + sqrtf((float)o->initial_accumulator)) / alpha +
	       (float)o->l2;
}

int emdb__optimizer_check(const emdb_optimizer *o, char *why, size_t why_len)
{
	const char *name;
	char what[48];

	if (why_len > 0)
		why[0] = '\0';
	if (!o) {
		if (why_len > 0)
			snprintf(why, why_len, "optimizer is NULL");
		return EMDB_ERR_INVALID;
	}
	name = emdb_optimizer_name(o->kind);
	if (!name) {
		if (why_len > 0)
			snprintf(why, why_len, "optimizer kind %d is unknown",
				 (int)o->kind);
		return EMDB_ERR_INVALID;
	}
	snprintf(what, sizeof(what), "optimizer %s:", name);

	/* > 0 after rounding to float: a denormal lr would become 0. */
	if (!float_ok(o->lr) || !((float)o->lr > 0.0f))
		return reject(why, why_len, what,
			      o->kind == EMDB_OPT_FTRL ? "lr (alpha)" : "lr",
			      "finite and > 0", o->lr);
	if (o->kind == EMDB_OPT_ADAGRAD && !nonneg_ok(o->lr_decay))
		return reject(why, why_len, what, "lr_decay", "finite and >= 0",
			      o->lr_decay);
	if ((o->kind == EMDB_OPT_ADAGRAD || o->kind == EMDB_OPT_ROWWISE_ADAGRAD ||
	     o->kind == EMDB_OPT_ADAM) && !nonneg_ok(o->eps))
		return reject(why, why_len, what, "eps", "finite and >= 0", o->eps);
	if (o->kind == EMDB_OPT_ADAM) {
		if (!beta_ok(o->beta1))
			return reject(why, why_len, what, "beta1", "in [0, 1)",
				      o->beta1);
		if (!beta_ok(o->beta2))
			return reject(why, why_len, what, "beta2", "in [0, 1)",
				      o->beta2);
	}
	if (o->kind == EMDB_OPT_FTRL) {
		if (!nonneg_ok(o->beta))
			return reject(why, why_len, what, "beta", "finite and >= 0",
				      o->beta);
		if (!nonneg_ok(o->l1))
			return reject(why, why_len, what, "l1", "finite and >= 0",
				      o->l1);
		if (!nonneg_ok(o->l2))
			return reject(why, why_len, what, "l2", "finite and >= 0",
				      o->l2);
	}
	if ((o->kind == EMDB_OPT_ADAGRAD || o->kind == EMDB_OPT_ROWWISE_ADAGRAD ||
	     o->kind == EMDB_OPT_FTRL) && !nonneg_ok(o->initial_accumulator))
		return reject(why, why_len, what, "initial_accumulator",
			      "finite and >= 0", o->initial_accumulator);
	/* A column whose gradients so far are all 0 has a zero accumulator
	 * unless eps or the initial accumulator keeps the denominator away
	 * from 0; 0/0 would turn the weight into NaN for good. */
	if (o->kind == EMDB_OPT_ADAM && !((float)o->eps > 0.0f))
		return reject(why, why_len, what, "eps",
			      "> 0 (v starts at 0)", o->eps);
	if ((o->kind == EMDB_OPT_ADAGRAD || o->kind == EMDB_OPT_ROWWISE_ADAGRAD) &&
	    !((float)o->eps > 0.0f) && !((float)o->initial_accumulator > 0.0f))
		return reject(why, why_len, what, "eps",
			      "> 0 when initial_accumulator is 0", o->eps);
	if (o->kind == EMDB_OPT_FTRL && !(ftrl_min_den(o) > 0.0f)) {
		if (why_len > 0)
			snprintf(why, why_len, "optimizer ftrl: (beta + "
				 "sqrt(initial_accumulator)) / alpha + l2 must be "
				 "> 0 in float (beta, l2, initial_accumulator all 0?)");
		return EMDB_ERR_INVALID;
	}
	return EMDB_OK;
}

int emdb__init_check(const emdb_init *i, char *why, size_t why_len)
{
	if (why_len > 0)
		why[0] = '\0';
	if (!i) {
		if (why_len > 0)
			snprintf(why, why_len, "initializer is NULL");
		return EMDB_ERR_INVALID;
	}
	switch (i->kind) {
	case EMDB_INIT_ZEROS:
		return EMDB_OK;
	case EMDB_INIT_UNIFORM:
		if (!float_ok(i->a))
			return reject(why, why_len, "initializer uniform:", "low (a)",
				      "a finite float", i->a);
		if (!float_ok(i->b))
			return reject(why, why_len, "initializer uniform:", "high (b)",
				      "a finite float", i->b);
		if (!(i->a < i->b))
			return reject(why, why_len, "initializer uniform:", "high (b)",
				      "greater than low (a)", i->b);
		return EMDB_OK;
	case EMDB_INIT_NORMAL:
		if (!float_ok(i->a))
			return reject(why, why_len, "initializer normal:", "mean (a)",
				      "a finite float", i->a);
		if (!nonneg_ok(i->b))
			return reject(why, why_len, "initializer normal:", "std (b)",
				      "finite and >= 0", i->b);
		return EMDB_OK;
	}
	if (why_len > 0)
		snprintf(why, why_len, "initializer kind %d is unknown", (int)i->kind);
	return EMDB_ERR_INVALID;
}
