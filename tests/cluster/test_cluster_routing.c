/*
 * test_cluster_routing.c - requests routed across a cluster of three
 * emdb-server processes on loopback (tests/lib/cluster_harness.h), as a
 * trainer sees them through the client library:
 *   - a table created on one node exists on every node under one id;
 *   - a training run through two home nodes (Prefetch; Pull plain, pooled
 *     and weighted, by IDs and by ticket; Push plain, pooled and weighted,
 *     by IDs and by ticket; Update; Push+Update by IDs and by ticket)
 *     answers every Pull and leaves every row and optimizer state
 *     bit-identical to the same run on one engine in this process, and
 *     Lookup and state reads of IDs held and not held agree with it, found
 *     flags included (each home node's local part goes through the
 *     engine's positional forms, the others' through the link);
 *   - three workers, one per node, meet in synchronous steps
 *     (emdb_client_update_sync): each step is applied once on every node,
 *     after the last worker's arrival, and every worker hears the same
 *     rows updated;
 *   - the same with UCX's shared-memory transports offered;
 *   - after a node is SIGKILLed, a request that needs it fails with NODE
 *     naming it, bounded by the node timeout, and requests that need only
 *     the others are answered.
 *
 * Every wait is bounded; the fixture kills every node.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>

#include <emdb/client.h>
#include <emdb/db.h>

#include "cluster/owner.h"
#include "tests/lib/cluster_harness.h"

#define READY_MS 20000
#define DIM 16

static void fini(void)
{
	ch_stop_all();
}

static const char *const fast[] = { "--node-timeout-ms", "1000", "--cluster-start-timeout-ms", "15000", NULL };

static emdb_table_config cfg_of(void)
{
	emdb_table_config c = EMDB_TABLE_CONFIG_INIT;
	strcpy(c.name, "emb");
	c.dim = DIM;
	cr_assert_eq(emdb_optimizer_defaults(EMDB_OPT_ADAM, &c.optimizer), 0);
	c.init = (emdb_init){ EMDB_INIT_NORMAL, 0, 0.05 };
	c.seed = 99;
	return c;
}

static uint64_t rng(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 11;
}

enum { N = 256, BAGS = 64, STEPS = 6 };

/* One step's batch: IDs with duplicates (0 and 2^64-1 among them) and
 * bags. */
static void batch(uint64_t *seed, uint64_t *ids, uint64_t *off)
{
	for (size_t i = 0; i < N; i++) {
		uint64_t x = rng(seed);
		ids[i] = x % 9 == 0 ? 0 : x % 9 == 1 ? UINT64_MAX : x % 301;
	}
	off[0] = 0;
	for (size_t b = 1; b < BAGS; b++) {
		uint64_t o = off[b - 1] + rng(seed) % 8;
		off[b] = o > N ? N : o;
	}
	off[BAGS] = N;
}

static void grads_of(const float *out, float *g, size_t rows)
{
	for (size_t i = 0; i < rows * DIM; i++)
		g[i] = out[i] * 0.25f - (float)(i % 7) * 0.003f;
}

/* Per-sample weights of a step, some negative. */
static void weights_of(uint64_t *seed, float *w)
{
	for (size_t i = 0; i < N; i++)
		w[i] = (float)(rng(seed) % 17) * 0.125f - 1.0f;
}

typedef struct worker {
	emdb_client *c;
	uint32_t table;
	int w;
	int rc[3];
	uint64_t rows[3];
} worker;

static void *worker_main(void *arg)
{
	worker *k = arg;
	uint64_t ids[32];
	static float g[3][32 * DIM];
	for (int i = 0; i < 32; i++)
		ids[i] = 1000000 + (uint64_t)k->w * 1000 + (uint64_t)i;
	for (size_t i = 0; i < 32 * DIM; i++)
		g[k->w][i] = 0.01f * (float)(k->w + 1);
	for (int s = 0; s < 3; s++) {
		k->rc[s] = emdb_client_push(k->c, k->table, ids, 32, DIM, g[k->w]);
		if (k->rc[s] == EMDB_OK)
			k->rc[s] = emdb_client_update_sync(k->c, k->table, 3, &k->rows[s]);
	}
	return NULL;
}

/* Three workers, one per node, take three synchronous steps of table t. */
static void three_workers_take_three_steps(emdb_client **c, uint32_t t)
{
	emdb_table_info before, after;
	cr_assert_eq(emdb_client_table_describe(c[0], t, &before), EMDB_OK, "%s", emdb_client_last_error());
	worker k[3];
	pthread_t th[3];
	for (int w = 0; w < 3; w++) {
		k[w] = (worker){ .c = c[w], .table = t, .w = w };
		cr_assert_eq(pthread_create(&th[w], NULL, worker_main, &k[w]), 0);
	}
	for (int w = 0; w < 3; w++)
		pthread_join(th[w], NULL);
	for (int w = 0; w < 3; w++)
		for (int s = 0; s < 3; s++) {
			cr_assert_eq(k[w].rc[s], EMDB_OK, "worker %d, step %d: %d", w, s, k[w].rc[s]);
			cr_assert_eq(k[w].rows[s], k[0].rows[s], "workers hear different rows updated at step %d", s);
		}
	cr_assert_geq(k[0].rows[0], 96, "the first step updated %llu rows", (unsigned long long)k[0].rows[0]);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(emdb_client_table_describe(c[i], t, &after), EMDB_OK, "%s", emdb_client_last_error());
		cr_assert_eq(after.stats.step, before.stats.step + 3, "node %d went from step %llu to %llu", i,
			     (unsigned long long)before.stats.step, (unsigned long long)after.stats.step);
	}
}

static void training_through_two_homes(void)
{
	ch_init(3);
	for (int i = 0; i < 3; i++)
		ch_spawn(i, NULL, fast);
	for (int i = 0; i < 3; i++)
		ch_wait_ready(i, READY_MS);
	emdb_client *c[3];
	for (int i = 0; i < 3; i++)
		c[i] = ch_client(i);
	emdb_table_config cfg = cfg_of();
	uint32_t t;
	cr_assert_eq(emdb_client_table_create(c[1], &cfg, &t), EMDB_OK, "%s", emdb_client_last_error());
	for (int i = 0; i < 3; i++) {
		uint32_t id;
		cr_assert_eq(emdb_client_table_find(c[i], "emb", &id), EMDB_OK, "node %d: %s", i, emdb_client_last_error());
		cr_assert_eq(id, t, "node %d numbers the table %u, not %u", i, id, t);
	}

	emdb_db *db;
	cr_assert_eq(emdb_db_open(NULL, &db), 0);
	uint32_t lt;
	cr_assert_eq(emdb_table_create(db, &cfg, &lt), 0);

	static uint64_t all[STEPS * N];
	uint64_t seed = 5, ids[N], off[BAGS + 1];
	static float a[BAGS * DIM], b[BAGS * DIM], g[BAGS * DIM];
	static float pa[N * DIM], pb[N * DIM], pg[N * DIM], wt[N];
	for (int s = 0; s < STEPS; s++) {
		emdb_client *home = c[1 + s % 2];
		batch(&seed, ids, off);
		memcpy(all + (size_t)s * N, ids, sizeof(ids));
		emdb_client_ticket *ct;
		emdb_ticket *et;
		cr_assert_eq(emdb_client_prefetch(home, t, ids, N, &ct), EMDB_OK, "%s", emdb_client_last_error());
		cr_assert_eq(emdb_prefetch(db, lt, ids, N, &et), 0);
		cr_assert_eq(emdb_client_pull_bags_ticket(home, t, ct, off, BAGS, EMDB_POOL_MEAN, DIM, a), EMDB_OK, "%s",
			     emdb_client_last_error());
		cr_assert_eq(emdb_pull_bags_ticket(db, lt, et, off, BAGS, EMDB_POOL_MEAN, DIM, b), 0);
		cr_assert(memcmp(a, b, sizeof(a)) == 0, "step %d: the pooled pull differs from one engine's", s);
		/* Plain Pull, by ticket and by IDs; weighted pooled Pull. */
		cr_assert_eq(emdb_client_pull_ticket(home, t, ct, DIM, pa), EMDB_OK, "%s", emdb_client_last_error());
		cr_assert_eq(emdb_pull_ticket(db, lt, et, DIM, pb), 0);
		cr_assert(memcmp(pa, pb, sizeof(pa)) == 0, "step %d: the pull by ticket differs from one engine's", s);
		memset(pa, 0xff, sizeof(pa));
		cr_assert_eq(emdb_client_pull(home, t, ids, N, DIM, pa), EMDB_OK, "%s", emdb_client_last_error());
		cr_assert(memcmp(pa, pb, sizeof(pa)) == 0, "step %d: the pull by IDs differs from one engine's", s);
		weights_of(&seed, wt);
		cr_assert_eq(emdb_client_pull_bags_weighted(home, t, ids, N, off, BAGS, EMDB_POOL_SUM, wt, DIM, a),
			     EMDB_OK, "%s", emdb_client_last_error());
		cr_assert_eq(emdb_pull_bags_weighted(db, lt, ids, N, off, BAGS, EMDB_POOL_SUM, wt, DIM, b), 0);
		cr_assert(memcmp(a, b, sizeof(a)) == 0, "step %d: the weighted pull differs from one engine's", s);
		grads_of(a, g, BAGS);
		grads_of(pa, pg, N);
		cr_assert_eq(emdb_client_push_bags_ticket(home, t, ct, off, BAGS, EMDB_POOL_MEAN, DIM, g), EMDB_OK, "%s",
			     emdb_client_last_error());
		cr_assert_eq(emdb_push_bags_ticket(db, lt, et, off, BAGS, EMDB_POOL_MEAN, DIM, g), 0);
		/* One more push a step, in turn: plain by IDs, plain by ticket,
		 * weighted pooled by IDs. */
		if (s % 3 == 0) {
			cr_assert_eq(emdb_client_push(home, t, ids, N, DIM, pg), EMDB_OK, "%s", emdb_client_last_error());
			cr_assert_eq(emdb_push(db, lt, ids, N, DIM, pg), 0);
		} else if (s % 3 == 1) {
			cr_assert_eq(emdb_client_push_ticket(home, t, ct, DIM, pg), EMDB_OK, "%s",
				     emdb_client_last_error());
			cr_assert_eq(emdb_push_ticket(db, lt, et, DIM, pg), 0);
		} else {
			cr_assert_eq(emdb_client_push_bags_weighted(home, t, ids, N, off, BAGS, EMDB_POOL_SUM, wt, DIM, g),
				     EMDB_OK, "%s", emdb_client_last_error());
			cr_assert_eq(emdb_push_bags_weighted(db, lt, ids, N, off, BAGS, EMDB_POOL_SUM, wt, DIM, g), 0);
		}
		uint64_t rc_rows = 0, lc_rows = 0;
		if (s % 2) {
			cr_assert_eq(emdb_client_update(home, t, &rc_rows), EMDB_OK, "%s", emdb_client_last_error());
			cr_assert_eq(emdb_update(db, lt, &lc_rows), 0);
		} else if (s % 4 == 2) {
			cr_assert_eq(emdb_client_push_update_ticket(home, t, ct, DIM, pg, &rc_rows), EMDB_OK, "%s",
				     emdb_client_last_error());
			cr_assert_eq(emdb_push_update_ticket(db, lt, et, DIM, pg, &lc_rows), 0);
		} else {
			cr_assert_eq(emdb_client_push_update(home, t, ids, BAGS, DIM, g, &rc_rows), EMDB_OK, "%s",
				     emdb_client_last_error());
			cr_assert_eq(emdb_push_update(db, lt, ids, BAGS, DIM, g, &lc_rows), 0);
		}
		cr_assert_eq(rc_rows, lc_rows, "step %d: %llu rows updated, one engine %llu", s,
			     (unsigned long long)rc_rows, (unsigned long long)lc_rows);
		emdb_client_ticket_free(ct);
		emdb_ticket_free(et);
	}
	uint32_t sf = emdb_optimizer_state_floats(EMDB_OPT_ADAM, DIM);
	size_t n = (size_t)STEPS * N;
	float *ra = malloc(n * DIM * 4), *rb = malloc(n * DIM * 4), *sa = malloc(n * sf * 4), *sb = malloc(n * sf * 4);
	cr_assert(ra && rb && sa && sb);
	cr_assert_eq(emdb_client_lookup(c[0], t, all, n, DIM, ra, NULL), EMDB_OK, "%s", emdb_client_last_error());
	cr_assert_eq(emdb_lookup(db, lt, all, n, DIM, rb, NULL), 0);
	cr_assert(memcmp(ra, rb, n * DIM * 4) == 0, "rows differ from one engine's");
	cr_assert_eq(emdb_client_read_state(c[2], t, all, n, sf, sa, NULL), EMDB_OK, "%s", emdb_client_last_error());
	cr_assert_eq(emdb_read_state(db, lt, all, n, sb, NULL), 0);
	cr_assert(memcmp(sa, sb, n * sf * 4) == 0, "optimizer state differs from one engine's");
	/* Lookup and state reads with found, of IDs held and not held. */
	static uint8_t fa[STEPS * N], fb[STEPS * N];
	for (size_t i = 0; i < n; i += 3)
		all[i] = all[i] * 7 + 100003;
	cr_assert_eq(emdb_client_lookup(c[1], t, all, n, DIM, ra, fa), EMDB_OK, "%s", emdb_client_last_error());
	cr_assert_eq(emdb_lookup(db, lt, all, n, DIM, rb, fb), 0);
	cr_assert(memcmp(ra, rb, n * DIM * 4) == 0, "rows looked up differ from one engine's");
	cr_assert(memcmp(fa, fb, n) == 0, "found flags differ from one engine's");
	size_t held = 0;
	for (size_t i = 0; i < n; i++)
		held += fb[i];
	cr_assert(held > 0 && held < n, "%zu of %zu IDs held: the lookup tests one kind only", held, n);
	memset(fa, 7, n);
	cr_assert_eq(emdb_client_read_state(c[2], t, all, n, sf, sa, fa), EMDB_OK, "%s", emdb_client_last_error());
	cr_assert_eq(emdb_read_state(db, lt, all, n, sb, fb), 0);
	cr_assert(memcmp(sa, sb, n * sf * 4) == 0, "state read differs from one engine's");
	cr_assert(memcmp(fa, fb, n) == 0, "state read's found flags differ from one engine's");
	free(ra), free(rb), free(sa), free(sb);
	emdb_db_close(db);

	/* Synchronous steps: three workers on three home nodes, disjoint IDs. */
	three_workers_take_three_steps(c, t);

	/* SIGKILL node 2: what needs it fails with NODE, naming it (the
	 * test's own timeout catches a hang); what needs only nodes 0 and 1
	 * goes on. */
	ch_kill(2);
	owner_map map;
	cr_assert_eq(owner_map_init(&map, 3, 1024), 0);
	uint64_t near[64], spread[64];
	size_t kn = 0;
	for (uint64_t id = 1; kn < 64; id++)
		if (owner_of(&map, id) != 2)
			near[kn++] = id;
	for (uint64_t i = 0; i < 64; i++)
		spread[i] = i;
	owner_map_destroy(&map);
	static float v[64 * DIM];
	int rc = emdb_client_pull(c[1], t, spread, 64, DIM, v);
	cr_assert_eq(rc, EMDB_ERR_NODE, "a pull needing the dead node: %d %s", rc, emdb_client_last_error());
	cr_assert(strstr(emdb_client_last_error(), "node 2"), "the error names the node: %s", emdb_client_last_error());
	cr_assert_eq(emdb_client_lookup(c[0], t, near, 64, DIM, v, NULL), EMDB_OK, "%s", emdb_client_last_error());
	cr_assert_eq(emdb_client_push(c[1], t, near, 64, DIM, v), EMDB_OK, "%s", emdb_client_last_error());
	for (int i = 0; i < 2; i++)
		emdb_client_close(c[i]);
	emdb_client_close(c[2]);
}

Test(cluster_routing, training_through_two_homes_is_one_engine, .fini = fini, .timeout = 180)
{
	training_through_two_homes(); /* UCX over TCP on loopback */
}

/* The same with UCX's shared-memory transports offered (and tcp, which
 * the listener's connection manager needs), with the error handling they
 * need to notice a peer's loss (docs/cluster.md, UCX settings). */
Test(cluster_routing, over_shared_memory, .fini = fini, .timeout = 180)
{
	setenv("UCX_TLS", "sm,self,tcp", 1); /* tcp: the listener's connection manager */
	setenv("UCX_NET_DEVICES", "lo", 1);
	setenv("UCX_POSIX_ERROR_HANDLING", "y", 1);
	setenv("UCX_SYSV_ERROR_HANDLING", "y", 1);
	training_through_two_homes();
}
