/*
 * hash.h - the 64-bit mixer that spreads IDs over shards and slots.
 *
 * IDs are arbitrary (often small, dense or strided), so they are mixed with
 * a bijective finalizer (MurmurHash3's fmix64) before use: the low bits pick
 * the shard, the high bits the slot within it (fastrange), so the two
 * choices stay independent.
 */
#ifndef EMDB_INDEX_HASH_H
#define EMDB_INDEX_HASH_H

#include <stdint.h>

#include "base/hd.h"

EMDB_HD static inline uint64_t dit_hash(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

/* Map h uniformly onto [0, n) without a division (Lemire's fastrange). */
EMDB_HD static inline uint64_t dit_range(uint64_t h, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)h * n) >> 64);
}

#endif
