/*
 * step_bench.c - the training step of client/python/bench/bench_step.py
 * through the C client alone, for the side-by-side figures.
 *
 *   emdb-step-bench URI STEPS BATCH DIM BAG VOCAB OPTIMIZER
 *
 * It creates table "bench_c" (dim DIM, the optimizer's defaults), inserts
 * IDs 0..VOCAB-1 first (so no step inserts) and runs WARMUP steps, then
 * times STEPS steps of
 * BATCH IDs drawn uniformly from the vocabulary in bags of BAG IDs: a
 * pooled Pull (sum), a pooled Push of a gradient per bag, an Update, all
 * synchronous, as emdb.torch.EmbeddingBag's forward, backward and
 * emdb.torch.Step.step() make them.  It prints one JSON line with the mean
 * step time.  The table is dropped at the end.
 *
 * Invariants:
 *   1. The IDs of every step are drawn before the clock starts.
 *   2. The same calls, in the same order, as the Python step: nothing more.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <emdb/client.h>

/* Steps run before the clock starts (the first Pushes map the gradient
 * accumulators); bench_step.py runs as many. */
#define WARMUP 20

static double clock_s(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int fail(const char *what, int rc)
{
	fprintf(stderr, "emdb-step-bench: %s: %s (%s)\n", what, emdb_err_name(rc), emdb_client_last_error());
	return 1;
}

static emdb_opt_kind opt_kind(const char *name)
{
	for (int k = 1; k < 64; k++) {
		const char *n = emdb_optimizer_name((emdb_opt_kind)k);
		if (n && strcmp(n, name) == 0)
			return (emdb_opt_kind)k;
	}
	return (emdb_opt_kind)0;
}

int main(int argc, char **argv)
{
	if (argc != 8) {
		fprintf(stderr, "usage: emdb-step-bench URI STEPS BATCH DIM BAG VOCAB OPTIMIZER\n");
		return 2;
	}
	const char *uri = argv[1];
	long steps = atol(argv[2]);
	size_t batch = (size_t)atol(argv[3]);
	uint32_t dim = (uint32_t)atol(argv[4]);
	size_t bag = (size_t)atol(argv[5]);
	uint64_t vocab = (uint64_t)atoll(argv[6]);
	emdb_opt_kind kind = opt_kind(argv[7]);
	if (steps < 1 || batch < 1 || dim < 1 || bag < 1 || batch % bag || vocab < 1 || !kind) {
		fprintf(stderr, "emdb-step-bench: bad arguments (BAG must divide BATCH; optimizer a name)\n");
		return 2;
	}
	size_t bags = batch / bag;
	uint64_t *ids = malloc((size_t)steps * batch * sizeof(*ids));
	uint64_t *offsets = malloc((bags + 1) * sizeof(*offsets));
	float *out = malloc(bags * dim * sizeof(float));
	float *grads = malloc(bags * dim * sizeof(float));
	uint64_t *all = malloc(65536 * sizeof(*all));
	float *rows = malloc((size_t)65536 * dim * sizeof(float));
	if (!ids || !offsets || !out || !grads || !all || !rows) {
		fprintf(stderr, "emdb-step-bench: out of memory\n");
		return 1;
	}
	uint64_t x = 88172645463325252ull;
	for (size_t i = 0; i < (size_t)steps * batch; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		ids[i] = x % vocab;
	}
	for (size_t b = 0; b <= bags; b++)
		offsets[b] = b * bag;
	for (size_t i = 0; i < bags * dim; i++)
		grads[i] = 1e-3f * (float)(i % 7);

	emdb_client *c;
	int rc = emdb_client_connect(uri, NULL, &c);
	if (rc)
		return fail("connect", rc);
	emdb_table_config cfg = EMDB_TABLE_CONFIG_INIT;
	strcpy(cfg.name, "bench_c");
	cfg.dim = dim;
	emdb_optimizer_defaults(kind, &cfg.optimizer);
	cfg.init = (emdb_init){ EMDB_INIT_UNIFORM, -0.05, 0.05 };
	uint32_t t;
	if ((rc = emdb_client_table_create(c, &cfg, &t)))
		return fail("table_create", rc);
	for (uint64_t lo = 0; lo < vocab; lo += 65536) {
		size_t n = vocab - lo < 65536 ? (size_t)(vocab - lo) : 65536;
		for (size_t i = 0; i < n; i++)
			all[i] = lo + i;
		if ((rc = emdb_client_pull(c, t, all, n, dim, rows)))
			return fail("pull (insert)", rc);
	}
	double t0 = 0, c0 = 0;
	for (long s = -WARMUP; s < steps; s++) {
		if (s == 0) {
			t0 = clock_s(CLOCK_MONOTONIC);
			c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
		}
		/* Warm-up steps take the last batches (any STEPS, as bench_step.py). */
		const uint64_t *b = ids + (size_t)((s % steps + steps) % steps) * batch;
		if ((rc = emdb_client_pull_bags(c, t, b, batch, offsets, bags, EMDB_POOL_SUM, dim, out)))
			return fail("pull_bags", rc);
		if ((rc = emdb_client_push_bags(c, t, b, batch, offsets, bags, EMDB_POOL_SUM, dim, grads)))
			return fail("push_bags", rc);
		if ((rc = emdb_client_update(c, t, NULL)))
			return fail("update", rc);
	}
	double dt = clock_s(CLOCK_MONOTONIC) - t0, dc = clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
	printf("{\"side\":\"c\",\"uri\":\"%s\",\"steps\":%ld,\"batch\":%zu,\"dim\":%u,\"bag\":%zu,"
	       "\"step_us\":%.1f,\"cpu_us\":%.1f}\n", uri, steps, batch, dim, bag, dt / (double)steps * 1e6,
	       dc / (double)steps * 1e6);
	emdb_client_table_drop(c, t);
	emdb_client_close(c);
	free(ids);
	free(offsets);
	free(out);
	free(grads);
	free(all);
	free(rows);
	return 0;
}
