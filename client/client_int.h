/*
 * client_int.h - the client library's private layout: the handle, the
 * request (future) every call goes through, and the transport interface
 * that mem.c and net.c implement.  Only the client library's .c files include this.
 */
#ifndef EMDB_CLIENT_INT_H
#define EMDB_CLIENT_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <emdb/client.h>
#include <emdb/db.h>

/* Every operation of emdb/client.h, declared once.  Each layer expands
 * the column it owns into a table indexed by cl_op, so that no layer keeps
 * a switch over operations:
 *
 *   X(NAME, wire, check, encode, receive, mem)
 *
 *   NAME     gives CL_NAME, the request's cl_op.
 *   wire     the PROTO_OP_MAP row it travels as (TABLE_FIND is a
 *            TABLE_DESCRIBE by name); its version and role are that row's.
 *   check    future.c: the argument check, run once before any transport
 *            (chk_none: nothing to check).
 *   encode   net_ops.c: ENC_FLAT(fn), the whole frame written by fn into a
 *            buffer, or ENC_IOV(fn), a scatter-gather list over the
 *            caller's own arrays (the big requests).
 *   receive  net_ops.c: RX_BODY(fn), the body buffered and decoded, then fn
 *            delivers it to the outputs (NULL: nothing to deliver), or
 *            RX_VECTORS, the floats read from the socket straight into
 *            the caller's array.
 *   mem      mem.c: the operation on the engine in this process.
 *
 * Adding a call: a row here (after its PROTO_OP_MAP row, codec and
 * handler), and the functions its row names. */
#define CL_OP_MAP(X)                                                                                  \
	X(PING, PING, chk_none, ENC_FLAT(enc_ping), RX_BODY(NULL), mem_ping)                           \
	X(INFO, INFO, chk_info, ENC_FLAT(enc_info), RX_BODY(dec_info), mem_info)                       \
	X(CONFIG_GET, CONFIG_GET, chk_config_get, ENC_FLAT(enc_config_get), RX_BODY(dec_config_get),   \
	  mem_config_get)                                                                              \
	X(CONFIG_SET, CONFIG_SET, chk_config_set, ENC_FLAT(enc_config_set), RX_BODY(NULL),             \
	  mem_config_set)                                                                              \
	X(SHUTDOWN, SHUTDOWN, chk_none, ENC_FLAT(enc_empty), RX_BODY(NULL), mem_shutdown)              \
	X(TABLE_CREATE, TABLE_CREATE, chk_table_create, ENC_FLAT(enc_table_create),                    \
	  RX_BODY(dec_table_create), mem_table_create)                                                 \
	X(TABLE_DROP, TABLE_DROP, chk_none, ENC_FLAT(enc_table_drop), RX_BODY(NULL), mem_table_drop)   \
	X(TABLE_RESERVE, TABLE_RESERVE, chk_none, ENC_FLAT(enc_table_reserve), RX_BODY(NULL),          \
	  mem_table_reserve)                                                                           \
	X(TABLE_ALTER, TABLE_ALTER, chk_table_alter, ENC_FLAT(enc_table_alter), RX_BODY(NULL),         \
	  mem_table_alter)                                                                             \
	X(TABLE_SCAN, TABLE_SCAN, chk_table_scan, ENC_FLAT(enc_table_scan), RX_BODY(dec_table_scan),    \
	  mem_table_scan)                                                                              \
	X(TABLE_LOAD, TABLE_LOAD, chk_table_load, ENC_IOV(iov_table_load), RX_BODY(NULL),              \
	  mem_table_load)                                                                              \
	X(TABLE_FIND, TABLE_DESCRIBE, chk_table_find, ENC_FLAT(enc_table_find),                        \
	  RX_BODY(dec_table_find), mem_table_find)                                                     \
	X(TABLE_DESCRIBE, TABLE_DESCRIBE, chk_table_describe, ENC_FLAT(enc_table_describe),            \
	  RX_BODY(dec_table_describe), mem_table_describe)                                             \
	X(TABLE_LIST, TABLE_LIST, chk_table_list, ENC_FLAT(enc_empty), RX_BODY(dec_table_list),        \
	  mem_table_list)                                                                              \
	X(STATS, STATS, chk_stats, ENC_FLAT(enc_empty), RX_BODY(dec_stats), mem_stats)                 \
	X(PREFETCH, PREFETCH, chk_prefetch, ENC_IOV(iov_prefetch), RX_BODY(dec_prefetch),              \
	  mem_prefetch)                                                                                \
	X(PULL, PULL, chk_rows, ENC_IOV(iov_pull), RX_VECTORS, mem_pull)                               \
	X(PUSH, PUSH, chk_rows, ENC_IOV(iov_push), RX_BODY(NULL), mem_push)                            \
	X(UPDATE, UPDATE, chk_none, ENC_FLAT(enc_update), RX_BODY(dec_update), mem_update)             \
	X(PUSH_UPDATE, PUSH_UPDATE, chk_rows, ENC_IOV(iov_push_update), RX_BODY(dec_push_update),      \
	  mem_push_update)                                                                             \
	X(PULL_WEIGHTED, PULL_WEIGHTED, chk_rows, ENC_IOV(iov_pull_weighted), RX_VECTORS, mem_pull)    \
	X(PUSH_WEIGHTED, PUSH_WEIGHTED, chk_rows, ENC_IOV(iov_push_weighted), RX_BODY(NULL), mem_push) \
	X(LOOKUP, LOOKUP, chk_rows, ENC_IOV(iov_lookup), RX_VECTORS, mem_lookup)                       \
	X(READ_STATE, READ_STATE, chk_rows, ENC_IOV(iov_read_state), RX_VECTORS, mem_read_state)       \
	X(CHECKPOINT, CHECKPOINT, chk_checkpoint, ENC_FLAT(enc_checkpoint), RX_BODY(dec_checkpoint),   \
	  mem_no_store)                                                                                \
	X(RESTORE, RESTORE, chk_none, ENC_FLAT(enc_restore), RX_BODY(dec_restore), mem_no_store)       \
	X(JOB_STATUS, JOB_STATUS, chk_job_status, ENC_FLAT(enc_job_status), RX_BODY(dec_job_status),   \
	  mem_no_store)                                                                                \
	X(CKPT_LIST, CHECKPOINT_LIST, chk_ckpt_list, ENC_FLAT(enc_empty), RX_BODY(dec_ckpt_list),      \
	  mem_no_store)                                                                                \
	X(CKPT_DELETE, CHECKPOINT_DELETE, chk_none, ENC_FLAT(enc_ckpt_delete), RX_BODY(NULL),          \
	  mem_no_store)                                                                                \
	X(LINKTEST, LINKTEST, chk_linktest, ENC_FLAT(enc_linktest), RX_BODY(dec_linktest), mem_no_cluster)

/* What a request asks for: a row of CL_OP_MAP. */
typedef enum cl_op {
	CL_NONE = 0, /* no request has it: a zeroed cl_args is no call */
#define CL_OP_ENUM_(NAME, wire, check, encode, receive, mem) CL_##NAME,
	CL_OP_MAP(CL_OP_ENUM_)
#undef CL_OP_ENUM_
	CL_OP_COUNT
} cl_op;

/* A request's arguments and where its results go: the caller's pointers,
 * borrowed under the lifetime rule of client.h. */
typedef struct cl_args {
	cl_op op;
	const char *what;  /* public function name, for messages */
	uint32_t table;
	uint32_t dim;
	/* Which rows (PREFETCH, PULL, PUSH, PUSH_UPDATE, LOOKUP, READ_STATE,
	 * and PULL_WEIGHTED, PUSH_WEIGHTED: PULL's and PUSH's with weights),
	 * decided once by client.c and read as they are by every layer: by
	 * IDs, ids[n] and ticket NULL; by ticket, ids NULL and n the ticket's
	 * count.  Pooled (bags, a *_bags call): offsets[n_bags], pool, and
	 * n_rows = n_bags vectors; otherwise n_rows = n. */
	const uint64_t *ids;
	size_t n;
	const emdb_client_ticket *ticket;
	bool bags;
	const uint64_t *offsets;
	size_t n_bags;
	emdb_pool pool;
	size_t n_rows;           /* vectors that PULL returns / PUSH carries */
	const float *weights;    /* PULL_WEIGHTED, PUSH_WEIGHTED: one per ID */
	bool all;                /* UPDATE of every table */
	uint32_t workers;        /* UPDATE: >= 2, a synchronous step */
	uint64_t seq, session;   /* UPDATE of a step by a ranked handle: its step number and the
				    handle's session (client.c); seq 0: none */
	const float *grads;      /* PUSH, PUSH_UPDATE */
	uint32_t per_row;        /* READ_STATE */
	const char *s1, *s2;     /* name / section / pattern */
	const char *const *keys; /* CONFIG_SET: keys[i] = values[i], i < n_kv */
	const char *const *values;
	size_t n_kv;
	const emdb_table_config *cfg;
	const emdb_optimizer *opt;   /* TABLE_ALTER */
	const float *vecs_in;        /* TABLE_LOAD (ids, n, dim, per_row too) */
	const float *state_in;       /* TABLE_LOAD, with per_row > 0 */
	uint64_t arg;            /* CHECKPOINT kind; RESTORE, CKPT_DELETE checkpoint; JOB_STATUS job;
				    TABLE_RESERVE rows */

	float *out;              /* PULL, LOOKUP, READ_STATE */
	uint8_t *found;          /* LOOKUP, READ_STATE; may be NULL */
	uint64_t *rows;          /* UPDATE, PUSH_UPDATE; may be NULL */
	uint32_t *id_out;        /* TABLE_CREATE, TABLE_FIND; may be NULL */
	emdb_client_ticket **ticket_out; /* PREFETCH */
	emdb_table_info *info;   /* TABLE_DESCRIBE */
	emdb_db_stats *stats;    /* STATS */
	uint32_t *list_ids;      /* TABLE_LIST */
	size_t list_cap;
	size_t *n_out;           /* TABLE_LIST, CONFIG_GET */
	char **text;             /* INFO */
	emdb_client_kv **kv;     /* CONFIG_GET */
	uint64_t *job_out;       /* CHECKPOINT, RESTORE; may be NULL */
	emdb_job_status *job;    /* JOB_STATUS */
	emdb_ckpt_info **ckpts;  /* CKPT_LIST (with n_out) */
	uint64_t *ids_out;       /* TABLE_SCAN: n rows of ids, vecs in out, */
	float *state_out;        /* state (per_row > 0), count in n_out,    */
	uint64_t *next_out;      /* the next cursor (arg: this one), and    */
	uint64_t *step_out;      /* the page's step (may be NULL)           */
	const emdb_linktest_msg *lt_msgs; /* LINKTEST [n]; depth in workers, */
	emdb_linktest_result *lt_out;     /* duration_ms in arg              */
} cl_args;

/* Declare `cl_args a` for operation op_ of public function what_. */
#define CL_ARGS(op_, what_) cl_args a = { .op = (op_), .what = (what_) }

/* Future states.  A future moves only forward:
 *   NEW -> QUEUED -> RUNNING -> DONE, or NEW -> QUEUED -> DONE (timed out
 *   or abandoned while queued), or NEW -> DONE (refused at submission).
 * QUEUED: waiting in mem.c's queue or in net.c's table of requests sent.
 * RUNNING: a worker executes it, or the receiver is filling its outputs;
 * only that thread may complete it, and nobody may unlink it. */
enum { FUT_NEW = 0, FUT_QUEUED, FUT_RUNNING, FUT_DONE };

#define CL_MSG_MAX 512

struct emdb_future {
	emdb_client *c;
	cl_args a;
	int state;                 /* FUT_*, under c->lock */
	int rc;                    /* result once DONE */
	bool delivered;            /* the ticket went to *a.ticket_out */
	uint64_t deadline;         /* monotonic ns; 0 = none */
	uint64_t req_id;           /* net.c: the wire id */
	emdb_client_ticket *tk;    /* PREFETCH result until delivered */
	struct emdb_future *next, *prev; /* queue or pending-table links */
	pthread_cond_t cond;       /* signalled on DONE, with c->lock */
	char msg[CL_MSG_MAX];      /* message when rc < 0 */
};

/* The operations a transport provides.  submit and run are called without
 * c->lock; unlink_locked with it. */
typedef struct cl_transport {
	const char *name;
	/* Start f (state NEW): queue or send it, or complete it at once. */
	void (*submit)(emdb_client *c, emdb_future *f);
	/* Execute f to completion on the calling thread, or NULL to use
	 * submit + wait. */
	void (*run)(emdb_client *c, emdb_future *f);
	/* Take a QUEUED f out of the queue or table: it timed out or was
	 * abandoned.  Caller then completes it. */
	void (*unlink_locked)(emdb_client *c, emdb_future *f);
	/* Release the ticket's server-side part (not its memory). */
	void (*ticket_release)(emdb_client *c, emdb_client_ticket *t);
	/* Stop threads and free the transport's state. */
	void (*close)(emdb_client *c);
} cl_transport;

struct emdb_client {
	const cl_transport *tr;
	void *priv;                /* the transport's own state */
	pthread_mutex_t lock;      /* future states, queues, flags */
	uint32_t timeout_ms;       /* atomic */
	uint32_t max_batch;
	emdb_role role;
	/* The protocol version HELLO chose (net.c), PROTO_VERSION_MAX until
	 * then and for mem://; requests of a newer opcode are refused. */
	uint8_t version;
	uint32_t worker_rank;      /* emdb_client_options.worker_rank (mem.c) */
	/* A ranked handle's synchronous steps: its session (random, never
	 * 0) and, per table, the step number its next step has; under lock
	 * (client.c, cl_step_done_locked). */
	uint64_t session;
	struct cl_step_seq *seqs;
	size_t n_seqs;
	char server[256];
};

struct emdb_client_ticket {
	emdb_client *c;
	uint32_t table;
	size_t count;
	uint64_t handle;           /* net: the server's handle */
	emdb_ticket *local;        /* mem: the engine's ticket */
};

/* ---- future.c ------------------------------------------------------ */

uint64_t cl_now_ns(void);
/* Complete f with rc and message (NULL: none); caller holds c->lock. */
void cl_complete_locked(emdb_future *f, int rc, const char *msg);
/* The same, taking the lock. */
void cl_complete(emdb_future *f, int rc, const char *msg);
/* Wait, holding c->lock, until f is DONE or the monotonic time `limit`;
 * a QUEUED f past its deadline is unlinked and completed with TIMEOUT.
 * Returns f->rc or EMDB_FUTURE_PENDING. */
int cl_wait_locked(emdb_future *f, uint64_t limit);
/* Run f synchronously to completion on a stack future and return its
 * result (the thread's message set on failure). */
int cl_call(emdb_client *c, cl_args *a);
/* Submit a heap future for a; NULL on NOMEM. */
emdb_future *cl_call_async(emdb_client *c, cl_args *a);

/* ---- client.c ------------------------------------------------------ */

/* f's step (a->seq) ended with rc: applied (EMDB_OK), the handle's next
 * step of its table gets the next number; else the same one again, a
 * resend.  Caller holds c->lock. */
void cl_step_done_locked(emdb_client *c, const cl_args *a, int rc);

/* Set this thread's emdb_client_last_error(); returns rc. */
int cl_seterr(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cl_setmsg(const char *msg);
/* A new ticket of c, or NULL (message set). */
emdb_client_ticket *cl_ticket_new(emdb_client *c, uint32_t table, size_t count);

/* ---- transports ---------------------------------------------------- */

typedef struct cl_uri cl_uri;
/* mem.c: open c's database and workers.  db NULL: by uri (name). */
typedef int cl_mem_open_fn(emdb_client *c, const cl_uri *u, emdb_db *db,
			   const emdb_client_options *o);
cl_mem_open_fn cl_mem_open;
/* client.c: mem.c's open when libemdb_client_mem is linked (its
 * mem_backend.c sets it before main), else NULL. */
extern cl_mem_open_fn *cl_mem_backend;
/* mem_backend.c: the symbol a static link names to keep that object. */
extern const char cl_mem_backend_linked[];
/* net.c: connect, HELLO, AUTH, start the receiver. */
int cl_net_open(emdb_client *c, const cl_uri *u, const emdb_client_options *o);

#endif
