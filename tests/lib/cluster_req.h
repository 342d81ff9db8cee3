/*
 * tests/lib/cluster_req.h - what the cluster layer's in-process tests
 * (test_cluster_route.c, test_cluster_v3.c) share on top of
 * tests/lib/cluster_mem.h: a table configuration, a request run to its
 * end with its expected result, deterministic batches (IDs with many
 * duplicates, 0 and 2^64-1 among them; gradients; bag offsets), and the
 * comparison with one engine.
 *
 * Header only, for Criterion tests (or the plain runner under TSan):
 * include it after the test framework and cluster_mem.h.
 */
#ifndef EMDB_TESTS_CLUSTER_REQ_H
#define EMDB_TESTS_CLUSTER_REQ_H

#include <stdlib.h>
#include <string.h>

#include <emdb/db.h>
#include <emdb/error.h>

#include "tests/lib/cluster_mem.h"

#define DIM 8

static inline emdb_table_config table_cfg(const char *name, emdb_opt_kind opt)
{
	emdb_table_config c = EMDB_TABLE_CONFIG_INIT;
	strcpy(c.name, name);
	c.dim = DIM;
	cr_assert_eq(emdb_optimizer_defaults(opt, &c.optimizer), 0);
	c.optimizer.lr = 0.05;
	c.init = (emdb_init){ EMDB_INIT_UNIFORM, -0.1, 0.1 };
	c.seed = 77;
	c.lookup_default = EMDB_DEFAULT_INIT;
	return c;
}

/* A cluster request, run to its end; fails the test on error unless
 * want is that error. */
static inline int run_req(memnet *net, uint32_t home, cluster_req *r, int want)
{
	int rc = cluster_run(memnet_cl(net, home), r);
	cr_assert_eq(rc, want, "op %d on node %u: %d (%s), wanted %d", (int)r->op, home, rc, r->msg, want);
	return rc;
}

static inline uint32_t cl_create(memnet *net, uint32_t home, const emdb_table_config *cfg)
{
	cluster_req r = { .op = CLUSTER_TABLE_CREATE, .cfg = cfg };
	run_req(net, home, &r, EMDB_OK);
	return r.table_out;
}

/* Requests submitted without waiting (req_submit); req_wait_all waits
 * for every one's done.  Initialise with REQ_WAITER_INIT. */
typedef struct req_waiter {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int left;
} req_waiter;

#define REQ_WAITER_INIT { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 }

static inline void req_waiter_done(cluster_req *r)
{
	req_waiter *w = r->arg;
	pthread_mutex_lock(&w->mu);
	w->left--;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

/* Submit r on home (its done and arg set here); fails the test when
 * cluster_submit refuses it. */
static inline void req_submit(memnet *net, uint32_t home, cluster_req *r, req_waiter *w)
{
	r->done = req_waiter_done;
	r->arg = w;
	pthread_mutex_lock(&w->mu);
	w->left++;
	pthread_mutex_unlock(&w->mu);
	int rc = cluster_submit(memnet_cl(net, home), r);
	cr_assert_eq(rc, EMDB_OK, "submit on node %u: %s", home, r->msg);
}

/* The memnet thread ends every call (its deadline too). */
static inline void req_wait_all(req_waiter *w)
{
	pthread_mutex_lock(&w->mu);
	while (w->left)
		pthread_cond_wait(&w->cv, &w->mu);
	pthread_mutex_unlock(&w->mu);
}

/* Deterministic batches: a mix of small, repeated and extreme IDs. */
static inline uint64_t rng_next(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 11;
}

static inline void make_ids(uint64_t *ids, size_t n, uint64_t *seed)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t x = rng_next(seed);
		ids[i] = x % 7 == 0 ? 0 : x % 7 == 1 ? UINT64_MAX : x % 97; /* duplicates galore */
		if (x % 11 == 5)
			ids[i] = x; /* and fresh large ones */
	}
}

static inline void make_grads(float *g, size_t n, uint64_t *seed)
{
	for (size_t i = 0; i < n; i++)
		g[i] = (float)((int64_t)(rng_next(seed) % 2001) - 1000) / 997.0f;
}

static inline void make_offsets(uint64_t *off, size_t n_bags, size_t n, uint64_t *seed)
{
	off[0] = 0;
	for (size_t b = 1; b < n_bags; b++) {
		uint64_t o = off[b - 1] + rng_next(seed) % 5;
		off[b] = o > n ? n : o;
	}
	off[n_bags] = n;
}

#define SAME(a, b, bytes, what) cr_assert(memcmp((a), (b), (bytes)) == 0, "%s differs from one engine's", what)

/* Every row and state of ids, read through each node, equal ref's. */
static inline void same_rows(memnet *net, uint32_t nodes, emdb_db *ref, uint32_t rt, uint32_t ct, const uint64_t *ids,
			     size_t n, uint32_t sf)
{
	float *ra = malloc(n * DIM * 4), *rb = malloc(n * DIM * 4);
	float *sa = malloc(n * sf * 4 + 4), *sb = malloc(n * sf * 4 + 4);
	uint8_t *ha = malloc(n), *hb = malloc(n);
	cr_assert(ra && rb && sa && sb && ha && hb);
	cr_assert_eq(emdb_lookup(ref, rt, ids, n, DIM, ra, ha), 0);
	cr_assert_eq(emdb_read_state(ref, rt, ids, n, sa, NULL), 0);
	for (uint32_t home = 0; home < nodes; home++) {
		cluster_req lk = { .op = CLUSTER_LOOKUP, .table = ct, .dim = DIM, .ids = ids, .n = n, .out = rb, .found = hb };
		run_req(net, home, &lk, EMDB_OK);
		SAME(ra, rb, n * DIM * 4, "rows");
		SAME(ha, hb, n, "rows held");
		cluster_req rs = { .op = CLUSTER_READ_STATE, .table = ct, .ids = ids, .n = n, .out = sb, .found = hb };
		run_req(net, home, &rs, EMDB_OK);
		SAME(sa, sb, n * sf * 4, "optimizer state");
	}
	free(ra), free(rb), free(sa), free(sb), free(ha), free(hb);
}

#endif
