/*
 * test_init.c - the reproducible initial values of db/init_math.h.
 *
 * The reference below is written again from docs/engine.md, "Initial
 * values", in the plainest way (a round counter, an explicit key schedule,
 * one Philox call per column), without calling the header, so that a
 * mistake in the header's block loop, tail handling or word selection
 * shows up as a bit difference.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "db/init_math.h"

/* ---- reference ------------------------------------------------------ */

static void ref_philox(const uint32_t in[4], const uint32_t key[2], uint32_t out[4])
{
	uint32_t x0 = in[0], x1 = in[1], x2 = in[2], x3 = in[3];
	uint32_t k0 = key[0], k1 = key[1];

	for (int round = 0; round < 10; round++) {
		if (round > 0) {
			k0 = k0 + 0x9E3779B9u;
			k1 = k1 + 0xBB67AE85u;
		}
		uint64_t p0 = (uint64_t)0xD2511F53u * (uint64_t)x0;
		uint64_t p1 = (uint64_t)0xCD9E8D57u * (uint64_t)x2;
		uint32_t n0 = (uint32_t)(p1 >> 32) ^ x1 ^ k0;
		uint32_t n1 = (uint32_t)(p1 & 0xffffffffu);
		uint32_t n2 = (uint32_t)(p0 >> 32) ^ x3 ^ k1;
		uint32_t n3 = (uint32_t)(p0 & 0xffffffffu);
		x0 = n0;
		x1 = n1;
		x2 = n2;
		x3 = n3;
	}
	out[0] = x0;
	out[1] = x1;
	out[2] = x2;
	out[3] = x3;
}

static double ref_u(uint32_t x)
{
	return ((double)x + 0.5) / 4294967296.0;
}

static float ref_value(emdb_init_kind kind, double a, double b, uint64_t seed,
		       uint32_t table, uint64_t id, uint32_t col)
{
	uint32_t ctr[4] = { col / 4, (uint32_t)(id & 0xffffffffu), (uint32_t)(id >> 32), table };
	uint32_t key[2] = { (uint32_t)(seed & 0xffffffffu), (uint32_t)(seed >> 32) };
	uint32_t w[4];
	uint32_t j = col % 4;

	if (kind == EMDB_INIT_ZEROS)
		return 0.0f;
	ref_philox(ctr, key, w);
	if (kind == EMDB_INIT_UNIFORM)
		return (float)fma(b - a, ref_u(w[j]), a);
	uint32_t p = j / 2;
	double pi = 3.14159265358979323846;
	double r = sqrt(-2.0 * log(ref_u(w[2 * p])));
	double theta = 2.0 * pi * ref_u(w[2 * p + 1]);
	double z = (j % 2 == 0) ? r * cos(theta) : r * sin(theta);
	return (float)fma(b, z, a);
}

static uint32_t bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

/* ---- Philox known answers (Random123 kat_vectors) -------------------- */

static void check_kat(const uint32_t ctr[4], const uint32_t key[2], const uint32_t want[4])
{
	uint32_t got[4], ref[4];

	emdb_philox4x32_10(ctr, key, got);
	ref_philox(ctr, key, ref);
	for (int i = 0; i < 4; i++) {
		cr_expect_eq(got[i], want[i], "word %d: %08x, want %08x", i, got[i], want[i]);
		cr_expect_eq(ref[i], want[i], "reference word %d: %08x, want %08x", i, ref[i],
			     want[i]);
	}
}

Test(philox, kat_zero)
{
	uint32_t ctr[4] = { 0, 0, 0, 0 }, key[2] = { 0, 0 };
	uint32_t want[4] = { 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8 };
	check_kat(ctr, key, want);
}

Test(philox, kat_ones)
{
	uint32_t ctr[4] = { ~0u, ~0u, ~0u, ~0u }, key[2] = { ~0u, ~0u };
	uint32_t want[4] = { 0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd };
	check_kat(ctr, key, want);
}

Test(philox, kat_pi)
{
	uint32_t ctr[4] = { 0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344 };
	uint32_t key[2] = { 0xa4093822, 0x299f31d0 };
	uint32_t want[4] = { 0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1 };
	check_kat(ctr, key, want);
}

/* ---- the formula, bit for bit ---------------------------------------- */

static const uint64_t seeds[] = { 0, 1, 42, 0xffffffffull, 0x100000000ull,
				  0x0123456789abcdefull, UINT64_MAX };
static const uint32_t tables[] = { 0, 1, 3, 0x80000000u, UINT32_MAX };
static const uint64_t ids[] = { 0, 1, 2, 7, 0xffffffffull, 0x100000000ull,
				0x100000007ull, 0xdeadbeefcafef00dull, UINT64_MAX - 1,
				UINT64_MAX };
static const uint32_t dims[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 31, 63, 64, 65, 130 };

struct init_case {
	emdb_init_kind kind;
	double a, b;
};

static const struct init_case cases[] = {
	{ EMDB_INIT_UNIFORM, -0.05, 0.05 },
	{ EMDB_INIT_UNIFORM, 0.0, 1.0 },
	{ EMDB_INIT_UNIFORM, -3.5, 1e-3 },
	{ EMDB_INIT_UNIFORM, 1e6, 1e6 + 7.0 },
	{ EMDB_INIT_NORMAL, 0.0, 1.0 },
	{ EMDB_INIT_NORMAL, 0.0, 0.01 },
	{ EMDB_INIT_NORMAL, -2.0, 0.5 },
	{ EMDB_INIT_NORMAL, 3.0, 0.0 },
	{ EMDB_INIT_ZEROS, 5.0, 9.0 },
};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* One row through emdb_init_row and every column through
 * emdb_init_value, against the reference; returns the columns checked. */
static size_t check_row(const struct init_case *k, uint64_t seed, uint32_t table,
			uint64_t id, uint32_t dim)
{
	float out[131];

	/* A sentinel after the row catches a tail written too far. */
	for (size_t c = 0; c < N_OF(out); c++)
		out[c] = 12345.0f;
	emdb_init_row(k->kind, k->a, k->b, seed, table, id, dim, out);
	cr_assert_eq(bits(out[dim]), bits(12345.0f), "dim %u: wrote past the row", dim);
	for (uint32_t c = 0; c < dim; c++) {
		float want = ref_value(k->kind, k->a, k->b, seed, table, id, c);
		float one = emdb_init_value(k->kind, k->a, k->b, seed, table, id, c);

		if (bits(out[c]) != bits(want) || bits(one) != bits(want))
			cr_assert_fail("kind %d a %g b %g seed %llx table %u id %llx dim %u "
				       "col %u: row %a value %a want %a",
				       (int)k->kind, k->a, k->b, (unsigned long long)seed, table,
				       (unsigned long long)id, dim, c, out[c], one, want);
	}
	return dim;
}

Test(init, row_matches_reference_bit_exact)
{
	size_t checked = 0;

	for (size_t ci = 0; ci < N_OF(cases); ci++)
		for (size_t si = 0; si < N_OF(seeds); si++)
			for (size_t ti = 0; ti < N_OF(tables); ti++)
				for (size_t ii = 0; ii < N_OF(ids); ii++)
					for (size_t di = 0; di < N_OF(dims); di++)
						checked += check_row(&cases[ci], seeds[si],
								     tables[ti], ids[ii],
								     dims[di]);
	cr_expect_gt(checked, 1000000, "%zu values", checked);
}

/* Whether a row has 5 or 64 columns does not change its first five. */
Test(init, prefix_independent_of_dim)
{
	float a[64], b[5];

	emdb_init_row(EMDB_INIT_NORMAL, 0, 1, 9, 2, 77, 64, a);
	emdb_init_row(EMDB_INIT_NORMAL, 0, 1, 9, 2, 77, 5, b);
	for (int c = 0; c < 5; c++)
		cr_expect_eq(bits(a[c]), bits(b[c]), "col %d", c);
}

/* Each of seed, table, id and block moves the value. */
Test(init, inputs_all_matter)
{
	float base = emdb_init_value(EMDB_INIT_UNIFORM, 0, 1, 5, 6, 7, 8);

	cr_expect_neq(bits(base), bits(emdb_init_value(EMDB_INIT_UNIFORM, 0, 1, 5 | (1ull << 40), 6, 7, 8)));
	cr_expect_neq(bits(base), bits(emdb_init_value(EMDB_INIT_UNIFORM, 0, 1, 5, 7, 7, 8)));
	cr_expect_neq(bits(base), bits(emdb_init_value(EMDB_INIT_UNIFORM, 0, 1, 5, 6, 7 | (1ull << 40), 8)));
	cr_expect_neq(bits(base), bits(emdb_init_value(EMDB_INIT_UNIFORM, 0, 1, 5, 6, 7, 12)));
}

/* The worked example of docs/engine.md, so the document cannot drift. */
Test(init, documented_example)
{
	static const uint32_t uni[6] = { 0x3d141301, 0x3cb6c231, 0xbb80e9a9,
					 0xbb61f8c1, 0x3b964ac7, 0x3c50b7c0 };
	static const uint32_t nor[6] = { 0xba70d42a, 0xbbb05e93, 0xbc47392e,
					 0x3b2f65dc, 0xbbfb18bc, 0xbc0160f5 };
	static const uint32_t w0[4] = { 0xdc8be0b1, 0xb91caf4c, 0x75edbec2, 0x772c4873 };
	uint32_t ctr[4] = { 0, 7, 1, 3 }, key[2] = { 42, 0 }, w[4];
	float out[6];

	emdb_philox4x32_10(ctr, key, w);
	for (int j = 0; j < 4; j++)
		cr_expect_eq(w[j], w0[j], "block 0 word %d: %08x", j, w[j]);
	emdb_init_row(EMDB_INIT_UNIFORM, -0.05, 0.05, 42, 3, 0x100000007ull, 6, out);
	for (int c = 0; c < 6; c++)
		cr_expect_eq(bits(out[c]), uni[c], "uniform col %d: %08x", c, bits(out[c]));
	emdb_init_row(EMDB_INIT_NORMAL, 0.0, 0.01, 42, 3, 0x100000007ull, 6, out);
	for (int c = 0; c < 6; c++)
		cr_expect_eq(bits(out[c]), nor[c], "normal col %d: %08x", c, bits(out[c]));
}

Test(init, zeros_are_positive_zero)
{
	float out[7];

	memset(out, 0xff, sizeof(out));
	emdb_init_row(EMDB_INIT_ZEROS, 1, 2, 3, 4, 5, 7, out);
	for (int c = 0; c < 7; c++)
		cr_expect_eq(bits(out[c]), 0u);
}

/* ---- distributions --------------------------------------------------- */

#define SAMPLE_ROWS 1563 /* x 64 columns = 100032 values */

Test(init, uniform_range_and_moments)
{
	const double lo = -0.25, hi = 0.75;
	float row[64];
	double sum = 0, sq = 0;
	size_t n = 0, at_hi = 0;

	for (uint64_t id = 0; id < SAMPLE_ROWS; id++) {
		emdb_init_row(EMDB_INIT_UNIFORM, lo, hi, 2024, 1, id * 0x9e3779b97f4a7c15ull, 64, row);
		for (int c = 0; c < 64; c++) {
			/* Closed above: see docs/engine.md, a value within half
			 * an ulp of high rounds to (float)high. */
			cr_assert(row[c] >= (float)lo && row[c] <= (float)hi, "%a", row[c]);
			at_hi += row[c] == (float)hi;
			sum += row[c];
			sq += (double)row[c] * row[c];
			n++;
		}
	}
	double mean = sum / n, var = sq / n - mean * mean;
	/* Standard error of the mean: sqrt(1/12 / 1e5) ~ 0.0009. */
	cr_expect(fabs(mean - 0.25) < 0.005, "mean %g", mean);
	cr_expect(fabs(var - 1.0 / 12) < 0.002, "var %g", var);
	cr_expect_eq(at_hi, 0, "(float)high reached %zu times in 1e5 draws", at_hi);
}

Test(init, normal_moments)
{
	const double mean0 = 1.5, std0 = 0.2;
	float row[64];
	double sum = 0, sq = 0, m4 = 0;
	size_t n = 0, beyond3 = 0;

	for (uint64_t id = 0; id < SAMPLE_ROWS; id++) {
		emdb_init_row(EMDB_INIT_NORMAL, mean0, std0, 7, 9, id, 64, row);
		for (int c = 0; c < 64; c++) {
			double z = (row[c] - mean0) / std0;
			cr_assert(isfinite(row[c]));
			sum += row[c];
			sq += (double)row[c] * row[c];
			m4 += z * z * z * z;
			beyond3 += fabs(z) > 3;
			n++;
		}
	}
	double mean = sum / n, std = sqrt(sq / n - mean * mean);
	/* Standard errors: mean 0.2/316 ~ 0.0006, std ~ 0.00045. */
	cr_expect(fabs(mean - mean0) < 0.004, "mean %g", mean);
	cr_expect(fabs(std - std0) < 0.003, "std %g", std);
	cr_expect(fabs(m4 / n - 3.0) < 0.1, "kurtosis %g", m4 / n);
	/* P(|z| > 3) = 0.0027: about 270 of 1e5. */
	cr_expect(beyond3 > 150 && beyond3 < 400, "%zu beyond 3 sigma", beyond3);
}

/* Columns of one block and neighbouring rows are uncorrelated. */
Test(init, no_obvious_correlation)
{
	float row[8];
	double s01 = 0, s04 = 0, s0n = 0, prev0 = 0;
	const int rows = 20000;

	for (int id = 0; id < rows; id++) {
		emdb_init_row(EMDB_INIT_NORMAL, 0, 1, 11, 1, (uint64_t)id, 8, row);
		s01 += (double)row[0] * row[1];
		s04 += (double)row[0] * row[4];
		s0n += prev0 * row[0];
		prev0 = row[0];
	}
	/* Each correlation estimate has standard error 1/sqrt(20000) ~ 0.007. */
	cr_expect(fabs(s01 / rows) < 0.04, "corr(c0, c1) %g", s01 / rows);
	cr_expect(fabs(s04 / rows) < 0.04, "corr(c0, c4) %g", s04 / rows);
	cr_expect(fabs(s0n / rows) < 0.04, "corr(id, id+1) %g", s0n / rows);
}
