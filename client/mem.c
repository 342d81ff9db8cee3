/*
 * mem.c - the mem:// transport: the engine in this process, called
 * directly, with no socket, no frame and no copy.
 *
 * Synchronous calls run the engine on the caller's thread.  Asynchronous
 * ones go into a FIFO served by mem_threads worker threads, so that a
 * Prefetch submitted now runs while the caller computes; with
 * mem_threads 0 they run at submission.  "mem://NAME" databases live in a
 * process-wide registry, reference-counted by the handles that opened them.
 * Synchronous steps (emdb_client_update_sync) meet in the engine's step
 * barrier (db/step.h), the caller's thread blocked in step_wait: one
 * barrier per database, shared by every handle on it.
 *
 * Invariants:
 *   1. The queue holds exactly the QUEUED futures of the handle, in
 *      submission order; a worker takes the head and makes it RUNNING
 *      under c->lock before calling the engine (future.c invariant 2).
 *   2. Workers exit only when `stopping` is set and the queue is empty;
 *      close sets it and joins them all before the database goes.
 *   3. A registry entry exists while refs > 0; the last handle to close
 *      removes it and closes its database, both under reg_lock, so a
 *      concurrent connect to the same name either shares the old database
 *      or opens a fresh one, never a closing one.
 *   4. The engine's message (emdb_last_error) is copied into the future
 *      on the thread that called the engine, before anything else can
 *      overwrite it.
 *   5. An operation runs by its row of CL_OP_MAP (mem_ops): exec knows
 *      no operation.
 */
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/client.h>
#include <emdb/db.h>

#include "client/client_int.h"
#include "client/uri.h"
#include "db/step.h"

typedef struct mem_shared {
	char name[64];
	emdb_db *db;
	step_barrier *steps;  /* synchronous steps, shared by its handles */
	unsigned refs;
	struct mem_shared *next;
} mem_shared;

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static mem_shared *registry;

typedef struct mem_state {
	emdb_db *db;
	bool own;             /* a private database: close it with the handle */
	mem_shared *shared;   /* or a registry entry to release              */
	step_barrier *own_steps; /* synchronous steps of a private or wrapped db */
	step_barrier *steps;     /* own_steps or shared->steps                   */
	pthread_t *workers;
	uint32_t n_workers;
	pthread_cond_t work;  /* queue non-empty or stopping, with c->lock    */
	emdb_future *head, *tail;
	bool stopping;
} mem_state;

/* ---- executing one request ----------------------------------------- */

static int info_text(emdb_client *c, const char *section, char **out, char *msg, size_t msglen)
{
	mem_state *m = c->priv;
	emdb_db_stats st;
	emdb_db_config cfg;
	bool all = !section[0] || !strcmp(section, "all");
	bool server = all || !strcmp(section, "server");
	bool memory = all || !strcmp(section, "memory");
	bool tables = all || !strcmp(section, "tables");
	if (!server && !memory && !tables) {
		snprintf(msg, msglen, "emdb_client_info: unknown section '%s' (mem://: server, memory, tables, all)",
			 section);
		return EMDB_ERR_INVALID;
	}
	int rc = emdb_db_get_stats(m->db, &st);
	if (rc != EMDB_OK)
		return rc;
	emdb_db_get_config(m->db, &cfg);

	char *s = emdb_malloc(2048);
	if (!s)
		return EMDB_ERR_NOMEM;
	size_t len = 0, cap = 2048;
#define ADD(...) len += (size_t)snprintf(s + len, len < cap ? cap - len : 0, __VA_ARGS__)
	if (server) {
		ADD("# Server\n");
		ADD("server: %s\n", c->server);
		ADD("transport: mem\n");
		ADD("shards: %u\n", cfg.shards);
		ADD("chunk_bytes: %llu\n", (unsigned long long)cfg.chunk_bytes);
		ADD("max_batch: %u\n", cfg.max_batch);
		ADD("max_tables: %u\n", cfg.max_tables);
	}
	if (memory) {
		ADD("# Memory\n");
		ADD("alloc_bytes: %llu\n", (unsigned long long)st.alloc_bytes);
		ADD("alloc_peak: %llu\n", (unsigned long long)st.alloc_peak);
	}
	if (tables) {
		ADD("# Tables\n");
		ADD("tables: %llu\n", (unsigned long long)st.tables);
		ADD("rows: %llu\n", (unsigned long long)st.total.rows);
		ADD("step: %llu\n", (unsigned long long)st.total.step);
	}
#undef ADD
	if (len >= cap) {
		emdb_free(s);
		return EMDB_ERR_INTERNAL;
	}
	*out = s;
	return EMDB_OK;
}

static int config_get(emdb_client *c, const char *pattern, emdb_client_kv **kv, size_t *n)
{
	mem_state *m = c->priv;
	emdb_db_config cfg;
	emdb_db_get_config(m->db, &cfg);
	char vals[4][24];
	const char *keys[4] = { "shards", "chunk_bytes", "max_batch", "max_tables" };
	snprintf(vals[0], sizeof(vals[0]), "%u", cfg.shards);
	snprintf(vals[1], sizeof(vals[1]), "%llu", (unsigned long long)cfg.chunk_bytes);
	snprintf(vals[2], sizeof(vals[2]), "%u", cfg.max_batch);
	snprintf(vals[3], sizeof(vals[3]), "%u", cfg.max_tables);

	size_t k = 0, bytes = 0;
	bool match[4];
	for (int i = 0; i < 4; i++) {
		match[i] = fnmatch(pattern, keys[i], 0) == 0;
		if (match[i]) {
			k++;
			bytes += strlen(keys[i]) + strlen(vals[i]) + 2;
		}
	}
	emdb_client_kv *out = emdb_malloc(k * sizeof(*out) + bytes);
	if (!out)
		return EMDB_ERR_NOMEM;
	char *p = (char *)(out + k);
	k = 0;
	for (int i = 0; i < 4; i++) {
		if (!match[i])
			continue;
		out[k].key = p;
		p = stpcpy(p, keys[i]) + 1;
		out[k].value = p;
		p = stpcpy(p, vals[i]) + 1;
		k++;
	}
	*kv = out;
	*n = k;
	return EMDB_OK;
}

/* ---- one function per operation: CL_OP_MAP's mem column ------------
 *
 * Each returns the engine's result; one that fills msg itself has said
 * all there is to say, otherwise exec copies the engine's message. */

typedef int (*mem_fn)(emdb_client *c, emdb_future *f, char *msg, size_t msglen);

#define MEM_OP(name) static int mem_##name(emdb_client *c, emdb_future *f, char *msg, size_t msglen)
/* The request's arguments and its database. */
#define MEM_ARGS              \
	const cl_args *a = &f->a; \
	emdb_db *db = ((mem_state *)c->priv)->db
/* The engine's ticket of a request by ticket, NULL for one by IDs. */
#define MEM_TICKET(a) ((a)->ticket ? (a)->ticket->local : NULL)

MEM_OP(ping)
{
	return EMDB_OK;
}

MEM_OP(info)
{
	return info_text(c, f->a.s1, f->a.text, msg, msglen);
}

MEM_OP(config_get)
{
	return config_get(c, f->a.s1, f->a.kv, f->a.n_out);
}

MEM_OP(config_set)
{
	snprintf(msg, msglen, "%s: a mem:// database has no settable configuration", f->a.what);
	return EMDB_ERR_UNSUPPORTED;
}

MEM_OP(shutdown)
{
	snprintf(msg, msglen, "%s: there is no server to shut down in mem://", f->a.what);
	return EMDB_ERR_UNSUPPORTED;
}

MEM_OP(table_create)
{
	MEM_ARGS;
	return emdb_table_create(db, a->cfg, a->id_out);
}

MEM_OP(table_drop)
{
	MEM_ARGS;
	return emdb_table_drop(db, a->table);
}

MEM_OP(table_reserve)
{
	MEM_ARGS;
	return emdb_table_reserve(db, a->table, a->arg);
}

MEM_OP(table_alter)
{
	MEM_ARGS;
	return emdb_table_alter(db, a->table, a->opt);
}

/* per_row, given, must be the table's state width (as over a socket). */
static int mem_per_row(emdb_client *c, const cl_args *a, char *msg, size_t msglen)
{
	emdb_table_config cfg;
	int rc = emdb_table_get_config(((mem_state *)c->priv)->db, a->table, &cfg);
	if (rc != EMDB_OK || !a->per_row)
		return rc;
	uint32_t per = emdb_optimizer_state_floats(cfg.optimizer.kind, cfg.dim);
	if (per != a->per_row) {
		snprintf(msg, msglen, "%s: table %u keeps %u state floats per row, not %u", a->what, a->table,
			 per, a->per_row);
		return EMDB_ERR_DIM;
	}
	return EMDB_OK;
}

MEM_OP(table_scan)
{
	MEM_ARGS;
	int rc = mem_per_row(c, a, msg, msglen);
	if (rc != EMDB_OK)
		return rc;
	return emdb_table_scan(db, a->table, a->arg, a->n, a->dim, a->ids_out, a->out,
			       a->per_row ? a->state_out : NULL, a->n_out, a->next_out, a->step_out);
}

MEM_OP(table_load)
{
	MEM_ARGS;
	int rc = mem_per_row(c, a, msg, msglen);
	if (rc != EMDB_OK)
		return rc;
	return emdb_table_load(db, a->table, a->ids, a->n, a->dim, a->vecs_in,
			       a->per_row ? a->state_in : NULL);
}

MEM_OP(table_find)
{
	MEM_ARGS;
	uint32_t id;
	int rc = emdb_table_find(db, a->s1, &id);
	if (rc == EMDB_OK && a->id_out)
		*a->id_out = id;
	return rc;
}

MEM_OP(table_describe)
{
	MEM_ARGS;
	return emdb_table_describe(db, a->table, a->info);
}

MEM_OP(table_list)
{
	MEM_ARGS;
	return emdb_table_list(db, a->list_ids, a->list_cap, a->n_out);
}

MEM_OP(stats)
{
	MEM_ARGS;
	return emdb_db_get_stats(db, a->stats);
}

MEM_OP(prefetch)
{
	MEM_ARGS;
	emdb_ticket *et;
	int rc = emdb_prefetch(db, a->table, a->ids, a->n, &et);
	if (rc != EMDB_OK)
		return rc;
	emdb_client_ticket *t = cl_ticket_new(c, emdb_ticket_table(et), emdb_ticket_count(et));
	if (!t) {
		emdb_ticket_free(et);
		return EMDB_ERR_NOMEM;
	}
	t->local = et;
	f->tk = t;
	return EMDB_OK;
}

/* PULL and PULL_WEIGHTED. */
MEM_OP(pull)
{
	MEM_ARGS;
	const emdb_ticket *et = MEM_TICKET(a);
	if (a->weights)
		return et ? emdb_pull_bags_weighted_ticket(db, a->table, et, a->offsets, a->n_bags, a->pool,
							   a->weights, a->dim, a->out)
			  : emdb_pull_bags_weighted(db, a->table, a->ids, a->n, a->offsets, a->n_bags,
						    a->pool, a->weights, a->dim, a->out);
	if (a->bags)
		return et ? emdb_pull_bags_ticket(db, a->table, et, a->offsets, a->n_bags, a->pool, a->dim,
						  a->out)
			  : emdb_pull_bags(db, a->table, a->ids, a->n, a->offsets, a->n_bags, a->pool,
					   a->dim, a->out);
	return et ? emdb_pull_ticket(db, a->table, et, a->dim, a->out)
		  : emdb_pull(db, a->table, a->ids, a->n, a->dim, a->out);
}

/* PUSH and PUSH_WEIGHTED; as the handle's worker, if it has a rank. */
MEM_OP(push)
{
	MEM_ARGS;
	const emdb_ticket *et = MEM_TICKET(a);
	if (c->worker_rank != EMDB_WORKER_NONE) {
		emdb_push_batch b = { .ids = a->ids, .n = a->n, .ticket = et, .offsets = a->bags ? a->offsets : NULL,
				      .n_bags = a->bags ? a->n_bags : 0, .pool = a->pool, .weights = a->weights,
				      .dim = a->dim, .grads = a->grads };
		return emdb_push_as(db, a->table, c->worker_rank, &b);
	}
	if (a->weights)
		return et ? emdb_push_bags_weighted_ticket(db, a->table, et, a->offsets, a->n_bags, a->pool,
							   a->weights, a->dim, a->grads)
			  : emdb_push_bags_weighted(db, a->table, a->ids, a->n, a->offsets, a->n_bags,
						    a->pool, a->weights, a->dim, a->grads);
	if (a->bags)
		return et ? emdb_push_bags_ticket(db, a->table, et, a->offsets, a->n_bags, a->pool, a->dim,
						  a->grads)
			  : emdb_push_bags(db, a->table, a->ids, a->n, a->offsets, a->n_bags, a->pool,
					   a->dim, a->grads);
	return et ? emdb_push_ticket(db, a->table, et, a->dim, a->grads)
		  : emdb_push(db, a->table, a->ids, a->n, a->dim, a->grads);
}

MEM_OP(update)
{
	MEM_ARGS;
	if (a->workers >= 2) {
		step_seq id = { a->seq, a->session, c->worker_rank }; /* a->seq 0: unsequenced */
		return step_wait(((mem_state *)c->priv)->steps, a->all ? 0 : a->table, a->workers, &id,
				 __atomic_load_n(&c->timeout_ms, __ATOMIC_RELAXED), a->rows);
	}
	return a->all ? emdb_update_all(db, a->rows) : emdb_update(db, a->table, a->rows);
}

MEM_OP(push_update)
{
	MEM_ARGS;
	const emdb_ticket *et = MEM_TICKET(a);
	return et ? emdb_push_update_ticket(db, a->table, et, a->dim, a->grads, a->rows)
		  : emdb_push_update(db, a->table, a->ids, a->n, a->dim, a->grads, a->rows);
}

MEM_OP(lookup)
{
	MEM_ARGS;
	return emdb_lookup(db, a->table, a->ids, a->n, a->dim, a->out, a->found);
}

MEM_OP(read_state)
{
	MEM_ARGS;
	emdb_table_config cfg;
	int rc = emdb_table_get_config(db, a->table, &cfg);
	if (rc != EMDB_OK)
		return rc;
	uint32_t per = emdb_optimizer_state_floats(cfg.optimizer.kind, cfg.dim);
	if (per != a->per_row) {
		snprintf(msg, msglen, "%s: table %u keeps %u state floats per row, not %u", a->what, a->table,
			 per, a->per_row);
		return EMDB_ERR_DIM;
	}
	return emdb_read_state(db, a->table, a->ids, a->n, a->out, a->found);
}

/* CHECKPOINT, RESTORE, JOB_STATUS, CKPT_LIST, CKPT_DELETE. */
MEM_OP(no_store)
{
	snprintf(msg, msglen,
		 "%s: a mem:// database has no checkpoint store: call emdb/checkpoint.h (emdb_store_open, emdb_checkpoint, emdb_restore) on the database directly",
		 f->a.what);
	return EMDB_ERR_UNSUPPORTED;
}

/* LINKTEST: an in-process database has no link between nodes. */
MEM_OP(no_cluster)
{
	snprintf(msg, msglen, "%s: a mem:// database is not a cluster node: ask an emdb-server of a cluster",
		 f->a.what);
	return EMDB_ERR_UNSUPPORTED;
}

static const mem_fn mem_ops[CL_OP_COUNT] = {
#define MEM_ROW_(NAME, wire, check, encode, receive, mem) [CL_##NAME] = mem,
	CL_OP_MAP(MEM_ROW_)
#undef MEM_ROW_
};

/* Run f's operation; returns the result and fills msg on failure. */
static int exec(emdb_client *c, emdb_future *f, char *msg, size_t msglen)
{
	msg[0] = 0;
	int rc = mem_ops[f->a.op](c, f, msg, msglen);
	if (rc == EMDB_OK || msg[0])
		return rc;
	if (rc == EMDB_ERR_NOMEM && !emdb_last_error()[0])
		snprintf(msg, msglen, "%s: out of memory", f->a.what);
	else
		snprintf(msg, msglen, "%s", emdb_last_error()); /* invariant 4 */
	return rc;
}

/* ---- the worker pool ----------------------------------------------- */

static void *worker(void *arg)
{
	emdb_client *c = arg;
	mem_state *m = c->priv;
	char msg[CL_MSG_MAX];

	pthread_mutex_lock(&c->lock);
	for (;;) {
		while (!m->head && !m->stopping)
			pthread_cond_wait(&m->work, &c->lock);
		emdb_future *f = m->head;
		if (!f)
			break; /* invariant 2 */
		m->head = f->next;
		if (m->head)
			m->head->prev = NULL;
		else
			m->tail = NULL;
		f->next = NULL;
		f->state = FUT_RUNNING;
		pthread_mutex_unlock(&c->lock);
		int rc = exec(c, f, msg, sizeof(msg));
		pthread_mutex_lock(&c->lock);
		cl_complete_locked(f, rc, msg);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

static void mem_run(emdb_client *c, emdb_future *f)
{
	char msg[CL_MSG_MAX];
	int rc = exec(c, f, msg, sizeof(msg));
	cl_complete(f, rc, msg);
}

static void mem_submit(emdb_client *c, emdb_future *f)
{
	mem_state *m = c->priv;
	if (m->n_workers == 0) {
		mem_run(c, f);
		return;
	}
	pthread_mutex_lock(&c->lock);
	f->state = FUT_QUEUED;
	f->next = NULL;
	f->prev = m->tail;
	if (m->tail)
		m->tail->next = f;
	else
		m->head = f;
	m->tail = f;
	pthread_cond_signal(&m->work);
	pthread_mutex_unlock(&c->lock);
}

static void mem_unlink_locked(emdb_client *c, emdb_future *f)
{
	mem_state *m = c->priv;
	if (f->prev)
		f->prev->next = f->next;
	else
		m->head = f->next;
	if (f->next)
		f->next->prev = f->prev;
	else
		m->tail = f->prev;
	f->next = f->prev = NULL;
}

static void mem_ticket_release(emdb_client *c, emdb_client_ticket *t)
{
	emdb_ticket_free(t->local);
	t->local = NULL;
}

static void mem_release_db(mem_state *m)
{
	if (m->own) {
		emdb_db_close(m->db);
	} else if (m->shared) {
		pthread_mutex_lock(&reg_lock);
		if (--m->shared->refs == 0) {
			mem_shared **pp = &registry;
			while (*pp != m->shared)
				pp = &(*pp)->next;
			*pp = m->shared->next;
			step_barrier_destroy(m->shared->steps);
			emdb_db_close(m->shared->db);
			emdb_free(m->shared);
		}
		pthread_mutex_unlock(&reg_lock);
	}
}

static void mem_close(emdb_client *c)
{
	mem_state *m = c->priv;
	pthread_mutex_lock(&c->lock);
	m->stopping = true;
	pthread_cond_broadcast(&m->work);
	pthread_mutex_unlock(&c->lock);
	for (uint32_t i = 0; i < m->n_workers; i++)
		pthread_join(m->workers[i], NULL);
	emdb_free(m->workers);
	pthread_cond_destroy(&m->work);
	step_barrier_destroy(m->own_steps);
	mem_release_db(m);
	emdb_free(m);
}

static const cl_transport mem_transport = {
	.name = "mem",
	.submit = mem_submit,
	.run = mem_run,
	.unlink_locked = mem_unlink_locked,
	.ticket_release = mem_ticket_release,
	.close = mem_close,
};

/* ---- opening ------------------------------------------------------- */

/* The synchronous steps of db (db/step.h): each one's Update is the
 * engine's. */
static int open_steps(emdb_db *db, step_barrier **out)
{
	step_hooks h = { .apply = step_apply_update, .arg = db };
	return step_barrier_create(&h, out);
}

static int open_db(mem_state *m, const cl_uri *u, const emdb_client_options *o)
{
	int rc;
	if (!u->name[0]) {
		rc = emdb_db_open(o->mem_config, &m->db);
		if (rc != EMDB_OK)
			return cl_seterr(rc, "emdb_client_connect: %s", emdb_last_error());
		m->own = true;
		return EMDB_OK;
	}
	pthread_mutex_lock(&reg_lock);
	mem_shared *s = registry;
	while (s && strcmp(s->name, u->name))
		s = s->next;
	if (!s) {
		s = emdb_calloc(1, sizeof(*s));
		if (!s) {
			pthread_mutex_unlock(&reg_lock);
			return cl_seterr(EMDB_ERR_NOMEM, "emdb_client_connect: out of memory");
		}
		rc = emdb_db_open(o->mem_config, &s->db);
		if (rc == EMDB_OK && (rc = open_steps(s->db, &s->steps)) != EMDB_OK)
			emdb_db_close(s->db);
		if (rc != EMDB_OK) {
			pthread_mutex_unlock(&reg_lock);
			emdb_free(s);
			return cl_seterr(rc, "emdb_client_connect: %s", emdb_last_error());
		}
		snprintf(s->name, sizeof(s->name), "%s", u->name);
		s->next = registry;
		registry = s;
	}
	s->refs++;
	pthread_mutex_unlock(&reg_lock);
	m->shared = s;
	m->db = s->db;
	return EMDB_OK;
}

int cl_mem_open(emdb_client *c, const cl_uri *u, emdb_db *db, const emdb_client_options *o)
{
	mem_state *m = emdb_calloc(1, sizeof(*m));
	int rc;
	if (!m)
		return cl_seterr(EMDB_ERR_NOMEM, "emdb_client_connect: out of memory");
	if (db) {
		m->db = db;
	} else {
		rc = open_db(m, u, o);
		if (rc != EMDB_OK) {
			emdb_free(m);
			return rc;
		}
	}
	if (m->shared) {
		m->steps = m->shared->steps;
	} else if ((rc = open_steps(m->db, &m->own_steps)) != EMDB_OK) {
		rc = cl_seterr(rc, "emdb_client_connect: %s", emdb_last_error());
		mem_release_db(m);
		emdb_free(m);
		return rc;
	} else {
		m->steps = m->own_steps;
	}
	pthread_cond_init(&m->work, NULL);
	c->priv = m;
	c->tr = &mem_transport;
	c->role = EMDB_ROLE_ADMIN;
	emdb_db_config cfg;
	emdb_db_get_config(m->db, &cfg);
	c->max_batch = cfg.max_batch;
	snprintf(c->server, sizeof(c->server), "emdb (in-process)");

	if (o->mem_threads) {
		m->workers = emdb_calloc(o->mem_threads, sizeof(pthread_t));
		if (!m->workers) {
			rc = cl_seterr(EMDB_ERR_NOMEM, "emdb_client_connect: out of memory");
			goto fail;
		}
		for (; m->n_workers < o->mem_threads; m->n_workers++) {
			if (pthread_create(&m->workers[m->n_workers], NULL, worker, c) != 0) {
				rc = cl_seterr(EMDB_ERR_NOMEM, "emdb_client_connect: cannot start a worker thread");
				goto fail;
			}
		}
	}
	return EMDB_OK;
fail:
	mem_close(c);
	return rc;
}
