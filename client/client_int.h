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

/* What a request asks for.  One enum for both transports; net.c maps it
 * to wire opcodes. */
typedef enum cl_op {
	CL_PING = 1,
	CL_INFO,
	CL_CONFIG_GET,
	CL_CONFIG_SET,
	CL_SHUTDOWN,
	CL_TABLE_CREATE,
	CL_TABLE_DROP,
	CL_TABLE_RESERVE,
	CL_TABLE_FIND,
	CL_TABLE_DESCRIBE,
	CL_TABLE_LIST,
	CL_STATS,
	CL_PREFETCH,
	CL_PULL,   /* plain or pooled, by IDs or ticket */
	CL_PUSH,   /* plain or pooled, by IDs or ticket */
	CL_UPDATE, /* table 0 = every table */
	CL_PUSH_UPDATE, /* by IDs or ticket, no bags */
	CL_LOOKUP,
	CL_READ_STATE,
	CL_CHECKPOINT,      /* start a checkpoint job */
	CL_RESTORE,         /* start a restore job */
	CL_JOB_STATUS,
	CL_CKPT_LIST,
	CL_CKPT_DELETE,
} cl_op;

/* A request's arguments and where its results go: the caller's pointers,
 * borrowed under the lifetime rule of client.h. */
typedef struct cl_args {
	cl_op op;
	const char *what;  /* public function name, for messages */
	uint32_t table;
	uint32_t dim;
	const uint64_t *ids;
	size_t n;
	const emdb_client_ticket *ticket;
	const uint64_t *offsets; /* non-NULL or n_bags > 0: pooled */
	size_t n_bags;
	emdb_pool pool;
	bool bags;               /* a *_bags call */
	bool all;                /* UPDATE of every table */
	uint32_t workers;        /* UPDATE: >= 2, a synchronous step */
	const float *grads;      /* PUSH, PUSH_UPDATE */
	uint32_t per_row;        /* READ_STATE */
	const char *s1, *s2;     /* name / section / pattern */
	const char *const *keys; /* CONFIG_SET: keys[i] = values[i], i < n_kv */
	const char *const *values;
	size_t n_kv;
	const emdb_table_config *cfg;
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
