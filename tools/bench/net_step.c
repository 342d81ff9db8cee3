/*
 * net_step.c - synchronous steps over the network (see net_step.h).
 *
 * Design
 *   The harness's timed loop cannot run steps: its threads stop on their
 *   own clocks, and a worker left waiting in a step whose partner has
 *   stopped would wait for ever.  So each repetition here runs a fixed
 *   number of steps on every worker, sized from the first repetition to
 *   take about seconds / 6, and is timed from the first worker's start to
 *   the last one's end.  The two sides alternate, emdb's first.
 *
 * Invariants
 *   1. Every worker runs the same number of steps in a repetition, so a
 *      step never waits for a worker that has finished.
 *   2. Both sides push the same batches with the same gradients.
 */
#include "tools/bench/net_step.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <emdb/client.h>

#include "tools/bench/harness.h"
#include "tools/bench/net_wl.h"

#define STEP_REPS 3
#define STEP_CALIBRATE 20 /* steps of the sizing run */

typedef struct step_run {
	emdb_client **c;
	uint32_t table, dim;
	const pool *p;
	const float *grads;
	unsigned workers;
	int peer;
	uint64_t steps, first;
	pthread_barrier_t bar;
} step_run;

typedef struct step_worker {
	step_run *r;
	unsigned t;
	pthread_t th;
} step_worker;

static void *step_main(void *arg)
{
	step_worker *w = arg;
	step_run *r = w->r;
	emdb_client *c = r->c[w->t];
	for (uint64_t s = r->first; s < r->first + r->steps; s++) {
		int rc = emdb_client_push(c, r->table, pool_ids(r->p, w->t, s), r->p->batch, r->dim, r->grads);
		if (rc != EMDB_OK)
			net_wl_die("emdb_client_push", rc);
		if (!r->peer) {
			rc = emdb_client_update_sync(c, r->table, r->workers, NULL);
			if (rc != EMDB_OK)
				net_wl_die("emdb_client_update_sync", rc);
			continue;
		}
		pthread_barrier_wait(&r->bar);
		if (w->t == 0 && (rc = emdb_client_update(c, r->table, NULL)) != EMDB_OK)
			net_wl_die("emdb_client_update", rc);
		pthread_barrier_wait(&r->bar);
	}
	return NULL;
}

/* One repetition: r->steps steps on every worker; returns its seconds. */
static double run_steps(step_run *r)
{
	step_worker w[HARNESS_MAX_THREADS];
	double t0 = harness_now();
	for (unsigned t = 0; t < r->workers; t++) {
		w[t] = (step_worker){ r, t, 0 };
		if (pthread_create(&w[t].th, NULL, step_main, &w[t]) != 0)
			harness_die("cannot start a step worker");
	}
	for (unsigned t = 0; t < r->workers; t++)
		pthread_join(w[t].th, NULL);
	r->first += r->steps;
	return harness_now() - t0;
}

void net_step_measure(const char *uri, uint32_t table, uint32_t dim, const pool *p, unsigned workers,
		      double seconds, net_step_result *out)
{
	emdb_client_options opt = EMDB_CLIENT_OPTIONS_INIT;
	emdb_client *c[HARNESS_MAX_THREADS];
	size_t n = p->batch * dim;
	float *grads = malloc(n * sizeof(float));
	step_run r = { .c = c, .table = table, .dim = dim, .p = p, .grads = grads, .workers = workers };

	if (!grads || workers < 2 || workers > p->threads || workers > HARNESS_MAX_THREADS)
		harness_die("step: %u workers over a pool of %u threads", workers, p->threads);
	for (size_t i = 0; i < n; i++)
		grads[i] = 1e-6f;
	opt.timeout_ms = 0;
	for (unsigned t = 0; t < workers; t++) {
		int rc = emdb_client_connect(uri, &opt, &c[t]);
		if (rc != EMDB_OK)
			net_wl_die("connect", rc);
	}
	pthread_barrier_init(&r.bar, NULL, workers);

	r.steps = STEP_CALIBRATE;
	double took = run_steps(&r);
	r.steps = (uint64_t)((double)STEP_CALIBRATE * seconds / 6 / (took > 1e-6 ? took : 1e-6));
	if (r.steps < STEP_CALIBRATE)
		r.steps = STEP_CALIBRATE;
	memset(out, 0, sizeof(*out));
	out->workers = workers;
	for (int rep = 0; rep < STEP_REPS; rep++)
		for (r.peer = 0; r.peer < 2; r.peer++) {
			double rate = (double)r.steps / run_steps(&r);
			double *best = r.peer ? &out->peer_steps_per_sec : &out->steps_per_sec;
			if (rate > *best)
				*best = rate;
		}
	harness_log("step, %u workers: %.0f steps/s with emdb_client_update_sync, %.0f with a barrier "
		    "in the trainer and one Update",
		    workers, out->steps_per_sec, out->peer_steps_per_sec);
	pthread_barrier_destroy(&r.bar);
	for (unsigned t = 0; t < workers; t++)
		emdb_client_close(c[t]);
	free(grads);
}
