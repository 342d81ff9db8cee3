/*
 * keys.h - the ID streams of emdb-bench: which IDs a workload asks for, and
 * in what proportions.
 *
 * A table of N rows holds the IDs of ranks 1..N; rank 1 is the most popular.
 * Ranks are drawn either uniformly or from a Zipf law whose exponent is
 * calibrated so that the top 2.2% of ranks take 90% of the draws, the skew
 * HypeReca (section 2.4) measures on Criteo Kaggle.  A rank becomes an ID
 * through a bijective 64-bit mix, so that IDs are arbitrary uint64 and hot
 * IDs are neither small nor dense; ranks above N are IDs the table has never
 * seen.
 */
#ifndef EMDB_BENCH_KEYS_H
#define EMDB_BENCH_KEYS_H

#include <stddef.h>
#include <stdint.h>

/* HypeReca's Criteo Kaggle figures: 2.2% of IDs take about 90% of accesses. */
#define KEYS_HOT_FRAC 0.022
#define KEYS_HOT_SHARE 0.90

typedef enum keys_dist {
	KEYS_ZIPF = 0,
	KEYS_UNIFORM = 1,
} keys_dist;

const char *keys_dist_name(keys_dist d);

/* A splitmix64 generator: one per thread, never shared. */
typedef struct keys_rng {
	uint64_t state;
} keys_rng;

static inline uint64_t keys_rng_next(keys_rng *r)
{
	uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static inline double keys_rng_unit(keys_rng *r)
{
	return (double)(keys_rng_next(r) >> 11) * 0x1.0p-53;
}

/* Uniform in [0, n), by multiply-shift (bias below 2^-32 for n < 2^32). */
static inline uint64_t keys_rng_below(keys_rng *r, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)keys_rng_next(r) * n) >> 64);
}

/* Rank -> ID.  Stafford's Mix13 (splitmix64's finalizer) on the salted
 * rank: each step (xor-shift, multiply by an odd constant) is invertible,
 * so distinct ranks give distinct IDs; rank 0 (never a real rank) gives
 * KEYS_ID_FRESH.  Deliberately not the index's own mixer (fmix64), so the
 * index hashes IDs that look random to it rather than undoing their mix. */
static inline uint64_t keys_id(uint64_t rank)
{
	uint64_t x = rank ^ 0x6a09e667f3bcc909ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Marks a position of an ID pool where a never-seen ID goes (see keys_fill). */
#define KEYS_ID_FRESH keys_id(0)

/* A bijection of [0, n) that scatters neighbours: a permutation of the
 * enclosing power of two (xor-shifts and an odd multiply within k bits),
 * cycle-walked until it lands below n.  Used to place ranks in rows so that
 * hot rows are spread over the whole region, as in the engine. */
typedef struct keys_perm {
	uint64_t n;
	uint64_t mask;
	uint64_t mul;
	uint64_t salt;
	unsigned shift;
} keys_perm;

void keys_perm_init(keys_perm *p, uint64_t n, uint64_t seed);

static inline uint64_t keys_perm_apply(const keys_perm *p, uint64_t i)
{
	uint64_t x = i;
	do {
		x = (x ^ p->salt) & p->mask;
		x ^= x >> p->shift;
		x = (x * p->mul) & p->mask;
		x ^= x >> p->shift;
	} while (x >= p->n);
	return x;
}

/* Rejection-inversion sampler of a Zipf law over ranks 1..n with exponent s
 * (Hoermann and Derflinger 1996): O(1) per draw, no table. */
typedef struct keys_zipf {
	uint64_t n;
	double s;
	double h_x1;   /* H(1.5) - 1                      */
	double h_n;    /* H(n + 0.5)                      */
	double sv;     /* squeeze bound                   */
} keys_zipf;

void keys_zipf_init(keys_zipf *z, uint64_t n, double s);
uint64_t keys_zipf_draw(const keys_zipf *z, keys_rng *r);

/* Share of the mass of Zipf(n, s) held by ranks 1..m, computed from the
 * generalized harmonic numbers (exact head, Euler-Maclaurin tail). */
double keys_zipf_share(uint64_t n, double s, uint64_t m);

/* The exponent for which the top `frac` of n ranks hold `share` of the
 * mass, by bisection on keys_zipf_share. */
double keys_zipf_calibrate(uint64_t n, double frac, double share);

/* Ranks that count as "top 2.2%" of n. */
uint64_t keys_hot_count(uint64_t n);

/* A rank source over 1..n. */
typedef struct keys_source {
	keys_dist dist;
	uint64_t n;
	keys_zipf zipf; /* when dist == KEYS_ZIPF */
} keys_source;

/* Calibrates the exponent for n when dist is Zipf. */
void keys_source_init(keys_source *src, keys_dist dist, uint64_t n);

static inline uint64_t keys_source_draw(const keys_source *src, keys_rng *r)
{
	if (src->dist == KEYS_ZIPF)
		return keys_zipf_draw(&src->zipf, r);
	return 1 + keys_rng_below(r, src->n);
}

/* Fill ranks[0..len) with draws from src (seeded by seed); each position is
 * instead 0 ("a new ID") with probability fresh_frac. */
void keys_fill_ranks(const keys_source *src, uint64_t seed, double fresh_frac,
		     uint64_t *ranks, size_t len);

/* Fraction of the non-zero ranks[0..len) that are among the top
 * keys_hot_count(n): the skew actually drawn. */
double keys_measured_share(const uint64_t *ranks, size_t len, uint64_t n);

#endif
