/*
 * keys.c - ID streams for emdb-bench: the calibrated Zipf law, the uniform
 * law, rank -> ID scrambling and pools of pre-drawn ranks.
 *
 * Design
 *   Drawing a Zipf rank costs a log and an exp or two (40-80 ns), as much as
 *   the engine spends on an ID, so workloads never draw while timed: every
 *   thread gets a pool of ranks drawn beforehand (keys_fill_ranks), large
 *   enough (millions) that cycling through it does not turn the run into a
 *   cache benchmark.
 *
 *   The sampler is rejection-inversion (Hoermann and Derflinger, "Rejection-
 *   inversion to generate variates from monotone discrete distributions",
 *   1996; the variant of Apache Commons RNG): it needs no table, so a 30M-key
 *   law costs nothing to set up.  The exponent is found by bisection on the
 *   share of the top 2.2% of ranks, computed from generalized harmonic
 *   numbers (exact sum of the first terms, Euler-Maclaurin for the rest), a
 *   few milliseconds for any n.
 *
 * Invariants
 *   1. keys_zipf_draw returns a rank in 1..n, keys_source_draw too.
 *   2. keys_id is a bijection of uint64: distinct ranks, distinct IDs.
 *   3. keys_perm_apply is a bijection of [0, n).
 *   4. keys_fill_ranks is a pure function of (source, seed, fresh_frac, len).
 */
#include "tools/bench/keys.h"

#include <math.h>

const char *keys_dist_name(keys_dist d)
{
	return d == KEYS_ZIPF ? "zipf" : "uniform";
}

void keys_perm_init(keys_perm *p, uint64_t n, uint64_t seed)
{
	unsigned k = 1;
	keys_rng r = { seed };

	while (k < 64 && (1ull << k) < n)
		k++;
	p->n = n ? n : 1;
	p->mask = k >= 64 ? ~0ull : (1ull << k) - 1;
	p->mul = (keys_rng_next(&r) | 1) & p->mask;
	if (p->mul == 0)
		p->mul = 1;
	p->salt = keys_rng_next(&r) & p->mask;
	p->shift = k / 2 + 1;
}

/* ---- Zipf: rejection-inversion ---------------------------------------- */

/* log1p(x)/x and expm1(x)/x, with their series near 0 where the quotient
 * would lose all precision (s close to 1). */
static double helper1(double x)
{
	if (fabs(x) > 1e-8)
		return log1p(x) / x;
	return 1 - x * (0.5 - x * (1.0 / 3 - 0.25 * x));
}

static double helper2(double x)
{
	if (fabs(x) > 1e-8)
		return expm1(x) / x;
	return 1 + x * 0.5 * (1 + x / 3 * (1 + 0.25 * x));
}

/* H(x) = integral of t^-s: (x^(1-s) - 1) / (1 - s), or log x at s = 1. */
static double h_integral(double s, double x)
{
	double lx = log(x);
	return helper2((1 - s) * lx) * lx;
}

static double h(double s, double x)
{
	return exp(-s * log(x));
}

static double h_integral_inverse(double s, double x)
{
	double t = x * (1 - s);
	if (t < -1)
		t = -1; /* rounding; the true value is >= -1 */
	return exp(helper1(t) * x);
}

void keys_zipf_init(keys_zipf *z, uint64_t n, double s)
{
	z->n = n;
	z->s = s;
	z->h_x1 = h_integral(s, 1.5) - 1;
	z->h_n = h_integral(s, (double)n + 0.5);
	z->sv = 2 - h_integral_inverse(s, h_integral(s, 2.5) - h(s, 2));
}

uint64_t keys_zipf_draw(const keys_zipf *z, keys_rng *r)
{
	for (;;) {
		double u = z->h_n + keys_rng_unit(r) * (z->h_x1 - z->h_n);
		double x = h_integral_inverse(z->s, u);
		double kf = x + 0.5;
		uint64_t k;

		if (kf < 1)
			k = 1;
		else if (kf >= (double)z->n)
			k = z->n;
		else
			k = (uint64_t)kf;
		if ((double)k - x <= z->sv ||
		    u >= h_integral(z->s, (double)k + 0.5) - h(z->s, (double)k))
			return k;
	}
}

/* ---- calibration ------------------------------------------------------- */

#define HARMONIC_EXACT 4096 /* terms summed exactly before Euler-Maclaurin */

/* sum_{k=1..n} k^-s */
static double harmonic(uint64_t n, double s)
{
	uint64_t head = n < HARMONIC_EXACT ? n : HARMONIC_EXACT;
	double sum = 0, a, b;

	for (uint64_t k = head; k >= 1; k--) /* small terms first */
		sum += h(s, (double)k);
	if (head == n)
		return sum;
	/* sum_{k=a+1..b} f(k) = int_a^b f + (f(b) - f(a))/2
	 *                      + (f'(b) - f'(a))/12 + O(f''') */
	a = (double)head;
	b = (double)n;
	sum += h_integral(s, b) - h_integral(s, a);
	sum += (h(s, b) - h(s, a)) / 2;
	sum += (-s * h(s, b) / b + s * h(s, a) / a) / 12;
	return sum;
}

double keys_zipf_share(uint64_t n, double s, uint64_t m)
{
	if (m >= n)
		return 1;
	return harmonic(m, s) / harmonic(n, s);
}

uint64_t keys_hot_count(uint64_t n)
{
	uint64_t m = (uint64_t)llround((double)n * KEYS_HOT_FRAC);
	return m ? m : 1;
}

double keys_zipf_calibrate(uint64_t n, double frac, double share)
{
	uint64_t m = (uint64_t)llround((double)n * frac);
	double lo = 0.0, hi = 8.0;

	if (m == 0)
		m = 1;
	if (m >= n || keys_zipf_share(n, hi, m) < share)
		return hi; /* tiny n: as skewed as the law gets */
	/* The share grows with s: bisect to double precision. */
	for (int i = 0; i < 64; i++) {
		double mid = (lo + hi) / 2;
		if (keys_zipf_share(n, mid, m) < share)
			lo = mid;
		else
			hi = mid;
	}
	return (lo + hi) / 2;
}

void keys_source_init(keys_source *src, keys_dist dist, uint64_t n)
{
	src->dist = dist;
	src->n = n;
	if (dist == KEYS_ZIPF)
		keys_zipf_init(&src->zipf, n,
			       keys_zipf_calibrate(n, KEYS_HOT_FRAC, KEYS_HOT_SHARE));
}

void keys_fill_ranks(const keys_source *src, uint64_t seed, double fresh_frac,
		     uint64_t *ranks, size_t len)
{
	keys_rng r = { seed * 0x2545f4914f6cdd1dull + 1 };
	/* Compare a 53-bit draw with the threshold, not a double per ID. */
	uint64_t fresh_below = (uint64_t)(fresh_frac * 0x1.0p53);

	for (size_t i = 0; i < len; i++) {
		if (fresh_below && (keys_rng_next(&r) >> 11) < fresh_below)
			ranks[i] = 0;
		else
			ranks[i] = keys_source_draw(src, &r);
	}
}

double keys_measured_share(const uint64_t *ranks, size_t len, uint64_t n)
{
	uint64_t hot = keys_hot_count(n), in = 0, all = 0;

	for (size_t i = 0; i < len; i++) {
		if (ranks[i] == 0)
			continue;
		all++;
		in += ranks[i] <= hot;
	}
	return all ? (double)in / (double)all : 0;
}
