/*
 * tier_int.h - the layout of a tier and the table of operations that each
 * backend fills (db/tier_host.c, db/tier_test.c, gpu/tier_cuda.cu).  Only
 * the shared part (db/tier.c) and the backends include it.
 *
 * The shared part checks every argument, combines duplicate gradient rows,
 * keeps the pending-gradient map and the counters, and turns a backend's
 * IO into the sticky error state, so a backend sees only valid, distinct
 * work:
 *   - slots passed to a backend lie in allocated chunks, except in step's
 *     list, where a slot of a chunk freed since its gradient arrived is
 *     TIER_SLOT_NONE and is skipped;
 *   - accumulate's pidx are distinct within a call.
 * A backend's accumulators (max_pending rows of dim floats per replica)
 * are zero at open and zeroed again by step for the rows it applied.
 */
#ifndef EMDB_TIER_INT_H
#define EMDB_TIER_INT_H

#include "db/tier.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TIER_SLOT_NONE UINT64_MAX

/* What init_rows needs, resolved once by the shared part. */
typedef struct tier_init_args {
	emdb_init init;
	emdb_optimizer opt;
	uint64_t seed;
	uint32_t table;
} tier_init_args;

typedef struct tier_backend {
	const char *name;
	/* Sets t->impl.  Errors: NOMEM, UNSUPPORTED, IO. */
	int (*open)(tier *t);
	void (*close)(tier *t);
	int (*chunk_alloc)(tier *t, uint32_t c);
	void (*chunk_free)(tier *t, uint32_t c);
	int (*put_rows)(tier *t, const uint64_t *slots, size_t n, const float *rows);
	int (*get_rows)(tier *t, uint32_t r, const uint64_t *slots, size_t n, float *rows);
	int (*init_rows)(tier *t, const uint64_t *slots, const uint64_t *ids, size_t n,
			 const tier_init_args *a);
	int (*gather)(tier *t, uint32_t r, const uint64_t *slots, size_t n, float *out,
		      bool out_in_tier);
	/* tier_gather_dev: slots and out in replica r's memory, unchecked;
	 * returns INVALID when a slot was bad (its row NaN).  NULL: the
	 * tier's memory is host memory, and the shared part checks the slots
	 * and calls gather. */
	int (*gather_dev)(tier *t, uint32_t r, const uint64_t *slots, size_t n, float *out);
	/* acc_r[pidx[i]] += grads[i] (host memory, dim floats each). */
	int (*accumulate)(tier *t, uint32_t r, const uint32_t *pidx, size_t n, const float *grads);
	/* acc_r[0..npend) = sum over replicas, on every replica. */
	int (*reduce)(tier *t, uint32_t npend);
	/* On every replica: the rule over slots[i] with gradient grads[i]
	 * (host memory), or with grads NULL, with acc[i], then acc[0..n) = 0. */
	int (*step)(tier *t, const emdb_opt_scalars *sc, const uint64_t *slots, size_t n,
		    const float *grads);
	/* Whether p is memory of replica r's device (NULL: never; the tier's
	 * memory is host memory). */
	bool (*owns_ptr)(const tier *t, uint32_t r, const void *p);
	/* Copy between host memory and replica r's memory, to_tier saying
	 * which way (called only for pointers owns_ptr accepted). */
	int (*copy)(tier *t, uint32_t r, void *dst, const void *src, size_t bytes, bool to_tier);
	/* Whether this backend can open on this machine (NULL: always). */
	bool (*available)(char *why, size_t why_len);
	/* Devices present (NULL: one). */
	uint32_t (*devices)(void);
	/* Asynchronous twins of gather (into host memory) and accumulate:
	 * enqueue and set *job to the backend's handle (NULL: the work is
	 * done already); wait_job waits for it and frees it (IO or OK).
	 * NULL: the shared part runs gather or accumulate in submit. */
	int (*gather_submit)(tier *t, uint32_t r, const uint64_t *slots, size_t n, float *out,
			     void **job);
	int (*accumulate_submit)(tier *t, uint32_t r, const uint32_t *pidx, size_t n,
				 const float *grads, void **job);
	int (*wait_job)(tier *t, void *job);
	/* Host memory the device reaches without staging (NULL: emdb_malloc
	 * and emdb_free). */
	void *(*host_alloc)(tier *t, size_t bytes);
	void (*host_free)(tier *t, void *p);
} tier_backend;

#define TIER_HOST_CACHE 8

struct tier {
	tier_kind kind;
	tier_config cfg;
	const tier_backend *be;
	void *impl;               /* the backend's state                      */
	void *wrap;               /* a wrapping backend's own (tier_test.c)   */
	uint32_t row_floats;
	uint32_t rpc_shift;       /* log2(rows_per_chunk), 32 if no power of 2 */
	uint8_t *chunk_used;      /* [max_chunks]                             */
	/* Pending gradients: slot -> index into pend_slots, open addressing
	 * with linear probing (keys TIER_SLOT_NONE when empty). */
	uint32_t npend;
	uint32_t map_cap;         /* power of two, >= 2 * max_pending          */
	uint64_t *map_keys;       /* [map_cap]                                */
	uint32_t *map_vals;       /* [map_cap]                                */
	uint64_t *pend_slots;     /* [max_pending]                            */
	uint32_t *batch_stamp;    /* [max_pending]: last call that saw it     */
	uint32_t *batch_pos;      /* [max_pending]: its place in that call    */
	uint32_t stamp;
	void *host_cache[TIER_HOST_CACHE]; /* free tier_host_alloc buffers  */
	tier_stats st;
};

extern const tier_backend tier_host_backend;
extern const tier_backend tier_test_backend;
#ifdef EMDB_HAVE_CUDA
extern const tier_backend tier_cuda_backend;
#endif

/* Chunk and offset of a slot: a shift for the usual power-of-two chunk
 * (a 64-bit division per slot was most of a large batch's checks). */
static inline uint64_t tier_slot_chunk64(const tier *t, uint64_t slot)
{
	return t->rpc_shift < 32 ? slot >> t->rpc_shift : slot / t->cfg.rows_per_chunk;
}

static inline uint32_t tier_slot_chunk(const tier *t, uint64_t slot)
{
	return (uint32_t)tier_slot_chunk64(t, slot);
}

static inline uint32_t tier_slot_offset(const tier *t, uint64_t slot)
{
	return t->rpc_shift < 32 ? (uint32_t)(slot & (t->cfg.rows_per_chunk - 1))
				 : (uint32_t)(slot % t->cfg.rows_per_chunk);
}

#ifdef __cplusplus
}
#endif

#endif
