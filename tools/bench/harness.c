/*
 * harness.c - timed, multi-threaded repetition of a step function.
 *
 * Design
 *   Workers run batches back to back and check a stop flag between batches;
 *   the main thread sleeps for the repetition's length and then raises the
 *   flag, so it takes no core from the workers (the machine may have only
 *   as many cores as workers).  Each worker reads CLOCK_MONOTONIC after the
 *   start barrier and after its last batch, so a repetition's time runs from
 *   the first start to the last end and includes the partial last batches:
 *   a thread that lags behind lowers the aggregate instead of being hidden.
 *
 *   The figure is the best of HARNESS_REPS repetitions: on a shared machine
 *   other tenants only ever slow a run down, so the fastest repetition is
 *   the closest to what the code can do; the median is kept beside it.
 *
 * Invariants
 *   1. The step function of a thread is never called after harness_measure
 *      returns, and no thread is left running.
 *   2. iter runs 0, 1, 2, ... per thread over the warm-up and all reps.
 *
 *   Before and after each measurement it times a cache line's round trip
 *   between CPUs 0 and 1, so a run says which of this VM's two placements
 *   of its virtual CPUs (near or far apart) each figure was taken under.
 */
#define _GNU_SOURCE
#include "tools/bench/harness.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static int quiet;

double harness_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double harness_cpu_thread(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double harness_cpu_process(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

void harness_die(const char *fmt, ...)
{
	va_list ap;
	fputs("emdb-bench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

void harness_set_quiet(int q)
{
	quiet = q;
}

void harness_log(const char *fmt, ...)
{
	va_list ap;
	if (quiet)
		return;
	fputs("emdb-bench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* ---- one repetition ---------------------------------------------------- */

typedef struct rep_shared {
	harness_step_fn fn;
	void *ctx;
	pthread_barrier_t start;
	int stop; /* atomic */
} rep_shared;

typedef struct rep_worker {
	rep_shared *sh;
	unsigned t;
	pthread_t tid;
	uint64_t iter;  /* carried over between reps */
	uint64_t units; /* this rep */
	double t0, t1;
} __attribute__((aligned(64))) rep_worker; /* no false sharing of counters */

static void *rep_main(void *arg)
{
	rep_worker *w = arg;
	rep_shared *sh = w->sh;
	uint64_t units = 0;

	pthread_barrier_wait(&sh->start);
	w->t0 = harness_now();
	while (!__atomic_load_n(&sh->stop, __ATOMIC_RELAXED))
		units += sh->fn(sh->ctx, w->t, w->iter++);
	w->t1 = harness_now();
	w->units = units;
	return NULL;
}

void harness_sleep(double sec)
{
	struct timespec ts;
	ts.tv_sec = (time_t)sec;
	ts.tv_nsec = (long)((sec - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* Returns the aggregate rate; per-thread rates go to per_thread. */
static double run_rep(rep_shared *sh, rep_worker *ws, unsigned threads,
		      double sec, double *per_thread, uint64_t *units_out)
{
	double first = 0, last = 0;
	uint64_t units = 0;

	__atomic_store_n(&sh->stop, 0, __ATOMIC_RELAXED);
	if (pthread_barrier_init(&sh->start, NULL, threads + 1) != 0)
		harness_die("pthread_barrier_init failed");
	for (unsigned t = 0; t < threads; t++) {
		ws[t].sh = sh;
		ws[t].t = t;
		if (pthread_create(&ws[t].tid, NULL, rep_main, &ws[t]) != 0)
			harness_die("cannot start thread %u of %u", t + 1, threads);
	}
	pthread_barrier_wait(&sh->start);
	harness_sleep(sec);
	__atomic_store_n(&sh->stop, 1, __ATOMIC_RELAXED);
	for (unsigned t = 0; t < threads; t++)
		pthread_join(ws[t].tid, NULL);
	pthread_barrier_destroy(&sh->start);

	for (unsigned t = 0; t < threads; t++) {
		if (t == 0 || ws[t].t0 < first)
			first = ws[t].t0;
		if (t == 0 || ws[t].t1 > last)
			last = ws[t].t1;
		units += ws[t].units;
		if (per_thread)
			per_thread[t] = (double)ws[t].units / (ws[t].t1 - ws[t].t0);
	}
	*units_out = units;
	return (double)units / (last - first);
}

#define RTT_ROUNDS 20000

typedef struct rtt_line {
	uint64_t v __attribute__((aligned(64))); /* atomic */
} rtt_line;

static int pin_to(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void *rtt_peer(void *arg)
{
	rtt_line *l = arg;
	(void)pin_to(1); /* unpinned, it still answers: the probe must end */
	for (uint64_t i = 0; i < RTT_ROUNDS; i++) {
		while (__atomic_load_n(&l->v, __ATOMIC_ACQUIRE) != 2 * i + 1)
			;
		__atomic_store_n(&l->v, 2 * i + 2, __ATOMIC_RELEASE);
	}
	return NULL;
}

double harness_core_rtt_ns(void)
{
	static rtt_line line;
	cpu_set_t old;
	pthread_t peer;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2 ||
	    pthread_getaffinity_np(pthread_self(), sizeof(old), &old) != 0 || !CPU_ISSET(0, &old) ||
	    !CPU_ISSET(1, &old) || pin_to(0) != 0)
		return 0;
	__atomic_store_n(&line.v, 0, __ATOMIC_RELEASE);
	if (pthread_create(&peer, NULL, rtt_peer, &line) != 0) {
		pthread_setaffinity_np(pthread_self(), sizeof(old), &old);
		return 0;
	}
	double t0 = harness_now();
	for (uint64_t i = 0; i < RTT_ROUNDS; i++) {
		__atomic_store_n(&line.v, 2 * i + 1, __ATOMIC_RELEASE);
		while (__atomic_load_n(&line.v, __ATOMIC_ACQUIRE) != 2 * i + 2)
			;
	}
	double ns = (harness_now() - t0) * 1e9 / RTT_ROUNDS;
	pthread_join(peer, NULL);
	pthread_setaffinity_np(pthread_self(), sizeof(old), &old);
	return ns;
}

void harness_rtt_span(const harness_result *r, double *lo, double *hi)
{
	for (int k = 0; k < 2; k++) {
		double x = r->rtt_ns[k];
		if (x > 0 && (*lo == 0 || x < *lo))
			*lo = x;
		if (x > *hi)
			*hi = x;
	}
}

int harness_rtt_far(const harness_result *r, double lo)
{
	return r->rtt_ns[0] > 2 * lo || r->rtt_ns[1] > 2 * lo;
}

void harness_measure(unsigned threads, double seconds, harness_step_fn fn,
		     void *ctx, harness_result *out)
{
	rep_shared sh = { .fn = fn, .ctx = ctx };
	rep_worker *ws;
	double per[HARNESS_MAX_THREADS];
	double warm = seconds / 8 < 0.25 ? seconds / 8 : 0.25;
	uint64_t units;

	if (threads == 0 || threads > HARNESS_MAX_THREADS)
		harness_die("thread count %u out of range 1..%d", threads,
			    HARNESS_MAX_THREADS);
	ws = aligned_alloc(64, sizeof(*ws) * threads);
	if (!ws)
		harness_die("out of memory");
	memset(ws, 0, sizeof(*ws) * threads);
	memset(out, 0, sizeof(*out));
	out->threads = threads;
	out->rtt_ns[0] = harness_core_rtt_ns();

	run_rep(&sh, ws, threads, warm, NULL, &units);
	for (int r = 0; r < HARNESS_REPS; r++) {
		double rate = run_rep(&sh, ws, threads, seconds / HARNESS_REPS,
				      per, &units);
		out->reps[r] = rate;
		out->units += units;
		if (rate > out->best) {
			out->best = rate;
			memcpy(out->per_thread, per, sizeof(double) * threads);
		}
	}
	harness_set_median(out);
	out->rtt_ns[1] = harness_core_rtt_ns();
	free(ws);
}

void harness_set_median(harness_result *out)
{
	double sorted[HARNESS_REPS];

	memcpy(sorted, out->reps, sizeof(sorted));
	for (int i = 1; i < HARNESS_REPS; i++)
		for (int j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
			double x = sorted[j];
			sorted[j] = sorted[j - 1];
			sorted[j - 1] = x;
		}
	out->median = sorted[HARNESS_REPS / 2];
}

/* ---- one-shot parallel jobs ------------------------------------------- */

typedef struct job {
	harness_job_fn fn;
	void *ctx;
	unsigned t;
	pthread_t tid;
} job;

static void *job_main(void *arg)
{
	job *j = arg;
	j->fn(j->ctx, j->t);
	return NULL;
}

void harness_parallel(unsigned threads, harness_job_fn fn, void *ctx)
{
	job js[HARNESS_MAX_THREADS];

	if (threads <= 1) {
		fn(ctx, 0);
		return;
	}
	if (threads > HARNESS_MAX_THREADS)
		harness_die("thread count %u out of range", threads);
	for (unsigned t = 0; t < threads; t++) {
		js[t] = (job){ fn, ctx, t, 0 };
		if (pthread_create(&js[t].tid, NULL, job_main, &js[t]) != 0)
			harness_die("cannot start thread %u of %u", t + 1, threads);
	}
	for (unsigned t = 0; t < threads; t++)
		pthread_join(js[t].tid, NULL);
}
