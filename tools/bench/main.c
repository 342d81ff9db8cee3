/*
 * main.c - emdb-bench: in-process benchmark of the emdb engine against the
 * anchors each of its figures is a ratio to.  docs/benchmarks.md is the
 * manual: what is measured, the goals, and the recorded results.
 *
 * Design
 *   One run measures the workloads and their anchors in the same process,
 *   on the same ID streams and thread counts, so that every ratio compares
 *   like with like on whatever machine it runs.  The phases are ordered to
 *   bound memory, which matters more than anything else on a small machine:
 *   the large table (30M rows by default, ~8 GB) serves Pull, Lookup and
 *   Prefetch and is closed before the baseline and the anchor regions (as
 *   large again) are mapped; the Push tables are small and created one
 *   optimizer at a time.
 *
 *     1. draw the ID pools (untimed)
 *     2. large table: preload, Pull, Lookup, Prefetch at 1 and T threads,
 *        then (--reserve on) for each thread count emdb_table_reserve and
 *        Prefetch again (pf_reserved); the table then grows into up to
 *        80% of the memory that was free (~19 GB of a 24 GB machine)
 *     3. close it; global-lock baseline at 1 and T threads, same ID stream
 *     4. random-access bound (region = the table's index bytes), gather
 *        bound (region = the table's vector bytes)
 *     5. per optimizer: Push+Update on a fresh table for each distribution,
 *        drop it, then the bare optimizer loop on the same batches
 *     6. print the table or the JSON lines
 *
 * Invariants
 *   1. Exit status 2 for bad usage, 1 for a failure while running, 0 after
 *      printing the figures (missed goals are figures, not failures).
 *   2. Nothing is left running or mapped at exit.
 *   3. Without --net the run is in process, exactly as described above;
 *      with --net, net_bench.c runs the network mode instead, with
 *      --cluster N, cluster_bench.c the cluster mode, and with
 *      --workload checkpoint, ckpt_bench.c runs the checkpoint workload.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <emdb/alloc.h>
#include <emdb/db.h>

#include "tools/bench/anchors.h"
#include "tools/bench/baseline.h"
#include "tools/bench/ckpt_bench.h"
#include "tools/bench/cluster_bench.h"
#include "tools/bench/harness.h"
#include "tools/bench/keys.h"
#include "tools/bench/net_bench.h"
#include "tools/bench/net_server.h"
#include "tools/bench/pool.h"
#include "tools/bench/preload.h"
#include "tools/bench/report.h"
#include "tools/bench/workloads.h"

enum {
	WL_PREFETCH = 1,
	WL_PULL = 2,
	WL_PUSH = 4,
	WL_LOOKUP = 8,
	WL_ALL = 15,     /* the in-memory workloads; checkpoint only when named */
	WL_CKPT = 16,
	WL_STEP = 32,    /* --net only, only when named */
};

#define DEFAULT_INDEX_ROWS 30000000ull /* HypeReca-scale table for Prefetch */
#define DEFAULT_PUSH_ROWS 2000000ull   /* per optimizer; Adam's rows are 3x wide */
#define PREFETCH_NEW_FRAC 0.10
#define PREFETCH_POOL_IDS (4u << 20)   /* per thread: far past the caches */
#define PULL_POOL_IDS (2u << 20)
#define PUSH_POOL_IDS (1u << 20)
#define MAX_RECORDS 64
#define MAX_OPTS 5

typedef struct bench_opts {
	unsigned workloads;
	uint64_t rows;          /* 0: per-workload defaults */
	uint32_t dim;
	uint32_t batch;
	uint32_t bags;          /* --bags: Pull pooled into this many bags; 0 plain */
	unsigned threads;       /* 0: the core count */
	emdb_opt_kind opts[MAX_OPTS];
	int n_opts;
	int opt_set;            /* --optimizer given */
	int dist_set;
	keys_dist dist;
	double seconds;
	double new_frac;        /* Prefetch: share of never-seen IDs */
	int reserve;            /* Prefetch: also measured after emdb_table_reserve */
	emdb_init_kind init;
	int json;
	net_transport net;       /* NET_OFF: in process */
	int net_tls;             /* --net tls: NET_TCP with a TLS server beside */
	unsigned depth;         /* --net: requests in flight */
	unsigned backends;      /* --net: NET_BACKEND_* */
	int cluster;            /* --cluster N: nodes; 0 off */
	cluster_link_kind cluster_link;
	int cluster_busy_poll;  /* --cluster-busy-poll */
	int cluster_serve_threads; /* --cluster-serve-threads; -1: the server's default */
	const char *dir;        /* checkpoint: parent of the data directory */
	uint64_t pause_rows;    /* checkpoint: rows of the Update-pause table */
} bench_opts;

static void usage(FILE *f)
{
	fprintf(f, "usage: emdb-bench [options]\n"
	      "\n"
	      "Measures the emdb engine in process, and beside each figure the anchor\n"
	      "it is a ratio to (see docs/benchmarks.md).\n"
	      "\n"
	      "  --workload W    prefetch, pull, push, lookup, all (default: the four),\n"
	      "                  push measuring Push then Update and both in one call\n"
	      "                  (push_update; with --net also PUSH_UPDATE requests),\n"
	      "                  or checkpoint (only when named: disk I/O of several GB),\n"
	      "                  or step (with --net, only when named: synchronous steps\n"
	      "                  of --threads workers, default 2)\n"
	      "  --rows N        table rows (k, M, G suffixes; default 30M for\n"
	      "                  prefetch/pull/lookup, 2M per optimizer for push,\n"
	      "                  5M for checkpoint)\n"
	      "  --dim D         row dimension (default 64)\n"
	      "  --batch B       IDs per call (default 4096)\n"
	      "  --bags N        pull: pool each batch into N bags of about B/N IDs\n"
	      "                  (sum, emdb_pull_bags_ticket), reported as pull_bags\n"
	      "                  (default: plain Pull)\n"
	      "  --threads T     threads (default: the cores online); Prefetch is\n"
	      "                  also measured at 1 thread for the scaling ratio\n"
	      "  --optimizer O   sgd, adagrad, adam, rowwise, ftrl, or all (default all:\n"
	      "                  sgd, adagrad and adam) for the push workload; one of\n"
	      "                  them for checkpoint (default adam)\n"
	      "  --dist D        zipf or uniform (default zipf; push runs both unless set)\n"
	      "  --seconds S     time per measurement: 3 repetitions of S/3 after a\n"
	      "                  warm-up, the best one reported (default 2)\n"
	      "  --new F         fraction of never-seen IDs in Prefetch batches\n"
	      "                  (default 0.10)\n"
	      "  --reserve R     on or off: Prefetch is measured a second time, as\n"
	      "                  pf_reserved, after emdb_table_reserve made room for the\n"
	      "                  rows it will insert (default on; only with --new > 0)\n"
	      "  --huge-pages H  off, try or on: where the engine's row chunks and index\n"
	      "                  arrays come from (emdb_alloc_set_huge_pages): ordinary\n"
	      "                  memory, or the kernel's pool of explicit huge pages, which\n"
	      "                  sysctl vm.nr_hugepages must have reserved (default off)\n"
	      "  --init I        row initializer: uniform, normal or zeros (default\n"
	      "                  uniform in [-0.01, 0.01])\n"
	      "  --net N         tcp or unix: measure over the network instead, through\n"
	      "                  the client library against an emdb-server (loopback or a\n"
	      "                  Unix socket), beside the echo bound and redis-server\n"
	      "                  (default: off, in process); tls: as tcp, with a TLS\n"
	      "                  emdb-server (one per --io-backend) measured beside a\n"
	      "                  plain one\n"
	      "  --depth N       --net: requests in flight on the connection (default 8)\n"
	      "  --io-backend B  --net: emdb-server's io_backend, libevent, uring, or both\n"
	      "                  (a server of each, measured side by side against the\n"
	      "                  same anchors; default libevent)\n"
	      "  --cluster N     the network workloads through one home node of N local\n"
	      "                  emdb-server nodes (2..%d) forming a cluster, beside a\n"
	      "                  single emdb-server and a bare UCX exchange of the same\n"
	      "                  message sizes, with the link's counters per request\n"
	      "                  (clients over --net unix, the default, or tcp)\n"
	      "  --cluster-link L  tcp or shm: UCX between the nodes over TCP on\n"
	      "                  loopback, or shared memory where it can (default tcp)\n"
	      "  --cluster-busy-poll  the nodes' link threads (and the bare exchange's\n"
	      "                  processes) poll UCX instead of sleeping on its event fd\n"
	      "                  (cluster_busy_poll 1)\n"
	      "  --cluster-serve-threads N  the nodes' cluster_serve_threads (default:\n"
	      "                  the server's; 0: owners serve on the link's thread)\n"
	      "  --dir D         checkpoint: make the data directory under D (default /tmp);\n"
	      "                  it is removed at the end\n"
	      "  --pause-rows N  checkpoint: rows of the Update-pause table, dim 16 SGD\n"
	      "                  (default 10M)\n"
	      "  --json          one JSON object per measurement and line on stdout\n"
	      "  --help          this text\n",
	      NET_CLUSTER_MAX);
}

static void bad_usage(const char *fmt, const char *arg)
{
	fputs("emdb-bench: ", stderr);
	fprintf(stderr, fmt, arg);
	fputs("\nTry 'emdb-bench --help'.\n", stderr);
	exit(2);
}

/* A positive integer with an optional k/M/G (decimal) suffix. */
static uint64_t parse_count(const char *opt, const char *s, uint64_t lo, uint64_t hi)
{
	char *end;
	unsigned long long v;
	uint64_t mul = 1;
	char msg[160];

	if (!*s || *s == '-')
		goto bad;
	v = strtoull(s, &end, 10);
	if (end == s)
		goto bad;
	if (*end == 'k' || *end == 'K')
		mul = 1000, end++;
	else if (*end == 'M')
		mul = 1000000, end++;
	else if (*end == 'G')
		mul = 1000000000, end++;
	if (*end || v > hi / mul || v * mul < lo)
		goto bad;
	return v * mul;
bad:
	snprintf(msg, sizeof(msg), "%s: '%%s' is not a whole number in %llu..%llu",
		 opt, (unsigned long long)lo, (unsigned long long)hi);
	bad_usage(msg, s);
	return 0;
}

static void parse_optimizer(bench_opts *o, const char *s)
{
	static const struct {
		const char *name;
		emdb_opt_kind kind;
	} names[] = {
		{ "sgd", EMDB_OPT_SGD },
		{ "adagrad", EMDB_OPT_ADAGRAD },
		{ "rowwise", EMDB_OPT_ROWWISE_ADAGRAD },
		{ "adam", EMDB_OPT_ADAM },
		{ "ftrl", EMDB_OPT_FTRL },
	};

	if (strcmp(s, "all") == 0) {
		o->opts[0] = EMDB_OPT_SGD;
		o->opts[1] = EMDB_OPT_ADAGRAD;
		o->opts[2] = EMDB_OPT_ADAM;
		o->n_opts = 3;
		return;
	}
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(s, names[i].name) == 0) {
			o->opts[0] = names[i].kind;
			o->n_opts = 1;
			return;
		}
	bad_usage("--optimizer: '%s' is not sgd, adagrad, adam, rowwise, ftrl or all", s);
}

static void parse_args(int argc, char **argv, bench_opts *o)
{
	static const struct option longopts[] = {
		{ "workload", required_argument, NULL, 'w' },
		{ "rows", required_argument, NULL, 'r' },
		{ "dim", required_argument, NULL, 'd' },
		{ "batch", required_argument, NULL, 'b' },
		{ "bags", required_argument, NULL, 'G' },
		{ "threads", required_argument, NULL, 't' },
		{ "optimizer", required_argument, NULL, 'o' },
		{ "dist", required_argument, NULL, 'D' },
		{ "seconds", required_argument, NULL, 's' },
		{ "new", required_argument, NULL, 'n' },
		{ "reserve", required_argument, NULL, 'V' },
		{ "huge-pages", required_argument, NULL, 'H' },
		{ "init", required_argument, NULL, 'i' },
		{ "json", no_argument, NULL, 'j' },
		{ "net", required_argument, NULL, 'N' },
		{ "depth", required_argument, NULL, 'P' },
		{ "io-backend", required_argument, NULL, 'B' },
		{ "dir", required_argument, NULL, 'R' },
		{ "pause-rows", required_argument, NULL, 'Q' },
		{ "cluster", required_argument, NULL, 'C' },
		{ "cluster-link", required_argument, NULL, 'L' },
		{ "cluster-busy-poll", no_argument, NULL, 'K' },
		{ "cluster-serve-threads", required_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*o = (bench_opts){ .workloads = WL_ALL, .dim = 64, .batch = 4096, .seconds = 2,
			   .new_frac = PREFETCH_NEW_FRAC, .reserve = 1, .init = EMDB_INIT_UNIFORM,
			   .depth = NET_DEFAULT_DEPTH, .backends = NET_BACKEND_LIBEVENT,
			   .cluster_serve_threads = -1 };
	parse_optimizer(o, "all");
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (c) {
		case 'w':
			if (strcmp(optarg, "prefetch") == 0)
				o->workloads = WL_PREFETCH;
			else if (strcmp(optarg, "pull") == 0)
				o->workloads = WL_PULL;
			else if (strcmp(optarg, "push") == 0)
				o->workloads = WL_PUSH;
			else if (strcmp(optarg, "lookup") == 0)
				o->workloads = WL_LOOKUP;
			else if (strcmp(optarg, "all") == 0)
				o->workloads = WL_ALL;
			else if (strcmp(optarg, "checkpoint") == 0)
				o->workloads = WL_CKPT;
			else if (strcmp(optarg, "step") == 0)
				o->workloads = WL_STEP;
			else
				bad_usage("--workload: '%s' is not prefetch, pull, push, lookup, all, "
					  "checkpoint or step", optarg);
			break;
		case 'r':
			o->rows = parse_count("--rows", optarg, 1, 1ull << 40);
			break;
		case 'd':
			o->dim = (uint32_t)parse_count("--dim", optarg, 1, EMDB_DIM_MAX);
			break;
		case 'b':
			o->batch = (uint32_t)parse_count("--batch", optarg, 1, 4u << 20);
			break;
		case 'G':
			o->bags = (uint32_t)parse_count("--bags", optarg, 1, 4u << 20);
			break;
		case 't':
			o->threads = (unsigned)parse_count("--threads", optarg, 1, HARNESS_MAX_THREADS);
			break;
		case 'o':
			parse_optimizer(o, optarg);
			o->opt_set = 1;
			break;
		case 'D':
			if (strcmp(optarg, "zipf") == 0)
				o->dist = KEYS_ZIPF;
			else if (strcmp(optarg, "uniform") == 0)
				o->dist = KEYS_UNIFORM;
			else
				bad_usage("--dist: '%s' is not zipf or uniform", optarg);
			o->dist_set = 1;
			break;
		case 's': {
			char *end;
			o->seconds = strtod(optarg, &end);
			if (end == optarg || *end || !(o->seconds >= 0.03 && o->seconds <= 3600))
				bad_usage("--seconds: '%s' is not a number of seconds in 0.03..3600", optarg);
			break;
		}
		case 'n': {
			char *end;
			o->new_frac = strtod(optarg, &end);
			if (end == optarg || *end || !(o->new_frac >= 0 && o->new_frac <= 1))
				bad_usage("--new: '%s' is not a fraction in 0..1", optarg);
			break;
		}
		case 'V':
			if (strcmp(optarg, "on") == 0)
				o->reserve = 1;
			else if (strcmp(optarg, "off") == 0)
				o->reserve = 0;
			else
				bad_usage("--reserve: '%s' is not on or off", optarg);
			break;
		case 'H': {
			emdb_huge_pages m;
			if (emdb_huge_pages_parse(optarg, &m) != EMDB_OK)
				bad_usage("--huge-pages: '%s' is not off, try or on", optarg);
			emdb_alloc_set_huge_pages(m);
			break;
		}
		case 'i':
			if (strcmp(optarg, "uniform") == 0)
				o->init = EMDB_INIT_UNIFORM;
			else if (strcmp(optarg, "normal") == 0)
				o->init = EMDB_INIT_NORMAL;
			else if (strcmp(optarg, "zeros") == 0)
				o->init = EMDB_INIT_ZEROS;
			else
				bad_usage("--init: '%s' is not uniform, normal or zeros", optarg);
			break;
		case 'j':
			o->json = 1;
			break;
		case 'N':
			if (strcmp(optarg, "tcp") == 0)
				o->net = NET_TCP;
			else if (strcmp(optarg, "unix") == 0)
				o->net = NET_UNIX;
			else if (strcmp(optarg, "tls") == 0)
				o->net = NET_TCP, o->net_tls = 1;
			else
				bad_usage("--net: '%s' is not tcp, tls or unix", optarg);
			break;
		case 'P':
			o->depth = (unsigned)parse_count("--depth", optarg, 1, 1024);
			break;
		case 'B':
			if (strcmp(optarg, "libevent") == 0)
				o->backends = NET_BACKEND_LIBEVENT;
			else if (strcmp(optarg, "uring") == 0)
				o->backends = NET_BACKEND_URING;
			else if (strcmp(optarg, "both") == 0)
				o->backends = NET_BACKEND_LIBEVENT | NET_BACKEND_URING;
			else
				bad_usage("--io-backend: '%s' is not libevent, uring or both", optarg);
			break;
		case 'R':
			o->dir = optarg;
			break;
		case 'C':
			o->cluster = (int)parse_count("--cluster", optarg, 2, NET_CLUSTER_MAX);
			break;
		case 'L':
			if (strcmp(optarg, "tcp") == 0)
				o->cluster_link = CLUSTER_LINK_TCP;
			else if (strcmp(optarg, "shm") == 0)
				o->cluster_link = CLUSTER_LINK_SHM;
			else
				bad_usage("--cluster-link: '%s' is not tcp or shm", optarg);
			break;
		case 'K':
			o->cluster_busy_poll = 1;
			break;
		case 'T':
			o->cluster_serve_threads = (int)parse_count("--cluster-serve-threads", optarg, 0, 256);
			break;
		case 'Q':
			o->pause_rows = parse_count("--pause-rows", optarg, 1, 1ull << 40);
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case ':':
			bad_usage("option '%s' needs a value", argv[optind - 1]);
			break;
		default:
			bad_usage("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		bad_usage("unexpected argument '%s'", argv[optind]);
	if (o->workloads == WL_CKPT && o->net != NET_OFF)
		bad_usage("%s: the checkpoint workload runs in process only", "--net");
	if (o->bags && (o->net != NET_OFF || !(o->workloads & WL_PULL)))
		bad_usage("--bags: pooling is measured by the in-process %s workload", "pull");
	if (o->bags > o->batch)
		bad_usage("--bags: more bags than IDs in a batch (%s) would leave bags empty", "--batch");
	if (o->workloads == WL_STEP && o->net == NET_OFF)
		bad_usage("--workload step: synchronous steps are measured over the network: add --net %s",
			  "unix (or tcp, tls)");
	if (o->workloads == WL_STEP && o->threads == 1)
		bad_usage("--threads 1: a step needs %s", "2 workers or more");
	if (o->cluster && (o->workloads & (WL_CKPT | WL_STEP)))
		bad_usage("--cluster: %s", "the checkpoint and step workloads are not measured on a cluster");
	if (o->cluster && (o->net_tls || o->backends != NET_BACKEND_LIBEVENT))
		bad_usage("--cluster: the nodes run libevent over plain sockets (%s)", "--net unix or tcp");
	if (!o->cluster && (o->cluster_link != CLUSTER_LINK_TCP || o->cluster_busy_poll || o->cluster_serve_threads >= 0))
		bad_usage("%s: only with --cluster N", "--cluster-link, --cluster-busy-poll, --cluster-serve-threads");
	if (o->cluster && o->bags)
		bad_usage("--cluster: %s", "--bags is not measured on a cluster");
	if (o->workloads == WL_CKPT && o->opt_set && o->n_opts != 1)
		bad_usage("--optimizer: the checkpoint workload takes one optimizer, not '%s'", "all");
}

/* --workload checkpoint: its own driver and report (ckpt_bench.c). */
static void run_checkpoint(const bench_opts *o, unsigned threads, int argc, char **argv)
{
	ckpt_bench_opts co = {
		.rows = o->rows, .dim = o->dim,
		.opt = o->opt_set ? o->opts[0] : EMDB_OPT_ADAM,
		.pause_rows = o->pause_rows, .batch = o->batch, .seconds = o->seconds,
		.threads = threads, .dir = o->dir, .json = o->json,
		.argc = argc, .argv = argv,
	};

	ckpt_bench_run(&co);
}

/* ---- phases ------------------------------------------------------------ */

typedef struct bench_run {
	const bench_opts *o;
	unsigned threads;
	unsigned counts[2]; /* thread counts for Prefetch: 1, then T if T > 1 */
	int n_counts;
	report_record recs[MAX_RECORDS];
	int n_recs;
} bench_run;

static report_record *new_record(bench_run *r)
{
	if (r->n_recs == MAX_RECORDS)
		harness_die("too many records");
	return &r->recs[r->n_recs++];
}

/* The anchors and goals of Prefetch record recs[i], taken at tc threads;
 * recs[0] is the same workload at 1 thread. */
static void prefetch_anchors(report_record **recs, int i, unsigned tc, const harness_result *ra,
			     const harness_result *bl)
{
	report_add_anchor(recs[i], "random_access_per_sec", "ratio_random_access",
			  "random-access bound", ra->best, 0.25);
	report_add_anchor(recs[i], "baseline_ids_per_sec", "ratio_baseline",
			  "global-lock baseline", bl->best, tc >= 2 ? 4.0 : 0);
	if (i > 0)
		report_add_anchor(recs[i], "prefetch_1thread_ids_per_sec", "ratio_threads",
				  "prefetch at 1 thread", recs[0]->res.best, 0.85 * tc);
}

/* Prefetch once more on the same table, after emdb_table_reserve made room
 * for what the measurement will insert: `grown` (the same thread count on
 * the growing table) times four, the gain the room gave in a probe, over
 * the warm-up and the repetitions, plus a tenth; at most 80% of the memory
 * free now.  The reserve's own time is logged: it is the first write of
 * that memory, paid up front. */
static void prefetch_reserved(const wl_env *env, const pool *p, unsigned threads,
			      wl_prefetch_state *st, const report_record *grown,
			      const bench_opts *o, report_record *rec)
{
	emdb_table_info info;
	preload_describe(env->db, env->table, &info);
	double row = (double)(info.stats.bytes_vectors + info.stats.bytes_optimizer + info.stats.bytes_index) /
		     (double)(info.stats.rows ? info.stats.rows : 1);
	double want = o->new_frac * grown->res.best * 4 * (o->seconds * 1.125 + 0.25) * 1.1;
	double fits = 0.8 * (double)sysconf(_SC_AVPHYS_PAGES) * (double)sysconf(_SC_PAGESIZE) / row;
	if (want > fits) {
		harness_log("pf_reserved, %u thread(s): room for %.0f rows wanted, %.0f fit in 80%% of "
			    "the free memory", threads, want, fits);
		want = fits;
	}
	uint64_t room = info.stats.rows + (uint64_t)want;
	double t0 = harness_now();
	int rc = emdb_table_reserve(env->db, env->table, room);
	if (rc != EMDB_OK)
		preload_die_engine("emdb_table_reserve", rc);
	double dt = harness_now() - t0;
	harness_log("emdb_table_reserve: room for %llu rows (%llu more) in %.2f s, %.2f GB/s of rows",
		    (unsigned long long)room, (unsigned long long)(room - info.stats.rows), dt,
		    want * row / (dt > 0 ? dt : 1e-9) / 1e9);
	wl_prefetch(env, p, threads, st, rec);
	rec->workload = "pf_reserved";
	rec->reserved_rows = room;
	preload_describe(env->db, env->table, &info);
	if (info.stats.rows > room)
		harness_log("pf_reserved, %u thread(s): %llu rows inserted beyond the room", threads,
			    (unsigned long long)(info.stats.rows - room));
}

/* Phases 2-4: the large table and its anchors. */
static void run_index(bench_run *r)
{
	const bench_opts *o = r->o;
	uint64_t rows = o->rows ? o->rows : DEFAULT_INDEX_ROWS;
	keys_dist dist = o->dist_set ? o->dist : KEYS_ZIPF;
	int want_rows = o->workloads & (WL_PULL | WL_LOOKUP);
	int want_pf = o->workloads & WL_PREFETCH;
	report_record *pull = NULL, *pf[2] = { NULL, NULL }, *pr[2] = { NULL, NULL };
	pool rows_pool = { 0 }, pf_pool = { 0 };
	wl_prefetch_state pf_state = { { 0 } };
	emdb_table_config cfg;
	emdb_table_info info;
	keys_source src;
	wl_env env;
	emdb_db *db;

	keys_source_init(&src, dist, rows);
	if (want_rows)
		pool_init(&rows_pool, &src, r->threads, o->batch, PULL_POOL_IDS, 0, 2);
	if (want_pf)
		pool_init(&pf_pool, &src, r->threads, o->batch, PREFETCH_POOL_IDS,
			  o->new_frac, 1);
	if (dist == KEYS_ZIPF)
		harness_log("zipf over %llu IDs: exponent %.4f, top 2.2%% drew %.1f%% of the pool",
			    (unsigned long long)rows, src.zipf.s,
			    100 * (want_pf ? pf_pool.share : rows_pool.share));

	db = preload_db_open();
	preload_config(&cfg, "bench", o->dim, EMDB_OPT_SGD, o->init);
	env = (wl_env){ .db = db, .dim = o->dim, .rows = rows, .seconds = o->seconds, .bags = o->bags };
	preload_table(db, &cfg, rows, r->threads, &env.table);
	preload_describe(db, env.table, &info);

	if (o->workloads & WL_PULL)
		wl_pull(&env, &rows_pool, r->threads, pull = new_record(r));
	if (o->workloads & WL_LOOKUP)
		wl_lookup(&env, &rows_pool, r->threads, new_record(r));
	harness_result fresh[2];
	if (want_pf) {
		size_t stride = ((size_t)o->dim * sizeof(float) + 15) & ~(size_t)15; /* SGD */
		for (int i = 0; i < r->n_counts; i++)
			wl_prefetch(&env, &pf_pool, r->counts[i], &pf_state, pf[i] = new_record(r));
		/* While the table is still open: memory it frees at close would
		 * come back to the bound already backed. */
		if (o->new_frac > 0)
			anchor_fresh_rows(stride, r->counts, r->n_counts, fresh);
		if (o->new_frac > 0 && o->reserve)
			for (int i = 0; i < r->n_counts; i++)
				prefetch_reserved(&env, &pf_pool, r->counts[i], &pf_state, pf[i], o,
						  pr[i] = new_record(r));
	}
	emdb_db_close(db);

	if (want_pf) {
		harness_result bl[2], ra[2];
		double nf;
		/* Room for what the baseline could insert at 30M IDs/s, far
		 * above what one lock allows, or a quarter of the table. */
		double expect = o->new_frac * 3e7 * o->seconds * 1.2 * r->n_counts;
		baseline *b = baseline_create(&cfg, env.table, rows,
					      (double)(rows / 4) > expect ? rows / 4 : (uint64_t)expect);

		for (int i = 0; i < r->n_counts; i++)
			baseline_measure(b, &pf_pool, r->counts[i], o->seconds, &bl[i], &nf);
		baseline_destroy(b);
		anchor_random_access(info.stats.bytes_index, r->counts, r->n_counts,
				     o->seconds, ra);
		for (int i = 0; i < r->n_counts; i++) {
			prefetch_anchors(pf, i, r->counts[i], &ra[i], &bl[i]);
			/* The Prefetch rate at which writing its new rows into
			 * fresh memory would take all the time. */
			if (o->new_frac > 0)
				report_add_anchor(pf[i], "fresh_memory_ids_per_sec",
						  "ratio_fresh_memory", "fresh-memory bound",
						  fresh[i].best / o->new_frac, 0);
			if (!pr[i])
				continue;
			prefetch_anchors(pr, i, r->counts[i], &ra[i], &bl[i]);
			report_add_anchor(pr[i], "growing_ids_per_sec", "ratio_growing",
					  "prefetch, no reserve", pf[i]->res.best, 0);
		}
		pool_free(&pf_pool);
	}
	if (pull) {
		harness_result g;
		anchor_gather(info.stats.bytes_vectors / ((uint64_t)o->dim * 4), o->dim,
			      &rows_pool, r->threads, o->seconds, &g);
		report_add_anchor(pull, "gather_ids_per_sec", "ratio_gather", "gather bound",
				  g.best, 0.70);
	}
	if (want_rows)
		pool_free(&rows_pool);
}

/* The anchor "a table per thread": the same steps with nothing shared
 * between the threads.  Thread 0 keeps env's table; the others get
 * tables of their own, preloaded alike and dropped afterwards. */
static void push_private_tables(bench_run *r, emdb_db *db, const wl_env *env,
				const emdb_table_config *cfg, const pool *pools, int n_dists,
				harness_result *priv, harness_result *priv_fused)
{
	uint32_t tables[HARNESS_MAX_THREADS];

	tables[0] = env->table;
	for (unsigned t = 1; t < r->threads; t++) {
		emdb_table_config c = *cfg;
		int n = snprintf(c.name, sizeof(c.name), "private_%u", t);

		if (n < 0 || (size_t)n >= sizeof(c.name))
			harness_die("table name too long");
		preload_table(db, &c, env->rows, r->threads, &tables[t]);
	}
	for (int d = 0; d < n_dists; d++) {
		wl_push_update_private(env, tables, &pools[d], r->threads, false, &priv[d]);
		wl_push_update_private(env, tables, &pools[d], r->threads, true, &priv_fused[d]);
	}
	for (unsigned t = 1; t < r->threads; t++) {
		int rc = emdb_table_drop(db, tables[t]);
		if (rc != EMDB_OK)
			preload_die_engine("emdb_table_drop", rc);
	}
}

/* Phase 5: Push+Update per optimizer and distribution, and the bare loop. */
static void run_push(bench_run *r)
{
	const bench_opts *o = r->o;
	uint64_t rows = o->rows ? o->rows : DEFAULT_PUSH_ROWS;
	keys_dist dists[2] = { KEYS_ZIPF, KEYS_UNIFORM };
	int n_dists = 2;
	pool pools[2];
	emdb_db *db = preload_db_open();

	if (o->dist_set) {
		dists[0] = o->dist;
		n_dists = 1;
	}
	for (int d = 0; d < n_dists; d++) {
		keys_source src;
		keys_source_init(&src, dists[d], rows);
		pool_init(&pools[d], &src, r->threads, o->batch, PUSH_POOL_IDS, 0, 3 + d);
	}
	for (int k = 0; k < o->n_opts; k++) {
		report_record *recs[2], *fused[2]; /* push then update; one call */
		harness_result priv[2], priv_fused[2]; /* a table per thread, threads > 1 */
		emdb_table_config cfg;
		char name[EMDB_NAME_MAX];
		wl_env env = { .db = db, .dim = o->dim, .rows = rows, .seconds = o->seconds };
		int rc;

		snprintf(name, sizeof(name), "push_%s", emdb_optimizer_name(o->opts[k]));
		preload_config(&cfg, name, o->dim, o->opts[k], o->init);
		preload_table(db, &cfg, rows, r->threads, &env.table);
		for (int d = 0; d < n_dists; d++) {
			wl_push_update(&env, &pools[d], r->threads, false, recs[d] = new_record(r));
			wl_push_update(&env, &pools[d], r->threads, true, fused[d] = new_record(r));
		}
		if (r->threads > 1)
			push_private_tables(r, db, &env, &cfg, pools, n_dists, priv, priv_fused);
		rc = emdb_table_drop(db, env.table);
		if (rc != EMDB_OK)
			preload_die_engine("emdb_table_drop", rc);
		for (int d = 0; d < n_dists; d++) {
			harness_result bare;
			wl_bare_update(&cfg.optimizer, o->dim, rows, &pools[d], r->threads,
				       o->seconds, &bare);
			report_add_anchor(recs[d], "bare_loop_ids_per_sec", "ratio_bare_loop",
					  "bare optimizer loop", bare.best, 0.70);
			report_add_anchor(fused[d], "bare_loop_ids_per_sec", "ratio_bare_loop",
					  "bare optimizer loop", bare.best, 0.70);
			if (r->threads > 1) {
				report_add_anchor(recs[d], "private_tables_ids_per_sec",
						  "ratio_private_tables", "a table per thread",
						  priv[d].best, 0);
				report_add_anchor(fused[d], "private_tables_ids_per_sec",
						  "ratio_private_tables", "a table per thread",
						  priv_fused[d].best, 0);
			}
		}
		if (n_dists == 2) {
			report_add_anchor(recs[0], "uniform_ids_per_sec", "ratio_zipf_uniform",
					  "push+update, uniform", recs[1]->res.best, 1.0);
			report_add_anchor(fused[0], "uniform_ids_per_sec", "ratio_zipf_uniform",
					  "push_update, uniform", fused[1]->res.best, 1.0);
		}
	}
	for (int d = 0; d < n_dists; d++)
		pool_free(&pools[d]);
	emdb_db_close(db);
}

/* --huge-pages and the kernel's pool, in the log. */
static void log_huge_pages(const char *when)
{
	emdb_huge_pages m = emdb_alloc_huge_pages();
	if (m == EMDB_HUGE_OFF)
		return;
	harness_log("huge pages %s, %s: the pool has %ld of %ld pages free; %llu regions taken "
		    "from it, %llu from ordinary memory for want of room",
		    emdb_huge_pages_name(m), when, emdb_alloc_pool_free(), emdb_alloc_pool_total(), (unsigned long long)emdb_alloc_huge_maps(),
		    (unsigned long long)emdb_alloc_huge_fallbacks());
}

int main(int argc, char **argv)
{
	bench_opts o;
	bench_run *r = calloc(1, sizeof(*r));
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	report_meta meta;
	double t0 = harness_now(), load[1] = { -1 };

	if (!r)
		harness_die("out of memory");
	parse_args(argc, argv, &o);
	if ((o.net != NET_OFF || o.cluster) && emdb_alloc_huge_pages() != EMDB_HUGE_OFF)
		bad_usage("--huge-pages%s: the engine of --net runs in emdb-server (its huge_pages "
			  "setting), not in the bench", "");
	if (o.cluster) {
		cluster_bench_opts co = {
			.net = { .transport = o.net == NET_TCP ? NET_TCP : NET_UNIX, .depth = o.depth,
				 .rows = o.rows, .dim = o.dim, .batch = o.batch, .seconds = o.seconds,
				 .dist = o.dist_set ? o.dist : KEYS_ZIPF, .json = o.json,
				 .pull = !!(o.workloads & WL_PULL), .push = !!(o.workloads & WL_PUSH),
				 .lookup = !!(o.workloads & WL_LOOKUP),
				 .prefetch = !!(o.workloads & WL_PREFETCH) },
			.nodes = o.cluster, .link = o.cluster_link, .busy_poll = o.cluster_busy_poll,
			.serve_threads = o.cluster_serve_threads,
		};
		free(r);
		cluster_bench_run(&co);
		return 0;
	}
	if (o.net != NET_OFF) {
		net_bench_opts no = {
			.transport = o.net, .backends = o.backends, .depth = o.depth,
			.rows = o.rows, .dim = o.dim,
			.batch = o.batch, .seconds = o.seconds,
			.dist = o.dist_set ? o.dist : KEYS_ZIPF, .json = o.json,
			.pull = !!(o.workloads & WL_PULL), .push = !!(o.workloads & WL_PUSH),
			.lookup = !!(o.workloads & WL_LOOKUP),
			.prefetch = !!(o.workloads & WL_PREFETCH), .tls = o.net_tls,
			.step = !!(o.workloads & WL_STEP), .workers = o.threads ? o.threads : 2,
		};
		free(r);
		net_bench_run(&no);
		return 0;
	}
	getloadavg(load, 1);
	if (cores < 1)
		cores = 1;
	log_huge_pages("at the start");
	r->o = &o;
	r->threads = o.threads ? o.threads : (unsigned)(cores < HARNESS_MAX_THREADS ? cores : HARNESS_MAX_THREADS);
	if (o.workloads == WL_CKPT) {
		run_checkpoint(&o, r->threads, argc, argv);
		log_huge_pages("at the end");
		free(r);
		return 0;
	}
	r->counts[0] = 1;
	r->n_counts = 1;
	if (r->threads > 1)
		r->counts[r->n_counts++] = r->threads;
	harness_log("%ld cores online (load average %.2f), %u thread(s), batch %u, dim %u, "
		    "%.2f s per measurement",
		    cores, load[0], r->threads, o.batch, o.dim, o.seconds);

	if (o.workloads & (WL_PREFETCH | WL_PULL | WL_LOOKUP))
		run_index(r);
	if (o.workloads & WL_PUSH)
		run_push(r);

	meta = (report_meta){ .cores = cores, .seconds = o.seconds, .json = o.json,
			      .load1 = load[0],
			      .init = o.init == EMDB_INIT_UNIFORM ? "uniform"
				      : o.init == EMDB_INIT_NORMAL ? "normal" : "zeros" };
	report_print(stdout, &meta, r->recs, r->n_recs);
	log_huge_pages("at the end");
	harness_log("done in %.0f s", harness_now() - t0);
	free(r);
	return 0;
}
