/*
 * test_client_workers.c - emdb_client_options.worker_rank: a trainer's
 * workers, each with its own mem:// handle and rank, push overlapping IDs;
 * whichever pushes first, the rows and optimizer state come out the same
 * bits (the engine sums per row in rank order, emdb_push_as).  A rank out
 * of range is refused, and a socket URI with a rank is refused with
 * UNSUPPORTED before any connection (the wire does not carry it yet).
 */
#include <criterion/criterion.h>
#include <string.h>

#include <emdb/client.h>
#include <emdb/db.h>

#include "tests/lib/helpers.h"

#define DIM 4
#define N 32
#define OK(call) cr_assert_eq((call), EMDB_OK, "%s: %s", #call, emdb_client_last_error())

static emdb_client *worker_handle(emdb_db *db, uint32_t rank)
{
	emdb_client_options o = EMDB_CLIENT_OPTIONS_INIT;
	o.worker_rank = rank;
	emdb_client *c = NULL;
	OK(emdb_client_wrap(db, &o, &c));
	return c;
}

static void batch(uint32_t w, int s, uint64_t *ids, float *g)
{
	for (size_t i = 0; i < N; i++)
		ids[i] = scramble((i * 7 + w * 3 + (size_t)s) % 20);
	static const float mag[5] = { 1e-3f, 1.0f, 1e3f, -1e3f, 1e-1f };
	for (size_t i = 0; i < N * DIM; i++)
		g[i] = mag[(i + w + (size_t)s) % 5] * (float)(1 + i % 7) / 7.0f;
}

/* Three steps of workers 0 and 1 pushing (worker `first` first), then
 * an Update; rows and state of the 20 IDs into out. */
static void run(uint32_t first, bool ranked, float *out)
{
	emdb_db *db = open_db(8);
	uint32_t t = make_table(db, "t", DIM, EMDB_OPT_ADAGRAD, EMDB_INIT_UNIFORM, -0.1, 0.1);
	emdb_client *c[2] = { worker_handle(db, ranked ? 0 : EMDB_WORKER_NONE),
			      worker_handle(db, ranked ? 1 : EMDB_WORKER_NONE) };
	for (int s = 0; s < 3; s++) {
		for (uint32_t k = 0; k < 2; k++) {
			uint32_t w = k ? 1 - first : first;
			uint64_t ids[N];
			float g[N * DIM];
			batch(w, s, ids, g);
			OK(emdb_client_push(c[w], t, ids, N, DIM, g));
		}
		OK(emdb_client_update(c[0], t, NULL));
	}
	uint64_t ids[20];
	for (uint64_t i = 0; i < 20; i++)
		ids[i] = scramble(i);
	OK(emdb_client_lookup(c[1], t, ids, 20, DIM, out, NULL));
	cr_assert_eq(emdb_read_state(db, t, ids, 20, out + 20 * DIM, NULL), 0);
	emdb_client_close(c[0]);
	emdb_client_close(c[1]);
	emdb_db_close(db);
}

Test(client_workers, mem_workers_in_either_order_give_the_same_bits)
{
	static float a[40 * DIM], b[40 * DIM];
	run(0, true, a);
	run(1, true, b);
	cr_assert(memcmp(a, b, sizeof(a)) == 0, "worker 1 first changed rows or state");
	run(0, false, a);
	run(1, false, b);
	cr_assert(memcmp(a, b, sizeof(a)) != 0, "the data must be sensitive to the order of unranked sums");
}

Test(client_workers, bad_rank_and_sockets_are_refused)
{
	emdb_client_options o = EMDB_CLIENT_OPTIONS_INIT;
	emdb_client *c = (emdb_client *)1;
	o.worker_rank = EMDB_WORKERS_MAX;
	cr_assert_eq(emdb_client_connect("mem://", &o, &c), EMDB_ERR_INVALID);
	cr_assert_null(c);
	cr_assert_not_null(strstr(emdb_client_last_error(), "worker_rank"));
	o.worker_rank = 3;
	cr_assert_eq(emdb_client_connect("tcp://127.0.0.1:1", &o, &c), EMDB_ERR_UNSUPPORTED);
	cr_assert_null(c);
	cr_assert_not_null(strstr(emdb_client_last_error(), "worker_rank"));
}
