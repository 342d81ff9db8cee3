/*
 * harness.h - how emdb-bench times things: T threads run the same step
 * function concurrently for a fixed time, a warm-up first, then three
 * repetitions; the best repetition is the figure.
 */
#ifndef EMDB_BENCH_HARNESS_H
#define EMDB_BENCH_HARNESS_H

#include <stdint.h>

#define HARNESS_MAX_THREADS 256
#define HARNESS_REPS 3

/* One unit of work on thread t (0..threads-1): one batch, usually.  iter
 * counts the calls on that thread within one harness_measure, warm-up
 * included, from 0.  Returns the IDs (or rows, reads) it processed. */
typedef uint64_t (*harness_step_fn)(void *ctx, unsigned t, uint64_t iter);

typedef struct harness_result {
	unsigned threads;
	double best;                      /* aggregate per second, best rep */
	double median;                    /* aggregate per second, median rep */
	double reps[HARNESS_REPS];        /* aggregate per second, in run order */
	double per_thread[HARNESS_MAX_THREADS]; /* per second, of the best rep */
	uint64_t units;                   /* processed in all reps, warm-up excluded */
	double rtt_ns[2];                 /* harness_core_rtt_ns before and after */
} harness_result;

/* Nanoseconds for a cache line to go from CPU 0 to CPU 1 and back (two
 * threads pinned there, bouncing one line 20000 times); 0 with fewer than
 * two CPUs.  On a VM it tells where the host put the virtual CPUs: on this
 * project's machines about 50-70 ns, or 340-370 ns at times, and then every
 * figure that passes data between threads drops while the others do not. */
double harness_core_rtt_ns(void);

/* Widen [*lo, *hi] (start both at 0) by r's two round trips, those not
 * taken (0) left out. */
void harness_rtt_span(const harness_result *r, double *lo, double *hi);

/* Whether the CPUs were far apart around r: a round trip above twice lo,
 * the nearest of the run. */
int harness_rtt_far(const harness_result *r, double lo);

/* Seconds since an arbitrary point, CLOCK_MONOTONIC. */
double harness_now(void);

/* Sleep `sec` seconds (fractions too), resuming after signals. */
void harness_sleep(double sec);

/* CPU seconds (user + system) of the calling thread, and of the process. */
double harness_cpu_thread(void);
double harness_cpu_process(void);

/* Run fn on `threads` threads: a warm-up of min(0.25 s, seconds / 8), then
 * HARNESS_REPS repetitions of seconds / HARNESS_REPS each.  A repetition's
 * aggregate rate is the units of all threads over the time from the first
 * thread's start to the last thread's end.  Exits the process if a thread
 * cannot be started. */
void harness_measure(unsigned threads, double seconds, harness_step_fn fn,
		     void *ctx, harness_result *out);

/* Set out->median from out->reps. */
void harness_set_median(harness_result *out);

/* Run fn(ctx, t) once on each of `threads` threads and wait for all: for
 * parallel set-up (drawing pools, preloading tables). */
typedef void (*harness_job_fn)(void *ctx, unsigned t);
void harness_parallel(unsigned threads, harness_job_fn fn, void *ctx);

/* Print "emdb-bench: <message>" to stderr and exit with status 1. */
void harness_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Progress line on stderr (unless quiet was set). */
void harness_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void harness_set_quiet(int quiet);

#endif
