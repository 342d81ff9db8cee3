/*
 * hot.h - a table's hot rows and their replica in a device tier
 * (HypeReca's replicated chunk R, in GPU memory where one exists).
 *
 * The host tier is the authority: every row keeps its host copy, always
 * current, and the device holds a replica of the hot rows that the
 * engine keeps bit-identical by applying, on the device, the same summed
 * gradient with the same rule (db/tier.h) at the end of every Update.  So
 * no row is ever lost: a full device (NOMEM) only means fewer hot rows, and
 * a failed device (IO) is dropped whole, with one message, while the host
 * copy goes on.  Pull reads the replica where it holds the row (equal to
 * the host: "serving through the tier" below); Lookup, state reads and
 * checkpoints read the host.
 *
 * Which rows are hot: the most frequently prefetched ones that fit the
 * table's budget of device memory, counted in bounded memory (a table of
 * at most HOT_COUNTERS_PER_ROW counters per row of budget, halved at each
 * revision so that old traffic fades; rows arriving while it is full wait
 * for the next revision) and revised every HOT_REVISE_STEPS Updates, at the
 * step boundary.  The choice is behind hot_choose_fn, one function, so a
 * later cost model (HypeReca's L(R)) can replace it.
 *
 * Thread safety: hot_note is safe from any thread (a mutex); hot_record
 * is safe from the threads of one Update pass (lock-free append, the
 * membership is read-only during the pass); hot_step, hot_stats and
 * hot_replica_* run with the table's rows_lock held for writing or reading
 * as each says.  The serving functions (hot_push, hot_pull_*, hot_stage,
 * hot_copy_*) are safe from any thread: the tier is used under one mutex,
 * which hot_step holds throughout.
 */
#ifndef EMDB_HOT_H
#define EMDB_HOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <emdb/db.h>

#include "db/chunk.h"
#include "db/optim_math.h"
#include "db/tier.h"

#define HOT_REVISE_STEPS 4
#define HOT_COUNTERS_PER_ROW 4

typedef struct hot hot;

typedef struct hot_config {
	tier_kind kind;          /* the device tier: CUDA, or TEST in tests  */
	uint64_t budget_bytes;   /* device memory for rows, > 0              */
	uint32_t test_chunks;    /* TEST: capacity in chunks (0: the budget) */
	uint32_t replicas;       /* copies, one per device, >= 1             */
} hot_config;

/* The rows chosen hot: from counted candidates loc[0..n) with their
 * counts, pick at most cap, writing their indices to pick[] and returning
 * how many.  The default picks the highest counts (ties: lower loc). */
typedef size_t (*hot_choose_fn)(const uint64_t *loc, const uint32_t *count, size_t n, size_t cap,
				size_t *pick);

/* A hot set for a table of `dim` and optimizer `opt` (rows of
 * dim + state floats).  Errors: INVALID (budget under one row),
 * UNSUPPORTED (the tier cannot open here: no device), NOMEM. */
int hot_create(const hot_config *cfg, uint32_t dim, const emdb_optimizer *opt, hot **out);
void hot_destroy(hot *h);

/* The hot set of a new table given `budget` bytes of device memory
 * (emdb_db_config.gpu_memory), or NULL when the device tier cannot open
 * here (no GPU or no driver) or the budget holds no row: the table then
 * lives in host memory only, as without a budget. */
hot *hot_open_for_table(uint64_t budget, uint32_t dim, const emdb_optimizer *opt);

/* Tests: the tier hot_open_for_table opens from now on (TIER_CUDA by
 * default, a replica on every GPU), TIER_TEST's capacity in chunks and
 * its replicas (0: one).  Process-wide. */
void hot_use_tier(tier_kind kind, uint32_t test_chunks, uint32_t test_replicas);

/* Count a Prefetch's rows (host locations). */
void hot_note(hot *h, const uint64_t *locs, size_t n);

/* Inside an Update pass: host row `loc` was just stepped with gradient g
 * (dim floats); if it is hot, the device replica will take the same step.
 * Lock-free; the pass's threads may call it at once. */
static inline bool hot_is_member(const hot *h, uint64_t loc);
void hot_record(hot *h, uint64_t loc, const float *g);

/* The end of an Update pass, rows_lock held for writing and no thread of
 * the pass left: the recorded steps run on the device, then, every
 * HOT_REVISE_STEPS steps, the hot set is revised (rows leaving freed, rows
 * entering copied from the host).  Never fails: a device error drops the
 * replica (hot_stats says so) and the host goes on. */
void hot_step(hot *h, const chunk_store *rows, const emdb_opt_scalars *sc, uint64_t step,
	      uint32_t gen);

/* Rows changed outside an Update (a load or restore into live rows, say):
 * the next hot_step copies every member again from the host, since no
 * step recorded the change.  Safe from any thread. */
void hot_rows_written(hot *h);

typedef struct hot_stats {
	tier_kind kind;
	bool failed;             /* the device failed; the replica is gone   */
	uint64_t rows;           /* rows in the replica                      */
	uint64_t capacity;       /* rows the budget holds                    */
	uint64_t bytes_device;   /* device memory held, all replicas         */
	uint32_t replicas;       /* copies, one per device                   */
	uint64_t steps_applied;  /* row steps run on the device              */
	uint64_t rows_resynced;  /* rows copied again from the host          */
	/* The serving paths (db/hot_serve.c): */
	uint64_t rows_gathered;  /* Pull rows read from the replica          */
	uint64_t rows_direct;    /* of them, gathered into device memory     */
	uint64_t rows_scattered; /* Push rows added to device accumulators   */
	uint64_t steps_device;   /* Updates stepped from those accumulators  */
	uint64_t steps_replayed; /* Updates that replayed the host's sums    */
	uint64_t steps_reduced;  /* of steps_device, reduced across devices  */
	uint64_t rows_staged;    /* rows Prefetch copied in for its Pull     */
	uint64_t fallbacks;      /* serving calls the host took over         */
} hot_stats;

void hot_get_stats(hot *h, hot_stats *out);

/* One device's share (replica r < hot_stats.replicas), as the public
 * API gives it (emdb_table_tier_device): every replica holds the same
 * rows and device memory; Pull into host memory gathers from replica 0,
 * Pull into a device's memory from that device's replica, and Push
 * scatters into every replica.  Errors: INVALID (r out of range, or the
 * device failed: no replica). */
int hot_get_device_stats(hot *h, uint32_t r, emdb_tier_device_info *out);

/* Replica `replica`'s copy (< hot_stats.replicas) of host row `loc`
 * (dim + state floats) into out:
 * for tests and for checks that the replica equals the host.  Returns
 * EMDB_OK, INVALID when loc is not hot, IO when the device failed.
 * rows_lock held (reading is enough). */
int hot_replica_row(hot *h, uint32_t replica, uint64_t loc, float *out);

/* ---- serving through the tier (db/hot_serve.c) ----
 *
 * Pull: the rows the tier holds (members, and rows a Prefetch staged
 * since the last step) are gathered from the replica, the others read
 * from the host; the host copy is never written here, and every path
 * gives the host's floats bit for bit (invariant 2 of hot.c).
 * Push: hot rows' gradients go to both: the host's accumulators (the
 * authority, unchanged) and, summed per row exactly as the host sums
 * them, one device's (tier_scatter_add; with several devices, reduced
 * across them at the step boundary), so that the step boundary runs
 * the optimizer from them with no gradient crossing then; when they
 * cannot equal the host's sums (a row pushed twice in one step, a sum
 * with -0 or NaN, a tier error, a push racing the step boundary) the
 * step replays the host's sums instead.
 * Device pointers: a caller in this process (mem://) may pass memory of
 * one of the replica's devices as Pull output or Push input; the tier
 * tells (cudaPointerGetAttributes), host and test memory is host memory.
 * Every function here falls back to the host and never fails a call
 * for the tier's sake (hot_stats.fallbacks counts it). */

/* A ticket's rows staged into the tier by its Prefetch. */
typedef struct hot_staged hot_staged;

/* Prefetch, rows_lock held for reading: copy the rows of locs[0..n) the
 * replica does not hold into free device slots (as many as are free),
 * lent until the next step boundary.  NULL when none was staged. */
hot_staged *hot_stage(hot *h, const chunk_store *rows, const uint64_t *locs, size_t n);
void hot_staged_free(hot_staged *s);

/* Pull, rows_lock held for reading, in two halves around the host's
 * part of the request (tier.h, "Asynchronous work"): hot_pull_submit
 * enqueues the gather of the rows the tier holds into r->buf (pinned
 * host memory: tier_host_alloc) and returns; r->src[i] is where row i
 * will be (NULL for the rows the host serves), r->held how many.  The
 * caller reads the cold rows from the host meanwhile, then calls
 * hot_pull_wait once when r->held: true when r->src's rows are there;
 * false when the device failed meanwhile (the caller reads those rows
 * from the host too).  hot_rows_free in every case. */
typedef struct hot_rows {
	const float **src;
	float *buf;
	size_t held;
	uint64_t *slots;         /* the gather's, kept until the wait        */
	tier *tier;              /* the tier buf and the job belong to       */
	tier_job *job;
} hot_rows;
void hot_pull_submit(hot *h, const uint64_t *locs, size_t n, const hot_staged *st, hot_rows *r);
bool hot_pull_wait(hot *h, hot_rows *r);
void hot_rows_free(hot *h, hot_rows *r);

/* The replica whose device memory p is, or -1 (host memory). */
int hot_ptr_replica(hot *h, const void *p);

/* Pull into device memory of replica rep: when the tier holds every row
 * of locs[0..n), gathers them straight into out (no row crosses to the
 * host) and returns true; false otherwise (the caller assembles on the
 * host and copies with hot_copy_in). */
bool hot_pull_direct(hot *h, int rep, const uint64_t *locs, size_t n, const hot_staged *st,
		     float *out);
int hot_copy_in(hot *h, int rep, void *dst, const void *src, size_t bytes);
int hot_copy_out(hot *h, int rep, void *dst, const void *src, size_t bytes);

/* Push, after its rows are resolved and its accumulator room reserved in
 * generation gen, before the host's adds: the batch in shard order
 * (slocs[j], position order[j]), the gradient of position p from fn.
 * The hot rows' sums go into replica rep's accumulators only: the device
 * whose memory held the gradients (hot_ptr_replica), 0 for host memory;
 * the step boundary reduces the replicas' accumulators (tier_reduce:
 * NCCL all-reduce on CUDA) before the step, so every replica steps from
 * the same sums. */
typedef void (*hot_grad_fn)(const void *ctx, uint32_t p, const float **row, float *scale);
/* The scatter is enqueued (tier_scatter_submit) and runs while the
 * caller adds the gradients on the host; the caller then calls
 * hot_push_wait(h, j) once, whatever hot_push did (a no-op when nothing
 * was enqueued).  Work on the tier after the submit (another push, the
 * step boundary) is ordered after the scatter, as on a CUDA stream, so
 * the wait may come after the step that uses the sums. */
typedef struct hot_push_job {
	tier *tier;              /* NULL: nothing enqueued                   */
	tier_job *job;
	uint32_t rep, m, gen;
} hot_push_job;
void hot_push(hot *h, uint32_t rep, uint32_t gen, const uint64_t *slocs, const uint32_t *order,
	      size_t n, hot_grad_fn fn, const void *ctx, hot_push_job *j);
void hot_push_wait(hot *h, hot_push_job *j);

/* The replica's tier (tests: to inject failures into a TIER_TEST one). */
tier *hot_tier(hot *h);

/* Replace the choice (tests; a later cost model).  Before any hot_step. */
void hot_set_choose(hot *h, hot_choose_fn fn);

/* ---- inline ---- */

struct hot_members {
	uint32_t cap;            /* power of two                              */
	uint64_t *loc;           /* [cap], LOC_NONE when empty                */
	uint32_t *slot;          /* [cap] the row's slot in the tier          */
};

/* The membership map is the first member of struct hot (db/hot.c). */
static inline uint32_t hot__slot(const struct hot_members *m, uint64_t loc)
{
	uint64_t x = loc * 0x9E3779B97F4A7C15ull;

	for (uint32_t i = (uint32_t)(x >> 32) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		if (m->loc[i] == loc)
			return m->slot[i];
		if (m->loc[i] == UINT64_MAX)
			return UINT32_MAX;
	}
}

static inline bool hot_is_member(const hot *h, uint64_t loc)
{
	const struct hot_members *m = (const struct hot_members *)(const void *)h;

	return m->cap && hot__slot(m, loc) != UINT32_MAX;
}

#endif
