/*
 * gpu_test.c - emdb-gpu-test: the CUDA tier against the host tier, bit for
 * bit, on a machine with a GPU.  Self-contained (libemdb with the static
 * CUDA runtime, no test framework), so tools/gpu-check.sh can build and
 * run it on a freshly lent machine.  Prints one line per check and then
 * "N passed, N failed"; exits 0 when every check passed (1 otherwise),
 * and 0 after a line starting "SKIP:" when no device or driver is
 * present (nothing was checked: tools/gpu-check.sh fails on that line).
 *
 * What it checks, at sizes a unit test does not reach (thousands of rows,
 * dim 64 and an odd dim):
 *   - initial values (zeros, uniform: bit-identical; normal: see below)
 *     and every optimizer's initial state;
 *   - several steps of each optimizer through scatter-add with duplicate
 *     rows in every batch, and through apply, rows and state bit-identical;
 *   - gather into host memory and into device memory (nothing crosses to
 *     the host), and refusal of a host pointer passed as device memory;
 *   - gather submitted and waited for (tier_gather_submit), into pinned
 *     memory (asynchronous) and pageable memory (staged);
 *   - with two or more devices, replicas reduced (NCCL) stay identical;
 *   - the engine's serving paths through the tier (gpu/gpu_test_serve.c).
 * The normal initializer evaluates log, cos and sin in double: glibc's and
 * CUDA's are both within an ulp of the exact value but not the same
 * functions, so a row may differ in its last float bit; the check allows
 * one float ulp and reports how many columns differed at all.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "db/init_math.h"
#include "db/tier.h"
#include "gpu/gpu_test.h"
#include "index/hash.h"

static int passed, failed;

void check(int ok, const char *fmt, const char *what, const char *detail)
{
	printf("%s ", ok ? "PASS" : "FAIL");
	printf(fmt, what, detail);
	printf("\n");
	if (ok)
		passed++;
	else
		failed++;
}

int to_device(void *dst, const void *src, size_t bytes)
{
	return cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice) == cudaSuccess &&
	       cudaDeviceSynchronize() == cudaSuccess;
}

static float val(uint64_t seed, uint64_t i)
{
	uint64_t x = dit_hash(seed * 1000003u + i);

	if (x % 13 == 0)
		return 0.0f;
	return ((float)(x % 200001) - 100000.0f) / 65536.0f;
}

typedef struct pair {
	tier *h, *d;
	uint32_t rf;
	size_t n;
	uint64_t *slots;
} pair;

static int open_pair(pair *p, emdb_opt_kind opt, uint32_t dim, size_t n, uint32_t replicas)
{
	tier_config c;

	memset(&c, 0, sizeof(c));
	memset(p, 0, sizeof(*p));
	c.dim = dim;
	c.opt = opt;
	c.rows_per_chunk = 1024;
	c.max_chunks = (uint32_t)((n + 1023) / 1024);
	c.max_pending = (uint32_t)n;
	c.replicas = replicas;
	if (tier_open(TIER_HOST, &c, &p->h) || tier_open(TIER_CUDA, &c, &p->d)) {
		printf("open: %s\n", emdb_last_error());
		return -1;
	}
	for (uint32_t k = 0; k < c.max_chunks; k++)
		if (tier_chunk_alloc(p->h, k) || tier_chunk_alloc(p->d, k)) {
			printf("chunk: %s\n", emdb_last_error());
			return -1;
		}
	p->rf = tier_row_floats(&c);
	p->n = n;
	p->slots = malloc(n * sizeof(uint64_t));
	for (size_t i = 0; i < n; i++) /* a permutation: rows out of order */
		p->slots[i] = (i * 7919u) % n;
	return 0;
}

static void close_pair(pair *p)
{
	tier_close(p->h);
	tier_close(p->d);
	free(p->slots);
}

/* Rows of every replica of the device tier equal the host's. */
static int same_rows(pair *p, uint32_t replicas, size_t *first_diff)
{
	size_t len = p->n * p->rf;
	float *a = malloc(len * sizeof(float)), *b = malloc(len * sizeof(float));
	int ok = a && b && !tier_get_rows(p->h, 0, p->slots, p->n, a);

	*first_diff = (size_t)-1;
	for (uint32_t r = 0; ok && r < replicas; r++) {
		ok = !tier_get_rows(p->d, r, p->slots, p->n, b);
		for (size_t k = 0; ok && k < len; k++)
			if (memcmp(&a[k], &b[k], sizeof(float))) {
				*first_diff = k;
				ok = 0;
			}
	}
	free(a);
	free(b);
	return ok;
}

static void test_optimizer(emdb_opt_kind kind, uint32_t dim, uint32_t replicas)
{
	pair p;
	emdb_optimizer opt;
	emdb_init init = { EMDB_INIT_UNIFORM, -0.05, 0.05 };
	char what[96], detail[96] = "";
	size_t n = 20000, diff;
	uint64_t *ids;
	int ok;

	snprintf(what, sizeof(what), "%s dim %u replicas %u", emdb_optimizer_name(kind), dim,
		 replicas);
	if (open_pair(&p, kind, dim, n, replicas)) {
		check(0, "%s: open%s", what, detail);
		return;
	}
	emdb_optimizer_defaults(kind, &opt);
	opt.lr = 0.03;
	opt.initial_accumulator = 0.1;
	opt.l1 = 0.001;
	opt.l2 = 0.01;
	ids = malloc(n * sizeof(uint64_t));
	for (size_t i = 0; i < n; i++)
		ids[i] = dit_hash(i + 1);
	ok = !tier_init_rows(p.h, p.slots, ids, n, &init, &opt, 42, 3) &&
	     !tier_init_rows(p.d, p.slots, ids, n, &init, &opt, 42, 3);
	check(ok && same_rows(&p, replicas, &diff), "%s: initial rows and state%s", what, "");
	for (uint64_t step = 1; step <= 4; step++) {
		size_t b = 6000;
		uint64_t *s = malloc(b * sizeof(uint64_t));
		float *g = malloc(b * dim * sizeof(float));
		emdb_opt_scalars sc;

		for (uint32_t r = 0; r < replicas; r++) {
			/* Skewed: a third of the batch hits 50 rows. */
			for (size_t i = 0; i < b; i++)
				s[i] = i % 3 == 0 ? dit_hash(i + step + r) % 50 : dit_hash(i * 31 + step + r) % n;
			for (size_t k = 0; k < b * dim; k++)
				g[k] = val(step * 10 + r, k);
			ok = ok && !tier_scatter_add(p.d, r, s, b, g);
			/* The host tier has one replica: the sum of all of them. */
			ok = ok && !tier_scatter_add(p.h, 0, s, b, g);
		}
		ok = ok && !tier_reduce(p.d);
		emdb_opt_scalars_for_step(&opt, step, dim, &sc);
		ok = ok && tier_step(p.h, &sc) == tier_step(p.d, &sc);
		free(s);
		free(g);
	}
	if (!ok)
		snprintf(detail, sizeof(detail), " (%s)", emdb_last_error());
	ok = ok && same_rows(&p, replicas, &diff);
	if (!ok && diff != (size_t)-1)
		snprintf(detail, sizeof(detail), " (first difference: row %zu column %zu)",
			 diff / p.rf, diff % p.rf);
	check(ok, "%s: 4 steps of scatter-add with duplicates%s", what, detail);

	/* apply: distinct rows with the caller's gradients. */
	{
		size_t b = 5000;
		float *g = malloc(b * dim * sizeof(float));
		emdb_opt_scalars sc;

		for (size_t k = 0; k < b * dim; k++)
			g[k] = val(99, k);
		emdb_opt_scalars_for_step(&opt, 5, dim, &sc);
		ok = !tier_apply(p.h, &sc, p.slots, b, g) && !tier_apply(p.d, &sc, p.slots, b, g) &&
		     same_rows(&p, replicas, &diff);
		check(ok, "%s: apply%s", what, "");
		free(g);
	}
	free(ids);
	close_pair(&p);
}

static void test_gather(uint32_t dim)
{
	pair p;
	emdb_optimizer opt;
	emdb_init init = { EMDB_INIT_UNIFORM, -1, 1 };
	size_t n = 50000, b = 30000;
	uint64_t *ids = malloc(n * sizeof(uint64_t)), *s = malloc(b * sizeof(uint64_t));
	float *a = malloc(b * dim * sizeof(float)), *h = malloc(b * dim * sizeof(float));
	float *dev = NULL;
	char what[64];
	int ok;

	snprintf(what, sizeof(what), "gather dim %u", dim);
	emdb_optimizer_defaults(EMDB_OPT_ADAGRAD, &opt);
	if (open_pair(&p, EMDB_OPT_ADAGRAD, dim, n, 1)) {
		check(0, "%s: open%s", what, "");
		return;
	}
	for (size_t i = 0; i < n; i++)
		ids[i] = i;
	for (size_t i = 0; i < b; i++)
		s[i] = dit_hash(i) % n; /* duplicates included */
	ok = !tier_init_rows(p.h, p.slots, ids, n, &init, &opt, 7, 1) &&
	     !tier_init_rows(p.d, p.slots, ids, n, &init, &opt, 7, 1) &&
	     !tier_gather(p.h, 0, s, b, a, false) && !tier_gather(p.d, 0, s, b, h, false) &&
	     !memcmp(a, h, b * dim * sizeof(float));
	check(ok, "%s: into host memory%s", what, "");
	ok = cudaMalloc((void **)&dev, b * dim * sizeof(float)) == cudaSuccess &&
	     !tier_gather(p.d, 0, s, b, dev, true) &&
	     cudaMemcpy(h, dev, b * dim * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess &&
	     !memcmp(a, h, b * dim * sizeof(float));
	check(ok, "%s: into device memory%s", what, "");
	check(tier_gather(p.d, 0, s, b, h, true) == EMDB_ERR_INVALID,
	      "%s: a host pointer as device memory is refused%s", what, "");
	{ /* Asynchronous: into pinned memory (an event), and into pageable
	   * memory (staged before submit returns); the host works between. */
		float *pin = tier_host_alloc(p.d, b * dim * sizeof(float));
		tier_job *j1 = NULL, *j2 = NULL;
		tier_stats t0, t1;

		tier_stats_get(p.d, &t0);
		memset(h, 0, b * dim * sizeof(float));
		ok = pin && !tier_gather_submit(p.d, 0, s, b, pin, &j1) &&
		     !tier_gather_submit(p.d, 0, s, b, h, &j2);
		if (j1)
			ok &= !tier_job_wait(p.d, j1);
		if (j2)
			ok &= !tier_job_wait(p.d, j2);
		tier_stats_get(p.d, &t1);
		ok = ok && !memcmp(a, pin, b * dim * sizeof(float)) &&
		     !memcmp(a, h, b * dim * sizeof(float)) && t1.jobs - t0.jobs == 2 &&
		     t1.jobs_async - t0.jobs_async == 1 && t1.host_pinned > 0;
		check(ok, "%s: submitted into pinned and pageable memory, then waited%s", what, "");
		tier_host_free(p.d, pin);
	}
	{
		uint64_t *ds = NULL, bad = (uint64_t)n + 5000; /* past the chunks */

		memset(h, 0, b * dim * sizeof(float));
		ok = cudaMalloc((void **)&ds, b * sizeof(uint64_t)) == cudaSuccess &&
		     to_device(ds, s, b * sizeof(uint64_t)) &&
		     !tier_gather_dev(p.d, 0, ds, b, dev) &&
		     cudaMemcpy(h, dev, b * dim * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess &&
		     !memcmp(a, h, b * dim * sizeof(float));
		check(ok, "%s: keys and output in device memory%s", what, "");
		ok = to_device(ds + 7, &bad, sizeof(bad)) &&
		     tier_gather_dev(p.d, 0, ds, b, dev) == EMDB_ERR_INVALID &&
		     cudaMemcpy(h, dev, b * dim * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess &&
		     isnan(h[7 * dim]) && !memcmp(a, h, 7 * dim * sizeof(float)) &&
		     !tier_gather_dev(p.d, 0, ds, 1, dev);
		check(ok, "%s: a device key past the chunks gives NaN and INVALID, the tier goes on%s",
		      what, "");
		cudaFree(ds);
	}
	cudaFree(dev);
	free(ids);
	free(s);
	free(a);
	free(h);
	close_pair(&p);
}

static void test_normal_init(uint32_t dim)
{
	pair p;
	emdb_optimizer opt;
	emdb_init init = { EMDB_INIT_NORMAL, 0.0, 0.01 };
	size_t n = 20000, inexact = 0, far = 0;
	uint64_t *ids = malloc(n * sizeof(uint64_t));
	float *a = malloc(n * dim * sizeof(float)), *b = malloc(n * dim * sizeof(float));
	char detail[96];
	int ok;

	emdb_optimizer_defaults(EMDB_OPT_SGD, &opt);
	if (open_pair(&p, EMDB_OPT_SGD, dim, n, 1)) {
		check(0, "normal init: open%s%s", "", "");
		return;
	}
	for (size_t i = 0; i < n; i++)
		ids[i] = dit_hash(i);
	ok = !tier_init_rows(p.h, p.slots, ids, n, &init, &opt, 5, 2) &&
	     !tier_init_rows(p.d, p.slots, ids, n, &init, &opt, 5, 2) &&
	     !tier_get_rows(p.h, 0, p.slots, n, a) && !tier_get_rows(p.d, 0, p.slots, n, b);
	for (size_t k = 0; ok && k < n * dim; k++)
		if (a[k] != b[k]) {
			inexact++;
			if (nextafterf(a[k], b[k]) != b[k])
				far++;
		}
	snprintf(detail, sizeof(detail), " (%zu of %zu columns not bit-identical, %zu over 1 ulp)",
		 inexact, n * dim, far);
	check(ok && !far, "normal init%s%s", "", detail);
	free(ids);
	free(a);
	free(b);
	close_pair(&p);
}

int main(void)
{
	static const emdb_opt_kind kinds[] = { EMDB_OPT_SGD, EMDB_OPT_ADAGRAD,
					       EMDB_OPT_ROWWISE_ADAGRAD, EMDB_OPT_ADAM,
					       EMDB_OPT_FTRL };
	char why[200];
	int ndev = 0;

	if (!tier_available(TIER_CUDA, why, sizeof(why))) {
		printf("SKIP: no GPU: %s; nothing was checked\n0 passed, 0 failed\n", why);
		return 0;
	}
	cudaGetDeviceCount(&ndev);
	printf("emdb-gpu-test: %d device(s)\n", ndev);
	for (size_t k = 0; k < 5; k++) {
		test_optimizer(kinds[k], 64, 1);
		test_optimizer(kinds[k], 13, 1);
		if (ndev >= 2)
			test_optimizer(kinds[k], 64, 2);
	}
	test_gather(64);
	test_gather(13);
	test_normal_init(64);
	gpu_test_serve();
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
