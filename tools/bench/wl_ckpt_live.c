/*
 * wl_ckpt_live.c - checkpoints under load: Pull throughput while a
 * checkpoint runs, and how long an Update can be held up by one
 * (wl_ckpt.h).
 *
 * Design
 *   Pull: one thread pulls batches back to back (emdb_pull by IDs, the
 *   uniform pool of the caller) for a fixed time, then while a FULL
 *   checkpoint runs on a second thread, then for the fixed time again.
 *   The figure is the rate during the checkpoint over the mean of the two
 *   rates around it, so a drift of the machine (another tenant starting
 *   or stopping) does not land on one side only.  Every rate is one
 *   stretch of back-to-back calls timed as a whole.
 *
 *   Pause: a trainer-like thread loops push (a small batch) then Update,
 *   timestamps around each call kept in an array; the main thread takes a
 *   FULL and then an INCREMENTAL checkpoint with quiet gaps before, between
 *   and after.  Afterwards each step is matched to the checkpoint whose
 *   emdb_job_run interval it overlaps, and the longest Update (and Push)
 *   of each is the pause a trainer would see; steps that overlap no
 *   checkpoint give the Update latency without one.
 *
 * Invariants
 *   1. Every thread started here is joined before the function returns.
 *   2. A step is attributed to a checkpoint when any part of the call
 *      lies inside the checkpoint's emdb_job_run interval.
 */
#include "tools/bench/wl_ckpt.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench/harness.h"
#include "tools/bench/preload.h"
#include "tools/bench/workloads.h"

#define PULL_WARMUP_S 0.25
#define PAUSE_GAP_S 1.0
#define PAUSE_MAX_STEPS (4u << 20)

static void start_thread(pthread_t *th, void *(*fn)(void *), void *arg)
{
	if (pthread_create(th, NULL, fn, arg) != 0)
		harness_die("cannot start a thread");
}

/* A checkpoint on a thread of its own. */
typedef struct bg_ckpt {
	emdb_db *db;
	emdb_store *st;
	emdb_ckpt_kind kind;
	ckpt_run run;
	atomic_int done;
} bg_ckpt;

static void *bg_ckpt_main(void *arg)
{
	bg_ckpt *b = arg;
	wl_ckpt_take(b->db, b->st, b->kind, &b->run);
	atomic_store(&b->done, 1);
	return NULL;
}

/* ---- Pull -------------------------------------------------------------- */

typedef struct puller {
	emdb_db *db;
	uint32_t table, dim;
	const pool *p;
	float *out;
	uint64_t iter;
} puller;

/* Pull until `until` (harness_now) or until *stop is set; IDs per second,
 * and the share of a core this thread got into *core (may be NULL). */
static double pull_for(puller *u, double until, atomic_int *stop, double *core)
{
	double t0 = harness_now(), t = t0, cpu0 = harness_cpu_thread();
	uint64_t ids = 0;

	while (t < until && !(stop && atomic_load_explicit(stop, memory_order_relaxed))) {
		int rc = emdb_pull(u->db, u->table, pool_ids(u->p, 0, u->iter++), u->p->batch,
				   u->dim, u->out);
		if (rc != EMDB_OK)
			preload_die_engine("emdb_pull", rc);
		ids += u->p->batch;
		t = harness_now();
	}
	if (core)
		*core = t > t0 ? (harness_cpu_thread() - cpu0) / (t - t0) : 0;
	return t > t0 ? (double)ids / (t - t0) : 0;
}

void wl_ckpt_pull(emdb_db *db, uint32_t table, uint32_t dim, emdb_store *st,
		  const pool *p, double seconds, ckpt_pull_result *out)
{
	puller u = { .db = db, .table = table, .dim = dim, .p = p };
	bg_ckpt b = { .db = db, .st = st, .kind = EMDB_CKPT_FULL };
	pthread_t th;
	double core[2];

	u.out = calloc(p->batch * dim, sizeof(float));
	if (!u.out)
		harness_die("out of memory");
	pull_for(&u, harness_now() + PULL_WARMUP_S, NULL, NULL);
	out->alone_before = pull_for(&u, harness_now() + seconds, NULL, &core[0]);
	atomic_init(&b.done, 0);
	start_thread(&th, bg_ckpt_main, &b);
	out->during = pull_for(&u, 1e300, &b.done, &out->core_during);
	pthread_join(th, NULL);
	out->alone_after = pull_for(&u, harness_now() + seconds, NULL, &core[1]);
	out->core_alone = (core[0] + core[1]) / 2;
	out->ck = b.run;
	harness_log("pull, 1 thread: %.2fM IDs/s alone (%.0f%% of a core), %.2fM during the "
		    "checkpoint (%.0f%% of a core), %.2fM alone again",
		    out->alone_before / 1e6, 100 * core[0], out->during / 1e6,
		    100 * out->core_during, out->alone_after / 1e6);
	free(u.out);
}

/* ---- Update pause ------------------------------------------------------ */

typedef struct step_times {
	double push0, update0, update1;
} step_times;

typedef struct trainer {
	emdb_db *db;
	uint32_t table, dim;
	const pool *p;
	float *grads;
	step_times *steps;
	uint64_t n_steps;
	atomic_int stop;
} trainer;

static void *trainer_main(void *arg)
{
	trainer *tr = arg;

	while (!atomic_load_explicit(&tr->stop, memory_order_relaxed)) {
		step_times *s = &tr->steps[tr->n_steps];
		int rc;

		if (tr->n_steps == PAUSE_MAX_STEPS)
			harness_die("update pause: more than %u steps; checkpoints this "
				    "slow need a larger PAUSE_MAX_STEPS", PAUSE_MAX_STEPS);
		s->push0 = harness_now();
		rc = emdb_push(tr->db, tr->table, pool_ids(tr->p, 0, tr->n_steps),
			       tr->p->batch, tr->dim, tr->grads);
		if (rc != EMDB_OK)
			preload_die_engine("emdb_push", rc);
		s->update0 = harness_now();
		rc = emdb_update(tr->db, tr->table, NULL);
		if (rc != EMDB_OK)
			preload_die_engine("emdb_update", rc);
		s->update1 = harness_now();
		tr->n_steps++;
	}
	return NULL;
}

static int overlaps(double a0, double a1, const ckpt_run *c)
{
	return a1 >= c->t0 && a0 <= c->t1;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Sort v[0..n) and give its largest value and 99th percentile. */
static void tail_of(double *v, uint64_t n, double *max, double *p99)
{
	if (!n)
		return;
	qsort(v, n, sizeof(double), cmp_double);
	*max = v[n - 1];
	*p99 = v[(n - 1) * 99 / 100];
}

static void attribute_steps(const trainer *tr, ckpt_pause_result *out)
{
	double *lat[CKPT_PAUSE_CKPTS + 1]; /* per checkpoint, then those of none */
	uint64_t n[CKPT_PAUSE_CKPTS + 1] = { 0 };

	for (int k = 0; k <= CKPT_PAUSE_CKPTS; k++) {
		lat[k] = malloc(sizeof(double) * (tr->n_steps + 1));
		if (!lat[k])
			harness_die("out of memory");
	}
	for (uint64_t i = 0; i < tr->n_steps; i++) {
		const step_times *s = &tr->steps[i];
		double upd = s->update1 - s->update0, push = s->update0 - s->push0;
		int any = 0;

		for (int k = 0; k < CKPT_PAUSE_CKPTS; k++) {
			if (overlaps(s->update0, s->update1, &out->ck[k])) {
				lat[k][n[k]++] = upd;
				any = 1;
			}
			if (overlaps(s->push0, s->update0, &out->ck[k]) && push > out->max_push_s[k])
				out->max_push_s[k] = push;
		}
		if (!any)
			lat[CKPT_PAUSE_CKPTS][n[CKPT_PAUSE_CKPTS]++] = upd;
	}
	for (int k = 0; k < CKPT_PAUSE_CKPTS; k++) {
		out->steps[k] = n[k];
		tail_of(lat[k], n[k], &out->max_update_s[k], &out->p99_update_s[k]);
	}
	out->base_steps = n[CKPT_PAUSE_CKPTS];
	tail_of(lat[CKPT_PAUSE_CKPTS], n[CKPT_PAUSE_CKPTS], &out->base_max_update_s,
		&out->base_p99_update_s);
	for (int k = 0; k <= CKPT_PAUSE_CKPTS; k++)
		free(lat[k]);
}

void wl_ckpt_pause(emdb_db *db, uint32_t table, uint32_t dim, emdb_store *st,
		   const pool *p, ckpt_pause_result *out)
{
	static const emdb_ckpt_kind kinds[CKPT_PAUSE_CKPTS] = { EMDB_CKPT_FULL,
								EMDB_CKPT_INCREMENTAL };
	trainer tr = { .db = db, .table = table, .dim = dim, .p = p };
	pthread_t th;

	memset(out, 0, sizeof(*out));
	tr.grads = wl_grads_new(p->batch, dim, 0);
	tr.steps = malloc(sizeof(step_times) * PAUSE_MAX_STEPS);
	if (!tr.steps)
		harness_die("out of memory");
	atomic_init(&tr.stop, 0);
	start_thread(&th, trainer_main, &tr);
	for (int k = 0; k < CKPT_PAUSE_CKPTS; k++) {
		harness_sleep(PAUSE_GAP_S);
		wl_ckpt_take(db, st, kinds[k], &out->ck[k]);
	}
	harness_sleep(PAUSE_GAP_S);
	atomic_store(&tr.stop, 1);
	pthread_join(th, NULL);
	attribute_steps(&tr, out);
	for (int k = 0; k < CKPT_PAUSE_CKPTS; k++)
		harness_log("update pause, %s checkpoint: longest Update %.3f ms (p99 %.3f ms), "
			    "longest Push %.3f ms over %llu steps; switch %.3f ms",
			    emdb_ckpt_kind_name(kinds[k]), out->max_update_s[k] * 1e3,
			    out->p99_update_s[k] * 1e3, out->max_push_s[k] * 1e3,
			    (unsigned long long)out->steps[k],
			    (double)out->ck[k].prog.switch_ns / 1e6);
	harness_log("update pause, no checkpoint: longest Update %.3f ms, p99 %.3f ms "
		    "over %llu steps", out->base_max_update_s * 1e3,
		    out->base_p99_update_s * 1e3, (unsigned long long)out->base_steps);
	free(tr.steps);
	free(tr.grads);
}
