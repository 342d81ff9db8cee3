/*
 * cluster/owner.h - which node owns an ID: P virtual partitions, each
 * mapped to one node's rank, the map versioned by an epoch (HypeReca 4.1,
 * DESIGN.md "Storage").
 *
 * An ID's partition is a pure function of the ID and P alone: a mixer of
 * its own (splitmix64's finalizer, not the DIT's MurmurHash3 fmix64, so
 * that the IDs one node owns still spread evenly over its index shards)
 * modulo P.  The partition's owner is the map's rank_of[partition].  The
 * map of a fresh cluster gives node r the contiguous partitions
 * [r*P/N, (r+1)*P/N); a reshard (a later issue) writes another map under
 * a higher epoch.  Every node-to-node frame carries the sender's epoch
 * and a node refuses frames of another one.
 *
 * owner_of is the one question the routing asks; a later issue answers
 * "this node" for replicated hot rows behind it.
 *
 * Thread safety: a map is immutable once made; any thread may read it.
 */
#ifndef EMDB_CLUSTER_OWNER_H
#define EMDB_CLUSTER_OWNER_H

#include <stdint.h>

#define OWNER_PARTITIONS_DEFAULT 1024u
#define OWNER_PARTITIONS_MAX (1u << 24)

typedef struct owner_map {
	uint64_t epoch;     /* >= 1 */
	uint32_t partitions; /* P, 1 .. OWNER_PARTITIONS_MAX */
	uint32_t nodes;      /* N, 1 .. P */
	uint32_t *rank_of;   /* [P] ranks < N */
} owner_map;

/* The fresh map of epoch 1 for N nodes and P partitions (P 0: the
 * default).  Errors: INVALID (N 0, P out of range or below N), NOMEM. */
int owner_map_init(owner_map *m, uint32_t nodes, uint32_t partitions);
/* Frees rank_of; the struct may be reused.  NULL rank_of is fine. */
void owner_map_destroy(owner_map *m);

/* The partition of id: mix(id) mod P. */
uint32_t owner_partition(const owner_map *m, uint64_t id);

/* The rank that owns id. */
static inline uint32_t owner_of(const owner_map *m, uint64_t id)
{
	return m->rank_of[owner_partition(m, id)];
}

/* Partitions rank owns (for INFO and docs). */
uint32_t owner_count(const owner_map *m, uint32_t rank);

#endif
