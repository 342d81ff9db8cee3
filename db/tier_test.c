/*
 * tier_test.c - the test backend of the tier interface (db/tier.h): the
 * host backend's memory and rules behind a device's limits, so that the
 * engine's use of a device tier is tested without a GPU.  It has a tiny
 * capacity (tier_config.test_chunks chunks; 0: max_chunks), and fails one
 * chosen operation on request (db/tier_test.h) the way a device fails:
 * NOMEM before anything changes, IO after which the tier is failed for
 * good (db/tier.c turns IO into the sticky state).  Bytes moved are
 * counted by db/tier.c for every backend (tier_stats).
 *
 * Invariants:
 *   1. Every operation first passes the injection countdown; an injected
 *      failure returns before the host backend is called, so NOMEM changes
 *      nothing.  An injected IO leaves the memory as it was, which no
 *      caller may read any more (the tier is failed).
 *   2. Chunks held never exceed the capacity.
 *   3. "Device" buffers (tier_test_buffer) are host memory the tier
 *      claims as its own: owns_ptr accepts any pointer inside one (of its
 *      replica, or of every replica), so the
 *      engine's device-pointer paths run here as on a GPU.
 *   4. A submitted gather or accumulate does nothing until its wait or
 *      the tier's next operation, whichever comes first, as a device
 *      stream runs work in the order it was enqueued: a caller reading
 *      the output before the wait may read garbage, as from a device,
 *      and the tests see (tier_test_on_wait) that the host part of a
 *      request ran between submit and wait.  Jobs run in submission
 *      order, each once (done).
 */
#include <string.h>

#include <emdb/alloc.h>

#include "base/error_int.h"
#include "db/tier_int.h"
#include "db/tier_test.h"

typedef struct test_tier {
	uint32_t cap;       /* chunks                           */
	uint32_t held;      /* chunks allocated                 */
	uint32_t countdown; /* operations before the failure    */
	int fail_err;       /* 0: no failure armed              */
	uint64_t calls;
	void *buf[TIER_TEST_BUFFERS];  /* invariant 3 */
	size_t buf_len[TIER_TEST_BUFFERS];
	int buf_rep[TIER_TEST_BUFFERS]; /* its replica, -1 every one */
	tier_test_wait_fn on_wait;      /* invariant 4 */
	void *on_wait_ctx;
	bool fail_wait;
	struct test_job *queue, *tail;  /* submitted, in order (the stream) */
} test_tier;

/* A deferred job (invariant 4): the arguments, which the caller keeps
 * until the wait (tier.h). */
typedef struct test_job {
	bool gather, done;
	uint32_t r;
	size_t n;
	const uint64_t *slots;    /* gather */
	float *out;
	const uint32_t *pidx;     /* accumulate */
	const float *grads;
	struct test_job *next;
} test_job;

static test_tier *T(const tier *t)
{
	return (test_tier *)t->wrap;
}

void tier_test_fail_after(tier *t, uint32_t after, int err)
{
	T(t)->countdown = after;
	T(t)->fail_err = err;
}

uint64_t tier_test_calls(const tier *t)
{
	return T(t)->calls;
}

static int test_gate(tier *t, const char *op);

void *tier_test_buffer_on(tier *t, int replica, size_t bytes)
{
	test_tier *x = T(t);

	for (int k = 0; k < TIER_TEST_BUFFERS; k++)
		if (!x->buf[k]) {
			x->buf[k] = emdb_malloc(bytes ? bytes : 1);
			x->buf_len[k] = bytes;
			x->buf_rep[k] = replica;
			return x->buf[k];
		}
	return NULL;
}

void *tier_test_buffer(tier *t, size_t bytes)
{
	return tier_test_buffer_on(t, -1, bytes);
}

void tier_test_free_buffer(tier *t, void *p)
{
	test_tier *x = T(t);

	for (int k = 0; p && k < TIER_TEST_BUFFERS; k++)
		if (x->buf[k] == p) {
			emdb_free(p);
			x->buf[k] = NULL;
		}
}

static bool test_owns_ptr(const tier *t, uint32_t r, const void *p)
{
	const test_tier *x = T(t);
	const char *c = p;

	for (int k = 0; k < TIER_TEST_BUFFERS; k++)
		if (x->buf[k] && (x->buf_rep[k] < 0 || x->buf_rep[k] == (int)r) &&
		    c >= (const char *)x->buf[k] &&
		    c < (const char *)x->buf[k] + x->buf_len[k])
			return true;
	return false;
}

static int test_copy(tier *t, uint32_t r, void *dst, const void *src, size_t bytes, bool to_tier)
{
	int rc = test_gate(t, to_tier ? "copy in" : "copy out");

	(void)r;
	if (!rc)
		memcpy(dst, src, bytes);
	return rc;
}

/* Run the deferred jobs up to and including `upto` (NULL: every one),
 * in order (invariant 4).  Only the host backend runs: no failure. */
static void test_flush(tier *t, const test_job *upto)
{
	for (test_job *j = T(t)->queue; j; j = j->next) {
		if (!j->done) {
			if (j->gather)
				(void)tier_host_backend.gather(t, j->r, j->slots, j->n, j->out, false);
			else
				(void)tier_host_backend.accumulate(t, j->r, j->pidx, j->n, j->grads);
			j->done = true;
		}
		if (j == upto)
			break;
	}
}

/* EMDB_OK, or the armed failure when its turn has come (invariant 1). */
static int test_gate(tier *t, const char *op)
{
	test_tier *x = T(t);
	int err = x->fail_err;

	test_flush(t, NULL);
	x->calls++;
	if (!err)
		return EMDB_OK;
	if (x->countdown) {
		x->countdown--;
		return EMDB_OK;
	}
	x->fail_err = 0;
	return emdb__seterr(err, "test tier: injected failure of %s", op);
}

static int test_open(tier *t)
{
	test_tier *x = emdb_calloc(1, sizeof(*x));
	int rc;

	if (!x)
		return EMDB_ERR_NOMEM;
	x->cap = t->cfg.test_chunks ? t->cfg.test_chunks : t->cfg.max_chunks;
	t->wrap = x;
	rc = tier_host_backend.open(t);
	if (rc) {
		emdb_free(x);
		t->wrap = NULL;
	}
	return rc;
}

static void test_close(tier *t)
{
	while (T(t)->queue) { /* jobs never waited for (tier.h forbids it) */
		test_job *j = T(t)->queue;

		T(t)->queue = j->next;
		emdb_free(j);
	}
	for (int k = 0; k < TIER_TEST_BUFFERS; k++)
		emdb_free(T(t)->buf[k]);
	tier_host_backend.close(t);
	emdb_free(t->wrap);
	t->wrap = NULL;
}

static int test_chunk_alloc(tier *t, uint32_t c)
{
	int rc = test_gate(t, "chunk_alloc");

	if (rc)
		return rc;
	if (T(t)->held >= T(t)->cap)
		return emdb__seterr(EMDB_ERR_NOMEM, "test tier: full (%u chunks)", T(t)->cap);
	rc = tier_host_backend.chunk_alloc(t, c);
	if (!rc)
		T(t)->held++;
	return rc;
}

static void test_chunk_free(tier *t, uint32_t c)
{
	test_flush(t, NULL); /* cudaFree waits for the device as well */
	tier_host_backend.chunk_free(t, c);
	T(t)->held--;
}

static int test_put_rows(tier *t, const uint64_t *slots, size_t n, const float *rows)
{
	int rc = test_gate(t, "put_rows");

	return rc ? rc : tier_host_backend.put_rows(t, slots, n, rows);
}

static int test_get_rows(tier *t, uint32_t r, const uint64_t *slots, size_t n, float *rows)
{
	int rc = test_gate(t, "get_rows");

	return rc ? rc : tier_host_backend.get_rows(t, r, slots, n, rows);
}

static int test_init_rows(tier *t, const uint64_t *slots, const uint64_t *ids, size_t n,
			  const tier_init_args *a)
{
	int rc = test_gate(t, "init_rows");

	return rc ? rc : tier_host_backend.init_rows(t, slots, ids, n, a);
}

static int test_gather(tier *t, uint32_t r, const uint64_t *slots, size_t n, float *out,
		       bool out_in_tier)
{
	int rc = test_gate(t, "gather");

	return rc ? rc : tier_host_backend.gather(t, r, slots, n, out, out_in_tier);
}

static int test_accumulate(tier *t, uint32_t r, const uint32_t *pidx, size_t n,
			   const float *grads)
{
	int rc = test_gate(t, "accumulate");

	return rc ? rc : tier_host_backend.accumulate(t, r, pidx, n, grads);
}

static int test_reduce(tier *t, uint32_t npend)
{
	int rc = test_gate(t, "reduce");

	return rc ? rc : tier_host_backend.reduce(t, npend);
}

static int test_step(tier *t, const emdb_opt_scalars *sc, const uint64_t *slots, size_t n,
		     const float *grads)
{
	int rc = test_gate(t, "step");

	return rc ? rc : tier_host_backend.step(t, sc, slots, n, grads);
}

void tier_test_on_wait(tier *t, tier_test_wait_fn fn, void *ctx)
{
	T(t)->on_wait = fn;
	T(t)->on_wait_ctx = ctx;
}

void tier_test_fail_wait(tier *t)
{
	T(t)->fail_wait = true;
}

static int test_defer(tier *t, const test_job *a, void **job)
{
	test_job *j = emdb_malloc(sizeof(*j));

	if (!j)
		return EMDB_ERR_NOMEM;
	*j = *a;
	j->done = false;
	j->next = NULL;
	if (T(t)->tail)
		T(t)->tail->next = j;
	else
		T(t)->queue = j;
	T(t)->tail = j;
	*job = j;
	return EMDB_OK;
}

static int test_gather_submit(tier *t, uint32_t r, const uint64_t *slots, size_t n, float *out,
			      void **job)
{
	int rc = test_gate(t, "gather");

	return rc ? rc : test_defer(t, &(test_job){ .gather = true, .r = r, .n = n, .slots = slots,
						     .out = out }, job);
}

static int test_accumulate_submit(tier *t, uint32_t r, const uint32_t *pidx, size_t n,
				  const float *grads, void **job)
{
	int rc = test_gate(t, "accumulate");

	return rc ? rc : test_defer(t, &(test_job){ .r = r, .n = n, .pidx = pidx, .grads = grads },
				    job);
}

/* Invariant 4: the job's work, and the work before it, runs now (unless
 * an injected failure: then the device failed while it ran). */
static int test_wait_job(tier *t, void *job)
{
	test_job *j = job, **pp;
	test_tier *x = T(t);
	int rc = EMDB_OK;

	x->calls++;
	if (x->on_wait && !j->done)
		x->on_wait(x->on_wait_ctx);
	if (x->fail_wait) {
		x->fail_wait = false;
		j->done = true; /* its work is lost with the device */
		rc = emdb__seterr(EMDB_ERR_IO, "test tier: injected failure of a job's wait");
	}
	test_flush(t, j);
	for (pp = &x->queue; *pp != j; pp = &(*pp)->next)
		;
	*pp = j->next;
	if (x->tail == j) {
		x->tail = NULL;
		for (test_job *k = x->queue; k; k = k->next)
			x->tail = k;
	}
	emdb_free(j);
	return rc;
}

const tier_backend tier_test_backend = {
	.name = "test",
	.open = test_open,
	.close = test_close,
	.chunk_alloc = test_chunk_alloc,
	.chunk_free = test_chunk_free,
	.put_rows = test_put_rows,
	.get_rows = test_get_rows,
	.init_rows = test_init_rows,
	.gather = test_gather,
	.gather_dev = NULL,
	.accumulate = test_accumulate,
	.reduce = test_reduce,
	.step = test_step,
	.owns_ptr = test_owns_ptr,
	.copy = test_copy,
	.available = NULL,
	.devices = NULL,
	.gather_submit = test_gather_submit,
	.accumulate_submit = test_accumulate_submit,
	.wait_job = test_wait_job,
	.host_alloc = NULL,
	.host_free = NULL,
};
