/*
 * gpu_bench.cu - emdb-gpu-bench: the CUDA tier's figures as ratios to the
 * device's own bandwidth, measured in the same run (docs/gpu.md):
 *
 *   gather      tier_gather_dev of N rows of dim 64, keys in random order
 *               and output both in device memory, N = 4096 .. 1M, against
 *               cudaMemcpy device-to-device of the same bytes (read +
 *               written); goal >= 0.60.  Also keys/s, and tier_gather with
 *               the keys coming from host memory, for information.
 *   staging     tier_put_rows of N whole rows from pinned host memory
 *               against cudaMemcpy host-to-device of the same bytes from
 *               pinned memory; goal >= 0.70.  From pageable memory too,
 *               for information.
 *   optimizer   each rule's kernel (gpu/tier_kernels.cuh) over N rows in
 *               random order against a bare kernel that reads and writes
 *               the same bytes through the same slot indirection and does
 *               no arithmetic; goal >= 0.60.
 *
 * Every figure is the best of REPS runs after a warm-up.  A benchmark
 * prints figures; it asserts nothing (tools/gpu-check.sh prints them).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>

#include <emdb/error.h>

#include "db/tier.h"
#include "index/hash.h"
#include "gpu/tier_kernels.cuh"

#define DIM 64
#define REPS 7

#define CUDA_OK(call)                                                                    \
	do {                                                                             \
		cudaError_t e_ = (call);                                                 \
		if (e_ != cudaSuccess) {                                                 \
			fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__,               \
				cudaGetErrorString(e_));                                 \
			exit(1);                                                         \
		}                                                                        \
	} while (0)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Best of REPS of a host-timed, synchronous operation. */
#define BEST(secs, op)                                                \
	do {                                                          \
		op;                                                   \
		secs = 1e30;                                          \
		for (int rep_ = 0; rep_ < REPS; rep_++) {             \
			double t0_ = now_s(), d_;                     \
			op;                                           \
			d_ = now_s() - t0_;                           \
			if (d_ < secs)                                \
				secs = d_;                            \
		}                                                     \
	} while (0)

static tier *open_tier(emdb_opt_kind opt, size_t n)
{
	tier_config c;
	tier *t;

	memset(&c, 0, sizeof(c));
	c.dim = DIM;
	c.opt = opt;
	c.rows_per_chunk = 65536;
	c.max_chunks = (uint32_t)((n + 65535) / 65536);
	c.max_pending = 1;
	c.replicas = 1;
	if (tier_open(TIER_CUDA, &c, &t)) {
		fprintf(stderr, "open: %s\n", emdb_last_error());
		exit(1);
	}
	for (uint32_t k = 0; k < c.max_chunks; k++)
		if (tier_chunk_alloc(t, k)) {
			fprintf(stderr, "chunk: %s\n", emdb_last_error());
			exit(1);
		}
	return t;
}

static double copy_secs(void *dst, const void *src, size_t bytes, cudaMemcpyKind k)
{
	double s;

	BEST(s, CUDA_OK(cudaMemcpy(dst, src, bytes, k)); CUDA_OK(cudaDeviceSynchronize()));
	return s;
}

static void bench_gather(void)
{
	static const size_t sizes[] = { 4096, 65536, 1u << 20 };
	size_t table = 1u << 21;
	tier *t = open_tier(EMDB_OPT_SGD, table);
	uint64_t *slots = (uint64_t *)malloc(sizes[2] * sizeof(uint64_t)), *ds;
	float *out, *src;

	CUDA_OK(cudaMalloc((void **)&out, sizes[2] * DIM * sizeof(float)));
	CUDA_OK(cudaMalloc((void **)&src, sizes[2] * DIM * sizeof(float)));
	CUDA_OK(cudaMalloc((void **)&ds, sizes[2] * sizeof(uint64_t)));
	for (size_t i = 0; i < sizes[2]; i++)
		slots[i] = dit_hash(i) % table;
	CUDA_OK(cudaMemcpy(ds, slots, sizes[2] * sizeof(uint64_t), cudaMemcpyHostToDevice));
	/* the copy may still be in flight, and the tier's stream does not
	 * wait for the legacy one */
	CUDA_OK(cudaDeviceSynchronize());
	printf("gather, dim %d, table of %zu rows, random keys, into device memory:\n", DIM, table);
	for (size_t k = 0; k < 3; k++) {
		size_t n = sizes[k], bytes = n * DIM * sizeof(float);
		double g, h, m;

		BEST(g, if (tier_gather_dev(t, 0, ds, n, out)) {
			fprintf(stderr, "gather_dev: %s\n", emdb_last_error());
			exit(1);
		});
		BEST(h, if (tier_gather(t, 0, slots, n, out, true)) {
			fprintf(stderr, "gather: %s\n", emdb_last_error());
			exit(1);
		});
		m = copy_secs(out, src, bytes, cudaMemcpyDeviceToDevice);
		printf("  %8zu rows, keys on the device: %7.1f GB/s, %6.3f G keys/s; d2d copy %7.1f GB/s;"
		       " ratio %.2f (goal >= 0.60)\n", n, 2.0 * bytes / g / 1e9, n / g / 1e9,
		       2.0 * bytes / m / 1e9, m / g);
		printf("  %8zu rows, keys from the host: %7.1f GB/s, %6.3f G keys/s (for information)\n",
		       n, 2.0 * bytes / h / 1e9, n / h / 1e9);
	}
	CUDA_OK(cudaFree(out));
	CUDA_OK(cudaFree(src));
	CUDA_OK(cudaFree(ds));
	free(slots);
	tier_close(t);
}

/* Whole rows put into their slots from pinned memory, slots pinned too,
 * as the engine passes them (db/hot.c's resync, db/hot_serve.c's
 * Prefetch staging: tier_host_alloc), against a plain pinned copy of the
 * rows; with pageable slots, and from pageable memory, for information. */
static void bench_staging(void)
{
	size_t n = 1u << 20;
	tier *t = open_tier(EMDB_OPT_ADAGRAD, n);
	uint32_t rf = 2 * DIM;
	size_t bytes = n * rf * sizeof(float);
	uint64_t *slots = (uint64_t *)malloc(n * sizeof(uint64_t)), *pslots;
	float *pinned, *pageable = (float *)malloc(bytes), *dev;
	double s, sps, sp, m;

	CUDA_OK(cudaMallocHost((void **)&pinned, bytes));
	CUDA_OK(cudaMallocHost((void **)&pslots, n * sizeof(uint64_t)));
	CUDA_OK(cudaMalloc((void **)&dev, bytes));
	for (size_t i = 0; i < n; i++)
		slots[i] = pslots[i] = i;
	for (size_t k = 0; k < n * rf; k++)
		pinned[k] = pageable[k] = (float)(k % 1000) * 0.001f;
	BEST(s, if (tier_put_rows(t, pslots, n, pinned)) {
		fprintf(stderr, "put: %s\n", emdb_last_error());
		exit(1);
	});
	BEST(sps, if (tier_put_rows(t, slots, n, pinned)) exit(1));
	BEST(sp, if (tier_put_rows(t, slots, n, pageable)) exit(1));
	m = copy_secs(dev, pinned, bytes, cudaMemcpyHostToDevice);
	printf("host-to-device staging of %zu rows (%zu MB, adagrad rows):\n", n, bytes >> 20);
	printf("  from pinned memory %6.1f GB/s; pinned copy %6.1f GB/s; ratio %.2f (goal >= 0.70)\n",
	       bytes / s / 1e9, bytes / m / 1e9, m / s);
	printf("  the same with pageable slots %6.1f GB/s (ratio %.2f, for information)\n",
	       bytes / sps / 1e9, m / sps);
	printf("  from pageable memory %6.1f GB/s (ratio %.2f, for information)\n", bytes / sp / 1e9,
	       m / sp);
	CUDA_OK(cudaFreeHost(pinned));
	CUDA_OK(cudaFreeHost(pslots));
	CUDA_OK(cudaFree(dev));
	free(pageable);
	free(slots);
	tier_close(t);
}

/* Milliseconds between events around launch(), on the legacy stream. */
template <class F> static float kernel_ms(cudaEvent_t e0, cudaEvent_t e1, F launch)
{
	float ms;

	CUDA_OK(cudaEventRecord(e0));
	launch();
	CUDA_OK(cudaEventRecord(e1));
	CUDA_OK(cudaEventSynchronize(e1));
	CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
	return ms;
}

/* Reads and writes what a rule of `state` floats of state per column
 * does, through the same slot indirection, with no arithmetic. */
__global__ static void bare_step(tk_rows R, uint32_t state_cols, const uint64_t *slots, uint64_t n,
				 const float *grads)
{
	TK_FOR(k, n * R.dim) {
		uint64_t i;
		uint32_t c;
		float *w;

		tk_divmod(k, R.dim, &i, &c);
		w = tk_row(R, slots[i]) + c;
		float g = grads[k];

		w[0] = g + w[0];
		for (uint32_t s = 1; s <= state_cols; s++)
			w[s * R.dim] = w[s * R.dim] + g;
	}
}

static void bench_optimizers(void)
{
	static const emdb_opt_kind kinds[] = { EMDB_OPT_SGD, EMDB_OPT_ADAGRAD,
					       EMDB_OPT_ROWWISE_ADAGRAD, EMDB_OPT_ADAM,
					       EMDB_OPT_FTRL };
	size_t n = 1u << 20, table = 1u << 21;
	uint64_t *slots = (uint64_t *)malloc(n * sizeof(uint64_t)), *ds;
	float *dg, **dir, *mem;
	size_t stride = 3 * DIM; /* room for the largest row (Adam, FTRL) */
	cudaEvent_t e0, e1;

	/* One chunk of table rows, at the largest stride. */
	CUDA_OK(cudaMalloc((void **)&mem, table * stride * sizeof(float)));
	CUDA_OK(cudaMemset(mem, 0, table * stride * sizeof(float)));
	CUDA_OK(cudaMalloc((void **)&dir, sizeof(float *)));
	CUDA_OK(cudaMemcpy(dir, &mem, sizeof(float *), cudaMemcpyHostToDevice));
	CUDA_OK(cudaMalloc((void **)&ds, n * sizeof(uint64_t)));
	CUDA_OK(cudaMalloc((void **)&dg, n * DIM * sizeof(float)));
	CUDA_OK(cudaMemset(dg, 0, n * DIM * sizeof(float)));
	{ /* distinct rows in random order: a random permutation's prefix */
		uint64_t *perm = (uint64_t *)malloc(table * sizeof(uint64_t));

		for (size_t i = 0; i < table; i++)
			perm[i] = i;
		for (size_t i = table - 1; i > 0; i--) {
			size_t j = dit_hash(i) % (i + 1);
			uint64_t x = perm[i];

			perm[i] = perm[j];
			perm[j] = x;
		}
		memcpy(slots, perm, n * sizeof(uint64_t));
		free(perm);
	}
	CUDA_OK(cudaMemcpy(ds, slots, n * sizeof(uint64_t), cudaMemcpyHostToDevice));
	CUDA_OK(cudaEventCreate(&e0));
	CUDA_OK(cudaEventCreate(&e1));
	printf("optimizer kernels, %zu distinct rows of dim %d in random order:\n", n, DIM);
	for (size_t k = 0; k < 5; k++) {
		tk_rows R;
		emdb_optimizer opt;
		emdb_opt_scalars sc;
		uint32_t sf = emdb_optimizer_state_floats(kinds[k], DIM);
		uint32_t state_cols = sf / DIM; /* row-wise: 0 columns, one float */
		float best_k = 1e30f, best_b = 1e30f, ms;

		R.dir = dir;
		R.rows_per_chunk = (uint32_t)table;
		R.rpc_shift = 21; /* table = 2^21 rows */
		R.n_chunks = 1;
		R.stride = (uint32_t)stride;
		R.dim = DIM;
		R.row_floats = DIM + sf;
		emdb_optimizer_defaults(kinds[k], &opt);
		emdb_opt_scalars_for_step(&opt, 1, DIM, &sc);
		/* the rule and the bare kernel alternate, repetition by repetition */
		for (int rep = 0; rep <= REPS; rep++) {
			ms = kernel_ms(e0, e1, [&] {
				if (kinds[k] == EMDB_OPT_ROWWISE_ADAGRAD)
					tk_step_rowwise<<<tk_rowwise_blocks(n, TK_ROWWISE_LANES),
							  TK_THREADS>>>(R, sc, ds, n, dg, TK_ROWWISE_LANES);
				else
					tk_step_cols<<<tk_blocks(n * DIM), TK_THREADS>>>(R, kinds[k], sc, ds,
											 n, dg);
			});
			if (rep && ms < best_k)
				best_k = ms;
			ms = kernel_ms(e0, e1, [&] {
				bare_step<<<tk_blocks(n * DIM), TK_THREADS>>>(R, state_cols, ds, n, dg);
			});
			if (rep && ms < best_b)
				best_b = ms;
		}
		CUDA_OK(cudaGetLastError());
		{
			double bytes = (double)n * (DIM * sizeof(float) * (2.0 * (1 + state_cols) + 1) +
						    sizeof(uint64_t));

			printf("  %-16s %7.1f GB/s; bare kernel %7.1f GB/s; ratio %.2f (goal >= 0.60)\n",
			       emdb_optimizer_name(kinds[k]), bytes / best_k / 1e6,
			       bytes / best_b / 1e6, best_b / best_k);
			/* The row-wise step's other widths, against the same bare
			 * kernel: which TK_ROWWISE_LANES should be. */
			for (uint32_t lpr = 1; kinds[k] == EMDB_OPT_ROWWISE_ADAGRAD && lpr <= 32; lpr *= 2) {
				float best = 1e30f;

				for (int rep = 0; rep <= REPS; rep++) {
					ms = kernel_ms(e0, e1, [&] {
						tk_step_rowwise<<<tk_rowwise_blocks(n, lpr), TK_THREADS>>>(
							R, sc, ds, n, dg, lpr);
					});
					if (rep && ms < best)
						best = ms;
				}
				CUDA_OK(cudaGetLastError());
				printf("    %2u lanes a row%s %7.1f GB/s; ratio %.2f (for information)\n", lpr,
				       lpr == TK_ROWWISE_LANES ? " (the tier's)" : "             ",
				       bytes / best / 1e6, best_b / best);
			}
		}
	}
	CUDA_OK(cudaFree(mem));
	CUDA_OK(cudaFree(dir));
	CUDA_OK(cudaFree(ds));
	CUDA_OK(cudaFree(dg));
	free(slots);
}

int main(void)
{
	char why[200];
	cudaDeviceProp prop;
	int dev = 0;

	if (!tier_available(TIER_CUDA, why, sizeof(why))) {
		printf("SKIP: no GPU: %s; nothing was measured\n", why);
		return 0;
	}
	CUDA_OK(cudaGetDevice(&dev));
	CUDA_OK(cudaGetDeviceProperties(&prop, dev));
	printf("emdb-gpu-bench on %s (%.0f GiB)\n", prop.name,
	       (double)prop.totalGlobalMem / (1u << 30));
	bench_gather();
	bench_staging();
	bench_optimizers();
	return 0;
}
