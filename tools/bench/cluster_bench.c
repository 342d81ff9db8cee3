/*
 * cluster_bench.c - the driver and the report of emdb-bench --cluster N
 * (cluster_bench.h, docs/benchmarks.md "Cluster").
 *
 * Design
 *   One run starts N emdb-server nodes forming a cluster on loopback (UCX
 *   over tcp, or shared memory with tcp beside) and one single-node
 *   emdb-server, creates the same table on both (on the cluster through
 *   the home node, rank 0, which creates it on every node), preloads
 *   ranks 1..rows into each, and then per operation measures, one after
 *   the other on the same ID stream and depth:
 *     1. the single node, through the client library (net_wl.h);
 *     2. the home node of the cluster, the same way, with every node's
 *        INFO cluster (the link's own per-peer counters) read right
 *        before the first request and right after the last: the messages
 *        and bytes the home node exchanged with each peer, and the bytes
 *        every node sent, for a known number of requests;
 *     3. two bare UCX exchanges of the same message sizes: per request,
 *        as many messages to each peer as the home node sent it, of its
 *        mean request size, each answered with the mean reply size,
 *        `depth` requests in flight:
 *        a. the nodes' peer (tools/linkbench/ucx_group.h): a home process
 *           and N-1 owner processes, each with its own UCX context and
 *           worker, each sleeping on its worker's event fd as a node
 *           does (polling where the nodes poll), the home's messages to
 *           peer k going to owner k;
 *        b. the one-process reference (tools/linkbench/ucx_pair.h): all
 *           messages between two workers of this process, polled by one
 *           thread, which pays no wake-up and no context switch;
 *     4. the nodes' own link moving exactly the messages of 3a: a
 *        linktest asked of the home node (emdb_client_linktest, ECHO
 *        rounds through its link thread, framing, authenticated
 *        endpoints and the owners' serve path, with no engine and no
 *        client in between), with every node's process CPU clock read
 *        around it.
 *   From those: messages per request per home node (goal <= N-1), the
 *   bytes sent by all nodes over the bytes that must cross (the IDs and
 *   rows, in request positions, whose owner is not the home node; goal
 *   <= 1.1), and the node-to-node goodput: the link's (a linktest round's
 *   bytes times its rounds per second) over the per-process exchange's
 *   (link/bare, goal >= 0.70 for the operations that carry rows), and
 *   end to end (the home node's bytes per request times the requests per
 *   second, node/bare and node/polled, no goal: on this CPU-bound machine
 *   the single node's work and the exchange add up, so that a node with
 *   no overhead of its own reaches only e2e_bound = single / (single +
 *   bare rounds)).  Every rate is the same statistic: the best of
 *   HARNESS_REPS repetitions after a warm-up, of the same length.
 *
 * Invariants
 *   1. The counters cover exactly the requests counted: set-up (the
 *      by-ticket ops' Prefetches) and tear-down (their frees) fall outside
 *      the marks (net_wl_measure_marked), and what reading the counters
 *      itself sends (INFO cluster asks every node) is measured once and
 *      taken off (measure_info_cost).  Prefetch's workload frees each
 *      ticket at once, so it counts two client requests per operation.
 *   2. Every server and every process of the bare group is killed and
 *      the temporary directory removed before the process exits
 *      (net_server's atexit and signal handlers; the group is forked
 *      before this process initializes UCX, and adopted by net_server).
 *   3. Missed goals are figures, not failures: the exit status is 0.
 */
#include "tools/bench/cluster_bench.h"

#include <inttypes.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/client.h>

#include "cluster/owner.h"
#include "tools/bench/harness.h"
#include "tools/bench/net_bench.h"
#include "tools/bench/net_server.h"
#include "tools/bench/net_wl.h"
#include "tools/bench/pool.h"
#include "tools/bench/preload.h"
#include "tools/linkbench/ucx_group.h"
#include "tools/linkbench/ucx_pair.h"

#define CL_POOL_IDS (256u << 10)
#define CL_HOME 0u                /* the home node's rank */
#define CL_GOAL_BYTES 1.1
#define CL_GOAL_BARE 0.70

/* One node's link counters towards one peer (INFO cluster). */
typedef struct cl_ctr {
	uint64_t bytes_sent, msgs_sent, bytes_received, msgs_received;
} cl_ctr;

typedef cl_ctr cl_snap[NET_CLUSTER_MAX][NET_CLUSTER_MAX]; /* [node][peer] */

typedef struct cl_rec {
	net_op op;
	harness_result single, cluster;
	double load_single, load_cluster, load_bare;
	uint64_t ops;          /* operations between the marks, warm-up included */
	unsigned reqs_per_op;  /* client requests per operation (Prefetch: 2) */
	cl_ctr home[NET_CLUSTER_MAX]; /* the home node's deltas, per peer */
	uint64_t all_bytes;    /* bytes every node sent */
	double must_cross;     /* bytes per operation that must cross */
	unsigned bare_n;       /* messages per bare round */
	size_t bare_req[UCX_PAIR_MAX_MSGS], bare_rep[UCX_PAIR_MAX_MSGS];
	unsigned bare_to[UCX_PAIR_MAX_MSGS]; /* the peer's rank of each message */
	double bare_rounds;    /* per second, best repetition: the group (the goal's) */
	double polled_rounds;  /* the same, of the one-process pair */
	uint64_t bare_round_bytes;
	double load_polled;
	double cpu_bare_home, cpu_bare_owners; /* the group's CPU seconds, timed reps */
	uint64_t bare_rounds_timed; /* the group's rounds in the timed reps */
	double link_rounds;    /* the home node's linktest: rounds/s, best repetition */
	uint64_t link_round_bytes; /* its bytes per round (both ways, link headers) */
	double load_link;
	double cpu_link_home, cpu_link_owners; /* the nodes' CPU seconds, timed reps */
	uint64_t link_rounds_timed;
	uint64_t single_ops;   /* the single node's operations between its marks */
	double cpu_single;     /* CPU seconds of the single node between its marks */
	double cpu_home, cpu_others; /* of the home node, of the other nodes */
} cl_rec;

typedef struct cl_run {
	const cluster_bench_opts *o;
	emdb_client *node[NET_CLUSTER_MAX]; /* one per node, for INFO */
	pid_t pid[NET_CLUSTER_MAX];         /* the nodes' processes */
	pid_t single_pid;
	cl_snap before;
	cl_snap info_cost;      /* what one round of snapshots itself sends */
	double cpu_before[NET_CLUSTER_MAX + 1]; /* the nodes', then the single node's */
	const uint32_t *cross;  /* per batch: positions owned elsewhere */
	size_t batches;
	cl_rec *rec;            /* the record being measured */
	ucx_group *group;       /* the bare exchange between processes */
} cl_run;

static double ratio(double a, double b)
{
	return b > 0 ? a / b : 0;
}

static double load_now(void)
{
	double l[1] = { -1 };
	getloadavg(l, 1);
	return l[0];
}

/* CPU seconds a server process used so far, all its threads (its
 * process CPU clock): what a request costs there, which the load of
 * other tenants does not inflate as it does wall time. */
static double cpu_of(pid_t pid)
{
	clockid_t id;
	struct timespec ts;
	if (clock_getcpuclockid(pid, &id) != 0 || clock_gettime(id, &ts) != 0)
		return 0;
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void mark_single(void *ctx, int after, uint64_t requests)
{
	cl_run *r = ctx;
	double now = cpu_of(r->single_pid);
	if (!after) {
		r->cpu_before[NET_CLUSTER_MAX] = now;
		return;
	}
	r->rec->cpu_single = now - r->cpu_before[NET_CLUSTER_MAX];
	r->rec->single_ops = requests;
}

static uint64_t field(const char *line, const char *key)
{
	const char *p = strstr(line, key);
	return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

/* Every node's per-peer counters. */
static void snapshot(const cl_run *r, cl_snap out)
{
	memset(out, 0, sizeof(cl_snap));
	for (int i = 0; i < r->o->nodes; i++) {
		char *text;
		int rc = emdb_client_info(r->node[i], "cluster", &text);
		if (rc != EMDB_OK)
			net_wl_die("INFO cluster", rc);
		for (char *line = text; line && *line;) {
			char *nl = strchr(line, '\n');
			unsigned peer;
			if (nl)
				*nl = 0;
			if (sscanf(line, "node_%u:", &peer) == 1 && peer < NET_CLUSTER_MAX &&
			    strstr(line, " bytes_sent=")) {
				cl_ctr *c = &out[i][peer];
				c->bytes_sent = field(line, " bytes_sent=");
				c->msgs_sent = field(line, " msgs_sent=");
				c->bytes_received = field(line, " bytes_received=");
				c->msgs_received = field(line, " msgs_received=");
			}
			line = nl ? nl + 1 : NULL;
		}
		emdb_free(text);
	}
}

/* Bytes per ID owned elsewhere that an operation must move: the ID in
 * the request unless by ticket, and its row unless no row travels. */
static double cross_bytes_per_id(net_op op, uint32_t dim)
{
	double row = 4.0 * dim;
	switch (op) {
	case NET_PREFETCH:
		return 8;
	case NET_PULL:
	case NET_PUSH:
	case NET_PUSH_UPDATE:
	case NET_LOOKUP:
		return 8 + row;
	case NET_PULL_TICKET:
	case NET_PUSH_TICKET:
	case NET_PUSH_UPDATE_TICKET:
		return row;
	default:
		return 0; /* Update: no ID, no row */
	}
}

/* Whether the goodput goal applies: the operations whose messages carry
 * rows. */
static int carries_rows(net_op op)
{
	return cross_bytes_per_id(op, 1) >= 4 && op != NET_PREFETCH;
}

static uint64_t minus(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

/* now - before - cost, counter by counter. */
static void delta(const cl_ctr *now, const cl_ctr *before, const cl_ctr *cost, cl_ctr *out)
{
	out->bytes_sent = minus(now->bytes_sent - before->bytes_sent, cost->bytes_sent);
	out->msgs_sent = minus(now->msgs_sent - before->msgs_sent, cost->msgs_sent);
	out->bytes_received = minus(now->bytes_received - before->bytes_received, cost->bytes_received);
	out->msgs_received = minus(now->msgs_received - before->msgs_received, cost->msgs_received);
}

/* INFO cluster asks every node for its table statistics before it
 * answers, so reading the counters moves them.  Between a node's reading
 * before and its reading after lies exactly one round of everybody's
 * reading (the rest of the round before, the start of the round after),
 * so the cost of one round, measured here twice in a row with nothing
 * else running, is taken off every measurement. */
static void measure_info_cost(cl_run *r)
{
	cl_snap a, b, zero;
	memset(zero, 0, sizeof(zero));
	snapshot(r, a);
	snapshot(r, b);
	uint64_t msgs = 0;
	for (int i = 0; i < r->o->nodes; i++)
		for (int k = 0; k < r->o->nodes; k++) {
			delta(&b[i][k], &a[i][k], &zero[i][k], &r->info_cost[i][k]);
			msgs += r->info_cost[i][k].msgs_sent;
		}
	harness_log("reading every node's counters sends %llu messages; taken off each measurement",
		    (unsigned long long)msgs);
}

static void mark(void *ctx, int after, uint64_t requests)
{
	cl_run *r = ctx;
	cl_rec *x = r->rec;
	cl_snap now;

	if (!after) {
		snapshot(r, r->before);
		for (int i = 0; i < r->o->nodes; i++)
			r->cpu_before[i] = cpu_of(r->pid[i]);
		return;
	}
	/* A ticket free gets no answer: give the last ones time to land. */
	harness_sleep(0.05);
	for (int i = 0; i < r->o->nodes; i++) {
		double cpu = cpu_of(r->pid[i]) - r->cpu_before[i];
		*(i == (int)CL_HOME ? &x->cpu_home : &x->cpu_others) += cpu;
	}
	snapshot(r, now);
	x->ops = requests;
	for (int i = 0; i < r->o->nodes; i++)
		for (int k = 0; k < r->o->nodes; k++) {
			cl_ctr d;
			delta(&now[i][k], &r->before[i][k], &r->info_cost[i][k], &d);
			x->all_bytes += d.bytes_sent;
			if (i == (int)CL_HOME)
				x->home[k] = d;
		}
	double ids = 0;
	for (uint64_t i = 0; i < requests; i++)
		ids += r->cross[i % r->batches];
	x->must_cross = requests ? ids * cross_bytes_per_id(x->op, r->o->net.dim) / (double)requests : 0;
}

/* The group's processes' CPU seconds: the home's, or the owners' together. */
static double cpu_group(const ucx_group *g, int home)
{
	double sum = 0;
	pid_t pid;
	for (unsigned i = home ? 0 : 1; (pid = ucx_group_pid(g, i)) > 0 && (!home || i == 0); i++)
		sum += cpu_of(pid);
	return sum;
}

/* One timed run of the bare exchange of x's messages: between the
 * group's processes (pair NULL) or in the one-process pair; its rounds per
 * second.  The group's CPU over timed runs is added to x. */
static double bare_once(const cl_run *r, ucx_pair *pair, cl_rec *x, uint64_t ns, bool timed)
{
	char err[256];
	ucx_am_result res;
	unsigned to[UCX_PAIR_MAX_MSGS];
	int rc;

	for (unsigned j = 0; j < x->bare_n; j++)
		to[j] = x->bare_to[j] - 1; /* owner k is rank k + 1: the home is rank 0 */
	if (timed && !pair) {
		x->cpu_bare_home -= cpu_group(r->group, 1);
		x->cpu_bare_owners -= cpu_group(r->group, 0);
	}
	if (pair)
		rc = ucx_pair_exchange(pair, x->bare_req, x->bare_rep, x->bare_n, r->o->net.depth, UINT64_MAX, ns, &res,
				       err, sizeof(err));
	else
		rc = ucx_group_exchange(r->group, to, x->bare_req, x->bare_rep, x->bare_n, r->o->net.depth, UINT64_MAX,
					ns, &res, err, sizeof(err));
	if (rc < 0)
		harness_die("bare UCX exchange (%s): %s", pair ? "one process" : "between processes", err);
	if (timed && !pair) {
		x->cpu_bare_home += cpu_group(r->group, 1);
		x->cpu_bare_owners += cpu_group(r->group, 0);
		x->bare_rounds_timed += res.rounds;
	}
	return res.ns ? (double)res.rounds * 1e9 / (double)res.ns : 0;
}

/* One linktest of the home node moving x's messages (design, 4); its
 * rounds per second.  The nodes' CPU over timed runs is added to x. */
static double link_once(const cl_run *r, cl_rec *x, double seconds, bool timed)
{
	emdb_linktest_msg m[UCX_PAIR_MAX_MSGS];
	emdb_linktest_result res;
	double before[NET_CLUSTER_MAX];
	uint32_t ms = seconds * 1000 < 1 ? 1 : seconds * 1000 > 10000 ? 10000 : (uint32_t)(seconds * 1000);

	for (unsigned j = 0; j < x->bare_n; j++)
		m[j] = (emdb_linktest_msg){ .rank = x->bare_to[j], .request_bytes = x->bare_req[j],
					    .reply_bytes = x->bare_rep[j] };
	for (int i = 0; i < r->o->nodes; i++)
		before[i] = cpu_of(r->pid[i]);
	if (emdb_client_linktest(r->node[CL_HOME], m, x->bare_n, r->o->net.depth, ms, &res) != EMDB_OK)
		harness_die("linktest of node %u: %s", CL_HOME, emdb_client_last_error());
	double rate = res.elapsed_ns ? (double)res.rounds * 1e9 / (double)res.elapsed_ns : 0;
	if (!timed)
		return rate;
	for (int i = 0; i < r->o->nodes; i++)
		*(i == (int)CL_HOME ? &x->cpu_link_home : &x->cpu_link_owners) += cpu_of(r->pid[i]) - before[i];
	x->link_rounds_timed += res.rounds;
	if (rate > x->link_rounds)
		x->link_round_bytes = res.rounds ? (res.bytes_sent + res.bytes_received) / res.rounds : 0;
	return rate;
}

/* The bare exchanges of the sizes the home node's counters gave, and the
 * home node's linktest of the same messages.  The exchange between
 * processes and the linktest are the goal's two sides, so their
 * repetitions alternate (bare, link, link, bare, ...: neither always
 * first), each after a warm-up: a change of load from other tenants falls
 * on both, and the best repetition of each is its figure.  The
 * one-process pair comes after them and lives only while it is measured:
 * an open UCX context keeps an async thread in this process, and an idle
 * one left connected woke on its sockets over and over, taking most of a
 * core from whatever was measured next. */
static void measure_bare(const cl_run *r, cl_rec *x)
{
	char err[256];
	ucx_pair *pair;
	double rep_s = r->o->net.seconds / HARNESS_REPS;
	uint64_t rep_ns = (uint64_t)(rep_s * 1e9);
	double warm = r->o->net.seconds / 8 < 0.25 ? r->o->net.seconds / 8 : 0.25;

	x->bare_n = 0;
	x->bare_round_bytes = 0;
	if (!x->ops)
		return;
	for (int k = 0; k < r->o->nodes; k++) {
		const cl_ctr *c = &x->home[k];
		if (k == (int)CL_HOME || !c->msgs_sent)
			continue;
		unsigned m = (unsigned)((c->msgs_sent + x->ops / 2) / x->ops);
		m = m ? m : 1;
		size_t req = (size_t)(c->bytes_sent / c->msgs_sent);
		size_t rep = (size_t)(c->bytes_received / x->ops / m);
		for (unsigned j = 0; j < m && x->bare_n < UCX_PAIR_MAX_MSGS; j++) {
			x->bare_req[x->bare_n] = req;
			x->bare_rep[x->bare_n] = rep;
			x->bare_to[x->bare_n++] = (unsigned)k;
			x->bare_round_bytes += req + rep;
		}
	}
	if (!x->bare_n)
		return;
	x->load_bare = load_now();
	bare_once(r, NULL, x, (uint64_t)(warm * 1e9), false);
	x->load_link = load_now();
	link_once(r, x, warm, false);
	for (int rep = 0; rep < HARNESS_REPS; rep++) {
		for (int side = 0; side < 2; side++) {
			if ((side ^ rep) & 1) {
				double rate = link_once(r, x, rep_s, true);
				x->link_rounds = rate > x->link_rounds ? rate : x->link_rounds;
			} else {
				double rate = bare_once(r, NULL, x, rep_ns, true);
				x->bare_rounds = rate > x->bare_rounds ? rate : x->bare_rounds;
			}
		}
	}
	x->load_polled = load_now();
	if (ucx_pair_open(&pair, err, sizeof(err)) < 0)
		harness_die("bare UCX exchange: %s", err);
	bare_once(r, pair, x, (uint64_t)(warm * 1e9), false);
	for (int rep = 0; rep < HARNESS_REPS; rep++) {
		double rate = bare_once(r, pair, x, rep_ns, true);
		x->polled_rounds = rate > x->polled_rounds ? rate : x->polled_rounds;
	}
	ucx_pair_close(pair);
}

/* Derived figures of one record. */
typedef struct cl_fig {
	double single_ops, cluster_ops;
	double msgs_per_req, bytes_per_op, bytes_ratio;
	double node_goodput, bare_goodput, bare_ratio; /* against the group */
	double polled_goodput, polled_ratio;           /* against the pair */
	double cpu_bare_home, cpu_bare_owners;         /* the group's CPU us per round */
	double link_goodput, link_ratio;               /* the home node's linktest, against the group */
	double cpu_link_home, cpu_link_owners;         /* the nodes' CPU us per linktest round */
	double e2e_bound;                              /* node/bare of a node with no overhead */
	uint64_t home_msgs, home_bytes;
	double cpu_single, cpu_home, cpu_others; /* CPU us per operation */
	int msgs_ok, bytes_ok, bare_ok; /* 1 met, 0 missed, -1 no goal */
} cl_fig;

static void figures(const cluster_bench_opts *o, const cl_rec *x, cl_fig *f)
{
	memset(f, 0, sizeof(*f));
	f->single_ops = x->single.best / o->net.batch;
	f->cluster_ops = x->cluster.best / o->net.batch;
	for (int k = 0; k < o->nodes; k++) {
		f->home_msgs += x->home[k].msgs_sent;
		f->home_bytes += x->home[k].bytes_sent + x->home[k].bytes_received;
	}
	f->msgs_per_req = ratio((double)f->home_msgs, (double)x->ops * x->reqs_per_op);
	f->msgs_ok = x->ops ? f->msgs_per_req <= o->nodes - 1 + 1e-9 : -1;
	f->bytes_per_op = ratio((double)x->all_bytes, (double)x->ops);
	f->bytes_ratio = ratio(f->bytes_per_op, x->must_cross);
	f->bytes_ok = x->must_cross > 0 ? f->bytes_ratio <= CL_GOAL_BYTES : -1;
	f->node_goodput = ratio((double)f->home_bytes, (double)x->ops) * f->cluster_ops;
	f->bare_goodput = (double)x->bare_round_bytes * x->bare_rounds;
	f->bare_ratio = ratio(f->node_goodput, f->bare_goodput);
	f->polled_goodput = (double)x->bare_round_bytes * x->polled_rounds;
	f->polled_ratio = ratio(f->node_goodput, f->polled_goodput);
	f->cpu_bare_home = ratio(x->cpu_bare_home * 1e6, (double)x->bare_rounds_timed);
	f->cpu_bare_owners = ratio(x->cpu_bare_owners * 1e6, (double)x->bare_rounds_timed);
	f->link_goodput = (double)x->link_round_bytes * x->link_rounds;
	f->link_ratio = ratio(f->link_goodput, f->bare_goodput);
	f->cpu_link_home = ratio(x->cpu_link_home * 1e6, (double)x->link_rounds_timed);
	f->cpu_link_owners = ratio(x->cpu_link_owners * 1e6, (double)x->link_rounds_timed);
	f->e2e_bound = ratio(f->single_ops, f->single_ops + x->bare_rounds);
	f->bare_ok = carries_rows(x->op) && f->bare_goodput > 0 ? f->link_ratio >= CL_GOAL_BARE : -1;
	f->cpu_single = ratio(x->cpu_single * 1e6, (double)x->single_ops);
	f->cpu_home = ratio(x->cpu_home * 1e6, (double)x->ops);
	f->cpu_others = ratio(x->cpu_others * 1e6, (double)x->ops);
}

static const char *link_name(cluster_link_kind k)
{
	return k == CLUSTER_LINK_TCP ? "tcp" : "shm";
}

static const char *tf(int ok)
{
	return ok < 0 ? "null" : ok ? "true" : "false";
}

static void print_json(const cluster_bench_opts *o, const cl_rec *recs, int n)
{
	for (int i = 0; i < n; i++) {
		const cl_rec *x = &recs[i];
		cl_fig f;
		figures(o, x, &f);
		printf("{\"mode\":\"cluster\",\"nodes\":%d,\"link\":\"%s\",\"cluster_busy_poll\":%d,"
		       "\"cluster_serve_threads\":%d,\"transport\":\"%s\",\"home_rank\":%u,"
		       "\"workload\":\"%s\",\"depth\":%u,\"batch\":%u,\"dim\":%u,\"rows\":%" PRIu64 ","
		       "\"ops_per_sec\":%.1f,\"us_per_op\":%.2f,\"ids_per_sec\":%.0f,"
		       "\"single_ops_per_sec\":%.1f,\"single_us_per_op\":%.2f,\"ratio_single\":%.4f,"
		       "\"ops_counted\":%" PRIu64 ",\"client_requests_per_op\":%u,\"peers\":[",
		       o->nodes, link_name(o->link), o->busy_poll, o->serve_threads, o->net.transport == NET_TCP ? "tcp" : "unix", CL_HOME,
		       net_op_name(x->op), o->net.depth, o->net.batch, o->net.dim, o->net.rows, f.cluster_ops,
		       ratio(1e6, f.cluster_ops), x->cluster.best, f.single_ops, ratio(1e6, f.single_ops),
		       ratio(f.cluster_ops, f.single_ops), x->ops, x->reqs_per_op);
		for (int k = 0, first = 1; k < o->nodes; k++) {
			if (k == (int)CL_HOME)
				continue;
			const cl_ctr *c = &x->home[k];
			printf("%s{\"rank\":%d,\"msgs_sent\":%" PRIu64 ",\"bytes_sent\":%" PRIu64
			       ",\"msgs_received\":%" PRIu64 ",\"bytes_received\":%" PRIu64 "}",
			       first ? "" : ",", k, c->msgs_sent, c->bytes_sent, c->msgs_received, c->bytes_received);
			first = 0;
		}
		printf("],\"home_msgs_sent\":%" PRIu64 ",\"home_bytes\":%" PRIu64 ",\"cluster_bytes_sent\":%" PRIu64 ","
		       "\"msgs_per_request\":%.4f,\"goal_msgs_per_request\":%d,\"msgs_ok\":%s,"
		       "\"bytes_per_op\":%.1f,\"must_cross_bytes_per_op\":%.1f,\"ratio_must_cross\":%.4f,"
		       "\"goal_ratio_must_cross\":%.2f,\"must_cross_ok\":%s,"
		       "\"node_goodput_bytes_per_sec\":%.0f,\"bare_msgs_per_round\":%u,\"bare_req_bytes\":[",
		       f.home_msgs, f.home_bytes, x->all_bytes, f.msgs_per_req, o->nodes - 1, tf(f.msgs_ok),
		       f.bytes_per_op, x->must_cross, f.bytes_ratio, CL_GOAL_BYTES, tf(f.bytes_ok), f.node_goodput,
		       x->bare_n);
		for (unsigned j = 0; j < x->bare_n; j++)
			printf("%s%zu", j ? "," : "", x->bare_req[j]);
		printf("],\"bare_rep_bytes\":[");
		for (unsigned j = 0; j < x->bare_n; j++)
			printf("%s%zu", j ? "," : "", x->bare_rep[j]);
		printf("],\"bare_msg_ranks\":[");
		for (unsigned j = 0; j < x->bare_n; j++)
			printf("%s%u", j ? "," : "", x->bare_to[j]);
		printf("],\"bare_processes\":%d,\"bare_progress\":\"%s\",\"statistic\":\"best of %d\","
		       "\"bare_rounds_per_sec\":%.1f,\"bare_us_per_round\":%.2f,\"bare_goodput_bytes_per_sec\":%.0f,"
		       "\"ratio_bare\":%.4f,\"e2e_bound\":%.4f,\"link_rounds_per_sec\":%.1f,\"link_us_per_round\":%.2f,"
		       "\"link_round_bytes\":%" PRIu64 ",\"link_goodput_bytes_per_sec\":%.0f,\"ratio_link_bare\":%.4f,"
		       "\"goal_ratio_link_bare\":%.2f,\"bare_ok\":%s,"
		       "\"cpu_us_per_round_link_home\":%.1f,\"cpu_us_per_round_link_owners\":%.1f,\"load1_link\":%.2f,"
		       "\"cpu_us_per_round_bare_home\":%.1f,\"cpu_us_per_round_bare_owners\":%.1f,"
		       "\"bare_polled_rounds_per_sec\":%.1f,\"bare_polled_us_per_round\":%.2f,"
		       "\"bare_polled_goodput_bytes_per_sec\":%.0f,\"ratio_bare_polled\":%.4f,"
		       "\"cpu_us_per_op_single\":%.1f,\"cpu_us_per_op_home\":%.1f,\"cpu_us_per_op_others\":%.1f,"
		       "\"load1_single\":%.2f,\"load1\":%.2f,\"load1_bare\":%.2f,\"load1_bare_polled\":%.2f,"
		       "\"goals_failed\":[",
		       o->nodes, o->busy_poll ? "busy_poll" : "event_fd", HARNESS_REPS, x->bare_rounds,
		       ratio(1e6, x->bare_rounds), f.bare_goodput, f.bare_ratio, f.e2e_bound, x->link_rounds,
		       ratio(1e6, x->link_rounds), x->link_round_bytes, f.link_goodput, f.link_ratio, CL_GOAL_BARE,
		       tf(f.bare_ok), f.cpu_link_home, f.cpu_link_owners, x->load_link,
		       f.cpu_bare_home, f.cpu_bare_owners, x->polled_rounds, ratio(1e6, x->polled_rounds),
		       f.polled_goodput, f.polled_ratio, f.cpu_single, f.cpu_home, f.cpu_others, x->load_single,
		       x->load_cluster, x->load_bare, x->load_polled);
		const char *sep = "";
		if (f.msgs_ok == 0)
			printf("\"msgs_per_request\""), sep = ",";
		if (f.bytes_ok == 0)
			printf("%s\"ratio_must_cross\"", sep), sep = ",";
		if (f.bare_ok == 0)
			printf("%s\"ratio_link_bare\"", sep);
		printf("]}\n");
	}
}

static const char *mark_goal(int ok)
{
	return ok < 0 ? "" : ok ? " ok" : " MISSED";
}

static void print_table(const cluster_bench_opts *o, const cl_rec *recs, int n)
{
	printf("emdb-bench --cluster %d: UCX over %s%s, clients over %s, depth %u, batch %u, dim %u, %" PRIu64
	       " rows; requests through node %u\n\n",
	       o->nodes, link_name(o->link), o->busy_poll ? " (cluster_busy_poll 1)" : "",
	       o->net.transport == NET_TCP ? "tcp" : "unix", o->net.depth, o->net.batch, o->net.dim, o->net.rows, CL_HOME);
	printf("%-18s %9s %8s %9s %8s %7s %12s %10s %10s %13s %9s %9s %9s %9s %13s %10s %11s %5s\n", "operation",
	       "single/s", "us", "cluster/s", "us", "/single", "msgs/req", "bytes/op", "must/op", "bytes/must",
	       "node MB/s", "bare MB/s", "node/bare", "link MB/s", "link/bare", "polled MB/s", "node/polled", "load");
	for (int i = 0; i < n; i++) {
		const cl_rec *x = &recs[i];
		cl_fig f;
		char m[32], b[32], g[32];
		figures(o, x, &f);
		snprintf(m, sizeof(m), "%.2f%s", f.msgs_per_req, mark_goal(f.msgs_ok));
		if (x->must_cross > 0)
			snprintf(b, sizeof(b), "%.3f%s", f.bytes_ratio, mark_goal(f.bytes_ok));
		else
			snprintf(b, sizeof(b), "-");
		snprintf(g, sizeof(g), "%.2f%s", f.link_ratio, mark_goal(f.bare_ok));
		printf("%-18s %9.0f %8.1f %9.0f %8.1f %7.2f %12s %10.0f %10.0f %13s %9.1f %9.1f %9.2f %9.1f %13s "
		       "%10.1f %11.2f %5.2f\n",
		       net_op_name(x->op), f.single_ops, ratio(1e6, f.single_ops), f.cluster_ops,
		       ratio(1e6, f.cluster_ops), ratio(f.cluster_ops, f.single_ops), m, f.bytes_per_op, x->must_cross,
		       b, f.node_goodput / 1e6, f.bare_goodput / 1e6, f.bare_ratio, f.link_goodput / 1e6, g,
		       f.polled_goodput / 1e6, f.polled_ratio, x->load_cluster);
	}
	printf("\ngoals: msgs/req <= %d (the home node's messages per client request; prefetch counts its\n"
	       "ticket free as a second request), bytes/must <= %.1f (bytes all nodes sent over the IDs and\n"
	       "rows owned elsewhere), link/bare >= %.2f for the operations that carry rows (the nodes' own\n"
	       "link: a linktest of the home node moving the bare exchange's messages through its link\n"
	       "thread, framing, endpoints and the owners' serve path, no engine, no client; over a bare UCX\n"
	       "exchange of the same messages at depth %u between %d processes, a home and its owners,\n"
	       "each %s as the nodes do).\n"
	       "node/bare: end to end, no goal: the home node's bytes per request times requests/s over the\n"
	       "same bare exchange; engine, client and exchange share the CPUs, so a node with no overhead\n"
	       "reaches e2e_bound = single/s / (single/s + bare rounds/s) at most (JSON).\n"
	       "node/polled: node/bare over a bare exchange between two workers of one process polled by one\n"
	       "thread (no wake-ups, no context switches).  All rates: the best of %d repetitions.\n"
	       "us: 1e6 / (op/s) with %u requests in flight.  load: 1-minute load average when measured.\n"
	       "bare UCX messages per request (request / reply bytes -> rank), rounds/s between processes\n"
	       "and in one process, and the bare processes' CPU per round (home / owners together, us):\n",
	       o->nodes - 1, CL_GOAL_BYTES, CL_GOAL_BARE, o->net.depth, o->nodes,
	       o->busy_poll ? "polling" : "sleeping on its worker's event fd", HARNESS_REPS, o->net.depth);
	for (int i = 0; i < n; i++) {
		const cl_rec *x = &recs[i];
		cl_fig f;
		figures(o, x, &f);
		printf("  %-18s", net_op_name(x->op));
		for (unsigned j = 0; j < x->bare_n; j++)
			printf(" %zu/%zu->%u", x->bare_req[j], x->bare_rep[j], x->bare_to[j]);
		printf("  (%.0f / %.0f rounds/s; CPU %.1f / %.1f)\n", x->bare_rounds, x->polled_rounds, f.cpu_bare_home,
		       f.cpu_bare_owners);
	}
	printf("the home node's linktest of those messages: rounds/s, and the nodes' CPU per round\n"
	       "(home / owners together, us), beside the bare exchange's:\n");
	for (int i = 0; i < n; i++) {
		const cl_rec *x = &recs[i];
		cl_fig f;
		figures(o, x, &f);
		printf("  %-18s %9.0f rounds/s (bare %.0f); CPU %.1f / %.1f (bare %.1f / %.1f); e2e_bound %.2f\n",
		       net_op_name(x->op), x->link_rounds, x->bare_rounds, f.cpu_link_home, f.cpu_link_owners,
		       f.cpu_bare_home, f.cpu_bare_owners, f.e2e_bound);
	}
	printf("server CPU per operation, us (the process CPU clocks, which other tenants inflate\n"
	       "far less than wall time): single node / home node / the other nodes together\n");
	for (int i = 0; i < n; i++) {
		cl_fig f;
		figures(o, &recs[i], &f);
		printf("  %-18s %8.1f / %8.1f / %8.1f\n", net_op_name(recs[i].op), f.cpu_single, f.cpu_home,
		       f.cpu_others);
	}
}

/* UCX's environment for the nodes (inherited) and for the bare exchange. */
static void set_ucx_env(cluster_link_kind k)
{
	setenv("UCX_NET_DEVICES", "lo", 1);
	if (k == CLUSTER_LINK_TCP) {
		setenv("UCX_TLS", "tcp", 1);
		return;
	}
	setenv("UCX_TLS", "posix,sysv,cma,tcp,self", 1);
	setenv("UCX_POSIX_ERROR_HANDLING", "y", 1);
	setenv("UCX_SYSV_ERROR_HANDLING", "y", 1);
}

static emdb_client *connect_to(const net_server *s)
{
	emdb_client_options copt = EMDB_CLIENT_OPTIONS_INIT;
	emdb_client *c;
	copt.timeout_ms = 0;
	if (emdb_client_connect(s->uri, &copt, &c) != EMDB_OK)
		harness_die("connect %s: %s", s->uri, emdb_client_last_error());
	return c;
}

static void make_table(net_wl *w, emdb_client *c, const cluster_bench_opts *o)
{
	emdb_table_config cfg;
	preload_config(&cfg, "bench", o->net.dim, EMDB_OPT_SGD, EMDB_INIT_UNIFORM);
	*w = (net_wl){ .c = c, .dim = o->net.dim, .depth = o->net.depth, .seconds = o->net.seconds };
	int rc = emdb_client_table_create(c, &cfg, &w->table);
	if (rc != EMDB_OK)
		net_wl_die("table create", rc);
	net_wl_preload(w, o->net.rows, NULL);
}

/* Per batch of p's thread 0, the positions whose owner is not the home. */
static uint32_t *owned_elsewhere(const pool *p, int nodes)
{
	owner_map m;
	uint32_t *cross = calloc(p->batches, sizeof(*cross));
	if (!cross || owner_map_init(&m, (uint32_t)nodes, 0) != EMDB_OK)
		harness_die("out of memory");
	for (size_t b = 0; b < p->batches; b++) {
		const uint64_t *ids = pool_ids(p, 0, b);
		for (size_t i = 0; i < p->batch; i++)
			cross[b] += owner_of(&m, ids[i]) != CL_HOME;
	}
	owner_map_destroy(&m);
	return cross;
}

void cluster_bench_run(const cluster_bench_opts *opts)
{
	cluster_bench_opts o = *opts;
	net_server nodes[NET_CLUSTER_MAX], single;
	net_wl wc, ws;
	cl_rec recs[NET_N_OPS];
	net_op ops[NET_N_OPS];
	int n_ops;
	keys_source src;
	pool p;
	char err[256];
	cl_run run = { .o = &o };

	if (!o.net.rows)
		o.net.rows = NET_DEFAULT_ROWS;
	set_ucx_env(o.link);
	net_servers_init();
	/* Forked before this process touches UCX (ucx_pair_open below). */
	if (ucx_group_open(&run.group, (unsigned)o.nodes - 1, o.busy_poll, err, sizeof(err)) < 0)
		harness_die("bare UCX exchange between processes: %s", err);
	for (unsigned i = 0; ucx_group_pid(run.group, i) > 0; i++)
		net_servers_adopt(ucx_group_pid(run.group, i));
	harness_log("starting %d cluster nodes (UCX over %s) and a single node; load average %.2f", o.nodes,
		    link_name(o.link), load_now());
	char threads[16];
	snprintf(threads, sizeof(threads), "%d", o.serve_threads);
	const char *args[5] = { NULL };
	int k = 0;
	if (o.busy_poll) {
		args[k++] = "--cluster-busy-poll";
		args[k++] = "1";
	}
	if (o.serve_threads >= 0) {
		args[k++] = "--cluster-serve-threads";
		args[k++] = threads;
	}
	net_server_start_cluster(nodes, o.nodes, o.net.transport, args);
	net_server_start_emdb(&single, o.net.transport, "libevent", 0);
	for (int i = 0; i < o.nodes; i++) {
		run.node[i] = connect_to(&nodes[i]);
		run.pid[i] = nodes[i].pid;
	}
	run.single_pid = single.pid;
	make_table(&wc, connect_to(&nodes[CL_HOME]), &o);
	make_table(&ws, connect_to(&single), &o);

	measure_info_cost(&run);
	keys_source_init(&src, o.net.dist, o.net.rows);
	pool_init(&p, &src, 1, o.net.batch, CL_POOL_IDS, 0, 7);
	uint32_t *cross = owned_elsewhere(&p, o.nodes);
	run.cross = cross;
	run.batches = p.batches;

	n_ops = net_wl_ops(o.net.pull, o.net.push, 1, o.net.lookup, o.net.prefetch, ops);
	for (int i = 0; i < n_ops; i++) {
		cl_rec *x = &recs[i];
		memset(x, 0, sizeof(*x));
		x->op = ops[i];
		x->reqs_per_op = x->op == NET_PREFETCH ? 2 : 1;
		x->load_single = load_now();
		run.rec = x;
		net_wl_measure_marked(&ws, x->op, &p, &x->single, mark_single, &run);
		x->load_cluster = load_now();
		net_wl_measure_marked(&wc, x->op, &p, &x->cluster, mark, &run);
		measure_bare(&run, x);
		harness_log("%s: single %.0f op/s, cluster %.0f op/s, bare %.0f rounds/s between processes, %.0f in one "
			    "(load %.2f)",
			    net_op_name(x->op), x->single.best / o.net.batch, x->cluster.best / o.net.batch, x->bare_rounds,
			    x->polled_rounds, x->load_cluster);
	}
	for (unsigned i = 0; ucx_group_pid(run.group, i) > 0; i++)
		net_servers_release(ucx_group_pid(run.group, i));
	ucx_group_close(run.group);
	emdb_client_close(wc.c);
	emdb_client_close(ws.c);
	for (int i = 0; i < o.nodes; i++) {
		emdb_client_close(run.node[i]);
		net_server_stop(&nodes[i]);
	}
	net_server_stop(&single);
	free(cross);
	pool_free(&p);

	if (o.net.json)
		print_json(&o, recs, n_ops);
	else
		print_table(&o, recs, n_ops);
}
