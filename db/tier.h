/*
 * tier.h - one storage tier: memory that holds rows of one table (its
 * weights and optimizer state, `stride` floats each) with the batched
 * operations of the data plane.  Backends, one file each, behind one
 * table of operations (db/tier_int.h), in the style of libuv's
 * src/unix/, one file per platform:
 *
 *   host   db/tier_host.c   host memory, always built; the oracle of the
 *                           conformance suite (tests/unit/test_tier.c)
 *   test   db/tier_test.c   host memory with a tiny capacity, counters of
 *                           bytes moved and injected failures: stands in
 *                           for a device in tests without a GPU
 *   cuda   gpu/tier_cuda.cu device memory and kernels, built when CMake
 *                           finds the CUDA toolkit (EMDB_CUDA)
 *
 * Conventions common to every function:
 *   - A slot is a row's place in the tier: chunk * rows_per_chunk +
 *     offset.  Chunks are allocated and freed whole; a slot is valid
 *     between tier_chunk_alloc of its chunk and tier_chunk_free.
 *   - A tier holds `replicas` copies of every chunk (one per device for
 *     CUDA; for host and test, copies in host memory): rows are the same
 *     on every replica as long as every replica applies the same steps.
 *     Gradients are accumulated per replica; tier_reduce sums them across
 *     replicas (NCCL all-reduce for CUDA) so that the next tier_step
 *     leaves the replicas identical.
 *   - Buffers passed in and out are host memory unless a function says
 *     otherwise; they are read or written before the function returns
 *     (calls are synchronous: a backend with streams waits for them),
 *     except for the two *_submit calls, whose device work runs while
 *     the caller goes on and ends at tier_job_wait ("Asynchronous work"
 *     below).
 *   - Rows are bit-identical across backends: every backend evaluates the
 *     rules of db/optim_math.h and db/init_math.h, in the same operation
 *     order, per column (CUDA compiles them with --fmad=false).
 *   - Errors: INVALID (a slot outside an allocated chunk, bad sizes:
 *     nothing changed), NOMEM (the tier's capacity or the device is full:
 *     nothing changed), LIMIT (more distinct gradient rows than
 *     max_pending: nothing changed), IO (the device failed: the tier is
 *     then in a sticky error state and every later call but
 *     tier_chunk_free, tier_stats and tier_close returns IO; its rows are
 *     lost, and a caller holding the rows elsewhere drops the tier).
 *     Messages go to emdb_last_error().
 *   - Not thread-safe: one caller at a time per tier (the table's locks).
 */
#ifndef EMDB_TIER_H
#define EMDB_TIER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <emdb/db.h>

#include "db/optim_math.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tier tier;

typedef enum tier_kind {
	TIER_HOST = 0,
	TIER_TEST = 1,
	TIER_CUDA = 2,
} tier_kind;

typedef struct tier_config {
	uint32_t dim;             /* weights per row                          */
	emdb_opt_kind opt;        /* decides the state after the weights      */
	uint32_t rows_per_chunk;  /* rows of one chunk, >= 1                  */
	uint32_t max_chunks;      /* chunks allocated at once, >= 1           */
	uint32_t max_pending;     /* distinct rows holding gradients between
				     two tier_step calls, >= 1              */
	uint32_t replicas;        /* copies (devices), >= 1                   */
	int device;               /* CUDA: first device ordinal               */
	/* test backend: capacity in chunks (0: max_chunks), and a countdown
	 * of operations after which one fails (0: none; see tier_test.h) */
	uint32_t test_chunks;
} tier_config;

typedef struct tier_stats {
	uint64_t chunks;          /* allocated now                            */
	uint64_t bytes_in_use;    /* rows and accumulators, all replicas      */
	uint64_t bytes_h2d;       /* host -> tier, counted per replica        */
	uint64_t bytes_d2h;       /* tier -> host                             */
	uint64_t bytes_d2d;       /* inside the tier (gather to tier memory,
				     reduce)                                  */
	uint64_t ops;             /* operations run (kernels for CUDA)        */
	uint64_t jobs;            /* *_submit calls that enqueued work        */
	uint64_t jobs_async;      /* of them, still running when they
				     returned (the backend is asynchronous)   */
	uint64_t host_bufs;       /* tier_host_alloc buffers handed out       */
	uint64_t host_pinned;     /* bytes of host memory the backend holds
				     for them now (pinned for CUDA), cached
				     free buffers included                    */
	bool failed;              /* sticky error state                       */
} tier_stats;

/* The backends compiled into this build (host and test always; CUDA when
 * built with the toolkit), and whether the kind can open here: CUDA needs
 * a device and a driver.  tier_available writes why not to why[why_len]. */
bool tier_compiled(tier_kind kind);
bool tier_available(tier_kind kind, char *why, size_t why_len);
const char *tier_kind_name(tier_kind kind);

/* Devices the kind can hold replicas on (1 for host and test; 0 when the
 * kind cannot open here). */
uint32_t tier_devices(tier_kind kind);

/* Floats per row in the tier: dim + the optimizer's state. */
uint32_t tier_row_floats(const tier_config *cfg);

/* Open a tier of `kind`.  Errors: INVALID (bad config), UNSUPPORTED (the
 * kind is not compiled or no device), NOMEM.  Free with tier_close. */
int tier_open(tier_kind kind, const tier_config *cfg, tier **out);
void tier_close(tier *t);
tier_kind tier_kind_of(const tier *t);
const tier_config *tier_config_of(const tier *t);

/* Allocate chunk c (< max_chunks) on every replica, rows zeroed.
 * Errors: INVALID (c taken or out of range), NOMEM (capacity). */
int tier_chunk_alloc(tier *t, uint32_t c);
/* Free chunk c; its slots' pending gradients are dropped. */
void tier_chunk_free(tier *t, uint32_t c);

/* Whole rows (weights then state, tier_row_floats each) in and out:
 * rows[i] is slots[i]'s.  put writes every replica; get reads replica 0. */
int tier_put_rows(tier *t, const uint64_t *slots, size_t n, const float *rows);
int tier_get_rows(tier *t, uint32_t replica, const uint64_t *slots, size_t n, float *rows);

/* New rows' initial values on every replica: weights from the table's
 * initializer (init_math.h, a pure function of seed, table and id) and
 * the optimizer's initial state (optim_math.h). */
int tier_init_rows(tier *t, const uint64_t *slots, const uint64_t *ids, size_t n,
		   const emdb_init *init, const emdb_optimizer *opt, uint64_t seed, uint32_t table);

/* Gather: out[i*dim .. +dim) = weights of slots[i] on `replica`;
 * duplicates allowed.  With out_in_tier, out is tier memory of that
 * replica (a device pointer for CUDA) and nothing crosses to the host.
 * @note out is the caller's, written when the call returns. */
int tier_gather(tier *t, uint32_t replica, const uint64_t *slots, size_t n, float *out,
		bool out_in_tier);

/* Gather with the slots in tier memory too (n slots on `replica`'s
 * device; host memory for host and test), into tier memory: nothing
 * crosses to the host, as a GPU trainer holding its keys on the device
 * needs.  The slots cannot be checked before the kernel reads them: the
 * row of a slot outside an allocated chunk is written as NaN and the
 * call returns INVALID (the tier stays usable). */
int tier_gather_dev(tier *t, uint32_t replica, const uint64_t *slots, size_t n, float *out);

/* Scatter-add: add grads[i*dim .. +dim) to the accumulator of slots[i] on
 * `replica`.  Duplicates in the batch are combined on the host first
 * (summed in batch order, then added to the accumulator), so a kernel
 * never sees two writers of one row.  Errors: LIMIT past max_pending
 * distinct rows since the last step (nothing added). */
int tier_scatter_add(tier *t, uint32_t replica, const uint64_t *slots, size_t n,
		     const float *grads);

/* Reduce: every replica's accumulators become their sum over replicas
 * (in replica order).  A tier with one replica has nothing to do. */
int tier_reduce(tier *t);

/* The optimizer step over every row holding an accumulator, on every
 * replica, with the scalars of this step (emdb_opt_scalars_for_step);
 * the accumulators are then empty.  Returns the rows stepped (>= 0). */
int64_t tier_step(tier *t, const emdb_opt_scalars *sc);

/* The optimizer step over slots[0..n) with the given gradients instead of
 * accumulators (distinct slots; the engine's own summed gradients), on
 * every replica. */
int tier_apply(tier *t, const emdb_opt_scalars *sc, const uint64_t *slots, size_t n,
	       const float *grads);

/* Drop every accumulator without stepping (the engine's step takes the
 * host's sums instead): the accumulators are then empty. */
int tier_discard(tier *t);

/* Whether p is memory of `replica`'s device (cudaPointerGetAttributes
 * for CUDA); false for host and test, whose memory is host memory, so a
 * caller holding a host pointer takes its host path. */
bool tier_ptr_in_tier(const tier *t, uint32_t replica, const void *p);

/* bytes from host memory into tier memory of `replica` (dst: a pointer
 * tier_ptr_in_tier accepts), or from tier memory to host memory.
 * Errors: INVALID (not tier memory), IO. */
int tier_copy_in(tier *t, uint32_t replica, void *dst, const void *src, size_t bytes);
int tier_copy_out(tier *t, uint32_t replica, void *dst, const void *src, size_t bytes);

/* ---- Asynchronous work within one request ----
 *
 * A request with a device part and a host part (a Pull of hot and cold
 * rows, a Push whose hot rows' sums go to the device) enqueues the device
 * part, does the host part, then waits once:
 *
 *     tier_gather_submit(t, 0, slots, n, buf, &job);   device works...
 *     ...cold rows on the host...                       ...meanwhile
 *     tier_job_wait(t, job);                            buf holds the rows
 *
 * CUDA enqueues on the replica's stream and records an event that the
 * wait synchronises; the copies are asynchronous when the host buffers
 * are pinned (tier_host_alloc), otherwise they go through the tier's
 * pinned staging before submit returns.  The host backend does the work
 * in submit; the test backend defers it to the wait, so that tests see
 * what ran in between (tier_test.h).
 *
 * Rules: every submitted job is waited exactly once, by a caller holding
 * the tier as for any call (other calls may come between submit and
 * wait, from the same caller or others: they are ordered after the
 * job's device work); slots, grads and out stay untouched by the caller
 * until the wait; the tier is not closed with a job outstanding.  Submit
 * fails as its synchronous twin does (nothing enqueued, *job NULL); the
 * wait fails only with IO (the tier is then failed; out is undefined and
 * the caller takes the host's rows). */
typedef struct tier_job tier_job;

/* tier_gather into host memory `out`, enqueued. */
int tier_gather_submit(tier *t, uint32_t replica, const uint64_t *slots, size_t n, float *out,
		       tier_job **job);
/* tier_scatter_add, enqueued: the pending rows are known when submit
 * returns (tier_pending counts them); the accumulators hold the sums
 * after the wait. */
int tier_scatter_submit(tier *t, uint32_t replica, const uint64_t *slots, size_t n,
			const float *grads, tier_job **job);
/* Wait for the job's device work and free it.  EMDB_OK or IO. */
int tier_job_wait(tier *t, tier_job *job);

/* Host memory that the tier's device reads and writes without staging:
 * pinned (cudaHostAlloc) for CUDA, ordinary memory for host and test
 * (counted in tier_stats: host_bufs, host_pinned).  Freed buffers are
 * kept for reuse (a few, of power-of-two sizes), since pinning is slow.
 * NULL when out of memory.  Free with tier_host_free on the same tier,
 * before tier_close. */
void *tier_host_alloc(tier *t, size_t bytes);
void tier_host_free(tier *t, void *p);

/* Rows holding an accumulator now. */
uint32_t tier_pending(const tier *t);

void tier_stats_get(const tier *t, tier_stats *out);

#ifdef __cplusplus
}
#endif

#endif
