/*
 * gpu_test_serve.c - emdb-gpu-test's checks of the serving paths through
 * the CUDA tier (db/hot.h, db/hot_serve.c), at the engine's interface: a
 * database with gpu_memory against a twin without, bit for bit, and the
 * hot set's counters saying the device paths ran.  The same checks as
 * tests/unit/test_hot_serve.c makes with the test tier, here on a GPU and
 * at sizes a unit test does not reach (thousands of hot rows of dim 64).
 *
 *   - the tier's own device-pointer operations: cudaMalloc memory is the
 *     tier's (cudaPointerGetAttributes), host memory is not; copies in and
 *     out; tier_discard empties the accumulators without a step;
 *   - Pull (plain, MEAN, weighted; by IDs and by ticket) gathers hot rows
 *     on the device; Push scatters their sums into the device's
 *     accumulators and Update steps the replica from them (steps_device);
 *   - Prefetch stages a batch's cold rows: the Pull by ticket into device
 *     memory then gathers every row on the device, none crossing to the
 *     host; gradients in device memory are accepted by Push.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include <emdb/db.h>
#include <emdb/error.h>

#include "db/db_int.h"
#include "db/table.h"
#include "gpu/gpu_test.h"
#include "index/hash.h"
#include "tests/lib/hot_batch.h"

enum { DIM = 64, HOT = 2048, COLD = 1024, N = 2 * HOT + 2 * COLD, BAGS = 64 };

static void test_tier_pointers(void)
{
	emdb_optimizer opt;
	tier_config c;
	tier *h = NULL, *d = NULL;
	uint64_t slots[64];
	/* a and b hold whole rows: Adagrad's 8 weights and 8 sums each */
	float *dev = NULL, a[64 * 16], b[64 * 16], g[64 * 8];
	int ok;

	memset(&c, 0, sizeof(c));
	c.dim = 8;
	c.opt = EMDB_OPT_ADAGRAD;
	c.rows_per_chunk = 64;
	c.max_chunks = 1;
	c.max_pending = 64;
	c.replicas = 1;
	emdb_optimizer_defaults(EMDB_OPT_ADAGRAD, &opt);
	ok = !tier_open(TIER_HOST, &c, &h) && !tier_open(TIER_CUDA, &c, &d) && !tier_chunk_alloc(h, 0) &&
	     !tier_chunk_alloc(d, 0) && cudaMalloc((void **)&dev, sizeof(a)) == cudaSuccess;
	check(ok, "serving: open%s%s", "", "");
	if (!ok)
		goto out;
	check(tier_ptr_in_tier(d, 0, dev + 3) && !tier_ptr_in_tier(d, 0, a) && !tier_ptr_in_tier(h, 0, a),
	      "serving: cudaMalloc memory is the tier's, host memory is not%s%s", "", "");
	for (size_t k = 0; k < 64 * 16; k++)
		a[k] = (float)k * 0.5f;
	ok = !tier_copy_in(d, 0, dev, a, sizeof(a)) && !tier_copy_out(d, 0, b, dev, sizeof(b)) &&
	     !memcmp(a, b, sizeof(a)) && tier_copy_in(d, 0, b, a, sizeof(a)) == EMDB_ERR_INVALID;
	check(ok, "serving: copies into and out of device memory; a host destination refused%s%s", "", "");
	for (int i = 0; i < 64; i++)
		slots[i] = (uint64_t)(i * 7 % 64);
	for (size_t k = 0; k < 64 * 8; k++)
		g[k] = (float)((int)(k % 11) - 5) * 0.125f;
	/* Scatter, discard, scatter again and step: only the second counts,
	 * on both tiers the same. */
	ok = !tier_scatter_add(h, 0, slots, 64, g) && !tier_scatter_add(d, 0, slots, 64, g) &&
	     !tier_discard(h) && !tier_discard(d) && tier_pending(d) == 0 &&
	     !tier_scatter_add(h, 0, slots, 32, g) && !tier_scatter_add(d, 0, slots, 32, g);
	if (ok) {
		emdb_opt_scalars sc;

		emdb_opt_scalars_for_step(&opt, 1, 8, &sc);
		ok = tier_step(h, &sc) == 32 && tier_step(d, &sc) == 32 && !tier_get_rows(h, 0, slots, 64, a) &&
		     !tier_get_rows(d, 0, slots, 64, b) && !memcmp(a, b, sizeof(a));
	}
	check(ok, "serving: discarded accumulators are not stepped, host and device alike%s%s", "", "");
out:
	cudaFree(dev);
	tier_close(h);
	tier_close(d);
}

typedef struct twin {
	emdb_db *ref, *db;
	uint32_t t;
} twin;

static int twin_open(twin *w)
{
	emdb_db_config c = EMDB_DB_CONFIG_INIT;
	emdb_table_config tc = EMDB_TABLE_CONFIG_INIT;
	uint32_t a = 0, b = 0;

	c.shards = 16;
	if (emdb_db_open(&c, &w->ref))
		return -1;
	/* Adam rows (3 * DIM floats) and their accumulators (DIM): room for
	 * twice the hot rows, so a batch's cold rows can be staged. */
	c.gpu_memory = 2ull * HOT * 4 * DIM * sizeof(float);
	if (emdb_db_open(&c, &w->db))
		return -1;
	strcpy(tc.name, "t");
	tc.dim = DIM;
	emdb_optimizer_defaults(EMDB_OPT_ADAM, &tc.optimizer);
	tc.init.kind = EMDB_INIT_UNIFORM;
	tc.init.a = -0.5;
	tc.init.b = 0.5;
	tc.seed = 99;
	if (emdb_table_create(w->ref, &tc, &a) || emdb_table_create(w->db, &tc, &b) || a != b)
		return -1;
	w->t = a;
	return 0;
}

static hot_stats hstats(twin *w)
{
	hot_stats hs;
	tbl *t;

	memset(&hs, 0, sizeof(hs));
	if (db_table_get(w->db, w->t, &t) == EMDB_OK) {
		if (t->hot)
			hot_get_stats(t->hot, &hs);
		table_release(t);
	}
	return hs;
}

static void batch(uint64_t *ids, uint64_t cold_from)
{
	hot_batch(ids, N, HOT, COLD, cold_from, dit_hash);
}

static void grads_for(int s, float *g, size_t rows)
{
	hot_grads(s, g, rows, DIM);
}

static int same_rows(twin *w, const uint64_t *ids, size_t n, float *a, float *b)
{
	return !emdb_lookup(w->ref, w->t, ids, n, DIM, a, NULL) && !emdb_lookup(w->db, w->t, ids, n, DIM, b, NULL) &&
	       !memcmp(a, b, n * DIM * sizeof(float));
}

/* With two devices or more (docs/gpu.md, "Several GPUs"): gradients in
 * device 1's memory are scattered into replica 1 and the step reduces the
 * replicas first; a Pull into device 1's memory then reads replica 1,
 * which must hold the host's rows bit for bit. */
static void test_second_device(twin *w, uint64_t *ids, float *g, float *a, float *b)
{
	size_t bytes = (size_t)N * DIM * sizeof(float);
	emdb_tier_device_info d0, d1, e1;
	emdb_ticket *ta = NULL, *tb = NULL;
	float *dg1 = NULL, *dout1 = NULL;
	hot_stats h0, h1;
	char detail[160];
	int ok;

	ok = cudaSetDevice(1) == cudaSuccess && cudaMalloc((void **)&dg1, bytes) == cudaSuccess &&
	     cudaMalloc((void **)&dout1, bytes) == cudaSuccess && cudaSetDevice(0) == cudaSuccess;
	batch(ids, 400000);
	grads_for(30, g, N);
	ok = ok && to_device(dg1, g, bytes) && !emdb_prefetch(w->ref, w->t, ids, N, &ta) &&
	     !emdb_prefetch(w->db, w->t, ids, N, &tb) && !emdb_table_tier_device(w->db, w->t, 1, &d0);
	h0 = hstats(w);
	ok = ok && !emdb_push_ticket(w->ref, w->t, ta, DIM, g) && !emdb_push_ticket(w->db, w->t, tb, DIM, dg1) &&
	     !emdb_update(w->ref, w->t, NULL) && !emdb_update(w->db, w->t, NULL) && same_rows(w, ids, N, a, b) &&
	     !emdb_table_tier_device(w->db, w->t, 1, &d1);
	h1 = hstats(w);
	snprintf(detail, sizeof(detail), " (%llu rows scattered into device 1, %llu steps reduced)",
		 ok ? (unsigned long long)(d1.rows_scattered - d0.rows_scattered) : 0ull,
		 (unsigned long long)(h1.steps_reduced - h0.steps_reduced));
	check(ok && d1.rows_scattered - d0.rows_scattered == HOT && h1.steps_reduced - h0.steps_reduced == 1 &&
		      h1.steps_replayed == h0.steps_replayed,
	      "engine: Push from device 1's memory scattered there, reduced across devices%s%s", "", detail);
	emdb_ticket_free(ta);
	emdb_ticket_free(tb);
	/* The hot rows into device 1's memory: replica 1 holds every one, so
	 * it gathers them straight there. */
	for (size_t i = 0; i < HOT; i++)
		ids[i] = dit_hash(i);
	ok = !emdb_pull(w->ref, w->t, ids, HOT, DIM, a) && !emdb_pull(w->db, w->t, ids, HOT, DIM, dout1) &&
	     !emdb_table_tier_device(w->db, w->t, 1, &e1) &&
	     cudaMemcpy(b, dout1, (size_t)HOT * DIM * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess &&
	     !memcmp(a, b, (size_t)HOT * DIM * sizeof(float));
	check(ok && e1.rows_gathered - d1.rows_gathered == HOT,
	      "engine: Pull into device 1's memory gathered from replica 1, equal to the host%s%s", "", "");
	cudaFree(dg1);
	cudaFree(dout1);
}

static void test_engine(void)
{
	twin w = { 0 };
	uint64_t *ids = malloc(N * sizeof(uint64_t)), off[BAGS + 1];
	float *g = malloc((size_t)N * DIM * sizeof(float)), *a = malloc((size_t)N * DIM * sizeof(float));
	float *b = malloc((size_t)N * DIM * sizeof(float)), *wts = malloc(N * sizeof(float));
	float *dev = NULL, *dgrad = NULL;
	size_t bytes = (size_t)N * DIM * sizeof(float);
	emdb_tier_info ti;
	hot_stats h0, h1;
	char detail[160];
	int ok = 1;

	if (twin_open(&w) || cudaMalloc((void **)&dev, bytes) != cudaSuccess ||
	    cudaMalloc((void **)&dgrad, bytes) != cudaSuccess) {
		check(0, "engine: open: %s%s", emdb_last_error(), "");
		goto out;
	}
	for (size_t k = 0; k <= BAGS; k++)
		off[k] = k * (N / BAGS);
	for (size_t i = 0; i < N; i++)
		wts[i] = 1.5f - (float)(i % 3) * 0.5f;
	/* Warm: only the hot ids are prefetched, so they are the members. */
	for (int s = 1; s <= HOT_REVISE_STEPS && ok; s++) {
		batch(ids, 100000 + (uint64_t)s * COLD);
		grads_for(s, g, N);
		for (size_t i = 0; i < HOT; i++)
			((uint64_t *)b)[i] = dit_hash(i); /* b holds the hot ids here */
		for (int d = 0; d < 2 && ok; d++) {
			emdb_db *db = d ? w.db : w.ref;
			emdb_ticket *tk = NULL;

			ok = !emdb_prefetch(db, w.t, (const uint64_t *)b, HOT, &tk) &&
			     !emdb_push(db, w.t, ids, N, DIM, g) && !emdb_update(db, w.t, NULL);
			emdb_ticket_free(tk);
		}
	}
	ok = ok && !emdb_table_tier(w.db, w.t, &ti) && !strcmp(ti.tier, "cuda") && ti.hot_rows == HOT;
	snprintf(detail, sizeof(detail), " (tier %s, %llu hot rows)", ok ? ti.tier : "?",
		 (unsigned long long)(ok ? ti.hot_rows : 0));
	check(ok, "engine: the hot ids are the device replica's rows%s%s", "", detail);
	if (!ok)
		goto out;

	/* Push forms, Update stepped on the device. */
	for (int s = 10; s < 13; s++) {
		h0 = hstats(&w);
		batch(ids, 200000 + (uint64_t)s * COLD);
		grads_for(s, g, N);
		for (int d = 0; d < 2 && ok; d++) {
			emdb_db *db = d ? w.db : w.ref;
			emdb_ticket *tk = NULL;

			ok = !emdb_prefetch(db, w.t, ids, N, &tk);
			if (ok && s == 10)
				ok = !emdb_push_ticket(db, w.t, tk, DIM, g);
			else if (ok && s == 11)
				ok = !emdb_push_bags(db, w.t, ids, N, off, BAGS, EMDB_POOL_MEAN, DIM, g);
			else if (ok)
				ok = !emdb_push_bags_weighted_ticket(db, w.t, tk, off, BAGS, EMDB_POOL_SUM, wts, DIM, g);
			ok = ok && !emdb_update(db, w.t, NULL);
			emdb_ticket_free(tk);
		}
		h1 = hstats(&w);
		ok = ok && same_rows(&w, ids, N, a, b);
		snprintf(detail, sizeof(detail), " (%llu rows scattered, %llu device steps, %llu replayed)",
			 (unsigned long long)(h1.rows_scattered - h0.rows_scattered),
			 (unsigned long long)(h1.steps_device - h0.steps_device),
			 (unsigned long long)(h1.steps_replayed - h0.steps_replayed));
		check(ok && h1.steps_device - h0.steps_device == 1 && h1.rows_scattered - h0.rows_scattered == HOT,
		      "engine: push form %s scattered on the device, rows bit-identical%s", s == 10 ? "ticket" :
		      s == 11 ? "MEAN bags" : "weighted bags", detail);
	}

	/* Pull into device memory after a Prefetch: every row on the device. */
	batch(ids, 300000);
	{
		emdb_ticket *ta = NULL, *tb = NULL;

		ok = !emdb_prefetch(w.ref, w.t, ids, N, &ta) && !emdb_prefetch(w.db, w.t, ids, N, &tb);
		h0 = hstats(&w);
		ok = ok && !emdb_pull_ticket(w.ref, w.t, ta, DIM, a) && !emdb_pull_ticket(w.db, w.t, tb, DIM, dev) &&
		     cudaMemcpy(b, dev, bytes, cudaMemcpyDeviceToHost) == cudaSuccess && !memcmp(a, b, bytes);
		h1 = hstats(&w);
		snprintf(detail, sizeof(detail), " (%llu staged, %llu gathered into device memory)",
			 (unsigned long long)h1.rows_staged, (unsigned long long)(h1.rows_direct - h0.rows_direct));
		check(ok && h1.rows_direct - h0.rows_direct == N,
		      "engine: Pull by ticket into device memory, every row gathered there%s%s", "", detail);
		/* Pooled forms, into host and into device memory. */
		h0 = hstats(&w);
		ok = !emdb_pull_bags_ticket(w.ref, w.t, ta, off, BAGS, EMDB_POOL_MEAN, DIM, a) &&
		     !emdb_pull_bags_ticket(w.db, w.t, tb, off, BAGS, EMDB_POOL_MEAN, DIM, b) &&
		     !memcmp(a, b, BAGS * DIM * sizeof(float)) &&
		     !emdb_pull_bags_weighted(w.db, w.t, ids, N, off, BAGS, EMDB_POOL_SUM, wts, DIM, dev) &&
		     !emdb_pull_bags_weighted(w.ref, w.t, ids, N, off, BAGS, EMDB_POOL_SUM, wts, DIM, a) &&
		     cudaMemcpy(b, dev, BAGS * DIM * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess &&
		     !memcmp(a, b, BAGS * DIM * sizeof(float));
		h1 = hstats(&w);
		check(ok && h1.rows_gathered - h0.rows_gathered == N + 2 * HOT,
		      "engine: pooled Pulls gather on the device, bit-identical%s%s", "", "");
		/* Gradients in device memory. */
		grads_for(20, g, N);
		ok = to_device(dgrad, g, bytes) &&
		     !emdb_push_ticket(w.ref, w.t, ta, DIM, g) && !emdb_push_ticket(w.db, w.t, tb, DIM, dgrad) &&
		     !emdb_update(w.ref, w.t, NULL) && !emdb_update(w.db, w.t, NULL) && same_rows(&w, ids, N, a, b);
		check(ok, "engine: Push of gradients in device memory, rows bit-identical%s%s", "", "");
		emdb_ticket_free(ta);
		emdb_ticket_free(tb);
	}
	if (ti.devices >= 2)
		test_second_device(&w, ids, g, a, b);
	/* Pull by IDs of rows the device does not hold, into device memory. */
	for (size_t i = 0; i < N; i++)
		ids[i] = dit_hash(900000 + i);
	ok = !emdb_pull(w.ref, w.t, ids, N, DIM, a) && !emdb_pull(w.db, w.t, ids, N, DIM, dev) &&
	     cudaMemcpy(b, dev, bytes, cudaMemcpyDeviceToHost) == cudaSuccess && !memcmp(a, b, bytes);
	check(ok, "engine: Pull of cold rows into device memory (assembled on the host)%s%s", "", "");
out:
	cudaFree(dev);
	cudaFree(dgrad);
	if (w.ref)
		emdb_db_close(w.ref);
	if (w.db)
		emdb_db_close(w.db);
	free(ids);
	free(g);
	free(a);
	free(b);
	free(wts);
}

void gpu_test_serve(void)
{
	test_tier_pointers();
	test_engine();
}
