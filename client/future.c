/*
 * future.c - the request machinery shared by every call and transport:
 * futures, their deadlines, waiting, abandoning, and the synchronous call
 * as submit + wait on a stack future.
 *
 * A request is an emdb_future whatever the transport.  The transport moves
 * it NEW -> QUEUED (in mem.c's work queue or net.c's table of requests
 * sent) -> RUNNING (a worker executes it, or the thread reading the
 * socket writes its outputs) -> DONE, and whoever completes it signals its condition
 * variable.  Waiters sleep on that variable with the handle's lock.
 *
 * Invariants:
 *   1. state only moves forward, and only under c->lock.
 *   2. A QUEUED future is reachable from its transport's queue or table;
 *      RUNNING and DONE ones are not.  Only the thread that made a future
 *      RUNNING completes it; nobody else touches its outputs, so a waiter
 *      that times out or frees never races the writer: it unlinks a
 *      QUEUED future, and waits out a RUNNING one.
 *   3. Deadlines are enforced by whoever observes the future (wait, poll,
 *      free): a QUEUED future past its deadline is unlinked and completed
 *      with EMDB_ERR_TIMEOUT.  No timer thread exists.
 *   4. A Prefetch's ticket stays in the future (f->tk) until a wait or
 *      poll hands it to *ticket_out; free releases an undelivered one, so
 *      no ticket leaks whatever the caller does.
 *   5. Arguments are checked here, once, before any transport sees them
 *      (each operation's check of CL_OP_MAP); transports may assume
 *      non-NULL outputs and a ticket of their handle.
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <emdb/alloc.h>
#include <emdb/client.h>

#include "client/client_int.h"

uint64_t cl_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void cond_init(pthread_cond_t *cv)
{
	pthread_condattr_t at;
	pthread_condattr_init(&at);
	pthread_condattr_setclock(&at, CLOCK_MONOTONIC);
	pthread_cond_init(cv, &at);
	pthread_condattr_destroy(&at);
}

/* Sleep on cv until the monotonic time `until` (UINT64_MAX: forever). */
static void cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *m, uint64_t until)
{
	if (until == UINT64_MAX) {
		pthread_cond_wait(cv, m);
		return;
	}
	struct timespec ts = { (time_t)(until / 1000000000ull), (long)(until % 1000000000ull) };
	pthread_cond_timedwait(cv, m, &ts);
}

static void future_init(emdb_client *c, emdb_future *f, const cl_args *a)
{
	memset(f, 0, sizeof(*f));
	f->c = c;
	f->a = *a;
	f->state = FUT_NEW;
	uint32_t ms = __atomic_load_n(&c->timeout_ms, __ATOMIC_RELAXED);
	f->deadline = ms ? cl_now_ns() + (uint64_t)ms * 1000000ull : 0;
	if (f->deadline && a->op == CL_LINKTEST) /* the timeout counts from the test's end */
		f->deadline += a->arg * 1000000ull;
	cond_init(&f->cond);
}

void cl_complete_locked(emdb_future *f, int rc, const char *msg)
{
	if (f->a.seq)
		cl_step_done_locked(f->c, &f->a, rc);
	f->rc = rc;
	if (rc != EMDB_OK)
		snprintf(f->msg, sizeof(f->msg), "%s", msg ? msg : emdb_strerror(rc));
	f->state = FUT_DONE;
	pthread_cond_broadcast(&f->cond);
}

void cl_complete(emdb_future *f, int rc, const char *msg)
{
	pthread_mutex_lock(&f->c->lock);
	cl_complete_locked(f, rc, msg);
	pthread_mutex_unlock(&f->c->lock);
}

int cl_wait_locked(emdb_future *f, uint64_t limit)
{
	emdb_client *c = f->c;
	while (f->state != FUT_DONE) {
		uint64_t now = cl_now_ns();
		if (f->state == FUT_QUEUED && f->deadline && now >= f->deadline) {
			c->tr->unlink_locked(c, f);
			char msg[CL_MSG_MAX];
			snprintf(msg, sizeof(msg), "%s: no response within the timeout (%s)", f->a.what,
				 c->tr->name);
			cl_complete_locked(f, EMDB_ERR_TIMEOUT, msg);
			break;
		}
		if (now >= limit)
			return EMDB_FUTURE_PENDING;
		uint64_t until = limit;
		if (f->state == FUT_QUEUED && f->deadline && f->deadline < until)
			until = f->deadline;
		cond_wait_until(&f->cond, &c->lock, until);
	}
	return f->rc;
}

/* The caller sees f's result: deliver its ticket or its message. */
static int observe(emdb_future *f)
{
	if (f->a.op == CL_PREFETCH) {
		if (f->rc == EMDB_OK && !f->delivered) {
			*f->a.ticket_out = f->tk;
			f->delivered = true;
		} else if (f->rc != EMDB_OK) {
			*f->a.ticket_out = NULL;
		}
	}
	if (f->rc != EMDB_OK)
		cl_setmsg(f->msg);
	return f->rc;
}

/* ---- argument checks (invariant 5): CL_OP_MAP's check column ------ */

typedef int (*chk_fn)(emdb_client *c, const cl_args *a);

static int chk_none(emdb_client *c, const cl_args *a)
{
	return EMDB_OK;
}

static int chk_prefetch(emdb_client *c, const cl_args *a)
{
	if (!a->ticket_out)
		return cl_seterr(EMDB_ERR_INVALID, "%s: out is NULL", a->what);
	*a->ticket_out = NULL;
	if (!a->ids)
		return cl_seterr(EMDB_ERR_INVALID, "%s: ids is NULL", a->what);
	return EMDB_OK;
}

/* PULL, PUSH, PUSH_UPDATE, LOOKUP, READ_STATE, PULL_WEIGHTED,
 * PUSH_WEIGHTED: rows by IDs or ticket, maybe pooled, maybe weighted. */
static int chk_rows(emdb_client *c, const cl_args *a)
{
	const char *w = a->what;
	bool push = a->op == CL_PUSH || a->op == CL_PUSH_UPDATE || a->op == CL_PUSH_WEIGHTED;
	bool weighted = a->op == CL_PULL_WEIGHTED || a->op == CL_PUSH_WEIGHTED;
	if (push ? !a->grads : !a->out)
		return cl_seterr(EMDB_ERR_INVALID, "%s: %s is NULL", w,
				 push ? "grads" : a->op == CL_READ_STATE ? "state" : "out");
	if (a->ticket && a->ticket->c != c)
		return cl_seterr(EMDB_ERR_INVALID, "%s: the ticket belongs to another handle", w);
	if (!a->ticket && !a->ids)
		return cl_seterr(EMDB_ERR_INVALID, "%s: %s is NULL", w,
				 push || a->op == CL_PULL || weighted ? "ids or ticket" : "ids");
	if (a->bags) {
		/* The same checks, codes and order as the engine's, needed
		 * here because the wire reads n_bags 0 as "no pooling". */
		if (a->pool != EMDB_POOL_SUM && a->pool != EMDB_POOL_MEAN)
			return cl_seterr(EMDB_ERR_INVALID, "%s: unknown pooling mode %d", w, (int)a->pool);
		if (!a->offsets)
			return cl_seterr(EMDB_ERR_INVALID, "%s: offsets is NULL", w);
		if (a->n_bags == 0)
			return cl_seterr(EMDB_ERR_BATCH, "%s: no bags: n_bags must be at least 1", w);
		if (a->n_bags >= UINT32_MAX)
			return cl_seterr(EMDB_ERR_BATCH, "%s: %zu bags is too many", w, a->n_bags);
	}
	if (weighted && !a->weights)
		return cl_seterr(EMDB_ERR_INVALID, "%s: weights is NULL", w);
	if (a->n > UINT32_MAX)
		return cl_seterr(EMDB_ERR_BATCH, "%s: %zu IDs is more than a request carries", w, a->n);
	return EMDB_OK;
}

static int chk_table_create(emdb_client *c, const cl_args *a)
{
	if (!a->cfg)
		return cl_seterr(EMDB_ERR_INVALID, "%s: cfg is NULL", a->what);
	return EMDB_OK;
}

static int chk_table_alter(emdb_client *c, const cl_args *a)
{
	if (!a->opt)
		return cl_seterr(EMDB_ERR_INVALID, "%s: opt is NULL", a->what);
	return EMDB_OK;
}

static int chk_table_scan(emdb_client *c, const cl_args *a)
{
	if (!a->ids_out || !a->out || !a->n_out || !a->next_out || (a->per_row && !a->state_out))
		return cl_seterr(EMDB_ERR_INVALID,
				 "%s: NULL ids, vecs, n_out or next_cursor, or state with per_row %u", a->what,
				 a->per_row);
	if (a->n == 0 || a->n > UINT32_MAX)
		return cl_seterr(EMDB_ERR_BATCH, "%s: max_rows %zu, allowed 1..max_batch", a->what, a->n);
	*a->n_out = 0;
	return EMDB_OK;
}

static int chk_table_load(emdb_client *c, const cl_args *a)
{
	if (!a->ids || !a->vecs_in || (a->per_row && !a->state_in))
		return cl_seterr(EMDB_ERR_INVALID, "%s: NULL ids or vecs, or state with per_row %u", a->what,
				 a->per_row);
	if (a->n > UINT32_MAX)
		return cl_seterr(EMDB_ERR_BATCH, "%s: %zu IDs is more than a request carries", a->what, a->n);
	return EMDB_OK;
}

static int chk_table_find(emdb_client *c, const cl_args *a)
{
	if (!a->s1)
		return cl_seterr(EMDB_ERR_INVALID, "%s: name is NULL", a->what);
	return EMDB_OK;
}

static int chk_table_describe(emdb_client *c, const cl_args *a)
{
	if (!a->info)
		return cl_seterr(EMDB_ERR_INVALID, "%s: out is NULL", a->what);
	return EMDB_OK;
}

static int chk_table_list(emdb_client *c, const cl_args *a)
{
	if (!a->n_out || (a->list_cap && !a->list_ids))
		return cl_seterr(EMDB_ERR_INVALID, "%s: n_out is NULL, or ids is NULL with cap %zu",
				 a->what, a->list_cap);
	return EMDB_OK;
}

static int chk_stats(emdb_client *c, const cl_args *a)
{
	if (!a->stats)
		return cl_seterr(EMDB_ERR_INVALID, "%s: out is NULL", a->what);
	return EMDB_OK;
}

static int chk_info(emdb_client *c, const cl_args *a)
{
	if (!a->text)
		return cl_seterr(EMDB_ERR_INVALID, "%s: text is NULL", a->what);
	*a->text = NULL;
	return EMDB_OK;
}

static int chk_config_get(emdb_client *c, const cl_args *a)
{
	if (!a->kv || !a->n_out || !a->s1)
		return cl_seterr(EMDB_ERR_INVALID, "%s: pattern, kv or n is NULL", a->what);
	*a->kv = NULL;
	*a->n_out = 0;
	return EMDB_OK;
}

static int chk_config_set(emdb_client *c, const cl_args *a)
{
	const char *w = a->what;
	if (a->n_kv == 0 || a->n_kv > EMDB_CLIENT_CONFIG_SET_MAX)
		return cl_seterr(EMDB_ERR_INVALID, "%s: %zu settings; 1 to %u at once", w, a->n_kv,
				 EMDB_CLIENT_CONFIG_SET_MAX);
	if (!a->keys || !a->values)
		return cl_seterr(EMDB_ERR_INVALID, "%s: keys or values is NULL", w);
	for (size_t i = 0; i < a->n_kv; i++)
		if (!a->keys[i] || !a->values[i])
			return cl_seterr(EMDB_ERR_INVALID, "%s: key or value %zu is NULL", w, i);
	return EMDB_OK;
}

static int chk_checkpoint(emdb_client *c, const cl_args *a)
{
	if (a->arg != EMDB_CKPT_FULL && a->arg != EMDB_CKPT_INCREMENTAL)
		return cl_seterr(EMDB_ERR_INVALID,
				 "%s: unknown checkpoint kind %llu (EMDB_CKPT_FULL or EMDB_CKPT_INCREMENTAL)",
				 a->what, (unsigned long long)a->arg);
	return EMDB_OK;
}

static int chk_job_status(emdb_client *c, const cl_args *a)
{
	if (!a->job)
		return cl_seterr(EMDB_ERR_INVALID, "%s: out is NULL", a->what);
	return EMDB_OK;
}

static int chk_ckpt_list(emdb_client *c, const cl_args *a)
{
	if (!a->ckpts || !a->n_out)
		return cl_seterr(EMDB_ERR_INVALID, "%s: out or n is NULL", a->what);
	*a->ckpts = NULL;
	*a->n_out = 0;
	return EMDB_OK;
}

static int chk_linktest(emdb_client *c, const cl_args *a)
{
	if (!a->lt_out || (a->n && !a->lt_msgs))
		return cl_seterr(EMDB_ERR_INVALID, "%s: out or msgs is NULL", a->what);
	if (a->n > UINT32_MAX)
		return cl_seterr(EMDB_ERR_INVALID, "%s: %zu messages", a->what, a->n);
	for (size_t i = 0; i < a->n; i++)
		if (a->lt_msgs[i].reserved)
			return cl_seterr(EMDB_ERR_INVALID, "%s: message %zu: reserved is not 0", a->what, i);
	memset(a->lt_out, 0, sizeof(*a->lt_out));
	return EMDB_OK;
}

static const chk_fn checks[CL_OP_COUNT] = {
#define CHECK_(NAME, wire, check, encode, receive, mem) [CL_##NAME] = check,
	CL_OP_MAP(CHECK_)
#undef CHECK_
};

static int check_args(emdb_client *c, const cl_args *a)
{
	assert(a->op > CL_NONE && a->op < CL_OP_COUNT);
	return checks[a->op](c, a);
}

int cl_call(emdb_client *c, cl_args *a)
{
	emdb_future f;
	if (!c)
		return cl_seterr(EMDB_ERR_INVALID, "%s: the handle is NULL", a->what);
	int rc = check_args(c, a);
	if (rc != EMDB_OK)
		return rc;
	future_init(c, &f, a);
	if (c->tr->run) {
		c->tr->run(c, &f);
	} else {
		c->tr->submit(c, &f);
		pthread_mutex_lock(&c->lock);
		cl_wait_locked(&f, UINT64_MAX);
		pthread_mutex_unlock(&c->lock);
	}
	rc = observe(&f);
	pthread_cond_destroy(&f.cond);
	return rc;
}

emdb_future *cl_call_async(emdb_client *c, cl_args *a)
{
	if (!c) {
		cl_seterr(EMDB_ERR_INVALID, "%s: the handle is NULL", a->what);
		return NULL;
	}
	emdb_future *f = emdb_malloc(sizeof(*f));
	if (!f) {
		cl_seterr(EMDB_ERR_NOMEM, "%s: out of memory for the future", a->what);
		return NULL;
	}
	future_init(c, f, a);
	int rc = check_args(c, a);
	if (rc != EMDB_OK) {
		cl_complete(f, rc, emdb_client_last_error());
		return f;
	}
	c->tr->submit(c, f);
	return f;
}

int emdb_future_wait(emdb_future *f, int64_t timeout_ms)
{
	if (!f)
		return cl_seterr(EMDB_ERR_NOMEM, "emdb_future_wait: the future could not be allocated");
	uint64_t limit = UINT64_MAX;
	if (timeout_ms >= 0 && timeout_ms < ((int64_t)1 << 40)) /* beyond: forever */
		limit = cl_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	pthread_mutex_lock(&f->c->lock);
	int rc = cl_wait_locked(f, limit);
	pthread_mutex_unlock(&f->c->lock);
	if (rc == EMDB_FUTURE_PENDING)
		return rc;
	return observe(f);
}

int emdb_future_poll(emdb_future *f)
{
	return emdb_future_wait(f, 0);
}

void emdb_future_free(emdb_future *f)
{
	if (!f)
		return;
	emdb_client *c = f->c;
	pthread_mutex_lock(&c->lock);
	if (f->state == FUT_QUEUED) {
		c->tr->unlink_locked(c, f);
		cl_complete_locked(f, EMDB_ERR_CLOSED, "abandoned");
	}
	while (f->state != FUT_DONE)
		pthread_cond_wait(&f->cond, &c->lock);
	pthread_mutex_unlock(&c->lock);
	if (f->a.op == CL_PREFETCH && f->rc == EMDB_OK && !f->delivered)
		emdb_client_ticket_free(f->tk);
	pthread_cond_destroy(&f->cond);
	emdb_free(f);
}
