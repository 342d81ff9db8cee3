/*
 * tier_kernels.cuh - the device kernels of the CUDA tier (gpu/tier_cuda.cu).
 *
 * Rows live in chunks of device memory; a per-device directory (an array
 * of chunk base pointers in device memory) turns a slot into an address:
 * dir[slot / rows_per_chunk] + (slot % rows_per_chunk) * stride.  The
 * stride is the row's floats rounded up to four, so every row starts on
 * 16 bytes and the gather moves float4s when dim is a multiple of four.
 *
 * Bit-identity with the host (db/tier.h): the rules are the EMDB_HD
 * functions of db/optim_math.h and db/init_math.h, and this file is
 * compiled with --fmad=false, IEEE division and square root (nvcc's
 * defaults, never --use_fast_math) and no flush to zero.  The
 * element-wise rules (SGD, Adagrad, Adam, FTRL) run one thread per
 * column through the same per-column function the host loops over with
 * dim = 1, which performs that column's operations in the same order;
 * row-wise Adagrad sums its squares in column order in one lane per row,
 * as the host does, and hands the multiplier to the other lanes.
 *
 * The tests run this file on the CPU too (tests/emu/cuda_runtime.h: one
 * thread at a time, in order; test_tier_kernels and test_tier_emu): a
 * kernel added here keeps to what that emulation runs exactly (no shared
 * memory or __syncthreads, shuffles only as lane 0's broadcast reached
 * alike by every lane, each thread writing floats of its own) or extends
 * it.
 */
#ifndef EMDB_GPU_TIER_KERNELS_CUH
#define EMDB_GPU_TIER_KERNELS_CUH

#include <stdint.h>

#include "db/init_math.h"
#include "db/optim_math.h"

#define TK_SLOT_NONE UINT64_MAX
#define TK_THREADS 256

typedef struct tk_rows {
	float *const *dir;       /* device: chunk base pointers             */
	uint32_t rows_per_chunk;
	uint32_t rpc_shift;      /* log2(rows_per_chunk), or 32 if not a power */
	uint32_t stride;         /* floats per row in device memory, % 4 == 0 */
	uint32_t dim;
	uint32_t row_floats;     /* dim + state                             */
	uint32_t n_chunks;       /* entries of dir                          */
} tk_rows;

/* k / q and k % q: a 64-bit division is many instructions on a GPU, and
 * every index here fits 32 bits in practice. */
__device__ static inline void tk_divmod(uint64_t k, uint32_t q, uint64_t *i, uint32_t *j)
{
	if (k >> 32) {
		*i = k / q;
		*j = (uint32_t)(k % q);
	} else {
		*i = (uint32_t)k / q;
		*j = (uint32_t)k % q;
	}
}

__device__ static inline float *tk_row(const tk_rows &R, uint64_t slot)
{
	uint64_t c;
	uint32_t o;

	if (R.rpc_shift < 32) {
		c = slot >> R.rpc_shift;
		o = (uint32_t)slot & (R.rows_per_chunk - 1);
	} else {
		tk_divmod(slot, R.rows_per_chunk, &c, &o);
	}
	return R.dir[c] + (size_t)o * R.stride;
}

static inline unsigned tk_blocks(uint64_t threads)
{
	uint64_t b = (threads + TK_THREADS - 1) / TK_THREADS;

	if (b > (1u << 20))
		b = 1u << 20; /* grid-stride loops do the rest */
	return b ? (unsigned)b : 1u;
}

#define TK_FOR(i, total) \
	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (total); \
	     i += (uint64_t)gridDim.x * blockDim.x)

/* The row of a slot, or NULL when the slot lies outside the chunks
 * allocated (*bad set): keys that arrive in device memory are checked
 * here, as the host cannot see them. */
__device__ static inline const float *tk_row_checked(const tk_rows &R, uint64_t slot, int *bad)
{
	uint64_t c = R.rpc_shift < 32 ? slot >> R.rpc_shift : slot / R.rows_per_chunk;

	if (c >= R.n_chunks || !R.dir[c]) {
		*bad = 1;
		return NULL;
	}
	return tk_row(R, slot);
}

/* out[i] = weights of slots[i], four floats a thread; a bad slot's row
 * is NaN. */
__global__ static void tk_gather4(tk_rows R, const uint64_t *slots, uint64_t n, float4 *out,
				  int *bad)
{
	uint32_t q = R.dim / 4;

	TK_FOR(k, n * q) {
		uint64_t i;
		uint32_t j;
		const float *row;

		tk_divmod(k, q, &i, &j);
		row = tk_row_checked(R, slots[i], bad);
		out[k] = row ? reinterpret_cast<const float4 *>(row)[j]
			     : make_float4(NAN, NAN, NAN, NAN);
	}
}

__global__ static void tk_gather1(tk_rows R, const uint64_t *slots, uint64_t n, float *out, int *bad)
{
	TK_FOR(k, n * R.dim) {
		uint64_t i;
		uint32_t j;
		const float *row;

		tk_divmod(k, R.dim, &i, &j);
		row = tk_row_checked(R, slots[i], bad);
		out[k] = row ? row[j] : NAN;
	}
}

/* Whole rows (row_floats each) between packed rows and slots. */
__global__ static void tk_put_rows(tk_rows R, const uint64_t *slots, uint64_t n, const float *rows)
{
	TK_FOR(k, n * R.row_floats) {
		uint64_t i;
		uint32_t j;

		tk_divmod(k, R.row_floats, &i, &j);
		tk_row(R, slots[i])[j] = rows[k];
	}
}

/* The same four floats a thread, for rows of row_floats % 4 == 0 from a
 * 16-byte aligned buffer: wide loads, which matters most when the rows
 * are read from pinned host memory over the bus. */
__global__ static void tk_put_rows4(tk_rows R, const uint64_t *slots, uint64_t n, const float4 *rows)
{
	uint32_t q = R.row_floats / 4;

	TK_FOR(k, n * q) {
		uint64_t i;
		uint32_t j;

		tk_divmod(k, q, &i, &j);
		reinterpret_cast<float4 *>(tk_row(R, slots[i]))[j] = rows[k];
	}
}

__global__ static void tk_get_rows(tk_rows R, const uint64_t *slots, uint64_t n, float *rows)
{
	TK_FOR(k, n * R.row_floats) {
		uint64_t i;
		uint32_t j;

		tk_divmod(k, R.row_floats, &i, &j);
		rows[k] = tk_row(R, slots[i])[j];
	}
}

/* One thread per row: the initializer is per row (Philox blocks of four
 * columns) and compute-bound. */
__global__ static void tk_init_rows(tk_rows R, const uint64_t *slots, const uint64_t *ids, uint64_t n,
				    emdb_init init, emdb_optimizer opt, uint64_t seed, uint32_t table)
{
	TK_FOR(i, n) {
		float *row = tk_row(R, slots[i]);

		emdb_init_row(init.kind, init.a, init.b, seed, table, ids[i], R.dim, row);
		emdb_opt_init_state(opt.kind, &opt, R.dim, row + R.dim);
	}
}

/* acc[pidx[i]] += grads[i]; pidx distinct, so no two threads share a
 * float and no atomic is needed. */
__global__ static void tk_accumulate(uint32_t dim, float *acc, const uint32_t *pidx, uint64_t n,
				     const float *grads)
{
	TK_FOR(k, n * dim) {
		uint64_t i;
		uint32_t j;

		tk_divmod(k, dim, &i, &j);
		acc[(size_t)pidx[i] * dim + j] += grads[k];
	}
}

/* The element-wise rules, one column a thread (see the file comment). */
__global__ static void tk_step_cols(tk_rows R, emdb_opt_kind kind, emdb_opt_scalars sc,
				    const uint64_t *slots, uint64_t n, const float *grads)
{
	uint32_t dim = R.dim;

	TK_FOR(k, n * dim) {
		uint64_t i, s;
		uint32_t c;
		tk_divmod(k, dim, &i, &c);
		s = slots[i];
		const float *g = grads + k;
		float *w;

		if (s == TK_SLOT_NONE)
			continue;
		w = tk_row(R, s) + c;
		switch (kind) {
		case EMDB_OPT_SGD:
			emdb__sgd_cols(1, w, g, sc.lr);
			break;
		case EMDB_OPT_ADAGRAD:
			emdb__adagrad_cols(1, w, w + dim, g, sc.lr, sc.eps);
			break;
		case EMDB_OPT_ADAM:
			emdb__adam_cols(1, w, w + dim, w + 2 * (size_t)dim, g, sc.lr, sc.eps, sc.omb1,
					sc.omb2);
			break;
		case EMDB_OPT_FTRL:
			emdb__ftrl_cols(1, w, w + dim, w + 2 * (size_t)dim, g, sc.lr, sc.beta, sc.l1,
					sc.l2);
			break;
		default:
			break;
		}
	}
}

/* Row-wise Adagrad: `lpr` lanes a row (a power of two, 1 to 32), so a
 * warp steps 32 / lpr rows at once.  The row's first lane runs its
 * reduction (emdb__rowwise_adagrad_mult, in column order, as the host),
 * its other lanes take the multiplier from it (__shfl_sync from a lower
 * lane, which the CPU emulation runs exactly) and every lane applies it
 * to its columns with the host's column rule.  Every lane of the warp
 * reaches the shuffle once per turn, rows past n or freed included.
 * TK_ROWWISE_LANES is what the tier launches (emdb-gpu-bench measures
 * every width). */
#define TK_ROWWISE_LANES 16

static inline unsigned tk_rowwise_blocks(uint64_t n, uint32_t lpr)
{
	return tk_blocks((n + 32 / lpr - 1) / (32 / lpr) * 32);
}

__global__ static void tk_step_rowwise(tk_rows R, emdb_opt_scalars sc, const uint64_t *slots,
				       uint64_t n, const float *grads, uint32_t lpr)
{
	uint32_t lane = threadIdx.x & 31, sub = lane & (lpr - 1), first = lane - sub;
	uint64_t rpw = 32 / lpr;
	uint64_t warp = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
	uint64_t warps = (uint64_t)gridDim.x * blockDim.x / 32;

	for (uint64_t base = warp * rpw; base < n; base += warps * rpw) {
		uint64_t i = base + lane / lpr;
		uint64_t s = i < n ? slots[i] : TK_SLOT_NONE;
		const float *g = NULL;
		float mult = 0.0f;
		float *w = NULL;

		if (s != TK_SLOT_NONE) {
			g = grads + i * R.dim;
			w = tk_row(R, s);
			if (sub == 0)
				mult = emdb__rowwise_adagrad_mult(R.dim, w + R.dim, g, sc.lr, sc.eps,
								  sc.dim);
		}
		mult = __shfl_sync(0xffffffffu, mult, (int)first);
		if (s != TK_SLOT_NONE)
			for (uint32_t c = sub; c < R.dim; c += lpr)
				emdb__sgd_cols(1, w + c, g + c, mult);
	}
}

#endif
