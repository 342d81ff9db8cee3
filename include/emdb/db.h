/*
 * emdb/db.h - the emdb engine: embedding tables in memory, in one process.
 *
 * This header is the manual of the engine library (libemdb).  The network
 * server and the client library's mem:// transport drive exactly these calls.
 *
 * Model
 *   A database (emdb_db) holds named tables.  A table maps arbitrary uint64
 *   IDs to rows of `dim` float32 values plus the optimizer state that sits
 *   beside each row.  Rows are created on first use by Prefetch, Pull or
 *   Push with a reproducible initial value (see docs/engine.md, "Initial
 *   values"); Lookup never creates rows.
 *
 *   Training follows HypeReca's four operations:
 *     emdb_prefetch   resolve (and insert) IDs, returns a ticket;
 *     emdb_pull*      copy vectors out, optionally pooled per bag;
 *     emdb_push*      accumulate gradients (duplicates are summed);
 *     emdb_update     apply the optimizer to every row holding a gradient.
 *   Inference uses emdb_lookup, which is read-only.
 *
 * Threads
 *   Every function here is safe to call from any number of threads at once
 *   on the same emdb_db, except emdb_db_close (no other call may be in
 *   flight).  The engine starts no threads of its own: the caller's threads
 *   do the work, so a server's thread pool drives it directly.  (One
 *   exception: checkpoint and restore jobs (emdb/checkpoint.h) use helper
 *   threads of their own, one for a checkpoint and up to seven for a
 *   restore, which live only while the job runs.)
 *   While emdb_update applies the optimizer, Pulls, Lookups and state reads
 *   of that table wait, so they see every row either entirely before or
 *   entirely after an Update, never a torn row.  Pushes wait only for the
 *   moment an Update takes the accumulated gradients (a push that has
 *   returned before emdb_update is called is applied by it; one that starts
 *   later goes to the next Update), and Prefetch never waits.  Concurrent
 *   pushes of the same ID are all summed; their float summation order is
 *   unspecified.
 *
 * Errors
 *   Functions return EMDB_OK or a negative emdb_err code (emdb/error.h) and
 *   leave a detailed message in emdb_last_error().  A call that fails on bad
 *   input (unknown table, wrong dim, zero or oversized batch, NULL buffer,
 *   a ticket from another table) changes nothing.  A call that fails with
 *   EMDB_ERR_NOMEM changes nothing either: each operation reserves what it
 *   needs before it makes the first visible change.  Under a memory limit
 *   (emdb_alloc_set_limit) the calls that grow a table (Prefetch, Pull,
 *   Push, Push-and-Update, emdb_table_reserve) check the whole growth
 *   against it first, so one the limit refuses maps nothing and the bytes
 *   in use are as before; when an allocation fails midway instead (the
 *   system, or a racing thread took the room), new row chunks are given
 *   back, and at most some index shards or gradient accumulators stay
 *   grown: room the table uses as it grows.
 *
 * Ownership
 *   The engine never keeps a pointer to a caller's buffer after a call
 *   returns.  Objects the engine allocates for the caller (emdb_db,
 *   emdb_ticket) are freed with their own close/free function.
 */
#ifndef EMDB_DB_H
#define EMDB_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <emdb/error.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EMDB_NAME_MAX 64      /* table name buffer, NUL included */
#define EMDB_DIM_MAX 65536    /* largest row dimension */

typedef struct emdb_db emdb_db;
typedef struct emdb_ticket emdb_ticket;

/* ------------------------------------------------------------------ */
/* Optimizers and initializers                                         */
/* ------------------------------------------------------------------ */

/* The update rules are given exactly in docs/engine.md.  Hyperparameters
 * are doubles; per-element arithmetic is float32. */
typedef enum emdb_opt_kind {
	EMDB_OPT_SGD = 1,             /* w -= lr*g                                */
	EMDB_OPT_ADAGRAD = 2,         /* torch.optim.Adagrad, one sum per column  */
	EMDB_OPT_ROWWISE_ADAGRAD = 3, /* one accumulator per row (FBGEMM)         */
	EMDB_OPT_ADAM = 4,            /* torch.optim.SparseAdam                    */
	EMDB_OPT_FTRL = 5,            /* FTRL-proximal (McMahan et al. 2013)      */
} emdb_opt_kind;

typedef struct emdb_optimizer {
	emdb_opt_kind kind;
	double lr;          /* SGD, Adagrad, row-wise Adagrad, Adam; FTRL alpha */
	double eps;         /* Adagrad, row-wise Adagrad, Adam                  */
	double beta1;       /* Adam                                             */
	double beta2;       /* Adam                                             */
	double lr_decay;    /* Adagrad                                          */
	double initial_accumulator; /* Adagrad, row-wise Adagrad               */
	double beta;        /* FTRL                                             */
	double l1;          /* FTRL                                             */
	double l2;          /* FTRL                                             */
} emdb_optimizer;

/* Fill *opt with the defaults of `kind` (torch's defaults where torch has
 * the optimizer; see docs/engine.md).  Returns EMDB_ERR_INVALID for an
 * unknown kind. */
int emdb_optimizer_defaults(emdb_opt_kind kind, emdb_optimizer *opt);

/* Float32 slots of optimizer state per row for `kind` at `dim`
 * (SGD 0, Adagrad dim, row-wise Adagrad 1, Adam 2*dim, FTRL 2*dim);
 * 0 for an unknown kind. */
uint32_t emdb_optimizer_state_floats(emdb_opt_kind kind, uint32_t dim);

const char *emdb_optimizer_name(emdb_opt_kind kind); /* "sgd", ...; NULL if unknown */

typedef enum emdb_init_kind {
	EMDB_INIT_ZEROS = 0,
	EMDB_INIT_UNIFORM = 1, /* a = low, b = high   */
	EMDB_INIT_NORMAL = 2,  /* a = mean, b = std   */
} emdb_init_kind;

typedef struct emdb_init {
	emdb_init_kind kind;
	double a;
	double b;
} emdb_init;

/* What Lookup returns for an ID the table does not hold. */
typedef enum emdb_default_kind {
	EMDB_DEFAULT_ZEROS = 0, /* a vector of zeros                          */
	EMDB_DEFAULT_INIT = 1,  /* the initial value the ID would get if inserted */
} emdb_default_kind;

/* ------------------------------------------------------------------ */
/* Database                                                            */
/* ------------------------------------------------------------------ */

typedef struct emdb_db_config {
	uint32_t size;        /* sizeof(emdb_db_config): set by the INIT macro */
	uint32_t shards;      /* index shards per table, power of two 1..4096; default 64 */
	uint64_t chunk_bytes; /* bytes per row chunk, >= 64 KiB; default 2 MiB */
	uint32_t max_batch;   /* largest batch of IDs one call accepts; default 4 Mi */
	uint32_t max_tables;  /* tables alive at once; default 1024 */
	uint64_t gpu_memory;  /* device memory per table and GPU for a replica
				 of its hot rows, one on each GPU of the
				 machine (docs/gpu.md); 0 (default): none.
				 Without a GPU the tables stay in host memory. */
} emdb_db_config;

#define EMDB_DB_CONFIG_INIT \
	{ sizeof(emdb_db_config), 64, 2u << 20, 4u << 20, 1024, 0 }

/* Open an empty in-memory database.  cfg may be NULL for the defaults.
 * On success *out owns the database; close it with emdb_db_close.
 * Errors: INVALID (bad config field), NOMEM. */
int emdb_db_open(const emdb_db_config *cfg, emdb_db **out);

/* Free the database, its tables and their memory.  No other call on db may
 * be in flight, and tickets still alive must be freed before (a ticket
 * outliving its database is undefined behaviour).  NULL is a no-op. */
void emdb_db_close(emdb_db *db);

/* The configuration the database was opened with. */
void emdb_db_get_config(const emdb_db *db, emdb_db_config *out);

/* ------------------------------------------------------------------ */
/* Tables                                                              */
/* ------------------------------------------------------------------ */

typedef struct emdb_table_config {
	uint32_t size;            /* sizeof(emdb_table_config): set by INIT   */
	uint32_t dim;             /* 1..EMDB_DIM_MAX                          */
	char name[EMDB_NAME_MAX]; /* 1..63 bytes of [A-Za-z0-9_.-]            */
	emdb_optimizer optimizer;
	emdb_init init;
	uint64_t seed;            /* initializer seed                         */
	emdb_default_kind lookup_default;
} emdb_table_config;

/* SGD with lr 0.01, zero initial values, seed 0, zero default.  Set name and
 * dim before use. */
#define EMDB_TABLE_CONFIG_INIT                                               \
	{ sizeof(emdb_table_config), 0, "",                                  \
	  { EMDB_OPT_SGD, 0.01, 0, 0, 0, 0, 0, 0, 0, 0 },                    \
	  { EMDB_INIT_ZEROS, 0, 0 }, 0, EMDB_DEFAULT_ZEROS }

typedef struct emdb_table_stats {
	uint64_t rows;            /* IDs held                                 */
	uint64_t step;            /* Updates applied so far                   */
	uint64_t pending_rows;    /* rows holding an accumulated gradient (a
				     row of k ranked workers counts k times) */
	uint64_t bytes_vectors;   /* rows * dim * 4                           */
	uint64_t bytes_optimizer; /* rows * state floats * 4                  */
	uint64_t bytes_index;     /* index slots of all shards                */
	uint64_t bytes_grads;     /* gradient accumulators                    */
	uint64_t bytes_overhead;  /* chunk slack, padding, directories        */
	uint64_t calls_prefetch, calls_pull, calls_push, calls_update, calls_lookup;
	uint64_t ids_prefetch, ids_pull, ids_push, ids_lookup;
	uint64_t lookup_misses;   /* Lookup IDs not held                      */
	uint64_t rows_updated;    /* row updates applied by all Updates       */
	uint64_t index_resizes;   /* shard resizes so far                     */
} emdb_table_stats;

typedef struct emdb_table_info {
	uint32_t id;
	emdb_table_config config;
	emdb_table_stats stats;
} emdb_table_info;

/* Create a table.  Table ids are assigned in creation order starting at 1
 * and never reused within one emdb_db.  *out_id may be NULL.
 * Errors: INVALID (bad name, dim, optimizer or initializer; message says
 * which field), EXISTS (name taken), LIMIT (max_tables), NOMEM. */
int emdb_table_create(emdb_db *db, const emdb_table_config *cfg,
		      uint32_t *out_id);

/* Drop a table and free its rows once the last ticket on it is freed.
 * Calls already in flight on it finish normally.  Errors: NO_TABLE. */
int emdb_table_drop(emdb_db *db, uint32_t table);

/* Make room for `rows` rows in all (the rows the table holds count), as a
 * trainer that knows its vocabulary does before it starts: every index
 * shard is grown so that its share of that many IDs fits without a resize,
 * and the chunks for that many rows are mapped and their memory backed by
 * the kernel now (written once, with its bytes unchanged).  Inserts up to
 * that size then pay neither a shard resize nor a page fault: on a machine
 * whose first write of memory is slow (a VM whose host backs guest memory
 * on first touch) that is most of what an insert costs.  The table grows
 * past `rows` on demand as before; reserving no more than the table has
 * room for does nothing.
 *
 * Rows, values, steps and accumulated gradients are not changed, and any
 * call on the table, this one included, may run meanwhile.  The call takes
 * about as long as writing that memory once, so call it before training,
 * not per batch.  The chunks are backed by the caller and up to seven
 * helper threads (one per online CPU beyond the caller's), joined before
 * the call returns: on a VM whose host backs memory on first touch that is
 * paid per vCPU.  The room counts in the table's bytes_index and
 * bytes_overhead (chunk slack) until rows use it, and in the emdb_malloc
 * family's counters and limit.  The room is not part of a checkpoint: a
 * restored table has room for the rows it holds, so reserve again after a
 * restore to grow without faults.
 *
 * Errors: NO_TABLE; INVALID (db NULL); LIMIT (more rows than a table can
 * hold: 2^24 chunks); NOMEM: before anything is mapped when the room would
 * pass the emdb_malloc limit or the memory the kernel reports available
 * (MemAvailable, and the huge page pool's free pages when
 * emdb_alloc_set_huge_pages is not off), else when an allocation fails
 * (index shards grown before the failure stay grown, no row chunk is
 * kept, the rows are unchanged). */
int emdb_table_reserve(emdb_db *db, uint32_t table, uint64_t rows);

/* Change the optimizer's hyperparameters of a table while it serves (a
 * learning-rate schedule): opt is the table's optimizer (from
 * emdb_table_get_config) with new values for any of lr, eps, beta1,
 * beta2, lr_decay, beta, l1 and l2.  The change takes effect at a step
 * boundary: an Update running meanwhile finishes with the old values (the
 * call waits for it), the next Update uses the new ones; no Update ever
 * mixes the two.  Rows and optimizer state are not touched, and Adam's
 * bias corrections go on from the table's step.  A checkpoint records the
 * values in force at its step, and a restore brings them back.
 * kind and initial_accumulator are fixed at creation (the state's layout,
 * and what a new row's state starts from).
 * Errors: NO_TABLE; INVALID (opt NULL, another kind, another
 * initial_accumulator, or a value emdb_table_create would refuse; the
 * message names it): nothing changes then. */
int emdb_table_alter(emdb_db *db, uint32_t table, const emdb_optimizer *opt);

/* Find a table's id by name.  Errors: NO_TABLE, INVALID (NULL). */
int emdb_table_find(emdb_db *db, const char *name, uint32_t *out_id);

/* Configuration and statistics of one table.  Gathering the statistics
 * visits every index shard and accumulator under its lock.
 * Errors: NO_TABLE, INVALID. */
int emdb_table_describe(emdb_db *db, uint32_t table, emdb_table_info *out);

/* The configuration of one table alone: what emdb_table_describe puts in
 * info->config, without gathering statistics (no shard lock is taken), for
 * callers that need the dim or optimizer on every request.
 * Errors: NO_TABLE, INVALID (NULL out). */
int emdb_table_get_config(emdb_db *db, uint32_t table, emdb_table_config *out);

/* Ids of the live tables in creation order: up to `cap` are written to ids
 * (which may be NULL when cap is 0) and *n_out gets the total count. */
int emdb_table_list(emdb_db *db, uint32_t *ids, size_t cap, size_t *n_out);

/* ------------------------------------------------------------------ */
/* Data plane                                                          */
/* ------------------------------------------------------------------ */

/* Every batch call takes 1..max_batch IDs.  Vectors in and out are packed
 * row-major: n * dim floats, row i belonging to ids[i].
 * @note Device memory: on a table with a GPU replica (gpu_memory;
 * emdb_table_tier says "cuda"), the vectors out of a Pull and the
 * gradients into a Push may be memory of one of the replica's GPUs
 * (cudaMalloc'ed by a trainer in this process, told apart by
 * cudaPointerGetAttributes); the call reads or writes it before it
 * returns and keeps no reference.  A Pull whose rows the GPU holds (hot
 * rows, and the rows its ticket's Prefetch staged) is gathered there
 * without crossing to the host; Push copies device gradients to the host
 * once.  Everything else must be host memory.  docs/gpu.md. */

/* Resolve every ID of the batch, inserting unseen ones with their initial
 * value, and return a ticket holding their locations so that the Pull and
 * Push that follow skip the index.  The ticket is the caller's: free it with
 * emdb_ticket_free.  It stays valid across Updates and table drops (calls
 * on a dropped table's ticket fail with NO_TABLE).  It takes about 20
 * bytes per ID (each location twice, in request order for Pull and in
 * index-shard order for Push, and the grouping), counted in the engine's
 * allocation statistics.
 * Errors: NO_TABLE, BATCH, INVALID (NULL), NOMEM. */
int emdb_prefetch(emdb_db *db, uint32_t table, const uint64_t *ids, size_t n,
		  emdb_ticket **out);

void emdb_ticket_free(emdb_ticket *t);           /* NULL is a no-op */
size_t emdb_ticket_count(const emdb_ticket *t);  /* IDs in the ticket */
uint32_t emdb_ticket_table(const emdb_ticket *t); /* the table it resolved */

/* Copy the vectors of ids (inserting unseen ones) into out[n*dim].
 * Errors: NO_TABLE, BATCH, DIM (dim != table's dim), INVALID, NOMEM. */
int emdb_pull(emdb_db *db, uint32_t table, const uint64_t *ids, size_t n,
	      uint32_t dim, float *out);
/* The same through a ticket of this table.  Errors add TICKET. */
int emdb_pull_ticket(emdb_db *db, uint32_t table, const emdb_ticket *t,
		     uint32_t dim, float *out);

typedef enum emdb_pool {
	EMDB_POOL_SUM = 1,
	EMDB_POOL_MEAN = 2,
} emdb_pool;

/* Pooled Pull, as torch.nn.EmbeddingBag with include_last_offset=True:
 * bag b holds positions offsets[b] .. offsets[b+1]-1 of the batch, so
 * offsets has n_bags+1 entries, starts at 0, ends at n and never decreases.
 * out receives n_bags * dim floats; an empty bag gives zeros.
 * Errors: as emdb_pull, INVALID for bad offsets or pool mode. */
int emdb_pull_bags(emdb_db *db, uint32_t table, const uint64_t *ids, size_t n,
		   const uint64_t *offsets, size_t n_bags, emdb_pool pool,
		   uint32_t dim, float *out);
int emdb_pull_bags_ticket(emdb_db *db, uint32_t table, const emdb_ticket *t,
			  const uint64_t *offsets, size_t n_bags,
			  emdb_pool pool, uint32_t dim, float *out);

/* Pooled Pull with per-sample weights, as torch.nn.EmbeddingBag's
 * per_sample_weights: weights holds one float per ID of the batch (n, or
 * the ticket's count) and bag b is the sum of weights[i] * row(ids[i])
 * over its positions, added in request order in float32.  Like torch,
 * weights are defined only with EMDB_POOL_SUM: MEAN is refused with
 * INVALID.  Errors: as emdb_pull_bags, INVALID for NULL weights. */
int emdb_pull_bags_weighted(emdb_db *db, uint32_t table, const uint64_t *ids,
			    size_t n, const uint64_t *offsets, size_t n_bags,
			    emdb_pool pool, const float *weights, uint32_t dim,
			    float *out);
int emdb_pull_bags_weighted_ticket(emdb_db *db, uint32_t table,
				   const emdb_ticket *t,
				   const uint64_t *offsets, size_t n_bags,
				   emdb_pool pool, const float *weights,
				   uint32_t dim, float *out);

/* Accumulate grads[n*dim] into the rows of ids (inserting unseen ones).
 * Duplicates, in this batch or across pushes, are summed until the next
 * Update.  Errors: NO_TABLE, BATCH, DIM, INVALID, NOMEM. */
int emdb_push(emdb_db *db, uint32_t table, const uint64_t *ids, size_t n,
	      uint32_t dim, const float *grads);
int emdb_push_ticket(emdb_db *db, uint32_t table, const emdb_ticket *t,
		     uint32_t dim, const float *grads);

/* The backward of emdb_pull_bags: grads holds n_bags * dim floats, one per
 * bag; every ID of bag b receives grads[b] (SUM) or grads[b] / bag size
 * (MEAN).  Same offsets rules and errors as emdb_pull_bags. */
int emdb_push_bags(emdb_db *db, uint32_t table, const uint64_t *ids, size_t n,
		   const uint64_t *offsets, size_t n_bags, emdb_pool pool,
		   uint32_t dim, const float *grads);
int emdb_push_bags_ticket(emdb_db *db, uint32_t table, const emdb_ticket *t,
			  const uint64_t *offsets, size_t n_bags,
			  emdb_pool pool, uint32_t dim, const float *grads);

/* The backward of emdb_pull_bags_weighted: the ID at position i of bag b
 * receives weights[i] * grads[b] (SUM only, as there).  The gradient of
 * the weights themselves (the dot product of grads[b] and the row) is
 * not computed: pull the rows to get it.  Errors: as
 * emdb_pull_bags_weighted. */
int emdb_push_bags_weighted(emdb_db *db, uint32_t table, const uint64_t *ids,
			    size_t n, const uint64_t *offsets, size_t n_bags,
			    emdb_pool pool, const float *weights, uint32_t dim,
			    const float *grads);
int emdb_push_bags_weighted_ticket(emdb_db *db, uint32_t table,
				   const emdb_ticket *t,
				   const uint64_t *offsets, size_t n_bags,
				   emdb_pool pool, const float *weights,
				   uint32_t dim, const float *grads);

/* Pushes of the workers of a data-parallel step, summed in an order that
 * does not depend on when they arrive.  A trainer of W workers gives each
 * a stable rank 0..W-1 (torch.distributed's rank) and pushes as that rank;
 * the table then keeps each worker's gradients apart until the Update,
 * which adds them per row in rank order:
 *     g(row) = ((unranked pushes) + worker 0's sum) + worker 1's sum ...
 * over the workers that pushed the row, each worker's sum in its own
 * request order (its pushes one after another, as one thread makes
 * them).  So a run with fixed batches gives bit-identical rows and
 * optimizer state whichever worker's push comes first, and on any number
 * of cluster nodes (docs/cluster.md "Determinism").  Pushes that name no
 * worker (EMDB_WORKER_NONE, and every emdb_push* call above) are summed
 * in arrival order, as before; a single worker gets the same bits either
 * way.
 *
 * Memory: a worker's accumulators hold the rows it pushed since the last
 * Update, as the shared ones do, and each ranked row also keeps room for
 * it in the shared accumulators (where the Update adds the workers' sums):
 * at most twice the memory of the same pushes unranked, plus a small
 * entry per worker and index shard (freed once a worker stops pushing:
 * docs/engine.md, "Several workers of one step").  The memory limit counts it all: a
 * push that does not fit is refused with NOMEM before anything is
 * added.
 *
 * The batch is one of the calls above: IDs (ids, n) or a ticket (ids NULL,
 * n ignored); optionally bags (offsets[n_bags + 1], pool) and per-sample
 * weights (SUM only), grads then holding one row per bag. */
#define EMDB_WORKER_NONE UINT32_MAX
#define EMDB_WORKERS_MAX 65536u /* ranks are 0 .. EMDB_WORKERS_MAX - 1 */

typedef struct emdb_push_batch {
	const uint64_t *ids;        /* [n], or NULL with a ticket          */
	size_t n;
	const emdb_ticket *ticket;  /* or NULL with ids                    */
	const uint64_t *offsets;    /* [n_bags + 1], or NULL: no bags      */
	size_t n_bags;
	emdb_pool pool;             /* with bags                           */
	const float *weights;       /* [n] per-sample weights, or NULL     */
	uint32_t dim;
	const float *grads;         /* [n or n_bags][dim]                  */
} emdb_push_batch;

/* Push b as worker `worker` (0 .. EMDB_WORKERS_MAX - 1, or
 * EMDB_WORKER_NONE for an unranked push).  Errors: as the emdb_push* call
 * of the same shape; INVALID for a rank out of range or a NULL b. */
int emdb_push_as(emdb_db *db, uint32_t table, uint32_t worker, const emdb_push_batch *b);

/* Advance the table's step and apply its optimizer to every row holding an
 * accumulated gradient, then clear the accumulators.  Rows without a
 * gradient stay bit-identical.  *rows_out (may be NULL) gets the number of
 * rows updated.  Errors: NO_TABLE. */
int emdb_update(emdb_db *db, uint32_t table, uint64_t *rows_out);
/* emdb_update on every table, in creation order. */
int emdb_update_all(emdb_db *db, uint64_t *rows_out);

/* emdb_push (or emdb_push_ticket) and then emdb_update of the same table,
 * as one call: the step advances once, and the Update applies this batch's
 * gradients together with every gradient pushed to the table before the
 * call (duplicates summed, as always), with no other push in between.
 * The result equals the two calls made back to back, bit for bit, when
 * nothing else pushes to the table meanwhile.  It is faster: each row's
 * gradient (the sum of its gradients in grads, where the batch repeats
 * it) is applied without the accumulator's write and read, unless
 * another push left a gradient waiting for that row, so a trainer that
 * pushes and updates one batch per step pays one pass over its rows
 * instead of two.  It needs scratch memory of up to n * dim floats for
 * the sums of repeated rows.  Readers of the table wait while it
 * applies, as they wait for emdb_update.  *rows_out (may be NULL) gets
 * the number of rows updated.  Errors: as emdb_push; on any error nothing
 * is pushed and the step does not advance. */
int emdb_push_update(emdb_db *db, uint32_t table, const uint64_t *ids,
		     size_t n, uint32_t dim, const float *grads,
		     uint64_t *rows_out);
int emdb_push_update_ticket(emdb_db *db, uint32_t table,
			    const emdb_ticket *t, uint32_t dim,
			    const float *grads, uint64_t *rows_out);

/* Read-only: copy the vectors of ids into out[n*dim]; an ID the table does
 * not hold gets the table's lookup default and is never inserted.  found
 * (may be NULL) receives n bytes, 1 where the ID is held.
 * Errors: NO_TABLE, BATCH, DIM, INVALID. */
int emdb_lookup(emdb_db *db, uint32_t table, const uint64_t *ids, size_t n,
		uint32_t dim, float *out, uint8_t *found);

/* Read-only: copy the optimizer state of ids into
 * state[n * emdb_optimizer_state_floats(kind, dim)] in the layout of
 * docs/engine.md; IDs not held get zeros and found[i] = 0.
 * Errors: as emdb_lookup. */
int emdb_read_state(emdb_db *db, uint32_t table, const uint64_t *ids,
		    size_t n, float *state, uint8_t *found);

/* ------------------------------------------------------------------ */
/* Scan and load: a table's rows out and in                            */
/* ------------------------------------------------------------------ */

/* One page of a scan of the table's IDs with their rows, Redis SCAN
 * style: start with cursor 0, pass each *next_cursor back in, stop when
 * it is 0.  A page examines up to max_rows rows (1..max_batch) and writes
 * the n it returns (*n_out, at most max_rows) to ids[n], vecs[n*dim] and,
 * when state is not NULL, state[n * emdb_optimizer_state_floats(kind,
 * dim)]; *step_out (may be NULL) gets the table's step.
 *
 * What a cursor promises: every row the table holds for the whole scan
 * is returned exactly once, whatever Updates, Pushes and inserts happen
 * between pages (rows never move and are never removed; the cursor is a
 * row number, in the order rows were created).  Each page is consistent
 * at one step: no Update runs while it is copied, and it reports that
 * step; pages of one scan may come from different steps when Updates run
 * between them.  A row inserted during the scan is returned at most once
 * (once when it lands past the cursor).  A page may hold fewer than
 * max_rows rows, even none, while the scan is not over (rows being
 * inserted at that moment are skipped: they were not there when the scan
 * began).  A restore replaces the table's rows: a cursor from before it
 * means nothing afterwards (INVALID when past the end; scan again).
 * Read-only: no row is inserted, no counter changes.
 * Errors: NO_TABLE, BATCH (max_rows), DIM, INVALID (NULL ids, vecs, n_out
 * or next_cursor; a cursor past the table's rows), NOMEM. */
int emdb_table_scan(emdb_db *db, uint32_t table, uint64_t cursor,
		    size_t max_rows, uint32_t dim, uint64_t *ids, float *vecs,
		    float *state, size_t *n_out, uint64_t *next_cursor,
		    uint64_t *step_out);

/* Write rows: vecs[n*dim] become the vectors of ids[n], inserting the IDs
 * the table lacks (pretrained embeddings, or rows a scan took out).  With
 * state not NULL, state[n * emdb_optimizer_state_floats(kind, dim)]
 * becomes their optimizer state (in the layout of docs/engine.md, not
 * checked); with state NULL new rows get the initial state and held rows
 * keep theirs.  An ID given twice gets its last row.  Like an Update it
 * waits for a running Update and readers never see a row half-written;
 * gradients pushed and not yet applied stay, and the next Update applies
 * them to the loaded rows.  The rows count for the next incremental
 * checkpoint.  The step does not advance.
 * Errors: NO_TABLE, BATCH, DIM, INVALID (NULL ids or vecs), NOMEM, LIMIT;
 * nothing is written then. */
int emdb_table_load(emdb_db *db, uint32_t table, const uint64_t *ids,
		    size_t n, uint32_t dim, const float *vecs,
		    const float *state);

/* ------------------------------------------------------------------ */
/* Statistics                                                          */
/* ------------------------------------------------------------------ */

typedef struct emdb_db_stats {
	uint64_t tables;
	emdb_table_stats total;   /* sums over live tables; step is the max */
	uint64_t alloc_bytes;     /* emdb_alloc_bytes() at the time of the call */
	uint64_t alloc_peak;
} emdb_db_stats;

int emdb_db_get_stats(emdb_db *db, emdb_db_stats *out);

/* ------------------------------------------------------------------ */
/* Storage tiers (docs/gpu.md)                                         */
/* ------------------------------------------------------------------ */

/* Where a table's rows live.  Every row is in host memory, which is the
 * authority; with emdb_db_config.gpu_memory and a GPU, a replica of the
 * table's most prefetched rows is kept in device memory too, identical
 * bit for bit after every Update. */
typedef struct emdb_tier_info {
	const char *tier;         /* "host" (no replica), "cuda"; static      */
	bool failed;              /* the device failed: replica dropped       */
	uint64_t hot_rows;        /* rows in the device replica               */
	uint64_t hot_capacity;    /* rows gpu_memory holds                    */
	uint64_t bytes_device;    /* device memory held, all devices          */
	uint32_t devices;         /* GPUs holding a replica, identical        */
	/* What the replica served since the table opened (docs/gpu.md,
	 * "Serving through the replica"); all 0 without one: */
	uint64_t rows_gathered;   /* Pull rows read from the replica          */
	uint64_t rows_direct;     /* of them, gathered into device memory     */
	uint64_t rows_scattered;  /* Push rows added to device accumulators   */
	uint64_t rows_staged;     /* rows Prefetch copied in for its Pull     */
	uint64_t steps_device;    /* Updates stepped from those accumulators  */
	uint64_t steps_replayed;  /* Updates that replayed the host's sums    */
	uint64_t steps_reduced;   /* of steps_device, summed across devices   */
	uint64_t row_steps;       /* rows stepped on the device (once for all) */
	uint64_t rows_resynced;   /* rows copied again from the host          */
	uint64_t fallbacks;       /* serving calls the host took over         */
} emdb_tier_info;

/* Errors: INVALID (NULL argument), NO_TABLE. */
int emdb_table_tier(emdb_db *db, uint32_t id, emdb_tier_info *out);

/* One device of a table's replica (device < emdb_tier_info.devices).
 * Every device holds the same rows; Pull into host memory reads device
 * 0's copy, Pull into a device's memory that device's, and Push adds to
 * every device's accumulators. */
typedef struct emdb_tier_device_info {
	int device;               /* the GPU's ordinal                        */
	uint64_t hot_rows;        /* rows in this device's copy               */
	uint64_t bytes_device;    /* device memory this copy holds            */
	uint64_t rows_gathered;   /* Pull rows read from this device          */
	uint64_t rows_scattered;  /* Push rows added to its accumulators      */
} emdb_tier_device_info;

/* Errors: INVALID (NULL argument; device out of range, which is every
 * device of a table without a replica), NO_TABLE. */
int emdb_table_tier_device(emdb_db *db, uint32_t id, uint32_t device,
			   emdb_tier_device_info *out);

/* Whether this build and machine can keep rows in GPU memory: false with
 * the reason in why[why_len] (no CUDA in the build, no driver, no device).
 * Probes the driver on each call (milliseconds the first time). */
bool emdb_gpu_available(char *why, size_t why_len);

#ifdef __cplusplus
}
#endif
#endif
