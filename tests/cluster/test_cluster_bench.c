/*
 * test_cluster_bench.c - emdb-bench --cluster as its user runs it: a tiny
 * configuration (256-ID batches, a few hundred requests in all) runs end
 * to end, exits 0, and prints one JSON line per operation with the link's
 * counters, messages per request within N-1, the bytes sent at least
 * the bytes that must cross, each server's CPU per request, both bare
 * UCX references (between processes, and in one process) and the home
 * node's linktest of the same messages (link/bare, the goal's ratio);
 * SIGINT in the middle of a run stops the bench, every emdb-server it
 * started and every process of its bare exchange.  No figure of speed is
 * asserted.
 *
 * The bench runs as a child process that dies with the test
 * (PR_SET_PDEATHSIG, tests/lib/cli_run.h's prog_start); every wait is
 * bounded.
 */
#define _GNU_SOURCE /* tests/lib/tmpdir.h: nftw */
#include <dirent.h>
#include <time.h>

#include "tests/lib/cli_run.h"

#define BENCH_LIMIT_MS 240000

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static prog_proc running;

/* emdb-bench with args, its stdin closed. */
static void bench_start(const char *const *args)
{
	prog_start(&running, EMDB_BENCH_BIN, NULL, args);
	close(running.in);
}

static void stop_bench(void)
{
	if (running.pid > 0) {
		kill(running.pid, SIGKILL);
		waitpid(running.pid, NULL, 0);
		running.pid = 0;
	}
	run_free(&running.r);
}

/* The pids whose parent is ppid (from /proc), at most max. */
static int children_of(pid_t ppid, pid_t *out, int max)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;
	cr_assert_not_null(d);
	while ((e = readdir(d)) && n < max) {
		char path[300], buf[512];
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		size_t len = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[len] = 0;
		char *rp = strrchr(buf, ')'); /* the name may hold blanks */
		char state;
		int pp;
		if (rp && sscanf(rp + 1, " %c %d", &state, &pp) == 2 && pp == ppid)
			out[n++] = atoi(e->d_name);
	}
	closedir(d);
	return n;
}

/* Whether pid is gone (or a zombie about to be reaped by init). */
static bool gone(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return true;
	size_t len = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[len] = 0;
	char *rp = strrchr(buf, ')');
	return rp && rp[1] == ' ' && rp[2] == 'Z';
}

TestSuite(cluster_bench, .fini = stop_bench, .timeout = 300);

Test(cluster_bench, two_nodes_end_to_end_json_has_the_counters)
{
	static const char *const want[] = { "pull", "pull_ticket", "push", "push_ticket", "update",
					    "push_update", "push_update_ticket", "lookup", "prefetch" };
	bench_start(ARGS("--cluster", "2", "--rows", "5k", "--batch", "256", "--depth", "2", "--seconds", "0.1",
			 "--json"));
	prog_wait(&running, "emdb-bench", BENCH_LIMIT_MS);
	cr_assert_eq(running.r.code, 0, "emdb-bench exited %d; stderr:\n%s", running.r.code, running.r.err);
	cr_assert_null(strstr(running.r.err, "Sanitizer"), "%s", running.r.err);

	int lines = 0;
	for (char *line = running.r.out; *line;) {
		char *nl = strchr(line, '\n');
		cr_assert_not_null(nl, "unterminated line: %s", line);
		jv *v = json_line(line, (size_t)(nl - line));
		cr_assert_lt(lines, 9, "more lines than operations:\n%s", running.r.out);
		const char *op = jstr(v, "workload");
		cr_assert_str_eq(op, want[lines], "line %d is %s", lines, op);
		cr_assert_str_eq(jstr(v, "mode"), "cluster");
		cr_assert_eq(jnum(v, "nodes"), 2);
		cr_assert_eq(jnum(v, "batch"), 256);
		cr_assert_gt(jnum(v, "ops_per_sec"), 0, "%s", op);
		cr_assert_gt(jnum(v, "single_ops_per_sec"), 0, "%s", op);

		/* The link's own counters, for the requests counted. */
		double ops = jnum(v, "ops_counted"), per_op = jnum(v, "client_requests_per_op");
		cr_assert_gt(ops, 0, "%s", op);
		cr_assert_eq(per_op, strcmp(op, "prefetch") ? 1 : 2, "%s", op);
		cr_assert_eq(jget(v, "peers")->n, 1, "%s: one peer of two nodes", op);
		cr_assert_eq(jnum(v, "peers.0.rank"), 1);
		double msgs = jnum(v, "peers.0.msgs_sent"), sent = jnum(v, "peers.0.bytes_sent");
		double recv = jnum(v, "peers.0.bytes_received");
		cr_assert_gt(msgs, 0, "%s", op);
		cr_assert_eq(jnum(v, "home_msgs_sent"), msgs);
		cr_assert_eq(jnum(v, "home_bytes"), sent + recv);
		cr_assert_geq(jnum(v, "cluster_bytes_sent"), sent, "%s", op);
		/* One message per request and other owner, never one per ID. */
		cr_assert_leq(msgs, ops * per_op, "%s: %.0f messages for %.0f requests", op, msgs, ops * per_op);
		cr_assert_leq(jnum(v, "msgs_per_request"), 1.0, "%s", op);
		cr_assert(jbool(v, "msgs_ok"), "%s", op);

		/* What crossed is at least what had to; where rows travel,
		 * headers and fixed parts stay within the goal at 256 IDs
		 * too (Prefetch's, with its ticket free, weigh more on 128
		 * IDs of 8 bytes than on 4096). */
		double must = jnum(v, "must_cross_bytes_per_op");
		if (strcmp(op, "update") == 0) {
			cr_assert_eq(must, 0);
			cr_assert_eq(jget(v, "must_cross_ok")->t, J_NULL);
		} else {
			cr_assert_gt(must, 0, "%s", op);
			double r = jnum(v, "ratio_must_cross");
			cr_assert_geq(r, 1.0, "%s: %.4f of the bytes that must cross", op, r);
			if (strcmp(op, "prefetch"))
				cr_assert_leq(r, 1.1, "%s: %.4f of the bytes that must cross", op, r);
			cr_assert_leq(fabs(jnum(v, "bytes_per_op") - jnum(v, "cluster_bytes_sent") / ops), 0.1);
		}

		/* Both bare exchanges ran with the messages the home node
		 * sent, to the peer it sent them to; the goal's between a
		 * home and an owner process, each on its event fd. */
		double n_bare = jnum(v, "bare_msgs_per_round");
		cr_assert_eq(n_bare, msgs / ops > 1.5 ? 2 : 1, "%s", op);
		cr_assert_eq(jget(v, "bare_req_bytes")->n, n_bare);
		cr_assert_eq(jget(v, "bare_msg_ranks")->n, n_bare);
		cr_assert_eq(jnum(v, "bare_msg_ranks.0"), 1, "%s", op);
		cr_assert_eq(jnum(v, "bare_processes"), 2, "%s", op);
		cr_assert_str_eq(jstr(v, "bare_progress"), "event_fd");
		cr_assert_str_eq(jstr(v, "statistic"), "best of 3");
		cr_assert_gt(jnum(v, "bare_rounds_per_sec"), 0, "%s", op);
		cr_assert_gt(jnum(v, "ratio_bare"), 0, "%s", op);
		cr_assert_gt(jnum(v, "cpu_us_per_round_bare_home"), 0, "%s", op);
		cr_assert_gt(jnum(v, "cpu_us_per_round_bare_owners"), 0, "%s", op);
		cr_assert_gt(jnum(v, "bare_polled_rounds_per_sec"), 0, "%s", op);
		cr_assert_gt(jnum(v, "ratio_bare_polled"), 0, "%s", op);
		/* Both ratios are of the same node goodput. */
		double node = jnum(v, "node_goodput_bytes_per_sec");
		cr_assert_leq(fabs(jnum(v, "ratio_bare") * jnum(v, "bare_goodput_bytes_per_sec") - node), node * 1e-2 + 1);
		cr_assert_leq(fabs(jnum(v, "ratio_bare_polled") * jnum(v, "bare_polled_goodput_bytes_per_sec") - node),
			      node * 1e-2 + 1);
		/* The home node's linktest moved the bare exchange's messages
		 * (each rounded up to the ECHO grid, at most 7 bytes each
		 * way), and link/bare is the goal's ratio; node/bare keeps
		 * its bound beside it. */
		double round = 0;
		for (int j = 0; j < (int)n_bare; j++) {
			char k[48];
			snprintf(k, sizeof(k), "bare_req_bytes.%d", j);
			round += jnum(v, k);
			snprintf(k, sizeof(k), "bare_rep_bytes.%d", j);
			round += jnum(v, k);
		}
		double lrb = jnum(v, "link_round_bytes");
		cr_assert(lrb >= round && lrb <= round + 14 * n_bare, "%s: linktest rounds of %.0f bytes for %.0f", op,
			  lrb, round);
		cr_assert_gt(jnum(v, "link_rounds_per_sec"), 0, "%s", op);
		double link = jnum(v, "link_goodput_bytes_per_sec");
		cr_assert_leq(fabs(jnum(v, "ratio_link_bare") * jnum(v, "bare_goodput_bytes_per_sec") - link), link * 1e-2 + 1);
		cr_assert_eq(jget(v, "goal_ratio_link_bare")->t, J_NUM);
		cr_assert_eq(jget(v, "bare_ok")->t, strcmp(op, "update") && strcmp(op, "prefetch") ? J_BOOL : J_NULL, "%s",
			     op);
		cr_assert_gt(jnum(v, "cpu_us_per_round_link_home"), 0, "%s", op);
		cr_assert_gt(jnum(v, "cpu_us_per_round_link_owners"), 0, "%s", op);
		double bound = jnum(v, "e2e_bound");
		cr_assert(bound > 0 && bound < 1, "%s: e2e_bound %f", op, bound);
		/* Each server's CPU for its requests (its process CPU clock). */
		cr_assert_gt(jnum(v, "cpu_us_per_op_home"), 0, "%s", op);
		cr_assert_gt(jnum(v, "cpu_us_per_op_single"), 0, "%s", op);
		cr_assert_geq(jnum(v, "cpu_us_per_op_others"), 0, "%s", op);
		cr_assert(jget(v, "load1")->t == J_NUM);
		lines++;
		line = nl + 1;
	}
	cr_assert_eq(lines, 9, "one line per operation:\n%s", running.r.out);
}

Test(cluster_bench, sigint_stops_the_bench_and_every_node)
{
	bench_start(ARGS("--cluster", "2", "--rows", "5k", "--batch", "256", "--seconds", "60", "--workload",
			 "pull"));
	/* Running: both tables preloaded, so all three servers are up. */
	uint64_t end = now_ms() + BENCH_LIMIT_MS;
	int preloaded = 0;
	while (preloaded < 2) {
		cr_assert_neq(prog_read(&running, 100), 1, "emdb-bench ended early:\n%s", running.r.err);
		cr_assert_lt(now_ms(), end, "emdb-bench did not get going:\n%s", running.r.err);
		preloaded = 0;
		for (const char *p = running.r.err; (p = strstr(p, "preloaded")); p++)
			preloaded++;
	}
	pid_t kids[16];
	int n = children_of(running.pid, kids, 16);
	cr_assert_eq(n, 5, "two nodes, a single node and the bare exchange's two processes, found %d children", n);

	cr_assert_eq(kill(running.pid, SIGINT), 0);
	prog_wait(&running, "emdb-bench after SIGINT", 30000);
	cr_assert_eq(running.r.code, 128 + SIGINT, "ended by SIGINT, got %d:\n%s", running.r.code, running.r.err);
	for (int i = 0; i < n; i++) {
		uint64_t until = now_ms() + 10000;
		while (!gone(kids[i]) && now_ms() < until)
			usleep(10000);
		cr_assert(gone(kids[i]), "emdb-server %d still runs after the bench's SIGINT", (int)kids[i]);
	}
}
