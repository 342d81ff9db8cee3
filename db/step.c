/*
 * step.c - synchronous steps (see step.h): the arrivals counted under one
 * lock, the Update applied and the waiters answered outside it.
 *
 * Invariants:
 *   1. At most one open step per table id; an open step has 1 <= n <
 *      workers waiters, w[0..n) in arrival order, none answered yet.
 *   2. A step leaves the open list exactly once, under the lock: full
 *      (the arrival that made workers owns it), failed (step_expire,
 *      step_close) or emptied (step_leave); whoever takes it out answers
 *      its waiters, outside the lock, and frees it.  So every waiter's
 *      `done` runs exactly once, and never under the lock: a callback may
 *      call the barrier again.
 *   3. `waiting` is the sum of n over the open steps.
 *   4. Once step_close has run no step opens or completes, so no answer
 *      follows the close (emdb-server's I/O threads stop after it).
 *   5. Sequenced arrivals (step.h): a worker's entry has pending != 0 and
 *      !applying exactly while one waiter of that worker (rank, session,
 *      seq) is in the open step of its table; applying while its step is
 *      full and not yet finished.  An entry exists before its arrival is
 *      counted, so recording a result never allocates.
 *
 * State changes: the open list, `closed` and the sequence entries, under
 * lock; step_wait's
 * waiters' results, under the same lock, signalled on `answered`.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <emdb/alloc.h>
#include <emdb/db.h>
#include <emdb/error.h>

#include "base/error_int.h"
#include "db/step.h"

struct step {
	step *next;
	step_barrier *b;
	step_seq last; /* the arrival that completed it (sequenced or not) */
	uint32_t table, workers, n, cap;
	uint64_t deadline_ns; /* 0: none */
	step_waiter *w;       /* [cap], grown as waiters arrive: a step's memory
				 follows its waiters, not its count */
};

/* A worker's sequence on one table (invariant 5). */
typedef struct seq_entry {
	uint64_t session;
	uint64_t applied, rows; /* its last applied seq (0: none) and rows */
	uint64_t pending;       /* the seq waiting or being applied; 0: none */
	bool applying;
} seq_entry;

/* The entries of one table, indexed by rank, grown as ranks arrive. */
typedef struct seq_log {
	struct seq_log *next;
	uint32_t table, cap;
	seq_entry *e;
} seq_log;

struct step_barrier {
	step_hooks hooks;
	seq_log *logs;
	pthread_mutex_t lock;
	pthread_cond_t answered; /* a step_wait waiter got its answer */
	step *open;
	_Atomic uint64_t waiting;
	bool closed;
	char refusal[160];
};

int step_apply_update(void *db, uint32_t table, uint64_t *rows)
{
	return table ? emdb_update(db, table, rows) : emdb_update_all(db, rows);
}

int step_barrier_create(const step_hooks *h, step_barrier **out)
{
	step_barrier *b = emdb_calloc(1, sizeof(*b));
	if (!b)
		return emdb__seterr(EMDB_ERR_NOMEM, "no memory for a step barrier");
	b->hooks = *h;
	pthread_condattr_t a;
	pthread_mutex_init(&b->lock, NULL);
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&b->answered, &a);
	pthread_condattr_destroy(&a);
	*out = b;
	return EMDB_OK;
}

static void step_free(step *s)
{
	if (s)
		emdb_free(s->w);
	emdb_free(s);
}

void step_barrier_destroy(step_barrier *b)
{
	if (!b)
		return;
	step *next;
	for (step *s = b->open; s; s = next) {
		next = s->next;
		step_free(s);
	}
	seq_log *lnext;
	for (seq_log *l = b->logs; l; l = lnext) {
		lnext = l->next;
		emdb_free(l->e);
		emdb_free(l);
	}
	pthread_cond_destroy(&b->answered);
	pthread_mutex_destroy(&b->lock);
	emdb_free(b);
}

/* Room for one more waiter in s.  Returns 0, or -1 (no memory). */
static int make_room(step *s)
{
	if (s->n < s->cap)
		return 0;
	uint32_t cap = s->cap ? s->cap * 2 : 4;
	if (cap > s->workers)
		cap = s->workers;
	step_waiter *w = emdb_realloc(s->w, (size_t)cap * sizeof(*w));
	if (!w)
		return -1;
	s->w = w;
	s->cap = cap;
	return 0;
}

static void unlink_step_locked(step_barrier *b, step *s)
{
	for (step **p = &b->open; *p; p = &(*p)->next)
		if (*p == s) {
			*p = s->next;
			s->next = NULL;
			return;
		}
}

/* The open step of table, a new one, or NULL with an error set. */
static step *find_or_open_locked(step_barrier *b, uint32_t table, uint32_t workers, uint64_t deadline_ns,
				 int *rc)
{
	step *s = b->open;
	while (s && s->table != table)
		s = s->next;
	if (s && s->workers != workers) {
		*rc = emdb__seterr(EMDB_ERR_INVALID,
				   "synchronous step of table %u: this UPDATE says %u workers, the open step %u",
				   table, workers, s->workers);
		return NULL;
	}
	if (s)
		return s;
	s = emdb_calloc(1, sizeof(*s));
	if (!s) {
		*rc = emdb__seterr(EMDB_ERR_NOMEM, "no memory for a synchronous step of %u workers", workers);
		return NULL;
	}
	s->b = b;
	s->table = table;
	s->workers = workers;
	s->deadline_ns = deadline_ns;
	s->next = b->open;
	b->open = s;
	return s;
}

/* ---- sequenced arrivals (step.h, invariant 5) ----------------------- */

/* worker's entry on table, made (grown) when grow; NULL: none, or no
 * memory when grow. */
static seq_entry *entry_locked(step_barrier *b, uint32_t table, uint32_t worker, bool grow)
{
	seq_log *l = b->logs;
	while (l && l->table != table)
		l = l->next;
	if (!l && !grow)
		return NULL;
	if (!l) {
		if (!(l = emdb_calloc(1, sizeof(*l))))
			return NULL;
		l->table = table;
		l->next = b->logs;
		b->logs = l;
	}
	if (worker < l->cap)
		return &l->e[worker];
	if (!grow)
		return NULL;
	uint32_t cap = l->cap ? l->cap : 8;
	while (cap <= worker)
		cap *= 2;
	seq_entry *e = emdb_realloc(l->e, (size_t)cap * sizeof(*e));
	if (!e)
		return NULL;
	memset(e + l->cap, 0, (size_t)(cap - l->cap) * sizeof(*e));
	l->e = e;
	l->cap = cap;
	return &e[worker];
}

/* The arrival id left its step unapplied (or applied, when applied):
 * its entry forgets the pending seq. */
static void settle_locked(step_barrier *b, uint32_t table, const step_seq *id, bool applied, uint64_t rows)
{
	if (!id->seq)
		return;
	seq_entry *e = entry_locked(b, table, id->worker, false);
	if (!e || e->session != id->session || e->pending != id->seq)
		return;
	if (applied) {
		e->applied = id->seq;
		e->rows = rows;
	}
	e->pending = 0;
	e->applying = false;
}

int step_seq_export(step_barrier *b, step_seq_rec **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	pthread_mutex_lock(&b->lock);
	size_t k = 0;
	for (seq_log *l = b->logs; l; l = l->next)
		for (uint32_t w = 0; w < l->cap; w++)
			k += l->e[w].applied != 0;
	step_seq_rec *v = k ? emdb_malloc(k * sizeof(*v)) : NULL;
	if (k && !v) {
		pthread_mutex_unlock(&b->lock);
		return emdb__seterr(EMDB_ERR_NOMEM, "no memory for %zu step sequences", k);
	}
	k = 0;
	for (seq_log *l = b->logs; l; l = l->next)
		for (uint32_t w = 0; w < l->cap; w++)
			if (l->e[w].applied)
				v[k++] = (step_seq_rec){ l->table, w, l->e[w].session, l->e[w].applied, l->e[w].rows };
	pthread_mutex_unlock(&b->lock);
	*out = v;
	*n = k;
	return EMDB_OK;
}

int step_seq_import(step_barrier *b, const step_seq_rec *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].worker >= EMDB_WORKERS_MAX || !v[i].applied || !v[i].table)
			return emdb__seterr(EMDB_ERR_INVALID, "step sequence %zu: worker %u, table %u, seq %llu", i,
					    v[i].worker, v[i].table, (unsigned long long)v[i].applied);
	pthread_mutex_lock(&b->lock);
	/* Room first (an entry made and left zero is no entry), then the
	 * values: a NOMEM changes nothing. */
	for (size_t i = 0; i < n; i++)
		if (!entry_locked(b, v[i].table, v[i].worker, true)) {
			pthread_mutex_unlock(&b->lock);
			return emdb__seterr(EMDB_ERR_NOMEM, "no memory for %zu step sequences", n);
		}
	for (seq_log *l = b->logs; l; l = l->next)
		for (uint32_t w = 0; w < l->cap; w++)
			if (!l->e[w].pending)
				l->e[w] = (seq_entry){ 0 };
	for (size_t i = 0; i < n; i++) {
		seq_entry *e = entry_locked(b, v[i].table, v[i].worker, false);
		if (e->pending)
			continue;
		*e = (seq_entry){ .session = v[i].session, .applied = v[i].applied, .rows = v[i].rows };
	}
	pthread_mutex_unlock(&b->lock);
	return EMDB_OK;
}

typedef enum { SEQ_NEW, SEQ_ANSWERED, SEQ_RESENT } seq_verdict;

/* What a sequenced arrival w is; *rows the applied step's for
 * SEQ_ANSWERED.  Errors, nothing changed: INVALID, BUSY, NOMEM. */
static int sequence_locked(step_barrier *b, uint32_t table, const step_waiter *w, seq_verdict *v,
			   uint64_t *rows)
{
	const step_seq *id = &w->id;
	if (id->worker >= EMDB_WORKERS_MAX)
		return emdb__seterr(EMDB_ERR_INVALID, "synchronous step of table %u: worker rank %u, at most %u",
				    table, id->worker, EMDB_WORKERS_MAX - 1);
	seq_entry *e = entry_locked(b, table, id->worker, true);
	if (!e)
		return emdb__seterr(EMDB_ERR_NOMEM, "no memory for worker %u's step sequence", id->worker);
	if (e->pending && e->applying)
		return emdb__seterr(EMDB_ERR_BUSY,
				    "synchronous step of table %u: worker %u's step %llu is being applied; ask again",
				    table, id->worker, (unsigned long long)e->pending);
	if (e->session != id->session) {
		/* The worker restarted: a new sequence; one waiting arrival
		 * of its old session is replaced. */
		*v = e->pending ? SEQ_RESENT : SEQ_NEW;
		return EMDB_OK;
	}
	if (id->seq == e->applied) {
		*rows = e->rows;
		*v = SEQ_ANSWERED;
		return EMDB_OK;
	}
	uint64_t last = e->pending > e->applied ? e->pending : e->applied;
	if (id->seq < last)
		return emdb__seterr(EMDB_ERR_INVALID,
				    "synchronous step of table %u: worker %u resent its step %llu, from the past: "
				    "its step %llu is the last %s, and only the last applied step's result is kept",
				    table, id->worker, (unsigned long long)id->seq, (unsigned long long)last,
				    e->pending ? "waiting" : "applied");
	if (e->pending && id->seq != e->pending)
		return emdb__seterr(EMDB_ERR_INVALID,
				    "synchronous step of table %u: worker %u arrived for its step %llu while its step "
				    "%llu still waits",
				    table, id->worker, (unsigned long long)id->seq, (unsigned long long)e->pending);
	*v = e->pending ? SEQ_RESENT : SEQ_NEW;
	return EMDB_OK;
}

/* Put w in the place of its worker's waiting arrival in s; *old gets
 * the one replaced.  Returns false when s holds none (not a resend). */
static bool replace_locked(step *s, const step_waiter *w, step_waiter *old)
{
	for (uint32_t i = 0; s && i < s->n; i++)
		if (s->w[i].id.seq && s->w[i].id.worker == w->id.worker) {
			*old = s->w[i];
			s->w[i] = *w;
			return true;
		}
	return false;
}

static void mark_pending_locked(step_barrier *b, uint32_t table, const step_seq *id)
{
	seq_entry *e = entry_locked(b, table, id->worker, false);
	assert(e); /* sequence_locked made it */
	if (e->session != id->session)
		*e = (seq_entry){ .session = id->session };
	e->pending = id->seq;
	e->applying = false;
}

static void mark_applying_locked(step_barrier *b, step *s)
{
	for (uint32_t i = 0; i <= s->n; i++) {
		const step_seq *id = i < s->n ? &s->w[i].id : &s->last;
		seq_entry *e = id->seq ? entry_locked(b, s->table, id->worker, false) : NULL;
		if (e && e->session == id->session && e->pending == id->seq)
			e->applying = true;
	}
}

int step_arrive(step_barrier *b, uint32_t table, uint32_t workers, const step_waiter *w,
		uint64_t deadline_ns, step **full)
{
	*full = NULL;
	if (workers < 2)
		return emdb__seterr(EMDB_ERR_INVALID, "synchronous step of table %u: %u workers, at least 2",
				    table, workers);
	int rc = EMDB_OK;
	seq_verdict v = SEQ_NEW;
	uint64_t rows = 0;
	step_waiter old;
	bool replaced = false;
	pthread_mutex_lock(&b->lock);
	step *s = NULL;
	if (b->closed)
		rc = emdb__seterr(EMDB_ERR_CLOSED, "%s", b->refusal);
	else if (w->id.seq)
		rc = sequence_locked(b, table, w, &v, &rows);
	if (rc == EMDB_OK && v != SEQ_ANSWERED)
		s = find_or_open_locked(b, table, workers, deadline_ns, &rc);
	if (s && v == SEQ_RESENT) {
		/* Invariant 5: the waiting arrival is in s; w takes its place,
		 * counted once. */
		replaced = replace_locked(s, w, &old);
		assert(replaced);
		mark_pending_locked(b, table, &w->id);
	} else if (s && s->n + 1 == workers) {
		/* w completes it (invariant 2); it is not a waiter. */
		unlink_step_locked(b, s);
		atomic_fetch_sub(&b->waiting, s->n);
		if (w->id.seq)
			mark_pending_locked(b, table, &w->id);
		s->last = w->id;
		mark_applying_locked(b, s);
		*full = s;
	} else if (s && make_room(s) < 0) {
		rc = emdb__seterr(EMDB_ERR_NOMEM, "no memory for a synchronous step of %u workers", workers);
		if (s->n == 0) {
			unlink_step_locked(b, s);
			step_free(s);
		}
	} else if (s) {
		s->w[s->n++] = *w;
		atomic_fetch_add(&b->waiting, 1);
		if (w->id.seq)
			mark_pending_locked(b, table, &w->id);
	}
	pthread_mutex_unlock(&b->lock);
	if (rc == EMDB_OK && v == SEQ_ANSWERED)
		w->done(w->arg, EMDB_OK, rows, "");
	if (replaced)
		old.done(old.arg, EMDB_ERR_BUSY, 0, "synchronous step: superseded, the same worker resent its arrival");
	return rc;
}

void step_finish(step *s, int status, uint64_t rows, const char *msg)
{
	step_barrier *b = s->b;
	pthread_mutex_lock(&b->lock);
	for (uint32_t i = 0; i <= s->n; i++)
		settle_locked(b, s->table, i < s->n ? &s->w[i].id : &s->last, status == EMDB_OK, rows);
	pthread_mutex_unlock(&b->lock);
	for (uint32_t i = 0; i < s->n; i++)
		s->w[i].done(s->w[i].arg, status, rows, status < 0 && msg ? msg : "");
	step_free(s);
}

/* The apply hook's message, kept as this thread's last error across the
 * callbacks (one may have called the engine).  msg is emdb__seterr's
 * "<strerror>: detail"; set again, it must not gain a second prefix. */
static int keep_error(int rc, const char *msg)
{
	if (!strcmp(emdb_last_error(), msg))
		return rc;
	size_t k = strlen(emdb_strerror(rc));
	if (!strncmp(msg, emdb_strerror(rc), k) && !strncmp(msg + k, ": ", 2))
		msg += k + 2;
	return emdb__seterr(rc, "%s", msg);
}

int step_apply(step_barrier *b, step *s, uint64_t *rows)
{
	uint64_t r = 0;
	char msg[256] = "";
	int rc = b->hooks.apply(b->hooks.arg, s->table, &r);
	if (rc != EMDB_OK)
		snprintf(msg, sizeof(msg), "%s", emdb_last_error());
	step_finish(s, rc, r, msg);
	if (rows)
		*rows = r;
	return rc != EMDB_OK ? keep_error(rc, msg) : EMDB_OK;
}

static void describe(char *buf, size_t len, uint32_t table, uint32_t arrived, uint32_t workers, const char *why)
{
	snprintf(buf, len, "synchronous step of table %u: %u of %u workers arrived %s; nothing applied", table,
		 arrived, workers, why);
}

/* Withdrawn waiters are answered a batch at a time, outside the lock,
 * with no allocation (withdrawing must not fail). */
#define LEAVE_BATCH 16

typedef struct leaving {
	step_waiter w;
	uint32_t table, arrived, workers; /* for its message */
} leaving;

unsigned step_leave(step_barrier *b, uint64_t owner, int status, const char *why)
{
	unsigned gone = 0;
	for (;;) {
		leaving out[LEAVE_BATCH];
		unsigned k = 0;
		pthread_mutex_lock(&b->lock);
		step *next;
		for (step *s = b->open; s && k < LEAVE_BATCH; s = next) {
			next = s->next;
			uint32_t arrived = s->n, kept = 0;
			for (uint32_t i = 0; i < s->n; i++) {
				if (s->w[i].owner == owner && k < LEAVE_BATCH) {
					out[k++] = (leaving){ s->w[i], s->table, arrived, s->workers };
					settle_locked(b, s->table, &s->w[i].id, false, 0);
				} else
					s->w[kept++] = s->w[i];
			}
			atomic_fetch_sub(&b->waiting, s->n - kept);
			s->n = kept;
			if (kept == 0) {
				unlink_step_locked(b, s);
				step_free(s);
			}
		}
		pthread_mutex_unlock(&b->lock);
		for (unsigned i = 0; i < k; i++) {
			char msg[256];
			describe(msg, sizeof(msg), out[i].table, out[i].arrived, out[i].workers, why);
			out[i].w.done(out[i].w.arg, status, 0, msg);
		}
		gone += k;
		if (k < LEAVE_BATCH)
			return gone;
	}
}

/* Fail the steps taken out of the open list (invariant 2). */
static unsigned fail_steps(step_barrier *b, step *failed, int status, const char *why)
{
	unsigned n = 0;
	step *next;
	for (step *s = failed; s; s = next) {
		next = s->next;
		char msg[256];
		describe(msg, sizeof(msg), s->table, s->n, s->workers, why);
		if (b->hooks.failed)
			b->hooks.failed(b->hooks.arg, msg);
		step_finish(s, status, 0, msg);
		n++;
	}
	return n;
}

/* Take the open steps past now_ns (all of them when all) out of the list. */
static step *take_failed_locked(step_barrier *b, uint64_t now_ns, bool all)
{
	step *failed = NULL, *next;
	for (step *s = b->open; s; s = next) {
		next = s->next;
		if (all || (s->deadline_ns && now_ns >= s->deadline_ns)) {
			unlink_step_locked(b, s);
			atomic_fetch_sub(&b->waiting, s->n);
			s->next = failed;
			failed = s;
		}
	}
	return failed;
}

unsigned step_expire(step_barrier *b, uint64_t now_ns, int status, const char *why)
{
	if (atomic_load(&b->waiting) == 0)
		return 0; /* the tick's common case, without the lock */
	pthread_mutex_lock(&b->lock);
	step *failed = take_failed_locked(b, now_ns, false);
	pthread_mutex_unlock(&b->lock);
	return fail_steps(b, failed, status, why);
}

void step_close(step_barrier *b, int status, const char *why, const char *refusal)
{
	pthread_mutex_lock(&b->lock);
	b->closed = true;
	snprintf(b->refusal, sizeof(b->refusal), "%s", refusal);
	step *failed = take_failed_locked(b, 0, true);
	pthread_mutex_unlock(&b->lock);
	fail_steps(b, failed, status, why);
}

uint64_t step_waiting(const step_barrier *b)
{
	return atomic_load(&((step_barrier *)b)->waiting);
}

/* ---- the blocking form ---------------------------------------------- */

typedef struct sync_wait {
	step_barrier *b;
	bool done;
	int status;
	uint64_t rows;
	char msg[256];
} sync_wait;

static void sync_done(void *arg, int status, uint64_t rows, const char *msg)
{
	sync_wait *x = arg;
	pthread_mutex_lock(&x->b->lock);
	x->status = status;
	x->rows = rows;
	snprintf(x->msg, sizeof(x->msg), "%s", msg);
	x->done = true;
	pthread_cond_broadcast(&x->b->answered);
	pthread_mutex_unlock(&x->b->lock);
}

int step_wait(step_barrier *b, uint32_t table, uint32_t workers, const step_seq *id, uint32_t timeout_ms,
	      uint64_t *rows)
{
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += timeout_ms / 1000;
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	sync_wait x = { .b = b };
	step_waiter w = { sync_done, &x, (uint64_t)(uintptr_t)&x, id ? *id : (step_seq){ 0 } };
	step *full;
	int rc = step_arrive(b, table, workers, &w, 0, &full);
	if (rc != EMDB_OK)
		return rc;
	if (full)
		return step_apply(b, full, rows);

	bool withdrawn = false;
	pthread_mutex_lock(&b->lock);
	while (!x.done) {
		int e = timeout_ms && !withdrawn ? pthread_cond_timedwait(&b->answered, &b->lock, &until)
						 : pthread_cond_wait(&b->answered, &b->lock);
		if (e == ETIMEDOUT && !x.done) {
			/* Withdraw; if the step is full already, its result
			 * comes all the same, and is waited for. */
			pthread_mutex_unlock(&b->lock);
			step_leave(b, w.owner, EMDB_ERR_TIMEOUT, "within the handle's timeout");
			withdrawn = true;
			pthread_mutex_lock(&b->lock);
		}
	}
	pthread_mutex_unlock(&b->lock);
	if (rows)
		*rows = x.rows;
	return x.status != EMDB_OK ? emdb__seterr(x.status, "%s", x.msg) : EMDB_OK;
}
