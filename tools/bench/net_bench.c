/*
 * net_bench.c - the driver and the report of emdb-bench --net
 * (net_bench.h, docs/benchmarks.md "Network mode").
 *
 * Design
 *   One run: start emdb-server (one per chosen I/O backend, each with its
 *   own copy of the table) and redis-server on the chosen transport,
 *   create the table and preload ranks 1..rows into each (Redis gets the
 *   vectors the first emdb returns, as packed values), then per operation
 *   measure the echo bound with the same request and response sizes and
 *   depth on the same socket type; where Redis has a counterpart, Redis
 *   (MGET for Pull, MSET for Push); and, against those same anchors, each
 *   emdb-server through the client library with `depth` requests in
 *   flight.  Lookup of a single ID is measured as latency, beside Redis
 *   GET and the echo of the same sizes, three times per emdb-server: with
 *   its default busy_poll_us 0 (sleep when idle); with NET_BUSY_POLL_US
 *   (poll a while before sleeping), set by CONFIG SET between turns; and
 *   with that and a second connection whose client polls as long too
 *   (emdb_client_options.busy_poll_us).  With --workload step, the
 *   synchronous steps of `workers` workers against a barrier in the
 *   trainer (net_step.h).
 *
 *   A ratio is workload / anchor for rates and workload / anchor for
 *   latencies too (so a latency ratio should be at most its goal).
 *
 * Invariants
 *   1. Every server is killed and the temporary directory removed before
 *      the process exits, by net_server's atexit and signal handlers.
 *   2. Missed goals are figures, not failures: the exit status is 0.
 */
#include "tools/bench/net_bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <emdb/alloc.h>
#include <emdb/client.h>

#include "base/alloc_int.h"
#include "tools/bench/anchors.h"
#include "tools/bench/net_echo.h"
#include "tools/bench/net_redis.h"
#include "tools/bench/net_server.h"
#include "tools/bench/net_step.h"
#include "tools/bench/net_tls.h"
#include "tools/bench/net_wl.h"
#include "tools/bench/pool.h"
#include "tools/bench/preload.h"

#define NET_POOL_IDS (256u << 10)
#define NET_LAT_ROUNDS 10         /* turns of the single-ID latency sides */
#define NET_BUSY_POLL_US "50"     /* emdb-server's busy_poll_us, second latency side */

typedef struct net_rec {
	net_op op;
	const char *backend; /* emdb-server's io_backend */
	int tls;             /* through TLS */
	size_t req, resp;
	harness_result emdb, echo, gecho, redis;
	int has_redis;
	int has_gecho;       /* the echo with the rows' work (gather or scatter) */
	const char *redis_cmd;
	double goal_echo, goal_redis; /* 0: none */
} net_rec;

/* One emdb-server of the run, with its connection and table. */
typedef struct net_side {
	const char *backend;
	int tls;
	net_server srv;
	net_wl w;
	net_wl w_poll;    /* w on a connection whose client polls */
	net_lat lat[3];   /* single-ID Lookup: busy_poll_us 0; the server's
			     NET_BUSY_POLL_US; that and the client's (w_poll) */
	net_step_result step; /* --workload step */
} net_side;

static const char *const lat_label[3] = { "busy_poll_us 0", "server busy_poll_us " NET_BUSY_POLL_US,
					  "server and client busy_poll_us " NET_BUSY_POLL_US };

static const char *tr_name(net_transport tr)
{
	return tr == NET_TCP ? "tcp" : "unix";
}

/* The backend column: "tls" for the TLS server on libevent, "tls/uring"
 * for the one on io_uring. */
static const char *side_label(const char *backend, int tls)
{
	if (!tls)
		return backend;
	return strcmp(backend, "uring") ? "tls" : "tls/uring";
}

static double ratio(double a, double b)
{
	return b > 0 ? a / b : 0;
}

/* The servers measured: one per backend, twice with --net tls (with and
 * without TLS). */
static int n_backends(const net_bench_opts *o)
{
	int n = (o->backends & NET_BACKEND_LIBEVENT ? 1 : 0) + (o->backends & NET_BACKEND_URING ? 1 : 0);
	return o->tls ? 2 * n : n;
}

/* n_sides is 0 when single-ID Lookup latency was not measured. */
static void print_json(const net_bench_opts *o, const net_rec *r, int n,
		       const net_side *sides, int n_sides, const net_lat *echo_lat,
		       const net_lat *get_lat, int has_redis)
{
	for (int i = 0; i < n; i++) {
		const net_rec *x = &r[i];
		printf("{\"mode\":\"net\",\"transport\":\"%s\",\"tls\":%s,\"io_backend\":\"%s\","
		       "\"workload\":\"%s\",\"depth\":%u,"
		       "\"batch\":%u,\"dim\":%u,\"rows\":%llu,\"req_bytes\":%zu,\"resp_bytes\":%zu,"
		       "\"ids_per_sec\":%.0f,\"echo_ids_per_sec\":%.0f,\"echo_bytes_per_sec\":%.0f,"
		       "\"ratio_echo\":%.4f",
		       tr_name(o->transport), x->tls ? "true" : "false", x->backend, net_op_name(x->op),
		       o->depth, o->batch, o->dim,
		       (unsigned long long)o->rows, x->req, x->resp, x->emdb.best, x->echo.best,
		       x->echo.best / o->batch * (double)(x->req + x->resp),
		       ratio(x->emdb.best, x->echo.best));
		if (x->has_gecho)
			printf(",\"rows_echo_ids_per_sec\":%.0f,\"ratio_rows_echo\":%.4f", x->gecho.best,
			       ratio(x->emdb.best, x->gecho.best));
		if (x->has_redis)
			printf(",\"redis_cmd\":\"%s\",\"redis_ids_per_sec\":%.0f,\"ratio_redis\":%.4f",
			       x->redis_cmd, x->redis.best, ratio(x->emdb.best, x->redis.best));
		printf(",\"core_rtt_ns\":[%.0f,%.0f],\"echo_core_rtt_ns\":[%.0f,%.0f]}\n", x->emdb.rtt_ns[0],
		       x->emdb.rtt_ns[1], x->echo.rtt_ns[0], x->echo.rtt_ns[1]);
	}
	for (int b = 0; o->step && b < n_backends(o); b++) {
		const net_step_result *st = &sides[b].step;
		printf("{\"mode\":\"net\",\"transport\":\"%s\",\"tls\":%s,\"io_backend\":\"%s\","
		       "\"workload\":\"step\",\"workers\":%u,\"batch\":%u,\"dim\":%u,"
		       "\"steps_per_sec\":%.1f,\"peer_steps_per_sec\":%.1f,\"ratio_peer\":%.4f}\n",
		       tr_name(o->transport), sides[b].tls ? "true" : "false", sides[b].backend, st->workers,
		       o->batch, o->dim, st->steps_per_sec, st->peer_steps_per_sec,
		       ratio(st->steps_per_sec, st->peer_steps_per_sec));
	}
	for (int i = 0; i < 3 * n_sides; i++) {
		int b = i / 3, k = i % 3;
		const net_lat *lat = &sides[b].lat[k];
		printf("{\"mode\":\"net\",\"transport\":\"%s\",\"tls\":%s,\"io_backend\":\"%s\","
		       "\"workload\":\"lookup_one\",\"busy_poll_us\":%s,\"client_busy_poll_us\":%s,"
		       "\"dim\":%u,\"p50_us\":%.2f,\"p99_us\":%.2f,\"samples\":%llu,"
		       "\"echo_p50_us\":%.2f,\"echo_p99_us\":%.2f,\"ratio_echo_p99\":%.4f",
		       tr_name(o->transport), sides[b].tls ? "true" : "false", sides[b].backend,
		       k ? NET_BUSY_POLL_US : "0", k == 2 ? NET_BUSY_POLL_US : "0", o->dim, lat->p50_us,
		       lat->p99_us,
		       (unsigned long long)lat->samples, echo_lat->p50_us, echo_lat->p99_us,
		       ratio(lat->p99_us, echo_lat->p99_us));
		if (has_redis)
			printf(",\"redis_get_p50_us\":%.2f,\"redis_get_p99_us\":%.2f,"
			       "\"ratio_redis_p99\":%.4f",
			       get_lat->p50_us, get_lat->p99_us, ratio(lat->p99_us, get_lat->p99_us));
		printf("}\n");
	}
}

static const char *mark(double r, double goal, int higher_better)
{
	if (goal <= 0 || r <= 0)
		return "";
	return (higher_better ? r >= goal : r <= goal) ? " ok" : " MISSED";
}

/* The core-to-core round trips taken around each measurement
 * (harness_core_rtt_ns), and the operations whose figure or echo was
 * measured with the CPUs more than twice as far apart as the nearest. */
static void print_placement(const net_rec *r, int n)
{
	double lo = 0, hi = 0;
	for (int i = 0; i < n; i++) {
		harness_rtt_span(&r[i].emdb, &lo, &hi);
		harness_rtt_span(&r[i].echo, &lo, &hi);
	}
	if (hi <= 0)
		return;
	printf("core-to-core round trip around the measurements: %.0f-%.0f ns\n", lo, hi);
	int named = 0;
	for (int i = 0; hi > 2 * lo && i < n; i++)
		if (harness_rtt_far(&r[i].emdb, lo) || harness_rtt_far(&r[i].echo, lo))
			printf("%s%s %s", named++ ? ", " : "  taken with the CPUs far apart (emdb or echo): ",
			       net_op_name(r[i].op), side_label(r[i].backend, r[i].tls));
	if (named)
		printf("\n");
}

/* The throughput table, one line per operation and server. */
static void print_ops(const net_bench_opts *o, const net_rec *r, int n)
{
	printf("%-18s %-8s %10s %10s %10s %10s %8s %9s %7s %-6s %10s %8s\n", "operation", "backend",
	       "req B", "resp B", "M IDs/s", "echo M/s", "/echo", "+rows M/s", "/+rows", "redis", "redis M/s",
	       "/redis");
	for (int i = 0; i < n; i++) {
		const net_rec *x = &r[i];
		double re = ratio(x->emdb.best, x->echo.best);
		printf("%-18s %-8s %10zu %10zu %10.3f %10.3f %7.2f%-7s", net_op_name(x->op), side_label(x->backend, x->tls),
		       x->req, x->resp,
		       x->emdb.best / 1e6, x->echo.best / 1e6, re, mark(re, x->goal_echo, 1));
		if (x->has_gecho)
			printf(" %9.3f %7.2f", x->gecho.best / 1e6, ratio(x->emdb.best, x->gecho.best));
		else
			printf(" %9s %7s", "-", "-");
		if (x->has_redis) {
			double rr = ratio(x->emdb.best, x->redis.best);
			printf(" %-6s %10.3f %7.2f%s", x->redis_cmd, x->redis.best / 1e6, rr,
			       mark(rr, x->goal_redis, 1));
		}
		printf("\n");
	}
	printf("\n(+rows: the echo that also gathers the response's rows from a table-sized region\n"
	       " (pull, lookup) or adds the request's rows into it (push, push_update);\n"
	       " echo goodput in GB/s, request + response bytes:");
	for (int i = 0; i < n; i += n_backends(o))
		printf(" %s %.2f", net_op_name(r[i].op),
		       r[i].echo.best / o->batch * (double)(r[i].req + r[i].resp) / 1e9);
	printf(")\n");
}

static void print_table(const net_bench_opts *o, const net_rec *r, int n,
			const net_side *sides, int n_sides, const net_lat *echo_lat,
			const net_lat *get_lat, int has_redis)
{
	printf("emdb-bench --net %s: depth %u, batch %u, dim %u, %llu rows, 1 connection\n",
	       o->tls ? "tls" : tr_name(o->transport), o->depth, o->batch, o->dim, (unsigned long long)o->rows);
	if (o->tls)
		printf("(the tls rows through TLS 1.3; the others plain TCP; echo and Redis plain TCP)\n");
	printf("\n");
	if (n)
		print_ops(o, r, n);
	print_placement(r, n);
	for (int b = 0; o->step && b < n_backends(o); b++) {
		const net_step_result *st = &sides[b].step;
		printf("\nsynchronous step of %u workers, a connection each, each pushing %u IDs x %u, %s:\n"
		       "  emdb_client_update_sync:          %8.1f steps/s (%.0f us a step)\n"
		       "  a barrier in the trainer, Update: %8.1f steps/s (%.0f us a step); ratio %.2f\n",
		       st->workers, o->batch, o->dim, side_label(sides[b].backend, sides[b].tls),
		       st->steps_per_sec, st->steps_per_sec > 0 ? 1e6 / st->steps_per_sec : 0,
		       st->peer_steps_per_sec, st->peer_steps_per_sec > 0 ? 1e6 / st->peer_steps_per_sec : 0,
		       ratio(st->steps_per_sec, st->peer_steps_per_sec));
	}
	for (int i = 0; i < 3 * n_sides; i++) {
		int b = i / 3;
		const net_lat *lat = &sides[b].lat[i % 3];
		printf("\nlookup of 1 ID, synchronous, %s, %s: p50 %.1f us, p99 %.1f us (%llu calls)\n",
		       side_label(sides[b].backend, sides[b].tls), lat_label[i % 3], lat->p50_us, lat->p99_us,
		       (unsigned long long)lat->samples);
		printf("  echo of the same sizes:       p50 %.1f us, p99 %.1f us; p99 ratio %.2f\n",
		       echo_lat->p50_us, echo_lat->p99_us, ratio(lat->p99_us, echo_lat->p99_us));
		if (has_redis) {
			double rr = ratio(lat->p99_us, get_lat->p99_us);
			printf("  redis GET:                    p50 %.1f us, p99 %.1f us; p99 ratio %.2f%s%s\n",
			       get_lat->p50_us, get_lat->p99_us, rr, sides[b].tls ? "" : " (goal <= 1)",
			       mark(rr, sides[b].tls ? 0 : 1.0, 0));
		}
	}
	if (!has_redis)
		printf("\nRedis anchor skipped: %s not found (tools/deps.sh installs it)\n", NET_REDIS_BIN);
}

static void set_busy_poll(const net_side *sd, const char *us)
{
	if (emdb_client_config_set(sd->w.c, "busy_poll_us", us) != EMDB_OK)
		harness_die("config set busy_poll_us %s: %s", us, emdb_client_last_error());
}

/* emdb-server's unix_send_buffer, for the echo anchor's sockets. */
static int server_send_buffer(emdb_client *c)
{
	emdb_client_kv *kv;
	size_t n;
	int v = 0;

	if (emdb_client_config_get(c, "unix_send_buffer", &kv, &n) != EMDB_OK)
		harness_die("config get unix_send_buffer: %s", emdb_client_last_error());
	if (n == 1)
		v = atoi(kv[0].value);
	emdb_free(kv);
	return v;
}

static void side_start(net_side *sd, const net_bench_opts *o, net_redis *rc)
{
	emdb_client_options copt = EMDB_CLIENT_OPTIONS_INIT;
	emdb_table_config cfg;
	emdb_client *c;
	int err;

	net_server_start_emdb(&sd->srv, o->transport, sd->backend, sd->tls);
	harness_log("emdb-server (%s%s) at %s", sd->backend, sd->tls ? ", TLS" : "", sd->srv.uri);
	copt.timeout_ms = 0;
	err = emdb_client_connect(sd->srv.uri, &copt, &c);
	if (err != EMDB_OK)
		harness_die("connect %s: %s", sd->srv.uri, emdb_client_last_error());
	preload_config(&cfg, "bench", o->dim, EMDB_OPT_SGD, EMDB_INIT_UNIFORM);
	sd->w = (net_wl){ .c = c, .dim = o->dim, .depth = o->depth, .seconds = o->seconds };
	err = emdb_client_table_create(c, &cfg, &sd->w.table);
	if (err != EMDB_OK)
		harness_die("table create: %s", emdb_client_last_error());
	net_wl_preload(&sd->w, o->rows, rc);
	if (!o->lookup)
		return; /* the polling client serves the Lookup latency only */
	sd->w_poll = sd->w;
	copt.busy_poll_us = atoi(NET_BUSY_POLL_US);
	err = emdb_client_connect(sd->srv.uri, &copt, &sd->w_poll.c);
	if (err != EMDB_OK)
		harness_die("connect %s: %s", sd->srv.uri, emdb_client_last_error());
}

void net_bench_run(const net_bench_opts *opts)
{
	net_bench_opts o = *opts;
	net_server redis;
	net_redis *rc = NULL;
	net_side sides[4];
	keys_source src;
	pool p;
	net_echo *echo;
	net_rec recs[4 * NET_N_OPS];
	net_lat echo_lat = { 0 }, get_lat = { 0 };
	int n = 0, has_redis, n_sides = 0;
	net_op ops[NET_N_OPS];
	int n_ops;

	if (!o.rows)
		o.rows = NET_DEFAULT_ROWS;
	memset(sides, 0, sizeof(sides));
	/* With --net tls, a TLS server of each backend asked for, and the
	 * same without TLS beside it. */
	for (int tls = o.tls; tls >= 0; tls--) {
		if (o.backends & NET_BACKEND_LIBEVENT)
			sides[n_sides++] = (net_side){ .backend = "libevent", .tls = tls };
		if (o.backends & NET_BACKEND_URING)
			sides[n_sides++] = (net_side){ .backend = "uring", .tls = tls };
	}
	net_servers_init();
	if (o.tls)
		net_tls_make_cert(net_servers_dir());
	has_redis = net_server_start_redis(&redis, o.transport) == 0;
	if (!has_redis)
		harness_log("%s not found: the Redis anchor is skipped", NET_REDIS_BIN);
	if (has_redis)
		rc = net_redis_connect(&redis);
	for (int b = 0; b < n_sides; b++)
		side_start(&sides[b], &o, b == 0 ? rc : NULL); /* Redis is loaded once */

	keys_source_init(&src, o.dist, o.rows);
	pool_init(&p, &src, 1, o.batch, NET_POOL_IDS, 0, 7);
	echo = net_echo_start(o.transport, net_servers_dir(),
			      o.transport == NET_UNIX ? server_send_buffer(sides[0].w.c) : 0);
	/* The table of the echo's row work: as large as emdb's, every page
	 * written, rank r at row r - 1 as the preload inserted them. */
	size_t row_bytes = (size_t)o.dim * sizeof(float);
	size_t region_bytes = (size_t)o.rows * row_bytes;
	uint8_t *region = anchor_region(region_bytes, 2);
	net_echo_rows er = { region, row_bytes, p.ranks, p.len, p.batch };
	net_echo_set_rows(echo, &er);

	n_ops = net_wl_ops(o.pull, o.push, 0, o.lookup, o.prefetch, ops);
	for (int i = 0; i < n_ops; i++) {
		net_rec *x = &recs[n];
		memset(x, 0, sizeof(*x));
		x->op = ops[i];
		x->req = net_op_req_bytes(x->op, o.batch, o.dim);
		x->resp = net_op_resp_bytes(x->op, o.batch, o.dim);
		net_echo_measure(echo, x->req, x->resp, o.depth, o.batch, NET_ECHO_NOTHING, o.seconds, &x->echo);
		net_echo_work work = NET_ECHO_NOTHING;
		if (x->op == NET_PULL || x->op == NET_PULL_TICKET || x->op == NET_LOOKUP)
			work = NET_ECHO_GATHER;
		else if (net_op_pushes(x->op))
			work = NET_ECHO_SCATTER;
		if (work != NET_ECHO_NOTHING) {
			x->has_gecho = 1;
			net_echo_measure(echo, x->req, x->resp, o.depth, o.batch, work, o.seconds, &x->gecho);
		}
		/* The goals; Push-and-Update, which also applies the
		 * optimizer, is shown against the same anchors without one. */
		if (x->op != NET_LOOKUP && x->op != NET_PREFETCH && x->op != NET_PUSH_UPDATE &&
		    x->op != NET_PUSH_UPDATE_TICKET)
			x->goal_echo = 0.8;
		if (has_redis && x->op != NET_PREFETCH) {
			int put = net_op_pushes(x->op);
			x->has_redis = 1;
			x->redis_cmd = put ? "MSET" : "MGET";
			x->goal_redis = x->op == NET_PULL || x->op == NET_PULL_TICKET ? 8 : 0;
			net_redis_measure(rc, &p, o.dim, put, o.depth, o.seconds, &x->redis);
		}
		/* The anchors once per operation, each backend against them. */
		for (int b = 0; b < n_sides; b++) {
			net_rec *y = &recs[n++];
			if (b)
				*y = *x;
			y->backend = sides[b].backend;
			y->tls = sides[b].tls;
			if (y->tls) /* the goals are for plain sockets */
				y->goal_echo = y->goal_redis = 0;
			net_wl_measure(&sides[b].w, y->op, &p, &y->emdb);
			harness_log("%s (%s): %.3fM IDs/s, echo %.3fM, redis %.3fM",
				    net_op_name(y->op), side_label(y->backend, y->tls), y->emdb.best / 1e6,
				    y->echo.best / 1e6, y->redis.best / 1e6);
		}
	}
	if (o.step) {
		pool sp;
		pool_init(&sp, &src, o.workers, o.batch, NET_POOL_IDS, 0, 8);
		for (int b = 0; b < n_sides; b++)
			net_step_measure(sides[b].srv.uri, sides[b].w.table, o.dim, &sp, o.workers, o.seconds,
					 &sides[b].step);
		pool_free(&sp);
	}
	if (o.lookup) {
		/* In NET_LAT_ROUNDS short turns, each side in turn, so that a
		 * burst of the host's noise falls on all sides alike instead
		 * of on whichever ran through it. */
		double t = o.seconds / NET_LAT_ROUNDS;
		for (int r = 0; r < NET_LAT_ROUNDS; r++) {
			for (int b = 0; b < n_sides; b++) {
				net_wl_lookup_latency(&sides[b].w, &p, t, &sides[b].lat[0]);
				set_busy_poll(&sides[b], NET_BUSY_POLL_US);
				net_wl_lookup_latency(&sides[b].w, &p, t, &sides[b].lat[1]);
				net_wl_lookup_latency(&sides[b].w_poll, &p, t, &sides[b].lat[2]);
				set_busy_poll(&sides[b], "0");
			}
			net_echo_latency(echo, net_op_req_bytes(NET_LOOKUP, 1, o.dim),
					 net_op_resp_bytes(NET_LOOKUP, 1, o.dim), t, &echo_lat);
			if (has_redis)
				net_redis_get_latency(rc, &p, o.dim, t, &get_lat);
		}
		for (int b = 0; b < n_sides; b++)
			for (int k = 0; k < 3; k++)
				net_lat_finish(&sides[b].lat[k]);
		net_lat_finish(&echo_lat);
		net_lat_finish(&get_lat);
	}
	net_echo_stop(echo);
	emdb_unmap(region, region_bytes);
	net_redis_close(rc);
	for (int b = 0; b < n_sides; b++) {
		emdb_client_close(sides[b].w.c);
		emdb_client_close(sides[b].w_poll.c);
		net_server_stop(&sides[b].srv);
	}
	if (has_redis)
		net_server_stop(&redis);
	pool_free(&p);

	if (o.json)
		print_json(&o, recs, n, sides, o.lookup ? n_sides : 0, &echo_lat, &get_lat,
			   has_redis);
	else
		print_table(&o, recs, n, sides, o.lookup ? n_sides : 0, &echo_lat, &get_lat,
			    has_redis);
}
