/*
 * example_trainer.c - the smallest useful emdb trainer: copy it first.
 *
 * It trains one embedding table for a few steps against an emdb server (or
 * an in-process database with mem://) the way a recommendation model does:
 * each step Prefetches its batch of IDs, Pulls their vectors, computes a
 * loss and its gradient, Pushes the gradient and Updates (in one request,
 * emdb_client_push_update_ticket, when it trains alone and the server
 * speaks protocol version 2).  The Prefetch of
 * batch i+1 is submitted asynchronously before batch i is computed, so the
 * server resolves the next IDs while the trainer works.
 *
 * The "model" is deliberately trivial: every ID should embed to the same
 * target vector, loss = mean over the batch of 0.5 * |e - target|^2, so
 * the printed loss must fall step after step.
 *
 *   emdb-server --port 7878 &
 *   emdb-example-trainer tcp://127.0.0.1:7878 20
 *   emdb-example-trainer-mem mem:// 20      # no server at all
 *
 * Data-parallel: N processes (WORKERS RANK as two more arguments), each
 * training on its own share of every step's data, end each step with
 * emdb_client_update_sync, which returns once all N have pushed and the
 * server has applied the step's Update, once:
 *
 *   emdb-example-trainer tcp://127.0.0.1:7878 20 2 0 &
 *   emdb-example-trainer tcp://127.0.0.1:7878 20 2 1
 *
 * Build: cc example_trainer.c $(pkg-config --cflags --libs emdb-client)
 * (it is also built by CMake as emdb-example-trainer): the client alone,
 * no engine and no RocksDB.  mem:// needs libemdb_client_mem linked too
 * (CMake target emdb_client_mem; built so as emdb-example-trainer-mem).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <emdb/client.h>

#define DIM 16
#define BATCH 512
#define VOCAB 5000 /* distinct IDs the batches draw from */

/* Report a failed call with its code and message, and give up. */
#define CHECK(call)                                                                  \
	do {                                                                         \
		int rc_ = (call);                                                    \
		if (rc_ != EMDB_OK) {                                                \
			fprintf(stderr, "%s failed: %s (%s)\n", #call, emdb_err_name(rc_), \
				emdb_client_last_error());                           \
			goto out;                                                    \
		}                                                                    \
	} while (0)

/* Batch i's IDs: a deterministic skewed draw from the vocabulary, with
 * repeats, as real click logs have. */
static void make_batch(uint64_t step, uint64_t *ids)
{
	uint64_t x = step * 0x9e3779b97f4a7c15ull + 1;
	for (int k = 0; k < BATCH; k++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		uint64_t r = x % VOCAB;
		ids[k] = (r * r) / VOCAB; /* small IDs are the frequent ones */
	}
}

int main(int argc, char **argv)
{
	const char *uri = argc > 1 ? argv[1] : "tcp://127.0.0.1:7878";
	int steps = argc > 2 ? atoi(argv[2]) : 10;
	uint32_t workers = argc > 3 ? (uint32_t)atoi(argv[3]) : 1;
	uint64_t rank = argc > 4 ? (uint64_t)atoll(argv[4]) : 0;
	int status = 1;
	emdb_client *c = NULL;
	emdb_client_ticket *tk = NULL, *tk_next = NULL;
	emdb_future *f = NULL;
	static uint64_t ids[2][BATCH];
	static float emb[BATCH * DIM], grad[BATCH * DIM];
	float target[DIM];

	for (int j = 0; j < DIM; j++)
		target[j] = 0.5f - (float)j / DIM;

	/* Connect: a token, if the server wants one, goes in the URI
	 * (tcp://host:port?token=...) or in emdb_client_options. */
	emdb_client_options opt = EMDB_CLIENT_OPTIONS_INIT;
	opt.client_name = "example-trainer";
	opt.timeout_ms = 10000;
	CHECK(emdb_client_connect(uri, &opt, &c));
	printf("connected to %s (%s)\n", uri, emdb_client_server(c));

	/* The table: reuse it if an earlier run (or another worker) made it. */
	uint32_t table;
	if (emdb_client_table_find(c, "example", &table) != EMDB_OK) {
		emdb_table_config cfg = EMDB_TABLE_CONFIG_INIT;
		strcpy(cfg.name, "example");
		cfg.dim = DIM;
		emdb_optimizer_defaults(EMDB_OPT_ADAGRAD, &cfg.optimizer);
		cfg.optimizer.lr = 0.5;
		cfg.init = (emdb_init){ EMDB_INIT_UNIFORM, -0.1, 0.1 };
		cfg.seed = 42;
		int rc = emdb_client_table_create(c, &cfg, &table);
		if (rc == EMDB_ERR_EXISTS) /* another worker was first */
			rc = emdb_client_table_find(c, "example", &table);
		else if (rc == EMDB_OK && emdb_client_protocol_version(c) >= 2)
			/* The vocabulary is known: make room for all of it now,
			 * so that the steps insert without index resizes or
			 * page faults. */
			rc = emdb_client_table_reserve(c, table, VOCAB);
		CHECK(rc);
	}

	/* Batch 0 is resolved synchronously; each later batch is
	 * prefetched while the previous one trains.  A worker's batch of
	 * step s is batch s * workers + rank of the data. */
	make_batch(rank, ids[0]);
	CHECK(emdb_client_prefetch(c, table, ids[0], BATCH, &tk));

	for (int step = 0; step < steps; step++) {
		uint64_t *next = ids[(step + 1) & 1];
		if (step + 1 < steps) {
			make_batch(((uint64_t)step + 1) * workers + rank, next);
			/* ids and tk_next must stay untouched until f completes. */
			f = emdb_client_prefetch_async(c, table, next, BATCH, &tk_next);
		}

		/* Forward: the batch's vectors, through its ticket. */
		CHECK(emdb_client_pull_ticket(c, table, tk, DIM, emb));
		double loss = 0;
		for (int k = 0; k < BATCH; k++)
			for (int j = 0; j < DIM; j++) {
				float d = emb[k * DIM + j] - target[j];
				loss += 0.5 * d * d;
				grad[k * DIM + j] = d / BATCH; /* d loss / d e */
			}
		loss /= BATCH;

		/* Backward: gradients in, optimizer step on the server.  Alone,
		 * one request does both (the gradients skip the server's
		 * accumulators); with several workers, the step is applied
		 * once all of them have pushed. */
		uint64_t rows;
		if (workers == 1 && emdb_client_protocol_version(c) >= 2) {
			CHECK(emdb_client_push_update_ticket(c, table, tk, DIM, grad, &rows));
		} else if (workers == 1) {
			/* A server that speaks only protocol version 1 has no
			 * PUSH_UPDATE: the same step in two requests. */
			CHECK(emdb_client_push_ticket(c, table, tk, DIM, grad));
			CHECK(emdb_client_update(c, table, &rows));
		} else {
			CHECK(emdb_client_push_ticket(c, table, tk, DIM, grad));
			CHECK(emdb_client_update_sync(c, table, workers, &rows));
		}
		printf("step %3d  loss %.6f  rows updated %" PRIu64 "\n", step, loss, rows);

		emdb_client_ticket_free(tk);
		tk = NULL;
		if (f) {
			int rc = emdb_future_wait(f, -1);
			emdb_future_free(f);
			f = NULL;
			CHECK(rc);
			tk = tk_next;
			tk_next = NULL;
		}
	}
	status = 0;
out:
	emdb_future_free(f); /* abandons a Prefetch still in flight */
	emdb_client_ticket_free(tk_next);
	emdb_client_ticket_free(tk);
	emdb_client_close(c);
	return status;
}
