/*
 * loc.h - a row location packed into 64 bits.
 *
 *   bits 63..52  node    (12 bits: up to 4096 server processes)
 *   bits 51..48  tier    (4 bits: host DRAM, hot chunk, GPU, ...)
 *   bits 47..24  chunk   (24 bits: chunk number within the table and tier)
 *   bits 23..0   offset  (24 bits: row within the chunk)
 *
 * LOC_NONE (all ones: tier 15) is never a real location; the index uses it
 * to mark an empty slot and Lookup to mark an ID that is not held.
 */
#ifndef EMDB_LOC_H
#define EMDB_LOC_H

#include <stdint.h>

#include "base/hd.h"

#define LOC_NONE UINT64_MAX

enum loc_tier {
	LOC_TIER_HOST = 0, /* cold rows in host DRAM chunks (HypeReca's C_i) */
	LOC_TIER_HOT = 1,  /* the replicated hot chunk R                      */
	LOC_TIER_GPU = 2,  /* R in GPU memory                                 */
	LOC_TIER_INVALID = 15,
};

#define LOC_NODE_BITS 12
#define LOC_TIER_BITS 4
#define LOC_CHUNK_BITS 24
#define LOC_OFFSET_BITS 24
#define LOC_MAX_CHUNKS (1u << LOC_CHUNK_BITS)
#define LOC_MAX_OFFSET (1u << LOC_OFFSET_BITS)

EMDB_HD static inline uint64_t loc_pack(uint32_t node, uint32_t tier,
					uint32_t chunk, uint32_t offset)
{
	return ((uint64_t)node << 52) | ((uint64_t)(tier & 15) << 48) |
	       ((uint64_t)(chunk & (LOC_MAX_CHUNKS - 1)) << 24) |
	       (uint64_t)(offset & (LOC_MAX_OFFSET - 1));
}

EMDB_HD static inline uint32_t loc_node(uint64_t loc) { return (uint32_t)(loc >> 52); }
EMDB_HD static inline uint32_t loc_tier(uint64_t loc) { return (uint32_t)(loc >> 48) & 15; }
EMDB_HD static inline uint32_t loc_chunk(uint64_t loc) { return (uint32_t)(loc >> 24) & (LOC_MAX_CHUNKS - 1); }
EMDB_HD static inline uint32_t loc_offset(uint64_t loc) { return (uint32_t)loc & (LOC_MAX_OFFSET - 1); }

#endif
