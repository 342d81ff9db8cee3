/*
 * client.c - the public face of the client library: connecting by URI,
 * closing, tickets, and every operation of emdb/client.h as a request
 * description handed to future.c (the per-thread error message is
 * client/error.c).
 *
 * Each public call only fills a cl_args (what to do, the caller's
 * pointers) and hands it to cl_call (synchronous) or cl_call_async; the
 * transport (mem.c or net.c, chosen by the URI at connect) does the rest.
 *
 * Invariants:
 *   1. A handle's transport is fixed at connect and never changes; a
 *      handle is fully built (lock, transport state, threads) before
 *      emdb_client_connect returns it, and torn down only by close.
 *   2. Options are read through their size field: a caller compiled
 *      against an older, shorter emdb_client_options gets the defaults
 *      for the fields it does not know.
 */
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <emdb/alloc.h>
#include <emdb/client.h>

#include "client/client_int.h"
#include "client/uri.h"
#include "protocol/proto.h"

/* ---- handles ------------------------------------------------------- */

static int read_options(const emdb_client_options *opts, emdb_client_options *o)
{
	emdb_client_options d = EMDB_CLIENT_OPTIONS_INIT;
	*o = d;
	if (!opts)
		return EMDB_OK;
	if (opts->size == 0 || opts->size > sizeof(*o))
		return cl_seterr(EMDB_ERR_INVALID,
				 "emdb_client_options.size is %u: initialize with EMDB_CLIENT_OPTIONS_INIT",
				 opts->size);
	memcpy(o, opts, opts->size);
	o->size = sizeof(*o);
	if (o->mem_threads > 64)
		return cl_seterr(EMDB_ERR_INVALID, "emdb_client_options.mem_threads must be 0..64, not %u",
				 o->mem_threads);
	if (o->busy_poll_us > EMDB_CLIENT_BUSY_POLL_MAX_US)
		return cl_seterr(EMDB_ERR_INVALID, "emdb_client_options.busy_poll_us must be 0..%u, not %u",
				 EMDB_CLIENT_BUSY_POLL_MAX_US, o->busy_poll_us);
	if (o->worker_rank != EMDB_WORKER_NONE && o->worker_rank >= EMDB_WORKERS_MAX)
		return cl_seterr(EMDB_ERR_INVALID,
				 "emdb_client_options.worker_rank must be below %u (or EMDB_WORKER_NONE), not %u",
				 EMDB_WORKERS_MAX, o->worker_rank);
	return EMDB_OK;
}

static emdb_client *client_new(const emdb_client_options *o)
{
	emdb_client *c = emdb_calloc(1, sizeof(*c));
	if (!c) {
		cl_seterr(EMDB_ERR_NOMEM, "emdb_client_connect: out of memory");
		return NULL;
	}
	pthread_mutex_init(&c->lock, NULL);
	c->timeout_ms = o->timeout_ms;
	c->version = PROTO_VERSION_MAX; /* a socket's HELLO may lower it */
	c->worker_rank = o->worker_rank;
	if (getrandom(&c->session, sizeof(c->session), 0) != (ssize_t)sizeof(c->session))
		c->session = (uint64_t)cl_now_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)c;
	c->session |= 1; /* never 0 */
	return c;
}

static void client_free(emdb_client *c)
{
	emdb_free(c->seqs);
	pthread_mutex_destroy(&c->lock);
	emdb_free(c);
}

/* ---- step numbers of a ranked handle (client_int.h) ---------------- */

struct cl_step_seq {
	uint32_t table; /* 0: every table */
	uint64_t next;  /* the number of the handle's next step of it, >= 1 */
};

static struct cl_step_seq *step_seq_locked(emdb_client *c, uint32_t table)
{
	for (size_t i = 0; i < c->n_seqs; i++)
		if (c->seqs[i].table == table)
			return &c->seqs[i];
	return NULL;
}

/* A ranked handle's step gets its number: the table's next one, which
 * only an applied step advances, so that a call repeated after an error
 * (a TIMEOUT, a lost connection) resends the same step.  Errors: NOMEM. */
static int step_seq_take(emdb_client *c, cl_args *a)
{
	if (c->worker_rank == EMDB_WORKER_NONE || a->workers < 2)
		return EMDB_OK;
	int rc = EMDB_OK;
	pthread_mutex_lock(&c->lock);
	struct cl_step_seq *s = step_seq_locked(c, a->table);
	if (!s) {
		struct cl_step_seq *n = emdb_realloc(c->seqs, (c->n_seqs + 1) * sizeof(*n));
		if (n) {
			c->seqs = n;
			s = &n[c->n_seqs++];
			*s = (struct cl_step_seq){ a->table, 1 };
		} else {
			rc = cl_seterr(EMDB_ERR_NOMEM, "%s: out of memory", a->what);
		}
	}
	if (s) {
		a->seq = s->next;
		a->session = c->session;
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

void cl_step_done_locked(emdb_client *c, const cl_args *a, int rc)
{
	struct cl_step_seq *s = step_seq_locked(c, a->table);
	if (rc == EMDB_OK && s && s->next == a->seq)
		s->next++;
}

cl_mem_open_fn *cl_mem_backend;

/* mem:// runs the engine in this process, so it lives in its own library
 * (libemdb_client_mem, which links the engine and RocksDB); linked, it sets
 * cl_mem_backend before main.  Without it the client links no engine and
 * mem:// is refused. */
static int mem_open(emdb_client *c, const cl_uri *u, emdb_db *db, const emdb_client_options *o)
{
	if (!cl_mem_backend)
		return cl_seterr(EMDB_ERR_UNSUPPORTED,
				 "mem:// needs libemdb_client_mem: link it for in-process databases, "
				 "or use tcp://, tls:// or unix://");
	return cl_mem_backend(c, u, db, o);
}

int emdb_client_connect(const char *uri, const emdb_client_options *opts, emdb_client **out)
{
	emdb_client_options o;
	cl_uri u;
	int rc;

	if (!out)
		return cl_seterr(EMDB_ERR_INVALID, "emdb_client_connect: out is NULL");
	*out = NULL;
	rc = read_options(opts, &o);
	if (rc != EMDB_OK)
		return rc;
	rc = cl_uri_parse(uri, &u);
	if (rc != EMDB_OK)
		return rc;
	if (u.has_timeout)
		o.timeout_ms = u.timeout_ms;
	emdb_client *c = client_new(&o);
	if (!c) {
		cl_uri_free(&u);
		return EMDB_ERR_NOMEM;
	}
	if (u.kind == CL_URI_MEM)
		rc = mem_open(c, &u, NULL, &o);
	else
		rc = cl_net_open(c, &u, &o);
	cl_uri_free(&u);
	if (rc != EMDB_OK) {
		client_free(c);
		return rc;
	}
	*out = c;
	return EMDB_OK;
}

int emdb_client_wrap(emdb_db *db, const emdb_client_options *opts, emdb_client **out)
{
	emdb_client_options o;
	if (!out)
		return cl_seterr(EMDB_ERR_INVALID, "emdb_client_wrap: out is NULL");
	*out = NULL;
	if (!db)
		return cl_seterr(EMDB_ERR_INVALID, "emdb_client_wrap: db is NULL");
	int rc = read_options(opts, &o);
	if (rc != EMDB_OK)
		return rc;
	emdb_client *c = client_new(&o);
	if (!c)
		return EMDB_ERR_NOMEM;
	rc = mem_open(c, NULL, db, &o);
	if (rc != EMDB_OK) {
		client_free(c);
		return rc;
	}
	*out = c;
	return EMDB_OK;
}

void emdb_client_close(emdb_client *c)
{
	if (!c)
		return;
	c->tr->close(c);
	client_free(c);
}

emdb_role emdb_client_role(const emdb_client *c)
{
	return c->role;
}

const char *emdb_client_server(const emdb_client *c)
{
	return c->server;
}

uint32_t emdb_client_max_batch(const emdb_client *c)
{
	return c->max_batch;
}

int emdb_client_protocol_version(const emdb_client *c)
{
	return c->version;
}

void emdb_client_set_timeout(emdb_client *c, uint32_t timeout_ms)
{
	__atomic_store_n(&c->timeout_ms, timeout_ms, __ATOMIC_RELAXED);
}

uint32_t emdb_client_timeout(const emdb_client *c)
{
	return __atomic_load_n(&c->timeout_ms, __ATOMIC_RELAXED);
}

/* ---- tickets ------------------------------------------------------- */

emdb_client_ticket *cl_ticket_new(emdb_client *c, uint32_t table, size_t count)
{
	emdb_client_ticket *t = emdb_calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->c = c;
	t->table = table;
	t->count = count;
	return t;
}

void emdb_client_ticket_free(emdb_client_ticket *t)
{
	if (!t)
		return;
	t->c->tr->ticket_release(t->c, t);
	emdb_free(t);
}

size_t emdb_client_ticket_count(const emdb_client_ticket *t)
{
	return t->count;
}

uint32_t emdb_client_ticket_table(const emdb_client_ticket *t)
{
	return t->table;
}

/* ---- server and tables --------------------------------------------- */

int emdb_client_ping(emdb_client *c)
{
	CL_ARGS(CL_PING, "emdb_client_ping");
	return cl_call(c, &a);
}

int emdb_client_info(emdb_client *c, const char *section, char **text)
{
	CL_ARGS(CL_INFO, "emdb_client_info");
	a.s1 = section ? section : "";
	a.text = text;
	return cl_call(c, &a);
}

int emdb_client_config_get(emdb_client *c, const char *pattern, emdb_client_kv **kv, size_t *n)
{
	CL_ARGS(CL_CONFIG_GET, "emdb_client_config_get");
	a.s1 = pattern;
	a.kv = kv;
	a.n_out = n;
	return cl_call(c, &a);
}

int emdb_client_config_set(emdb_client *c, const char *key, const char *value)
{
	CL_ARGS(CL_CONFIG_SET, "emdb_client_config_set");
	a.keys = &key;
	a.values = &value;
	a.n_kv = 1;
	return cl_call(c, &a);
}

int emdb_client_config_set_many(emdb_client *c, size_t n, const char *const *keys, const char *const *values)
{
	CL_ARGS(CL_CONFIG_SET, "emdb_client_config_set_many");
	a.keys = keys;
	a.values = values;
	a.n_kv = n;
	return cl_call(c, &a);
}

int emdb_client_shutdown(emdb_client *c)
{
	CL_ARGS(CL_SHUTDOWN, "emdb_client_shutdown");
	return cl_call(c, &a);
}

int emdb_client_table_create(emdb_client *c, const emdb_table_config *cfg, uint32_t *out_id)
{
	CL_ARGS(CL_TABLE_CREATE, "emdb_client_table_create");
	a.cfg = cfg;
	a.id_out = out_id;
	return cl_call(c, &a);
}

int emdb_client_table_drop(emdb_client *c, uint32_t table)
{
	CL_ARGS(CL_TABLE_DROP, "emdb_client_table_drop");
	a.table = table;
	return cl_call(c, &a);
}

int emdb_client_table_reserve(emdb_client *c, uint32_t table, uint64_t rows)
{
	CL_ARGS(CL_TABLE_RESERVE, "emdb_client_table_reserve");
	a.table = table;
	a.arg = rows;
	return cl_call(c, &a);
}

int emdb_client_linktest(emdb_client *c, const emdb_linktest_msg *msgs, size_t n, uint32_t depth,
			 uint32_t duration_ms, emdb_linktest_result *out)
{
	CL_ARGS(CL_LINKTEST, "emdb_client_linktest");
	a.lt_msgs = msgs;
	a.n = n;
	a.workers = depth;
	a.arg = duration_ms;
	a.lt_out = out;
	return cl_call(c, &a);
}

int emdb_client_table_find(emdb_client *c, const char *name, uint32_t *out_id)
{
	CL_ARGS(CL_TABLE_FIND, "emdb_client_table_find");
	a.s1 = name;
	a.id_out = out_id;
	return cl_call(c, &a);
}

int emdb_client_table_describe(emdb_client *c, uint32_t table, emdb_table_info *out)
{
	CL_ARGS(CL_TABLE_DESCRIBE, "emdb_client_table_describe");
	a.table = table;
	a.info = out;
	return cl_call(c, &a);
}

int emdb_client_table_alter(emdb_client *c, uint32_t table, const emdb_optimizer *opt)
{
	CL_ARGS(CL_TABLE_ALTER, "emdb_client_table_alter");
	a.table = table;
	a.opt = opt;
	return cl_call(c, &a);
}

int emdb_client_table_scan(emdb_client *c, uint32_t table, uint64_t cursor, size_t max_rows, uint32_t dim,
			   uint32_t per_row, uint64_t *ids, float *vecs, float *state, size_t *n_out,
			   uint64_t *next_cursor, uint64_t *step_out)
{
	CL_ARGS(CL_TABLE_SCAN, "emdb_client_table_scan");
	a.table = table;
	a.arg = cursor;
	a.n = max_rows;
	a.dim = dim;
	a.per_row = per_row;
	a.ids_out = ids;
	a.out = vecs;
	a.state_out = state;
	a.n_out = n_out;
	a.next_out = next_cursor;
	a.step_out = step_out;
	return cl_call(c, &a);
}

int emdb_client_table_load(emdb_client *c, uint32_t table, const uint64_t *ids, size_t n, uint32_t dim,
			   const float *vecs, uint32_t per_row, const float *state)
{
	CL_ARGS(CL_TABLE_LOAD, "emdb_client_table_load");
	a.table = table;
	a.ids = ids;
	a.n = n;
	a.dim = dim;
	a.vecs_in = vecs;
	a.per_row = per_row;
	a.state_in = state;
	return cl_call(c, &a);
}

int emdb_client_table_list(emdb_client *c, uint32_t *ids, size_t cap, size_t *n_out)
{
	CL_ARGS(CL_TABLE_LIST, "emdb_client_table_list");
	a.list_ids = ids;
	a.list_cap = cap;
	a.n_out = n_out;
	return cl_call(c, &a);
}

int emdb_client_stats(emdb_client *c, emdb_db_stats *out)
{
	CL_ARGS(CL_STATS, "emdb_client_stats");
	a.stats = out;
	return cl_call(c, &a);
}

/* ---- data plane ---------------------------------------------------- */

/* Each data-plane operation builds its cl_args in one function shared by
 * the synchronous and asynchronous forms. */

static cl_args prefetch_args(uint32_t table, const uint64_t *ids, size_t n, emdb_client_ticket **out,
			     const char *what)
{
	CL_ARGS(CL_PREFETCH, what);
	a.table = table;
	a.ids = ids;
	a.n = n;
	a.ticket_out = out;
	return a;
}

static cl_args pull_args(uint32_t table, const uint64_t *ids, size_t n, const emdb_client_ticket *t,
			 bool bags, const uint64_t *offsets, size_t n_bags, emdb_pool pool, uint32_t dim,
			 float *out, const char *what)
{
	CL_ARGS(CL_PULL, what);
	a.table = table;
	a.ids = t ? NULL : ids;
	a.n = t ? t->count : n;
	a.ticket = t;
	a.bags = bags;
	a.offsets = offsets;
	a.n_bags = n_bags;
	a.pool = pool;
	a.n_rows = bags ? n_bags : a.n;
	a.dim = dim;
	a.out = out;
	return a;
}

static cl_args push_args(uint32_t table, const uint64_t *ids, size_t n, const emdb_client_ticket *t,
			 bool bags, const uint64_t *offsets, size_t n_bags, emdb_pool pool, uint32_t dim,
			 const float *grads, const char *what)
{
	cl_args a = pull_args(table, ids, n, t, bags, offsets, n_bags, pool, dim, NULL, what);
	a.op = CL_PUSH;
	a.grads = grads;
	return a;
}

/* The weighted forms: the pooled call's arguments, weights and opcode. */
static cl_args weighted_args(cl_args a, cl_op op, const float *weights)
{
	a.op = op;
	a.weights = weights;
	return a;
}

/* A Push and an Update in one request: Push's arguments without bags. */
static cl_args push_update_args(uint32_t table, const uint64_t *ids, size_t n,
				const emdb_client_ticket *t, uint32_t dim, const float *grads,
				uint64_t *rows, const char *what)
{
	cl_args a = push_args(table, ids, n, t, false, NULL, 0, 0, dim, grads, what);
	a.op = CL_PUSH_UPDATE;
	a.rows = rows;
	return a;
}

static cl_args update_args(uint32_t table, bool all, uint64_t *rows, const char *what)
{
	CL_ARGS(CL_UPDATE, what);
	a.table = all ? 0 : table;
	a.all = all;
	a.rows = rows;
	return a;
}

/* A synchronous step: the update of table (0: all) over `workers`. */
static cl_args step_args(uint32_t table, uint32_t workers, uint64_t *rows, const char *what)
{
	cl_args a = update_args(table, table == 0, rows, what);
	a.workers = workers;
	return a;
}

static int check_workers(uint32_t workers, const char *what)
{
	if (workers == 0 || workers > EMDB_CLIENT_UPDATE_WORKERS_MAX)
		return cl_seterr(EMDB_ERR_INVALID, "%s: workers must be 1..%u, not %u", what,
				 EMDB_CLIENT_UPDATE_WORKERS_MAX, workers);
	return EMDB_OK;
}

static cl_args lookup_args(uint32_t table, const uint64_t *ids, size_t n, uint32_t dim, float *out,
			   uint8_t *found, const char *what)
{
	CL_ARGS(CL_LOOKUP, what);
	a.table = table;
	a.ids = ids;
	a.n = n;
	a.n_rows = n;
	a.dim = dim;
	a.out = out;
	a.found = found;
	return a;
}

int emdb_client_prefetch(emdb_client *c, uint32_t table, const uint64_t *ids, size_t n,
			 emdb_client_ticket **out)
{
	cl_args a = prefetch_args(table, ids, n, out, "emdb_client_prefetch");
	return cl_call(c, &a);
}

int emdb_client_pull(emdb_client *c, uint32_t table, const uint64_t *ids, size_t n, uint32_t dim,
		     float *out)
{
	cl_args a = pull_args(table, ids, n, NULL, false, NULL, 0, 0, dim, out, "emdb_client_pull");
	return cl_call(c, &a);
}

int emdb_client_pull_ticket(emdb_client *c, uint32_t table, const emdb_client_ticket *t, uint32_t dim,
			    float *out)
{
	cl_args a = pull_args(table, NULL, 0, t, false, NULL, 0, 0, dim, out, "emdb_client_pull_ticket");
	return cl_call(c, &a);
}

int emdb_client_pull_bags(emdb_client *c, uint32_t table, const uint64_t *ids, size_t n,
			  const uint64_t *offsets, size_t n_bags, emdb_pool pool, uint32_t dim, float *out)
{
	cl_args a = pull_args(table, ids, n, NULL, true, offsets, n_bags, pool, dim, out,
			      "emdb_client_pull_bags");
	return cl_call(c, &a);
}

int emdb_client_pull_bags_ticket(emdb_client *c, uint32_t table, const emdb_client_ticket *t,
				 const uint64_t *offsets, size_t n_bags, emdb_pool pool, uint32_t dim,
				 float *out)
{
	cl_args a = pull_args(table, NULL, 0, t, true, offsets, n_bags, pool, dim, out,
			      "emdb_client_pull_bags_ticket");
	return cl_call(c, &a);
}

int emdb_client_push(emdb_client *c, uint32_t table, const uint64_t *ids, size_t n, uint32_t dim,
		     const float *grads)
{
	cl_args a = push_args(table, ids, n, NULL, false, NULL, 0, 0, dim, grads, "emdb_client_push");
	return cl_call(c, &a);
}

int emdb_client_push_ticket(emdb_client *c, uint32_t table, const emdb_client_ticket *t, uint32_t dim,
			    const float *grads)
{
	cl_args a = push_args(table, NULL, 0, t, false, NULL, 0, 0, dim, grads, "emdb_client_push_ticket");
	return cl_call(c, &a);
}

int emdb_client_push_bags(emdb_client *c, uint32_t table, const uint64_t *ids, size_t n,
			  const uint64_t *offsets, size_t n_bags, emdb_pool pool, uint32_t dim,
			  const float *grads)
{
	cl_args a = push_args(table, ids, n, NULL, true, offsets, n_bags, pool, dim, grads,
			      "emdb_client_push_bags");
	return cl_call(c, &a);
}

int emdb_client_push_bags_ticket(emdb_client *c, uint32_t table, const emdb_client_ticket *t,
				 const uint64_t *offsets, size_t n_bags, emdb_pool pool, uint32_t dim,
				 const float *grads)
{
	cl_args a = push_args(table, NULL, 0, t, true, offsets, n_bags, pool, dim, grads,
			      "emdb_client_push_bags_ticket");
	return cl_call(c, &a);
}

int emdb_client_pull_bags_weighted(emdb_client *c, uint32_t table, const uint64_t *ids, size_t n,
				   const uint64_t *offsets, size_t n_bags, emdb_pool pool, const float *weights,
				   uint32_t dim, float *out)
{
	cl_args a = weighted_args(pull_args(table, ids, n, NULL, true, offsets, n_bags, pool, dim, out,
					    "emdb_client_pull_bags_weighted"),
				  CL_PULL_WEIGHTED, weights);
	return cl_call(c, &a);
}

int emdb_client_pull_bags_weighted_ticket(emdb_client *c, uint32_t table, const emdb_client_ticket *t,
					  const uint64_t *offsets, size_t n_bags, emdb_pool pool,
					  const float *weights, uint32_t dim, float *out)
{
	cl_args a = weighted_args(pull_args(table, NULL, 0, t, true, offsets, n_bags, pool, dim, out,
					    "emdb_client_pull_bags_weighted_ticket"),
				  CL_PULL_WEIGHTED, weights);
	return cl_call(c, &a);
}

int emdb_client_push_bags_weighted(emdb_client *c, uint32_t table, const uint64_t *ids, size_t n,
				   const uint64_t *offsets, size_t n_bags, emdb_pool pool, const float *weights,
				   uint32_t dim, const float *grads)
{
	cl_args a = weighted_args(push_args(table, ids, n, NULL, true, offsets, n_bags, pool, dim, grads,
					    "emdb_client_push_bags_weighted"),
				  CL_PUSH_WEIGHTED, weights);
	return cl_call(c, &a);
}

int emdb_client_push_bags_weighted_ticket(emdb_client *c, uint32_t table, const emdb_client_ticket *t,
					  const uint64_t *offsets, size_t n_bags, emdb_pool pool,
					  const float *weights, uint32_t dim, const float *grads)
{
	cl_args a = weighted_args(push_args(table, NULL, 0, t, true, offsets, n_bags, pool, dim, grads,
					    "emdb_client_push_bags_weighted_ticket"),
				  CL_PUSH_WEIGHTED, weights);
	return cl_call(c, &a);
}

int emdb_client_push_update(emdb_client *c, uint32_t table, const uint64_t *ids, size_t n,
			    uint32_t dim, const float *grads, uint64_t *rows_out)
{
	cl_args a = push_update_args(table, ids, n, NULL, dim, grads, rows_out,
				     "emdb_client_push_update");
	return cl_call(c, &a);
}

int emdb_client_push_update_ticket(emdb_client *c, uint32_t table, const emdb_client_ticket *t,
				   uint32_t dim, const float *grads, uint64_t *rows_out)
{
	cl_args a = push_update_args(table, NULL, 0, t, dim, grads, rows_out,
				     "emdb_client_push_update_ticket");
	return cl_call(c, &a);
}

int emdb_client_update(emdb_client *c, uint32_t table, uint64_t *rows_out)
{
	cl_args a = update_args(table, false, rows_out, "emdb_client_update");
	return cl_call(c, &a);
}

int emdb_client_update_all(emdb_client *c, uint64_t *rows_out)
{
	cl_args a = update_args(0, true, rows_out, "emdb_client_update_all");
	return cl_call(c, &a);
}

int emdb_client_update_sync(emdb_client *c, uint32_t table, uint32_t workers, uint64_t *rows_out)
{
	int rc = check_workers(workers, "emdb_client_update_sync");
	if (rc != EMDB_OK)
		return rc;
	cl_args a = step_args(table, workers, rows_out, "emdb_client_update_sync");
	if ((rc = step_seq_take(c, &a)) != EMDB_OK)
		return rc;
	return cl_call(c, &a);
}

int emdb_client_lookup(emdb_client *c, uint32_t table, const uint64_t *ids, size_t n, uint32_t dim,
		       float *out, uint8_t *found)
{
	cl_args a = lookup_args(table, ids, n, dim, out, found, "emdb_client_lookup");
	return cl_call(c, &a);
}

int emdb_client_read_state(emdb_client *c, uint32_t table, const uint64_t *ids, size_t n,
			   uint32_t per_row, float *state, uint8_t *found)
{
	CL_ARGS(CL_READ_STATE, "emdb_client_read_state");
	a.table = table;
	a.ids = ids;
	a.n = n;
	a.n_rows = n;
	a.per_row = per_row;
	a.out = state;
	a.found = found;
	return cl_call(c, &a);
}

/* ---- data plane, asynchronous -------------------------------------- */

emdb_future *emdb_client_prefetch_async(emdb_client *c, uint32_t table, const uint64_t *ids, size_t n,
					emdb_client_ticket **out)
{
	cl_args a = prefetch_args(table, ids, n, out, "emdb_client_prefetch_async");
	return cl_call_async(c, &a);
}

emdb_future *emdb_client_pull_async(emdb_client *c, uint32_t table, const uint64_t *ids, size_t n,
				    uint32_t dim, float *out)
{
	cl_args a = pull_args(table, ids, n, NULL, false, NULL, 0, 0, dim, out, "emdb_client_pull_async");
	return cl_call_async(c, &a);
}

emdb_future *emdb_client_pull_ticket_async(emdb_client *c, uint32_t table, const emdb_client_ticket *t,
					   uint32_t dim, float *out)
{
	cl_args a = pull_args(table, NULL, 0, t, false, NULL, 0, 0, dim, out,
			      "emdb_client_pull_ticket_async");
	return cl_call_async(c, &a);
}

emdb_future *emdb_client_pull_bags_async(emdb_client *c, uint32_t table, const uint64_t *ids, size_t n,
					 const uint64_t *offsets, size_t n_bags, emdb_pool pool,
					 uint32_t dim, float *out)
{
	cl_args a = pull_args(table, ids, n, NULL, true, offsets, n_bags, pool, dim, out,
			      "emdb_client_pull_bags_async");
	return cl_call_async(c, &a);
}

emdb_future *emdb_client_pull_bags_ticket_async(emdb_client *c, uint32_t table,
						const emdb_client_ticket *t, const uint64_t *offsets,
						size_t n_bags, emdb_pool pool, uint32_t dim, float *out)
{
	cl_args a = pull_args(table, NULL, 0, t, true, offsets, n_bags, pool, dim, out,
			      "emdb_client_pull_bags_ticket_async");
	return cl_call_async(c, &a);
}

emdb_future *emdb_client_push_async(emdb_client *c, uint32_t table, const uint64_t *ids, size_t n,
				    uint32_t dim, const float *grads)
{
	cl_args a = push_args(table, ids, n, NULL, false, NULL, 0, 0, dim, grads, "emdb_client_push_async");
	return cl_call_async(c, &a);
}

emdb_future *emdb_client_push_ticket_async(emdb_client *c, uint32_t table, const emdb_client_ticket *t,
					   uint32_t dim, const float *grads)
{
	cl_args a = push_args(table, NULL, 0, t, false, NULL, 0, 0, dim, grads,
			      "emdb_client_push_ticket_async");
	return cl_call_async(c, &a);
}

emdb_future *emdb_client_push_bags_async(emdb_client *c, uint32_t table, const uint64_t *ids, size_t n,
					 const uint64_t *offsets, size_t n_bags, emdb_pool pool,
					 uint32_t dim, const float *grads)
{
	cl_args a = push_args(table, ids, n, NULL, true, offsets, n_bags, pool, dim, grads,
			      "emdb_client_push_bags_async");
	return cl_call_async(c, &a);
}

emdb_future *emdb_client_push_bags_ticket_async(emdb_client *c, uint32_t table,
						const emdb_client_ticket *t, const uint64_t *offsets,
						size_t n_bags, emdb_pool pool, uint32_t dim,
						const float *grads)
{
	cl_args a = push_args(table, NULL, 0, t, true, offsets, n_bags, pool, dim, grads,
			      "emdb_client_push_bags_ticket_async");
	return cl_call_async(c, &a);
}

emdb_future *emdb_client_pull_bags_weighted_async(emdb_client *c, uint32_t table, const uint64_t *ids,
						  size_t n, const uint64_t *offsets, size_t n_bags,
						  emdb_pool pool, const float *weights, uint32_t dim,
						  float *out)
{
	cl_args a = weighted_args(pull_args(table, ids, n, NULL, true, offsets, n_bags, pool, dim, out,
					    "emdb_client_pull_bags_weighted_async"),
				  CL_PULL_WEIGHTED, weights);
	return cl_call_async(c, &a);
}

emdb_future *emdb_client_pull_bags_weighted_ticket_async(emdb_client *c, uint32_t table,
							 const emdb_client_ticket *t, const uint64_t *offsets,
							 size_t n_bags, emdb_pool pool, const float *weights,
							 uint32_t dim, float *out)
{
	cl_args a = weighted_args(pull_args(table, NULL, 0, t, true, offsets, n_bags, pool, dim, out,
					    "emdb_client_pull_bags_weighted_ticket_async"),
				  CL_PULL_WEIGHTED, weights);
	return cl_call_async(c, &a);
}

emdb_future *emdb_client_push_bags_weighted_async(emdb_client *c, uint32_t table, const uint64_t *ids,
						  size_t n, const uint64_t *offsets, size_t n_bags,
						  emdb_pool pool, const float *weights, uint32_t dim,
						  const float *grads)
{
	cl_args a = weighted_args(push_args(table, ids, n, NULL, true, offsets, n_bags, pool, dim, grads,
					    "emdb_client_push_bags_weighted_async"),
				  CL_PUSH_WEIGHTED, weights);
	return cl_call_async(c, &a);
}

emdb_future *emdb_client_push_bags_weighted_ticket_async(emdb_client *c, uint32_t table,
							 const emdb_client_ticket *t, const uint64_t *offsets,
							 size_t n_bags, emdb_pool pool, const float *weights,
							 uint32_t dim, const float *grads)
{
	cl_args a = weighted_args(push_args(table, NULL, 0, t, true, offsets, n_bags, pool, dim, grads,
					    "emdb_client_push_bags_weighted_ticket_async"),
				  CL_PUSH_WEIGHTED, weights);
	return cl_call_async(c, &a);
}

emdb_future *emdb_client_push_update_async(emdb_client *c, uint32_t table, const uint64_t *ids,
					   size_t n, uint32_t dim, const float *grads,
					   uint64_t *rows_out)
{
	cl_args a = push_update_args(table, ids, n, NULL, dim, grads, rows_out,
				     "emdb_client_push_update_async");
	return cl_call_async(c, &a);
}

emdb_future *emdb_client_push_update_ticket_async(emdb_client *c, uint32_t table,
						  const emdb_client_ticket *t, uint32_t dim,
						  const float *grads, uint64_t *rows_out)
{
	cl_args a = push_update_args(table, NULL, 0, t, dim, grads, rows_out,
				     "emdb_client_push_update_ticket_async");
	return cl_call_async(c, &a);
}

emdb_future *emdb_client_update_async(emdb_client *c, uint32_t table, uint64_t *rows_out)
{
	cl_args a = update_args(table, false, rows_out, "emdb_client_update_async");
	return cl_call_async(c, &a);
}

emdb_future *emdb_client_update_all_async(emdb_client *c, uint64_t *rows_out)
{
	cl_args a = update_args(0, true, rows_out, "emdb_client_update_all_async");
	return cl_call_async(c, &a);
}

emdb_future *emdb_client_update_sync_async(emdb_client *c, uint32_t table, uint32_t workers,
					  uint64_t *rows_out)
{
	if (check_workers(workers, "emdb_client_update_sync_async") != EMDB_OK)
		return NULL;
	cl_args a = step_args(table, workers, rows_out, "emdb_client_update_sync_async");
	if (step_seq_take(c, &a) != EMDB_OK)
		return NULL;
	return cl_call_async(c, &a);
}

emdb_future *emdb_client_lookup_async(emdb_client *c, uint32_t table, const uint64_t *ids, size_t n,
				      uint32_t dim, float *out, uint8_t *found)
{
	cl_args a = lookup_args(table, ids, n, dim, out, found, "emdb_client_lookup_async");
	return cl_call_async(c, &a);
}
