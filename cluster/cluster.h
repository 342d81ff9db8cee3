/*
 * cluster/cluster.h - the cluster layer: several emdb nodes as one
 * database (DESIGN.md "Network and cluster", HypeReca sections 4-5,
 * docs/cluster.md).
 *
 * Each node runs one `cluster` over its own engine (emdb_db) and a
 * cluster_link to the other nodes (cluster/link.h: UCX in emdb-server, in
 * process in tests).  A request made on a node (its trainers' home node)
 * goes through cluster_submit:
 *   - each ID has one owner node (cluster/owner.h); the batch is split by
 *     owner, keeping request order within each owner's part;
 *   - this node's part runs on the local engine, every other owner gets
 *     exactly one node-to-node message (protocol/proto_node.h), sent in
 *     HypeReca's ring order (rank r sends to r+1, r+2, ... mod N);
 *   - the owners' answers are assembled in request order, pooled bags are
 *     pooled here after assembly, and the request ends through one
 *     completion callback.
 * The other nodes' requests arrive through cluster_serve, which the link
 * calls for every frame a peer sends.
 *
 * Results are those of one node holding every row, bit for bit (initial
 * values, sums of duplicate gradients, pooling, optimizer steps): see
 * docs/cluster.md "Determinism".
 *
 * Threads
 *   cluster_submit may be called from any thread.  Its local part runs on
 *   the calling thread; its remote parts end on the link's thread.  The
 *   request's done runs exactly once, on whichever thread finished the
 *   last part (maybe the caller's, before cluster_submit returns).
 *   cluster_serve runs on the link's thread and never blocks on a peer.
 *
 * Errors
 *   Negative emdb_err codes; a request's message is in req->msg.  A part
 *   that a peer did not answer fails the request with EMDB_ERR_NODE and a
 *   message naming the node.  A request refused before anything was sent
 *   (bad table, dim, batch, offsets) changes nothing, as on one node.  A
 *   request that fails after its parts went out may have been applied by
 *   the owners that answered (docs/cluster.md "Faults").
 *
 * Ownership
 *   Every array a request points to is the caller's and must stay valid,
 *   unchanged (inputs) or untouched (outputs), until done runs.  The
 *   cluster_req itself too.  One exception: the routed data ops
 *   (PREFETCH, PULL, PUSH, PUSH_UPDATE, LOOKUP, READ_STATE, LOAD) read
 *   their ids, grads, vecs and state only inside cluster_submit (every
 *   part's frame is built and the local part has run when it returns),
 *   so those four arrays are the caller's again once it returns; a pooled
 *   PULL's offsets and weights are read until done runs.  A cluster_ticket is the caller's, freed with
 *   cluster_ticket_free.
 */
#ifndef EMDB_CLUSTER_CLUSTER_H
#define EMDB_CLUSTER_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <emdb/db.h>

#include "cluster/link.h"
#include "cluster/owner.h"

typedef struct cluster cluster;
typedef struct cluster_ticket cluster_ticket;
typedef struct cluster_req cluster_req;

/* Open the cluster layer of this node over db (borrowed; it outlives the
 * cluster) and link (copied; its ctx must outlive the cluster), with
 * `partitions` virtual partitions (0: OWNER_PARTITIONS_DEFAULT), the same
 * on every node.  The link must deliver peers' frames to cluster_serve
 * with the returned cluster as ctx.  Errors: INVALID, NOMEM. */
int cluster_open(emdb_db *db, const cluster_link *link, uint32_t partitions, cluster **out);
/* Free the cluster.  No request may be in flight and the link must have
 * stopped calling cluster_serve; the owner tickets peers still hold are
 * freed.  Steps still waiting fail with CLOSED first.  NULL is a no-op. */
void cluster_close(cluster *cl);

/* Run the peers' requests still queued for the serve threads
 * (cluster_serve_drain), then answer, with CLOSED, the synchronous steps
 * waiting at this node (the coordinator), so that none still holds a
 * peer's request when the link closes; later arrivals are refused.  Call before destroying the link,
 * after it stopped calling cluster_serve.  NULL is a no-op. */
void cluster_drain(cluster *cl);

/* The link's serve function (cluster_serve_fn of link.h); ctx is the
 * cluster. */
void cluster_serve(void *ctx, uint32_t from, const uint8_t *frame, size_t len, cluster_responder *r);

/* ---- the owner's engine calls off the link's thread ----------------- */

#define CLUSTER_SERVE_THREADS_MAX 256u

/* Serve peers' requests on a pool of `threads` threads (0: every request
 * on the link's thread, as a cluster opens).  Each peer's requests run in
 * arrival order, one at a time (its "strand"); the data-plane requests
 * (PREFETCH, PULL, PUSH, PUSH_RANKED, PUSH_UPDATE, UPDATE, LOOKUP,
 * READ_STATE, TICKET_FREE, LOAD) run on a pool thread, the others (steps,
 * table changes, checkpoint phases, scans, statistics) on the link's
 * thread, through its post(), in their turn; a linktest's ECHO, which
 * changes nothing, is answered at once on the link's thread.  Different peers'
 * requests run at once.  Call once, before the link delivers any
 * request.  Errors: INVALID (called twice, over the maximum), NOMEM. */
int cluster_set_serve_threads(cluster *cl, uint32_t threads);
/* Wait until every request queued for the pool has run and replied;
 * true when some had to be waited for.  Any thread but the pool's and,
 * while requests wait to run there, the link's.  NULL is a no-op. */
bool cluster_serve_drain(cluster *cl);

typedef struct cluster_serve_counters {
	uint32_t threads;     /* the pool's size; 0: no pool */
	uint32_t max_running; /* most requests run on pool threads at once */
	uint64_t on_pool;     /* requests run on pool threads */
	uint64_t on_link;     /* requests queued and run on the link's thread */
} cluster_serve_counters;

/* The pool's counters so far (all 0 without a pool). */
void cluster_get_serve_counters(cluster *cl, cluster_serve_counters *out);

/* A peer restarted or left: free the owner tickets it held here.  Any
 * thread. */
void cluster_peer_lost(cluster *cl, uint32_t rank);

/* The worker of key `worker` on this node (its connection) has gone:
 * withdraw its arrival from the step it waits in, which answers it with
 * CLOSED, as a server alone does.  Not waited for.  Any thread. */
void cluster_step_leave(cluster *cl, uint64_t worker);

/* Fail the synchronous steps this node coordinates whose deadline passed
 * (call it about every 100 ms; now_ns on emdb__now_ns's clock). */
void cluster_tick(cluster *cl, uint64_t now_ns);

const owner_map *cluster_map(const cluster *cl);
uint32_t cluster_rank(const cluster *cl);
uint32_t cluster_nodes(const cluster *cl);

typedef enum cluster_op {
	CLUSTER_PREFETCH = 1, /* ids -> *ticket_out                            */
	CLUSTER_PULL,         /* ids or ticket, optionally bags -> out          */
	CLUSTER_PUSH,         /* ids or ticket, optionally bags, grads          */
	CLUSTER_PUSH_UPDATE,  /* ids or ticket, grads -> rows                   */
	CLUSTER_UPDATE,       /* table (0: all) -> rows                         */
	CLUSTER_LOOKUP,       /* ids -> out, found (optional)                   */
	CLUSTER_READ_STATE,   /* ids -> out (state floats), found               */
	CLUSTER_STEP,         /* UPDATE of a synchronous step: table, workers,
				 worker -> rows, once all workers arrived      */
	CLUSTER_TABLE_CREATE, /* cfg -> table (the id on every node)            */
	CLUSTER_TABLE_DROP,   /* table                                          */
	CLUSTER_TABLE_RESERVE, /* table, rows                                   */
	CLUSTER_TABLE_ALTER,  /* table, opt: on every node, all or none        */
	CLUSTER_SCAN,         /* table, cursor, max_rows, dim -> one page      */
	CLUSTER_LOAD,         /* table, ids, n, dim, vecs (, state) at owners  */
	CLUSTER_TABLE_STATS,  /* table (0: every table) -> per-node stats      */
	CLUSTER_LINKTEST      /* msgs, n, depth, duration_ns -> rounds, bytes   */
} cluster_op;

/* ---- Linktest (cluster/linktest.c, docs/cluster.md "Linktest") ------
 *
 * The node-to-node path alone, measured from this node: rounds of ECHO
 * messages (protocol/proto_node.h) to other nodes through the link, the
 * owners answering from their serve path with no engine and no table.
 * A round is a list of messages; `depth` rounds are kept in flight; a
 * round counts when all its replies are in; no round starts after the
 * duration, those in flight are waited for, and the test ends once.
 *
 * Sizes are frame sizes as the link's per-peer counters count them, its
 * own header included (cluster_link.frame_overhead): a size below the
 * smallest ECHO frame, or off its 8-byte grid, is rounded up to the next
 * one, and the bytes reported are those sent.  Bounds (INVALID beyond,
 * with nothing sent): duration 1 ns .. LINKTEST_NS_MAX, depth and
 * messages per round 1 .. LINKTEST_MAX, each frame within
 * PROTO_NODE_FRAME_MAX, depth x a round's bytes within
 * LINKTEST_INFLIGHT_MAX, every rank another node of the cluster.  One
 * linktest at a time per node (BUSY).  A peer that fails or does not
 * answer within the link's deadline ends the test with its error
 * (EMDB_ERR_NODE naming the node) once the rounds in flight are in. */
#define LINKTEST_MAX 64u
#define LINKTEST_NS_MAX (10ull * 1000000000ull)
#define LINKTEST_INFLIGHT_MAX (1ull << 30)

typedef struct cluster_linktest_msg {
	uint32_t rank;      /* another node                        */
	uint64_t req_bytes; /* the request, as the link counts it  */
	uint64_t rep_bytes; /* its reply, the same way             */
} cluster_linktest_msg;

/* CLUSTER_SCAN's cursor: the node being scanned in the top bits, the row
 * number at that node (emdb_table_scan's cursor) below.  0 starts at
 * node 0 row 0; the scan is over when next_cursor is 0. */
#define CLUSTER_SCAN_NODE_SHIFT 48
#define CLUSTER_SCAN_ROW_MASK ((1ull << CLUSTER_SCAN_NODE_SHIFT) - 1)

/* CLUSTER_TABLE_STATS's answer for one node. */
typedef struct cluster_node_stats {
	int status;            /* EMDB_OK, or why the node did not answer */
	emdb_table_stats stats; /* the table's (or the node's totals)      */
	uint64_t alloc_bytes;  /* the node's engine, all tables            */
} cluster_node_stats;

typedef void (*cluster_done_fn)(cluster_req *req);

/* One request.  Fill the inputs its op uses (zero the rest), then
 * cluster_submit. */
struct cluster_req {
	/* inputs */
	cluster_op op;
	uint32_t table;
	uint32_t dim;                 /* PULL, PUSH, PUSH_UPDATE, LOOKUP,
					 SCAN, LOAD                       */
	const uint64_t *ids;          /* [n], or NULL with ticket        */
	size_t n;
	const cluster_ticket *ticket; /* PULL, PUSH, PUSH_UPDATE         */
	const uint64_t *offsets;      /* [n_bags + 1]: pooled PULL/PUSH  */
	size_t n_bags;
	emdb_pool pool;
	const float *grads;           /* PUSH: [n or n_bags][dim]; PUSH_UPDATE [n][dim] */
	float *out;                   /* PULL [n or n_bags][dim]; LOOKUP [n][dim];
					 READ_STATE [n][state floats] */
	uint8_t *found;               /* LOOKUP (may be NULL), READ_STATE [n] */
	uint32_t workers;             /* STEP: >= 2                      */
	uint64_t worker;              /* STEP: the worker's key on this node
					 (a connection id); a resend with the
					 same key is not counted twice    */
	uint32_t timeout_ms;          /* STEP: 0 = no deadline           */
	uint64_t seq, session;        /* STEP: a ranked worker's step number
					 (>= 1; 0: none) and session, its
					 rank in `rank` (db/step.h)       */
	uint64_t rows_in;             /* TABLE_RESERVE                   */
	const emdb_table_config *cfg; /* TABLE_CREATE                    */
	const float *weights;         /* pooled PULL/PUSH: [n] per-sample
					 weights (SUM only), or NULL      */
	const emdb_optimizer *opt;    /* TABLE_ALTER                     */
	uint64_t cursor;              /* SCAN                            */
	uint32_t max_rows;            /* SCAN: 1..max_batch              */
	uint64_t *ids_out;            /* SCAN [max_rows]                 */
	float *state;                 /* SCAN out, LOAD in (may be NULL):
					 [rows][state floats]             */
	const float *vecs;            /* LOAD [n][dim]                   */
	cluster_node_stats *per_node; /* TABLE_STATS [nodes]             */
	const cluster_linktest_msg *msgs; /* LINKTEST [n]: one round,
					 read in cluster_submit only      */
	uint32_t depth;               /* LINKTEST: rounds in flight      */
	uint64_t duration_ns;         /* LINKTEST                        */
	bool ranked;                  /* PUSH: pushed as worker `rank`   */
	uint32_t rank;                /* (emdb_push_as), sent to every
					 owner (PUSH_RANKED)             */
	cluster_done_fn done;
	void *arg;                    /* the caller's                    */

	/* results, set before done runs */
	int status;                   /* EMDB_OK or an emdb_err          */
	char msg[256];                /* why, when status < 0            */
	uint64_t rows;                /* PUSH_UPDATE, UPDATE, STEP       */
	cluster_ticket *ticket_out;   /* PREFETCH                        */
	uint32_t table_out;           /* TABLE_CREATE                    */
	uint64_t next_cursor, step;   /* SCAN (rows: the page's rows;
					 `out` gets their vectors)        */
	uint64_t rounds, elapsed_ns;  /* LINKTEST: rounds done, from the
					 first send to the last reply     */
	uint64_t bytes_sent, bytes_received; /* LINKTEST: of those rounds,
					 frames as the link counts them   */

	void *priv;                   /* the cluster's, while in flight  */
	cluster *priv_cluster;        /* the cluster's (cluster/ckpt.c)  */
	cluster_done_fn gated_done;   /* the cluster's (cluster/ckpt.c)  */
};

/* Start req.  EMDB_OK: done will run once with the result.  An error
 * (INVALID, NO_TABLE, DIM, BATCH, TICKET, NOMEM; for a SCAN of this
 * node's own rows, the engine's) refuses the request before anything
 * happened: done never runs, req->msg says why. */
int cluster_submit(cluster *cl, cluster_req *req);

/* The blocking form, for callers that are threads: submit and wait.
 * Returns req->status. */
int cluster_run(cluster *cl, cluster_req *req);

/* Free a ticket of PREFETCH: its parts here now, the owners' parts by
 * a message to each (not waited for).  NULL is a no-op.  Any thread. */
void cluster_ticket_free(cluster *cl, cluster_ticket *t);
size_t cluster_ticket_count(const cluster_ticket *t);
uint32_t cluster_ticket_table(const cluster_ticket *t);

/* The whole table (or database) from CLUSTER_TABLE_STATS's per_node:
 * every counter summed over the nodes (rows: the table's rows, each
 * living on one node; call counters count engine calls, so a request
 * split over k owners counts k), step the largest; *alloc_bytes the sum
 * of the nodes' engines (may be NULL).  Errors: the first node whose
 * statistics are unknown (its status; the message names it): a total
 * missing a node is never given. */
int cluster_stats_total(const cluster *cl, const cluster_node_stats *per_node, emdb_table_stats *sum,
			uint64_t *alloc_bytes);

/* Traffic this node's cluster layer started (for INFO and tests):
 * messages and bytes sent per peer rank, counted by the layer itself. */
typedef struct cluster_counters {
	uint64_t msgs_to;
	uint64_t bytes_to;
	uint64_t msgs_from; /* requests served for that peer */
	uint64_t bytes_from;
} cluster_counters;
void cluster_get_counters(const cluster *cl, uint32_t rank, cluster_counters *out);

/* ---- Cluster checkpoints (cluster/ckpt.c, docs/cluster.md) ----------
 *
 * A checkpoint asked of any node checkpoints every node at the same step
 * boundary: the coordinator (rank 0) holds Updates on every node, has each
 * node write its part, then writes a manifest naming the parts, last.
 * What a part and a manifest are is the server's (cluster_ckpt_ops): the
 * cluster layer links no checkpoint store. */

/* One node's part of a cluster checkpoint: its checkpoint id in that
 * node's store and the rows it holds. */
typedef struct cluster_ckpt_part {
	uint32_t rank;
	uint64_t part;
	uint64_t rows;
} cluster_ckpt_part;

typedef struct step_seq_rec step_seq_rec; /* db/step.h: a worker's last applied step */

typedef struct cluster_ckpt_ops {
	/* Write this node's part of cluster checkpoint `id` (kind 1 full, 2
	 * incremental), then call cluster_ckpt_part_done(cl, token, ...) once,
	 * from any thread, when it is durable or failed.  An error return
	 * (the message in emdb_last_error) means done will not be called. */
	int (*write_part)(void *ctx, uint32_t kind, uint64_t id, void *token);
	/* Delete part `part` (an aborted checkpoint's).  Best effort. */
	void (*drop_part)(void *ctx, uint64_t part);
	/* Coordinator: the id of the next cluster checkpoint. */
	int (*next_id)(void *ctx, uint64_t *id);
	/* Coordinator: write the manifest of `id`, whose parts[n] (by rank)
	 * are all durable, with seqs[nseqs]: every ranked worker's last
	 * applied step (db/step.h) at the checkpoint.  Errors with the
	 * reason in why. */
	int (*publish)(void *ctx, uint64_t id, uint32_t kind, const cluster_ckpt_part *parts, uint32_t n,
		       const step_seq_rec *seqs, size_t nseqs, char *why, size_t whylen);
	/* Coordinator: the complete cluster checkpoint `id` names (0: the
	 * newest) into *out.  Errors: INVALID (none such). */
	int (*resolve)(void *ctx, uint64_t id, uint64_t *out);
	/* Read every part of cluster checkpoint `id` and stage the rows this
	 * node owns, changing nothing yet; then, from any thread,
	 * cluster_ckpt_part_done(cl, token, status, 1, rows, msg). */
	int (*load)(void *ctx, uint64_t id, void *token);
	/* Replace every table with what load staged, at once; *seqs[*nseqs]
	 * the staged checkpoint's workers' steps (publish's; emdb_malloc'd,
	 * the caller frees; NULL and 0 for none), which the coordinator
	 * takes on for its synchronous steps. */
	int (*swap)(void *ctx, step_seq_rec **seqs, size_t *nseqs);
	/* Forget what load staged (none: a no-op). */
	void (*discard)(void *ctx);
} cluster_ckpt_ops;

/* Install the store's operations (copied; ctx borrowed for the cluster's
 * life) and hold_ms (0: 600000): how long a node holds Updates for a
 * checkpoint at most, and how long the coordinator waits for a node's
 * part (the same on every node).  Without them, a cluster checkpoint
 * involving this node fails with UNSUPPORTED.  Call before requests
 * flow. */
void cluster_ckpt_set_ops(cluster *cl, const cluster_ckpt_ops *ops, void *ctx, uint32_t hold_ms);

/* The end of a cluster checkpoint: status EMDB_OK and its id, or an
 * error and why (naming the node).  Runs on the link's thread or a job
 * thread. */
typedef void (*cluster_ckpt_done_fn)(void *arg, int status, uint64_t id, const char *msg);

/* Take a cluster checkpoint of kind 1 (full) or 2 (incremental): on the
 * coordinator it runs here, elsewhere it is forwarded.  EMDB_OK: done
 * runs once later.  Errors (done never runs): INVALID, BUSY (one runs),
 * UNSUPPORTED (no store), NOMEM, NODE. */
int cluster_ckpt_start(cluster *cl, uint32_t kind, cluster_ckpt_done_fn done, void *arg);

/* Restore cluster checkpoint `id` (0: the newest) on every node, all or
 * none: done as cluster_ckpt_start's, with the id restored. */
int cluster_ckpt_restore(cluster *cl, uint64_t id, cluster_ckpt_done_fn done, void *arg);

/* At start, after `--restore` restored a cluster checkpoint: the workers'
 * steps of its manifest (publish's seqs), taken on by the coordinator
 * (other ranks: nothing to do).  Before any request.  Errors as
 * step_seq_import. */
int cluster_ckpt_steps_restored(cluster *cl, const step_seq_rec *seqs, size_t n);

/* What write_part's (or load's) work ended with: the part's id and rows, or an error
 * and its message.  Any thread; token is freed here. */
void cluster_ckpt_part_done(cluster *cl, void *token, int status, uint64_t part, uint64_t rows, const char *msg);

#endif
