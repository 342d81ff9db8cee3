/*
 * test_tier_kernels.cc - the CUDA tier's kernels (gpu/tier_kernels.cuh)
 * on the CPU, through gpu/tier_cuda.cu itself on the emulated runtime of
 * tests/emu, compared bit for bit with the host backend (db/tier_host.c)
 * given the same calls through db/tier.h: where test_tier_emu runs the
 * conformance suite on one shape (dim 12, 8 rows a chunk, the launches as
 * made), this test sweeps the shapes that take the kernels' other paths.
 * Run with EMDB_EMU_DEVICES=2.
 *
 * Each scenario runs one optimizer over rows spread across the chunks of
 * a directory with holes, and checks every row of every allocated chunk
 * on every replica after every operation: initial values, put and get,
 * gathers (float4 and scalar), gathers of keys in device memory outside
 * the chunks (NaN rows, INVALID), scatter-adds with duplicates and
 * out-of-order slots, reduce, steps (from accumulators, with
 * TIER_SLOT_NONE for a freed chunk's rows, and from given gradients),
 * over five steps.  Scenarios vary dim (a multiple of four and not, more
 * columns than a warp has lanes), rows per chunk (a power of two, one,
 * and not: the shift and the division), one replica and two, and the
 * launch: as tier_cuda.cu makes it, or capped far below the work
 * (emu_cap_grid) so that every grid-stride loop turns more than once.
 *
 * The normal initializer is bit-identical here because both sides call
 * glibc's log, cos and sin; on a GPU they are CUDA's (docs/gpu.md).
 */
#include <criterion/criterion.h>

#include <cmath>
#include <csignal>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#include <emdb/error.h>

#include "db/init_math.h"
#include "db/optim_math.h"
#include "db/tier.h"
/* For index_arithmetic's direct calls; the kernels themselves run from
 * tier_cuda.cu's copy in libemdb_emu, so this one's go unused. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "gpu/tier_kernels.cuh"
#pragma GCC diagnostic pop
#include "tests/lib/helpers.h"

namespace {

const emdb_opt_kind all_opts[] = { EMDB_OPT_SGD, EMDB_OPT_ADAGRAD, EMDB_OPT_ROWWISE_ADAGRAD,
				   EMDB_OPT_ADAM, EMDB_OPT_FTRL };

uint32_t bits(float f)
{
	uint32_t u;

	std::memcpy(&u, &f, sizeof(u));
	return u;
}

void same_bits(const float *host, const float *kern, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++)
		if (bits(host[i]) != bits(kern[i]))
			cr_assert_fail("%s: float %zu: host %a (0x%08x), kernels %a (0x%08x)", what, i,
				       (double)host[i], bits(host[i]), (double)kern[i], bits(kern[i]));
}

/* The launch shapes: tier_cuda.cu's, and grids far smaller than the work. */
struct launch {
	unsigned blocks, threads; /* emu_cap_grid */
	const char *name;
};

const launch launches[] = { { 0, 0, "tier_cuda.cu's grid" },
			    { 1, 32, "one warp" },
			    { 3, 64, "three blocks of two warps" } };

/* A host tier and an emulated CUDA tier given the same calls, the
 * used_chunks allocated. */
struct twin {
	tier_config c;
	uint32_t rf;
	tier *h, *e;
	bool used[10];            /* chunks allocated (config: 10 at most) */
	char what[160];
};

/* Chunks 0, 2, 3, 5, 6 and 9 of 10: holes inside the directory and its
 * last entry used; the rows of chunk c, in an order that is not the
 * slots' (a stride coprime with the count). */
const uint32_t used_chunks[] = { 0, 2, 3, 5, 6, 9 };

std::vector<uint64_t> used_slots(const twin *p)
{
	uint32_t rpc = p->c.rows_per_chunk, n = 6 * rpc;
	std::vector<uint64_t> s(n);

	for (uint32_t k = 0; k < n; k++) {
		uint32_t j = (k * 7 + 3) % n; /* 7 is coprime with 6 * rpc for rpc 1, 6, 8 */

		s[k] = (uint64_t)used_chunks[j / rpc] * rpc + j % rpc;
	}
	return s;
}

/* f on both tiers: the same result, which is returned. */
template <typename F>
int64_t both(twin *p, const char *op, F f)
{
	int64_t a = f(p->h), b = f(p->e);

	cr_assert_eq(a, b, "%s: %s: host %lld, kernels %lld (%s)", p->what, op, (long long)a,
		     (long long)b, emdb_last_error());
	return a;
}

/* Every row of every allocated chunk, on every replica. */
void check_all(twin *p, const char *after)
{
	uint32_t rpc = p->c.rows_per_chunk;
	std::vector<uint64_t> slots(rpc);
	std::vector<float> hr((size_t)rpc * p->rf), er((size_t)rpc * p->rf);
	char what[300];

	for (uint32_t c = 0; c < p->c.max_chunks; c++) {
		if (!p->used[c])
			continue;
		for (uint32_t i = 0; i < rpc; i++)
			slots[i] = (uint64_t)c * rpc + i;
		for (uint32_t r = 0; r < p->c.replicas; r++) {
			std::snprintf(what, sizeof(what), "%s: after %s: chunk %u replica %u", p->what,
				      after, c, r);
			cr_assert_eq(tier_get_rows(p->h, r, slots.data(), rpc, hr.data()), EMDB_OK);
			cr_assert_eq(tier_get_rows(p->e, r, slots.data(), rpc, er.data()), EMDB_OK,
				     "%s: %s", what, emdb_last_error());
			same_bits(hr.data(), er.data(), hr.size(), what);
		}
	}
}

void twin_alloc(twin *p, uint32_t k)
{
	both(p, "chunk alloc", [&](tier *t) { return tier_chunk_alloc(t, k); });
	p->used[k] = true;
}

/* Its pending rows reach the step kernel as TIER_SLOT_NONE. */
void twin_free(twin *p, uint32_t k)
{
	tier_chunk_free(p->h, k);
	tier_chunk_free(p->e, k);
	p->used[k] = false;
}

/* Opening a CUDA tier is the costly part here (its pinned staging
 * buffers), so each twin serves every launch shape in turn. */
void twin_open(twin *p, const tier_config *c)
{
	std::memset(p, 0, sizeof(*p));
	p->c = *c;
	p->rf = tier_row_floats(c);
	cr_assert_eq(tier_open(TIER_HOST, c, &p->h), EMDB_OK, "%s", emdb_last_error());
	cr_assert_eq(tier_open(TIER_CUDA, c, &p->e), EMDB_OK, "%s", emdb_last_error());
}

/* From here on launches take shape l, on fresh chunks (the used_chunks,
 * zero rows). */
void twin_launch(twin *p, const launch *l)
{
	emu_cap_grid(l->blocks, l->threads);
	std::snprintf(p->what, sizeof(p->what), "%s dim %u rows/chunk %u replicas %u, %s",
		      emdb_optimizer_name(p->c.opt), p->c.dim, p->c.rows_per_chunk, p->c.replicas,
		      l->name);
	for (uint32_t k = 0; k < 10; k++)
		if (p->used[k])
			twin_free(p, k);
	for (uint32_t k : used_chunks)
		twin_alloc(p, k);
	check_all(p, "chunk alloc");
}

/* rows (tier_row_floats each) put into slots s on both. */
void twin_put(twin *p, const std::vector<uint64_t> &s, const std::vector<float> &rows)
{
	both(p, "put rows", [&](tier *t) { return tier_put_rows(t, s.data(), s.size(), rows.data()); });
}

void twin_close(twin *p)
{
	tier_close(p->h);
	tier_close(p->e);
	emu_cap_grid(0, 0);
}

/* bytes of memory of device `dev`; cudaFree frees it. */
template <typename T>
T *dev_alloc(uint32_t dev, size_t n)
{
	void *d = nullptr;

	cr_assert_eq(cudaSetDevice((int)dev), cudaSuccess);
	cr_assert_eq(cudaMalloc(&d, n * sizeof(T)), cudaSuccess);
	return static_cast<T *>(d);
}

/* n Ts of device memory on device `dev` -> host, after whatever the tier
 * queued (the tier's calls are synchronous: cudaMemcpy's own wait). */
template <typename T>
void dev_read(uint32_t dev, T *dst, const T *src, size_t n)
{
	cr_assert_eq(cudaSetDevice((int)dev), cudaSuccess);
	cr_assert_eq(cudaMemcpy(dst, src, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
}

/* Gathers of `slots` on replica r: into host memory (through a device
 * scratch buffer, 16-byte aligned: the float4 kernel when dim % 4 == 0),
 * and into the device's memory one float off 16 bytes (the scalar
 * kernel). */
void check_gather(twin *p, uint32_t r, const std::vector<uint64_t> &slots)
{
	size_t n = slots.size(), len = n * p->c.dim;
	std::vector<float> h(len + 1), e(len + 1);
	float *d = dev_alloc<float>(r, len + 1);
	char what[300];

	std::snprintf(what, sizeof(what), "%s: gather on replica %u", p->what, r);
	both(p, "gather", [&](tier *t) { return tier_gather(t, r, slots.data(), n,
							    t == p->h ? h.data() : e.data(),
							    false); });
	same_bits(h.data(), e.data(), len, what);
	both(p, "gather into tier memory", [&](tier *t) {
		return tier_gather(t, r, slots.data(), n, t == p->h ? h.data() + 1 : d + 1, true);
	});
	dev_read(r, e.data() + 1, d + 1, len);
	same_bits(h.data() + 1, e.data() + 1, len, what);
	cr_assert_eq(cudaFree(d), cudaSuccess);
}

tier_config config(emdb_opt_kind opt, uint32_t dim, uint32_t rpc, uint32_t replicas)
{
	tier_config c;

	std::memset(&c, 0, sizeof(c));
	c.dim = dim;
	c.opt = opt;
	c.rows_per_chunk = rpc;
	c.max_chunks = 10;
	c.max_pending = 10 * rpc;
	c.replicas = replicas;
	return c;
}

emdb_optimizer optimizer(emdb_opt_kind kind)
{
	emdb_optimizer o;

	cr_assert_eq(emdb_optimizer_defaults(kind, &o), EMDB_OK);
	o.lr = 0.05;
	o.initial_accumulator = 0.125;
	o.lr_decay = 0.01;
	o.l1 = 0.001;
	o.l2 = 0.01;
	o.eps = 1e-3; /* large enough to change the bits of every rule using it */
	return o;
}

/* Gradients for one push: slots drawn from `pool` with repeats, out of
 * order. */
void push(twin *p, uint32_t r, const std::vector<uint64_t> &pool, uint32_t seed, uint32_t n)
{
	std::vector<uint64_t> s(n);
	std::vector<float> g((size_t)n * p->c.dim);

	for (uint32_t i = 0; i < n; i++) /* every fourth a repeat */
		s[i] = i % 4 == 3 ? s[i - 2] : pool[(i * 5 + seed) % pool.size()];
	for (size_t k = 0; k < g.size(); k++)
		g[k] = test_val(seed, (uint32_t)k);
	both(p, "scatter-add", [&](tier *t) { return tier_scatter_add(t, r, s.data(), n, g.data()); });
}

void scenario(twin &p, emdb_opt_kind opt, uint32_t dim, uint32_t rpc, uint32_t replicas)
{
	static const emdb_init inits[3] = { { EMDB_INIT_UNIFORM, -0.5, 0.25 },
					    { EMDB_INIT_NORMAL, 0.1, 0.02 },
					    { EMDB_INIT_ZEROS, 0, 0 } };
	emdb_optimizer o = optimizer(opt);
	const emdb_init *init = &inits[(dim + rpc) % 3];
	std::vector<uint64_t> slots = used_slots(&p), ids(slots.size());
	for (size_t i = 0; i < ids.size(); i++)
		ids[i] = slots[i] * 7919 + (i % 3 ? 0 : 1ull << 40);
	both(&p, "init rows", [&](tier *t) {
		return tier_init_rows(t, slots.data(), ids.data(), slots.size(), init, &o, 42, 3);
	});
	check_all(&p, "init rows");
	for (uint32_t r = 0; r < replicas; r++)
		check_gather(&p, r, slots);

	for (uint64_t step = 1; step <= 5; step++) {
		emdb_opt_scalars sc;

		emdb_opt_scalars_for_step(&o, step, dim, &sc);
		push(&p, (uint32_t)(step % replicas), slots, (uint32_t)step, (uint32_t)slots.size() / 2);
		if (step == 2) { /* dropped unstepped: the accumulators empty again */
			both(&p, "discard", [&](tier *t) { return tier_discard(t); });
			push(&p, 0, slots, 100, 7);
		}
		push(&p, 0, slots, (uint32_t)(10 + step), 9);
		both(&p, "reduce", [&](tier *t) { return tier_reduce(t); });
		if (step == 3)
			twin_free(&p, 5);
		if (step == 4) { /* the engine's own sums instead of accumulators */
			std::vector<float> g(slots.size() * dim);

			for (size_t k = 0; k < g.size(); k++)
				g[k] = test_val(77, (uint32_t)k);
			both(&p, "discard", [&](tier *t) { return tier_discard(t); });
			both(&p, "apply", [&](tier *t) {
				return tier_apply(t, &sc, slots.data(), slots.size(), g.data());
			});
		} else {
			both(&p, "step", [&](tier *t) { return tier_step(t, &sc); });
		}
		check_all(&p, "a step");
		if (step == 3) {
			std::vector<uint64_t> s5(rpc), i5(rpc);

			twin_alloc(&p, 5);
			for (uint32_t i = 0; i < rpc; i++) {
				s5[i] = 5ull * rpc + (i * 5 + 1) % rpc;
				i5[i] = 1000 + i;
			}
			both(&p, "init rows", [&](tier *t) {
				return tier_init_rows(t, s5.data(), i5.data(), rpc, init, &o, 42, 3);
			});
			check_all(&p, "chunk 5 again");
		}
	}
	for (uint32_t r = 0; r < replicas; r++)
		check_gather(&p, r, slots);
}

/* Shapes covering each dim, rows per chunk and replica count with the
 * others (not every product: each tier opened costs its staging). */
void every_scenario(emdb_opt_kind opt)
{
	static const struct {
		uint32_t dim, rpc, replicas;
	} shapes[] = { { 12, 8, 1 }, { 13, 6, 2 }, { 40, 6, 1 },
		       { 13, 1, 2 }, { 40, 8, 2 }, { 12, 1, 1 } };

	for (const auto &sh : shapes) {
		tier_config c = config(opt, sh.dim, sh.rpc, sh.replicas);
		twin p;

		twin_open(&p, &c);
		for (const launch &l : launches) {
			twin_launch(&p, &l);
			scenario(p, opt, sh.dim, sh.rpc, sh.replicas);
		}
		twin_close(&p);
	}
}

/* f(p, dim, rpc) on fresh chunks of each small shape: dim 12 and 13,
 * rows per chunk 8 and 6, every launch. */
template <typename F>
void each_shape(emdb_opt_kind opt, uint32_t replicas, F f)
{
	for (uint32_t dim : { 12u, 13u })
		for (uint32_t rpc : { 8u, 6u }) {
			tier_config c = config(opt, dim, rpc, replicas);
			twin p;

			twin_open(&p, &c);
			for (const launch &l : launches) {
				twin_launch(&p, &l);
				f(p, dim, rpc);
			}
			twin_close(&p);
		}
}

} // namespace

Test(tier_kernels, sgd) { every_scenario(EMDB_OPT_SGD); }
Test(tier_kernels, adagrad) { every_scenario(EMDB_OPT_ADAGRAD); }
Test(tier_kernels, rowwise_adagrad) { every_scenario(EMDB_OPT_ROWWISE_ADAGRAD); }
Test(tier_kernels, adam) { every_scenario(EMDB_OPT_ADAM); }
Test(tier_kernels, ftrl) { every_scenario(EMDB_OPT_FTRL); }

/* Every initializer with every optimizer's state, over dims that take
 * the host's vector paths (64: sixteen Philox blocks at once where the
 * CPU has AVX-512, eight with AVX2) and its scalar tail, against the
 * kernel's scalar Philox. */
Test(tier_kernels, initial_values)
{
	static const emdb_init inits[3] = { { EMDB_INIT_ZEROS, 0, 0 },
					    { EMDB_INIT_UNIFORM, -0.5, 0.25 },
					    { EMDB_INIT_NORMAL, 0.1, 0.02 } };
	static const uint32_t dims[] = { 1, 4, 13, 64, 67 };

	for (emdb_opt_kind opt : all_opts)
		for (uint32_t dim : dims) {
			tier_config c = config(opt, dim, 8, 1);
			emdb_optimizer o = optimizer(opt);
			twin p;

			twin_open(&p, &c);
			for (const launch &l : launches) {
				twin_launch(&p, &l);
				std::vector<uint64_t> s = used_slots(&p), ids(s.size());
				for (size_t i = 0; i < s.size(); i++)
					ids[i] = (i * 0x9E3779B97F4A7C15ull) >> (i % 40);
				for (const emdb_init &init : inits) {
					both(&p, "init rows", [&](tier *t) {
						return tier_init_rows(t, s.data(), ids.data(), s.size(), &init,
								      &o, 0xfeedface12345ull, 9);
					});
					check_all(&p, "init rows");
				}
			}
			twin_close(&p);
		}
}

/* Whole rows in and out bit for bit, special values included (NaN with
 * a payload, infinities, -0, a subnormal). */
Test(tier_kernels, put_and_get_rows_keep_every_bit)
{
	const float special[] = { NAN, -NAN, INFINITY, -INFINITY, -0.0f, 1e-40f, 3.5f };
	uint32_t payload_nan = 0x7fa12345u;

	each_shape(EMDB_OPT_ADAM, 2, [&](twin &p, uint32_t dim, uint32_t rpc) {
		std::vector<uint64_t> s = used_slots(&p);
		std::vector<float> rows(s.size() * p.rf), got(rows.size());
		for (size_t k = 0; k < rows.size(); k++)
			rows[k] = k % 5 ? test_val(5, (uint32_t)k) : special[k / 5 % 7];
		std::memcpy(&rows[1], &payload_nan, sizeof(float));
		twin_put(&p, s, rows);
		check_all(&p, "put rows");
		for (uint32_t r = 0; r < 2; r++) {
			cr_assert_eq(tier_get_rows(p.e, r, s.data(), s.size(), got.data()),
				     EMDB_OK);
			same_bits(rows.data(), got.data(), rows.size(), p.what);
		}
	});
}

/* Slots the host cannot check before the kernel reads them: a slot in a
 * hole of the directory, in its last unallocated entries, past it, and
 * TK_SLOT_NONE; their rows are NaN, the others gathered, the call
 * INVALID, and the tier goes on. */
Test(tier_kernels, gather_dev_flags_slots_outside_the_chunks)
{
	each_shape(EMDB_OPT_SGD, 1, [&](twin &p, uint32_t dim, uint32_t rpc) {
		std::vector<uint64_t> s = used_slots(&p);
		std::vector<float> rows(s.size() * p.rf);
		for (size_t k = 0; k < rows.size(); k++)
			rows[k] = test_val(6, (uint32_t)k);
		twin_put(&p, s, rows);

		const uint64_t bad[] = { 1ull * rpc + 2, 8ull * rpc, 10ull * rpc,
					 (1ull << 35) + 3, TK_SLOT_NONE };
		std::vector<uint64_t> q;
		for (size_t i = 0; i < 15; i++)
			q.push_back(i % 3 == 1 ? bad[i / 3] : s[(i * 11) % s.size()]);
		std::vector<float> h(q.size() * dim), e(q.size() * dim);
		uint64_t *dq = dev_alloc<uint64_t>(0, s.size());
		float *dout = dev_alloc<float>(0, s.size() * dim);

		/* the keys land before the tier's stream reads them */
		cr_assert_eq(cudaMemcpy(dq, q.data(), q.size() * sizeof(uint64_t),
					cudaMemcpyHostToDevice), cudaSuccess);
		cr_assert_eq(cudaDeviceSynchronize(), cudaSuccess);
		cr_assert_eq(both(&p, "gather_dev", [&](tier *t) {
			return t == p.h ? tier_gather_dev(t, 0, q.data(), q.size(), h.data())
					: tier_gather_dev(t, 0, dq, q.size(), dout);
		}), EMDB_ERR_INVALID);
		dev_read(0, e.data(), dout, e.size());
		/* The host's good rows are "gathered or not" (tier.h): the
		 * kernels' are compared with the rows put. */
		for (size_t i = 1; i < q.size(); i += 3)
			same_bits(&h[i * dim], &e[i * dim], dim, p.what);
		for (size_t i = 0; i < q.size(); i++)
			for (uint32_t k = 0; k < dim; k++) {
				float v = e[i * dim + k];

				if (i % 3 == 1)
					cr_assert(std::isnan(v), "%s: entry %zu NaN", p.what, i);
				else
					cr_assert_eq(bits(v), bits(rows[(i * 11) % s.size() * p.rf + k]),
						     "%s: entry %zu column %u", p.what, i, k);
			}
		std::vector<float> ok(s.size() * dim), want(ok.size());
		cr_assert_eq(cudaMemcpy(dq, s.data(), s.size() * sizeof(uint64_t),
					cudaMemcpyHostToDevice), cudaSuccess);
		cr_assert_eq(cudaDeviceSynchronize(), cudaSuccess);
		cr_assert_eq(tier_gather_dev(p.e, 0, dq, s.size(), dout), EMDB_OK,
			     "%s: the tier goes on: %s", p.what, emdb_last_error());
		dev_read(0, ok.data(), dout, ok.size());
		cr_assert_eq(tier_gather(p.h, 0, s.data(), s.size(), want.data(), false),
			     EMDB_OK);
		same_bits(want.data(), ok.data(), ok.size(), p.what);
		cr_assert_eq(cudaFree(dq), cudaSuccess);
		cr_assert_eq(cudaFree(dout), cudaSuccess);
	});
}

/* The index arithmetic where the tier's own tests cannot reach: 64-bit
 * slots on the division path, and the grid's cap. */
Test(tier_kernels, index_arithmetic)
{
	const uint32_t rpc = 65537; /* not a power of two */
	const uint64_t slot = (1ull << 32) + 12345;
	const uint64_t chunk = slot / rpc;
	std::vector<float *> dir(chunk + 2, nullptr);
	std::vector<float> mem((size_t)rpc * 4);
	uint64_t i;
	uint32_t j;
	int bad = 0;

	tk_divmod(slot * 3 + 1, 1000003u, &i, &j);
	cr_assert_eq(i, (slot * 3 + 1) / 1000003u);
	cr_assert_eq(j, (slot * 3 + 1) % 1000003u);
	tk_divmod(4000000000u, 7u, &i, &j);
	cr_assert(i == 4000000000u / 7u && j == 4000000000u % 7u);

	dir[chunk] = mem.data();
	tk_rows R = { dir.data(), rpc, 32, 4, 3, 3, (uint32_t)dir.size() }; /* as rows_of */
	cr_assert_eq(tk_row(R, slot), mem.data() + (slot % rpc) * 4);
	cr_assert_eq(tk_row_checked(R, slot, &bad), mem.data() + (slot % rpc) * 4);
	cr_assert_eq(bad, 0);
	cr_assert_null(tk_row_checked(R, slot + rpc, &bad), "a NULL directory entry");
	cr_assert_eq(bad, 1);
	bad = 0;
	cr_assert_null(tk_row_checked(R, slot + 2 * (uint64_t)rpc, &bad), "past the directory");
	cr_assert_eq(bad, 1);

	R.rows_per_chunk = 1u << 16;
	R.rpc_shift = 16;
	dir[slot >> 16] = mem.data();
	cr_assert_eq(tk_row(R, slot), mem.data() + (slot & 0xffff) * 4);

	cr_assert_eq(tk_blocks(0), 1u);
	cr_assert_eq(tk_blocks(TK_THREADS), 1u);
	cr_assert_eq(tk_blocks(TK_THREADS + 1), 2u);
	cr_assert_eq(tk_blocks((uint64_t)TK_THREADS << 20), 1u << 20);
	cr_assert_eq(tk_blocks(((uint64_t)TK_THREADS << 20) + 1), 1u << 20, "capped");
	cr_assert_eq(tk_blocks(UINT64_MAX / 2), 1u << 20, "capped");
}

/* The emulation runs exactly, and refuses what it cannot
 * (tests/emu/cuda_runtime.h): a lane reads itself or a lower lane, every
 * lane of the warp reaching the shuffle the same number of times. */
/* Each thread writes out[its index in the grid]. */
#define GRID_INDEX (blockIdx.x * blockDim.x + threadIdx.x)

__global__ static void shfl_from_first_of_eight(float *out)
{
	out[GRID_INDEX] = __shfl_sync(0xffffffffu, (float)GRID_INDEX, (int)(threadIdx.x & 31 & ~7u));
}

__global__ static void shfl_from_lane_1(float *out)
{
	out[GRID_INDEX] = __shfl_sync(0xffffffffu, (float)GRID_INDEX, 1);
}

__global__ static void shfl_odd_lanes(float *out)
{
	if (threadIdx.x & 1)
		out[GRID_INDEX] = __shfl_sync(0xffffffffu, (float)GRID_INDEX, 0);
}

__global__ static void shfl_lane_0_alone(float *out)
{
	if (threadIdx.x % 32 == 0)
		out[GRID_INDEX] = __shfl_sync(0xffffffffu, (float)GRID_INDEX, 0);
}

__global__ static void shfl_broadcast(float *out)
{
	float v = __shfl_sync(0xffffffffu, (float)GRID_INDEX + 0.5f, 0);

	out[GRID_INDEX] = __shfl_sync(0xffffffffu, v * 2.0f, 0);
}

void run_kernel(void (*k)(float *), float *out)
{
	cr_assert_eq(cudaSetDevice(0), cudaSuccess);
	emu_launch(nullptr, 2, 64, k, out);
	cudaDeviceSynchronize();
}

Test(tier_kernels, emulation_broadcasts_lane_0s_value_in_order)
{
	float out[128];

	run_kernel(shfl_broadcast, out);
	for (int t = 0; t < 128; t++)
		cr_assert_eq(out[t], (float)(t & ~31) * 2.0f + 1.0f, "thread %d: %g", t, (double)out[t]);
}

Test(tier_kernels, emulation_reads_a_lower_lane)
{
	float out[128];

	run_kernel(shfl_from_first_of_eight, out);
	for (int t = 0; t < 128; t++)
		cr_assert_eq(out[t], (float)(t & ~7), "thread %d: %g", t, (double)out[t]);
}

Test(tier_kernels, emulation_refuses_a_higher_source_lane, .signal = SIGABRT)
{
	float out[128];

	run_kernel(shfl_from_lane_1, out);
}

Test(tier_kernels, emulation_refuses_a_lane_shuffling_more_than_lane_0, .signal = SIGABRT)
{
	float out[128];

	run_kernel(shfl_odd_lanes, out);
}

Test(tier_kernels, emulation_refuses_a_lane_shuffling_less_than_lane_0, .signal = SIGABRT)
{
	float out[128];

	run_kernel(shfl_lane_0_alone, out);
}

/* Every width of the row-wise step (tk_step_rowwise's lanes a row, 1 to
 * 32; the tier launches TK_ROWWISE_LANES), directly, against the host's
 * rule row by row: rows in random order, a freed row, a count that is no
 * multiple of the rows a warp takes, dims under, at and past a warp. */
Test(tier_kernels, rowwise_every_width)
{
	static const uint32_t dims[] = { 5, 32, 67 };

	cr_assert_eq(cudaSetDevice(0), cudaSuccess);
	for (uint32_t dim : dims)
		for (uint32_t lpr = 1; lpr <= 32; lpr *= 2) {
			const uint32_t rows = 53, n = 41, rf = dim + 1, stride = (rf + 3) & ~3u;
			std::vector<float> host(rows * stride), g(n * dim), out(rows * stride);
			std::vector<uint64_t> slots(n);
			float *mem, **dir, *dg;
			uint64_t *ds;
			emdb_optimizer o;
			emdb_opt_scalars sc;
			tk_rows R;

			for (size_t k = 0; k < host.size(); k++)
				host[k] = test_val(dim * 100 + lpr, k);
			for (size_t k = 0; k < g.size(); k++)
				g[k] = test_val(dim * 7 + lpr, k);
			for (uint32_t i = 0; i < n; i++)
				slots[i] = (i * 17 + 3) % rows;
			slots[9] = TK_SLOT_NONE;
			emdb_optimizer_defaults(EMDB_OPT_ROWWISE_ADAGRAD, &o);
			emdb_opt_scalars_for_step(&o, 3, dim, &sc);
			cr_assert_eq(cudaMalloc((void **)&mem, host.size() * sizeof(float)), cudaSuccess);
			cr_assert_eq(cudaMalloc((void **)&dir, sizeof(float *)), cudaSuccess);
			cr_assert_eq(cudaMalloc((void **)&dg, g.size() * sizeof(float)), cudaSuccess);
			cr_assert_eq(cudaMalloc((void **)&ds, n * sizeof(uint64_t)), cudaSuccess);
			cudaMemcpy(mem, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice);
			cudaMemcpy(dir, &mem, sizeof(mem), cudaMemcpyHostToDevice);
			cudaMemcpy(dg, g.data(), g.size() * sizeof(float), cudaMemcpyHostToDevice);
			cudaMemcpy(ds, slots.data(), n * sizeof(uint64_t), cudaMemcpyHostToDevice);
			R.dir = dir;
			R.rows_per_chunk = 64;
			R.rpc_shift = 6;
			R.stride = stride;
			R.dim = dim;
			R.row_floats = rf;
			R.n_chunks = 1;
			for (unsigned blocks : { tk_rowwise_blocks(n, lpr), 1u }) {
				emu_launch(nullptr, blocks, TK_THREADS, tk_step_rowwise, R, sc,
					   (const uint64_t *)ds, (uint64_t)n, (const float *)dg, lpr);
				for (uint32_t i = 0; i < n; i++)
					if (slots[i] != TK_SLOT_NONE)
						emdb_opt_rowwise_adagrad_row(&sc, dim, &host[slots[i] * stride],
									     &g[(size_t)i * dim]);
			}
			cudaMemcpy(out.data(), mem, out.size() * sizeof(float), cudaMemcpyDeviceToHost);
			for (uint32_t r = 0; r < rows; r++)
				same_bits(&host[r * stride], &out[r * stride], rf, "rowwise row");
			cudaFree(mem);
			cudaFree(dir);
			cudaFree(dg);
			cudaFree(ds);
		}
}
