/*
 * cluster/owner.c - the partition map (owner.h).
 *
 * Invariants:
 *   1. owner_partition depends on the ID and P only: never on N, the
 *      epoch or anything a node holds, so every node computes the same
 *      partition for an ID, and a different node count only remaps whole
 *      partitions.
 *   2. A fresh map gives each rank floor or ceil of P/N partitions, in
 *      contiguous blocks, and every partition exactly one rank.
 */
#include <emdb/alloc.h>
#include <emdb/error.h>

#include "base/error_int.h"
#include "cluster/owner.h"

/* splitmix64's finalizer (Steele, Lea, Flood 2014): a bijection with full
 * avalanche, unrelated to index/hash.h's mixer. */
static uint64_t owner_mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

int owner_map_init(owner_map *m, uint32_t nodes, uint32_t partitions)
{
	if (!partitions)
		partitions = OWNER_PARTITIONS_DEFAULT;
	m->rank_of = NULL;
	if (!nodes || partitions > OWNER_PARTITIONS_MAX || partitions < nodes)
		return emdb__seterr(EMDB_ERR_INVALID,
				    "partition map: %u partitions for %u nodes: need 1..%u partitions, at least one per node",
				    partitions, nodes, OWNER_PARTITIONS_MAX);
	m->rank_of = emdb_malloc((size_t)partitions * sizeof(*m->rank_of));
	if (!m->rank_of)
		return emdb__seterr(EMDB_ERR_NOMEM, "partition map of %u partitions", partitions);
	for (uint32_t p = 0; p < partitions; p++)
		m->rank_of[p] = (uint32_t)((uint64_t)p * nodes / partitions);
	m->epoch = 1;
	m->partitions = partitions;
	m->nodes = nodes;
	return EMDB_OK;
}

void owner_map_destroy(owner_map *m)
{
	emdb_free(m->rank_of);
	m->rank_of = NULL;
}

uint32_t owner_partition(const owner_map *m, uint64_t id)
{
	return (uint32_t)(owner_mix(id) % m->partitions);
}

uint32_t owner_count(const owner_map *m, uint32_t rank)
{
	uint32_t n = 0;
	for (uint32_t p = 0; p < m->partitions; p++)
		n += m->rank_of[p] == rank;
	return n;
}
