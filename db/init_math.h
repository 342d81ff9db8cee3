/*
 * init_math.h - the reproducible initial value of a row.
 *
 * A row's initial value is a pure function of (table seed, table id, row id,
 * column) so that it does not depend on which thread, server or device
 * inserts the row, on insertion order, or on whether Lookup computes it for
 * an ID that was never inserted (EMDB_DEFAULT_INIT).  The formula is the
 * contract of docs/engine.md, "Initial values"; clients reproduce it.
 *
 * Randomness comes from Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel
 * random numbers: as easy as 1, 2, 3", SC 2011), a counter-based generator:
 * one call maps a 128-bit counter and a 64-bit key to 128 random bits with
 * no state to carry, so column block 4k..4k+3 of any row costs one call.
 *
 * Invariants:
 *   1. The value of (seed, table, id, col) is the same from emdb_init_row
 *      and emdb_init_value, for every dim that contains col.
 *   2. Products that feed a sum are written as explicit fma(), so that the
 *      result does not depend on whether a compiler contracts a*b+c
 *      (gcc -ffp-contract=fast, nvcc's default) and is the same with and
 *      without FMA hardware.
 *   3. Everything is EMDB_HD static inline with no globals and no libc call
 *      outside <math.h>, so the same code compiles for CUDA kernels.
 *
 * The transcendental functions of the normal initializer (log, cos, sin)
 * are not correctly rounded by every libm; see docs/engine.md for what that
 * means for bit-reproducibility across platforms.
 */
#ifndef EMDB_INIT_MATH_H
#define EMDB_INIT_MATH_H

#include <math.h>
#include <stdint.h>

#include <emdb/db.h>

#include "base/hd.h"

#define EMDB_PHILOX_M0 0xD2511F53u
#define EMDB_PHILOX_M1 0xCD9E8D57u
#define EMDB_PHILOX_W0 0x9E3779B9u /* golden ratio                 */
#define EMDB_PHILOX_W1 0xBB67AE85u /* sqrt(3) - 1                  */

/* One Philox round: two 32x32->64 multiplies, then the S-box permutation
 * that mixes the high halves into the other two words. */
EMDB_HD static inline void emdb__philox_round(uint32_t x[4], uint32_t k0,
					      uint32_t k1)
{
	uint64_t p0 = (uint64_t)EMDB_PHILOX_M0 * x[0];
	uint64_t p1 = (uint64_t)EMDB_PHILOX_M1 * x[2];
	uint32_t y0 = (uint32_t)(p1 >> 32) ^ x[1] ^ k0;
	uint32_t y1 = (uint32_t)p1;
	uint32_t y2 = (uint32_t)(p0 >> 32) ^ x[3] ^ k1;
	uint32_t y3 = (uint32_t)p0;

	x[0] = y0;
	x[1] = y1;
	x[2] = y2;
	x[3] = y3;
}

/* Philox4x32-10: ten rounds, the key bumped by the Weyl constants between
 * rounds (nine bumps).  Matches the Random123 known-answer vectors. */
EMDB_HD static inline void emdb_philox4x32_10(const uint32_t ctr[4],
					      const uint32_t key[2],
					      uint32_t out[4])
{
	uint32_t x[4] = { ctr[0], ctr[1], ctr[2], ctr[3] };
	uint32_t k0 = key[0], k1 = key[1];

	emdb__philox_round(x, k0, k1);
	for (int r = 1; r < 10; r++) {
		k0 += EMDB_PHILOX_W0;
		k1 += EMDB_PHILOX_W1;
		emdb__philox_round(x, k0, k1);
	}
	out[0] = x[0];
	out[1] = x[1];
	out[2] = x[2];
	out[3] = x[3];
}

/* The 128 random bits behind columns 4*block .. 4*block+3 of a row. */
EMDB_HD static inline void emdb__init_bits(uint64_t seed, uint32_t table,
					   uint64_t id, uint32_t block,
					   uint32_t w[4])
{
	uint32_t ctr[4] = { block, (uint32_t)id, (uint32_t)(id >> 32), table };
	uint32_t key[2] = { (uint32_t)seed, (uint32_t)(seed >> 32) };

	emdb_philox4x32_10(ctr, key, w);
}

/* (x + 0.5) / 2^32: exact in double, strictly inside (0, 1), so log() of
 * it is finite. */
EMDB_HD static inline double emdb__init_u(uint32_t x)
{
	return ((double)x + 0.5) * (1.0 / 4294967296.0);
}

/* Four uniform values from one block of bits: (float)fma(b - a, u, a). */
EMDB_HD static inline void emdb__init_uniform4(const uint32_t w[4], double a,
					       double span, float o[4])
{
	for (int j = 0; j < 4; j++)
		o[j] = (float)fma(span, emdb__init_u(w[j]), a);
}

/* Four normal values from one block: Box-Muller on (w0, w1) gives columns
 * 0 (cos) and 1 (sin), on (w2, w3) columns 2 and 3. */
EMDB_HD static inline void emdb__init_normal4(const uint32_t w[4], double mean,
					      double std, float o[4])
{
	const double two_pi = 2.0 * 3.14159265358979323846;

	for (int p = 0; p < 2; p++) {
		double r = sqrt(-2.0 * log(emdb__init_u(w[2 * p])));
		double theta = two_pi * emdb__init_u(w[2 * p + 1]);

		o[2 * p] = (float)fma(std, r * cos(theta), mean);
		o[2 * p + 1] = (float)fma(std, r * sin(theta), mean);
	}
}

#if defined(__AVX2__) && defined(__FMA__) && !defined(__CUDACC__)
#include <immintrin.h>
#define EMDB_INIT_X8 1

/* lo and hi halves of the 32x32->64 products m * x, lane by lane. */
static inline void emdb__mulhilo_x8(__m256i x, __m256i m, __m256i *lo, __m256i *hi)
{
	__m256i pe = _mm256_mul_epu32(x, m);                       /* lanes 0,2,4,6 */
	__m256i po = _mm256_mul_epu32(_mm256_srli_epi64(x, 32), m); /* lanes 1,3,5,7 */

	*lo = _mm256_mullo_epi32(x, m);
	*hi = _mm256_blend_epi32(_mm256_srli_epi64(pe, 32), po, 0xAA);
}

/* Philox4x32-10 of the eight consecutive blocks b0 .. b0+7 of one row at
 * once, one AVX2 lane per block; equal to emdb__init_bits lane by lane. */
static inline void emdb__init_bits_x8(uint64_t seed, uint32_t table,
				      uint64_t id, uint32_t b0, __m256i w[4])
{
	const __m256i m0 = _mm256_set1_epi32((int)EMDB_PHILOX_M0);
	const __m256i m1 = _mm256_set1_epi32((int)EMDB_PHILOX_M1);
	__m256i x0 = _mm256_add_epi32(_mm256_set1_epi32((int)b0),
				      _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
	__m256i x1 = _mm256_set1_epi32((int)(uint32_t)id);
	__m256i x2 = _mm256_set1_epi32((int)(uint32_t)(id >> 32));
	__m256i x3 = _mm256_set1_epi32((int)table);
	uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);

	for (int r = 0; r < 10; r++) {
		__m256i lo0, hi0, lo1, hi1;

		emdb__mulhilo_x8(x0, m0, &lo0, &hi0);
		emdb__mulhilo_x8(x2, m1, &lo1, &hi1);
		x0 = _mm256_xor_si256(_mm256_xor_si256(hi1, x1), _mm256_set1_epi32((int)k0));
		x2 = _mm256_xor_si256(_mm256_xor_si256(hi0, x3), _mm256_set1_epi32((int)k1));
		x1 = lo1;
		x3 = lo0;
		k0 += EMDB_PHILOX_W0;
		k1 += EMDB_PHILOX_W1;
	}
	w[0] = x0;
	w[1] = x1;
	w[2] = x2;
	w[3] = x3;
}

/* Four lanes of (float)fma(span, (x + 0.5) * 2^-32, a), computed exactly as
 * emdb__init_u and emdb__init_uniform4 do, in double. */
static inline __m128 emdb__uniform_x4(__m128i x, __m256d span, __m256d a)
{
	/* u32 -> double: flip the sign bit, convert as i32, add 2^31 back. */
	__m256d d = _mm256_cvtepi32_pd(_mm_xor_si128(x, _mm_set1_epi32((int)0x80000000u)));
	d = _mm256_add_pd(d, _mm256_set1_pd(2147483648.0));
	d = _mm256_mul_pd(_mm256_add_pd(d, _mm256_set1_pd(0.5)), _mm256_set1_pd(1.0 / 4294967296.0));
	return _mm256_cvtpd_ps(_mm256_fmadd_pd(span, d, a));
}

/* Uniform values of the 32 columns 4*b0 .. 4*b0+31. */
static inline void emdb__init_uniform_x8(uint64_t seed, uint32_t table,
					 uint64_t id, uint32_t b0, double a,
					 double span, float *out)
{
	__m256i w[4];
	__m256d vs = _mm256_set1_pd(span), va = _mm256_set1_pd(a);
	float v[4][8];

	emdb__init_bits_x8(seed, table, id, b0, w);
	for (int k = 0; k < 4; k++) {
		_mm_storeu_ps(&v[k][0], emdb__uniform_x4(_mm256_castsi256_si128(w[k]), vs, va));
		_mm_storeu_ps(&v[k][4], emdb__uniform_x4(_mm256_extracti128_si256(w[k], 1), vs, va));
	}
	/* Column 4*j + k is word k of block b0+j. */
	for (int j = 0; j < 8; j++)
		for (int k = 0; k < 4; k++)
			out[4 * j + k] = v[k][j];
}
#endif

#if defined(EMDB_INIT_X8) && defined(__AVX512F__) && defined(__AVX512DQ__)
#define EMDB_INIT_X16 1

/* emdb__mulhilo_x8 on sixteen lanes. */
static inline void emdb__mulhilo_x16(__m512i x, __m512i m, __m512i *lo, __m512i *hi)
{
	__m512i pe = _mm512_mul_epu32(x, m);                       /* lanes 0,2,...,14 */
	__m512i po = _mm512_mul_epu32(_mm512_srli_epi64(x, 32), m); /* lanes 1,3,...,15 */

	*lo = _mm512_mullo_epi32(x, m);
	*hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(pe, 32), po);
}

/* emdb__init_bits_x8 on the sixteen blocks b0 .. b0+15. */
static inline void emdb__init_bits_x16(uint64_t seed, uint32_t table,
				       uint64_t id, uint32_t b0, __m512i w[4])
{
	const __m512i m0 = _mm512_set1_epi32((int)EMDB_PHILOX_M0);
	const __m512i m1 = _mm512_set1_epi32((int)EMDB_PHILOX_M1);
	__m512i x0 = _mm512_add_epi32(_mm512_set1_epi32((int)b0),
				      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
							11, 12, 13, 14, 15));
	__m512i x1 = _mm512_set1_epi32((int)(uint32_t)id);
	__m512i x2 = _mm512_set1_epi32((int)(uint32_t)(id >> 32));
	__m512i x3 = _mm512_set1_epi32((int)table);
	uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);

	for (int r = 0; r < 10; r++) {
		__m512i lo0, hi0, lo1, hi1;

		emdb__mulhilo_x16(x0, m0, &lo0, &hi0);
		emdb__mulhilo_x16(x2, m1, &lo1, &hi1);
		x0 = _mm512_xor_si512(_mm512_xor_si512(hi1, x1), _mm512_set1_epi32((int)k0));
		x2 = _mm512_xor_si512(_mm512_xor_si512(hi0, x3), _mm512_set1_epi32((int)k1));
		x1 = lo1;
		x3 = lo0;
		k0 += EMDB_PHILOX_W0;
		k1 += EMDB_PHILOX_W1;
	}
	w[0] = x0;
	w[1] = x1;
	w[2] = x2;
	w[3] = x3;
}

/* emdb__uniform_x4 on eight lanes: the same operations in double, so the
 * same floats. */
static inline __m256 emdb__uniform_x8(__m256i x, __m512d span, __m512d a)
{
	__m512d d = _mm512_cvtepu32_pd(x);
	d = _mm512_mul_pd(_mm512_add_pd(d, _mm512_set1_pd(0.5)), _mm512_set1_pd(1.0 / 4294967296.0));
	return _mm512_cvtpd_ps(_mm512_fmadd_pd(span, d, a));
}

/* Uniform values of the 64 columns 4*b0 .. 4*b0+63. */
static inline void emdb__init_uniform_x16(uint64_t seed, uint32_t table,
					  uint64_t id, uint32_t b0, double a,
					  double span, float *out)
{
	__m512i w[4];
	__m512 v[4];
	__m512d vs = _mm512_set1_pd(span), va = _mm512_set1_pd(a);

	emdb__init_bits_x16(seed, table, id, b0, w);
	for (int k = 0; k < 4; k++) {
		__m256 lo = emdb__uniform_x8(_mm512_castsi512_si256(w[k]), vs, va);
		__m256 hi = emdb__uniform_x8(_mm512_extracti64x4_epi64(w[k], 1), vs, va);
		v[k] = _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
	}
	/* Column 4*j + k is word k of block b0+j: a 4x4 transpose inside each
	 * 128-bit lane gives r[i] = block 4L+i in lane L, then one of the
	 * lanes gathers the four blocks of each 16 columns. */
	__m512 t0 = _mm512_unpacklo_ps(v[0], v[1]), t1 = _mm512_unpackhi_ps(v[0], v[1]);
	__m512 t2 = _mm512_unpacklo_ps(v[2], v[3]), t3 = _mm512_unpackhi_ps(v[2], v[3]);
	__m512 r0 = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t0), _mm512_castps_pd(t2)));
	__m512 r1 = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t0), _mm512_castps_pd(t2)));
	__m512 r2 = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t1), _mm512_castps_pd(t3)));
	__m512 r3 = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t1), _mm512_castps_pd(t3)));
	__m512 u0 = _mm512_shuffle_f32x4(r0, r1, _MM_SHUFFLE(1, 0, 1, 0));
	__m512 u1 = _mm512_shuffle_f32x4(r0, r1, _MM_SHUFFLE(3, 2, 3, 2));
	__m512 u2 = _mm512_shuffle_f32x4(r2, r3, _MM_SHUFFLE(1, 0, 1, 0));
	__m512 u3 = _mm512_shuffle_f32x4(r2, r3, _MM_SHUFFLE(3, 2, 3, 2));
	_mm512_storeu_ps(out, _mm512_shuffle_f32x4(u0, u2, _MM_SHUFFLE(2, 0, 2, 0)));
	_mm512_storeu_ps(out + 16, _mm512_shuffle_f32x4(u0, u2, _MM_SHUFFLE(3, 1, 3, 1)));
	_mm512_storeu_ps(out + 32, _mm512_shuffle_f32x4(u1, u3, _MM_SHUFFLE(2, 0, 2, 0)));
	_mm512_storeu_ps(out + 48, _mm512_shuffle_f32x4(u1, u3, _MM_SHUFFLE(3, 1, 3, 1)));
}
#endif

/* Fill out[0..dim) with the initial value of row `id` of table `table`.
 * kind ZEROS ignores a and b; UNIFORM takes a = low, b = high; NORMAL takes
 * a = mean, b = std.  An unknown kind gives zeros (tables validate their
 * initializer at creation, see emdb__init_check).  One Philox call per four
 * columns; the kind is dispatched once per row, not per column. */
EMDB_HD static inline void emdb_init_row(emdb_init_kind kind, double a,
					 double b, uint64_t seed,
					 uint32_t table, uint64_t id,
					 uint32_t dim, float *out)
{
	uint32_t full = dim / 4, rest = dim % 4;
	uint32_t w[4];
	float tail[4];

	switch (kind) {
	case EMDB_INIT_UNIFORM: {
		double span = b - a;
		uint32_t blk = 0;

#ifdef EMDB_INIT_X16
		for (; blk + 16 <= full; blk += 16)
			emdb__init_uniform_x16(seed, table, id, blk, a, span,
					       out + 4 * (size_t)blk);
#endif
#ifdef EMDB_INIT_X8
		/* Eight blocks at a time on the vector path, the rest one by one. */
		for (; blk + 8 <= full; blk += 8)
			emdb__init_uniform_x8(seed, table, id, blk, a, span,
					      out + 4 * (size_t)blk);
#endif
		for (; blk < full; blk++) {
			emdb__init_bits(seed, table, id, blk, w);
			emdb__init_uniform4(w, a, span, out + 4 * (size_t)blk);
		}
		if (rest) {
			emdb__init_bits(seed, table, id, full, w);
			emdb__init_uniform4(w, a, span, tail);
		}
		break;
	}
	case EMDB_INIT_NORMAL:
		for (uint32_t blk = 0; blk < full; blk++) {
			emdb__init_bits(seed, table, id, blk, w);
			emdb__init_normal4(w, a, b, out + 4 * (size_t)blk);
		}
		if (rest) {
			emdb__init_bits(seed, table, id, full, w);
			emdb__init_normal4(w, a, b, tail);
		}
		break;
	case EMDB_INIT_ZEROS:
	default:
		for (uint32_t c = 0; c < dim; c++)
			out[c] = 0.0f;
		return;
	}
	for (uint32_t j = 0; j < rest; j++)
		out[4 * (size_t)full + j] = tail[j];
}

/* The initial value of one column; equals emdb_init_row's out[col]. */
EMDB_HD static inline float emdb_init_value(emdb_init_kind kind, double a,
					    double b, uint64_t seed,
					    uint32_t table, uint64_t id,
					    uint32_t col)
{
	uint32_t w[4];
	float o[4];

	switch (kind) {
	case EMDB_INIT_UNIFORM:
		emdb__init_bits(seed, table, id, col / 4, w);
		emdb__init_uniform4(w, a, b - a, o);
		return o[col % 4];
	case EMDB_INIT_NORMAL:
		emdb__init_bits(seed, table, id, col / 4, w);
		emdb__init_normal4(w, a, b, o);
		return o[col % 4];
	case EMDB_INIT_ZEROS:
	default:
		return 0.0f;
	}
}

#endif
