/*
 * cmd_cluster.c - `cluster info`: the cluster this server belongs to, one
 * row per node with its rows and bytes (asked of every node by the
 * server) and the link's own counters (the server's INFO cluster
 * section, docs/server.md), as a table or as JSON.  A node whose rows are
 * unknown (it did not answer) prints "unknown" (no rows and bytes keys in
 * JSON), never 0.  `cluster linktest`: the server's own node-to-node path
 * measured (emdb_client_linktest), one message to every other node per
 * round.
 *
 * Invariants:
 *   1. The figures are the server's, read from INFO's text as it sent them:
 *      a line this version does not know is skipped, not an error, so a
 *      newer server still prints.
 *   2. A server that is not part of a cluster prints one line saying so
 *      ({"cluster":{"enabled":false}} in JSON), not an error; a linktest
 *      asked of it is sent anyway, so that its refusal is the server's.
 *
 * State changes: none.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <emdb/alloc.h>

#include "tools/cli/cmd_int.h"

#define MAX_NODES 1024

/* Fields of a node line, in the order they print. */
static const char *const node_fields[] = { "bytes_sent", "msgs_sent", "bytes_received", "msgs_received", "calls",
					   "calls_failed", "calls_timed_out", "requests_served", "connects" };
#define N_FIELDS (sizeof(node_fields) / sizeof(node_fields[0]))

/* A count that may be unknown ("unknown" in INFO). */
typedef struct count {
	uint64_t v;
	int known;
} count;

static count count_of(const char *v)
{
	count c = { 0, 0 };
	if (strcmp(v, "unknown") != 0) {
		c.v = strtoull(v, NULL, 10);
		c.known = 1;
	}
	return c;
}

typedef struct node_row {
	char addr[280];
	char state[16];
	count rows, bytes;
	uint64_t v[N_FIELDS];
	char last_error[200];
	int seen;
} node_row;

typedef struct cluster_view {
	char id[80], state[16];
	uint64_t rank, nodes, partitions, epoch, rows, bytes;
	count cluster_rows, cluster_bytes;
	int enabled;
	node_row *row; /* [MAX_NODES] */
} cluster_view;

/* "node_N: k=v k=v ..." into its row. */
static void parse_node(cluster_view *cv, const char *key, const char *val)
{
	char *end;
	unsigned long r = strtoul(key + 5, &end, 10);
	if (r >= MAX_NODES || end == key + 5)
		return;
	node_row *n = &cv->row[r];
	if (!strcmp(end, "_last_error")) {
		snprintf(n->last_error, sizeof(n->last_error), "%s", val);
		return;
	}
	if (*end)
		return;
	n->seen = 1;
	char buf[1024];
	snprintf(buf, sizeof(buf), "%s", val);
	char *save = NULL;
	for (char *tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		char *eq = strchr(tok, '=');
		if (!eq)
			continue;
		*eq = '\0';
		const char *v = eq + 1;
		if (!strcmp(tok, "addr"))
			snprintf(n->addr, sizeof(n->addr), "%s", v);
		else if (!strcmp(tok, "state"))
			snprintf(n->state, sizeof(n->state), "%s", v);
		else if (!strcmp(tok, "rows"))
			n->rows = count_of(v);
		else if (!strcmp(tok, "bytes"))
			n->bytes = count_of(v);
		else
			for (size_t i = 0; i < N_FIELDS; i++)
				if (!strcmp(tok, node_fields[i]))
					n->v[i] = strtoull(v, NULL, 10);
	}
}

static void parse(cluster_view *cv, char *text)
{
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *colon = strstr(line, ": ");
		if (!colon || line[0] == '#')
			continue;
		*colon = '\0';
		const char *k = line, *v = colon + 2;
		if (!strcmp(k, "enabled"))
			cv->enabled = !strcmp(v, "yes");
		else if (!strcmp(k, "cluster_id"))
			snprintf(cv->id, sizeof(cv->id), "%s", v);
		else if (!strcmp(k, "state"))
			snprintf(cv->state, sizeof(cv->state), "%s", v);
		else if (!strcmp(k, "rank"))
			cv->rank = strtoull(v, NULL, 10);
		else if (!strcmp(k, "nodes"))
			cv->nodes = strtoull(v, NULL, 10);
		else if (!strcmp(k, "partitions"))
			cv->partitions = strtoull(v, NULL, 10);
		else if (!strcmp(k, "epoch"))
			cv->epoch = strtoull(v, NULL, 10);
		else if (!strcmp(k, "rows"))
			cv->rows = strtoull(v, NULL, 10);
		else if (!strcmp(k, "bytes"))
			cv->bytes = strtoull(v, NULL, 10);
		else if (!strcmp(k, "cluster_rows"))
			cv->cluster_rows = count_of(v);
		else if (!strcmp(k, "cluster_bytes"))
			cv->cluster_bytes = count_of(v);
		else if (!strncmp(k, "node_", 5))
			parse_node(cv, k, v);
	}
}

static void print_json(const cluster_view *cv)
{
	jw w;
	jw_open(&w, stdout);
	jw_bool(&w, "ok", true);
	jw_obj(&w, "cluster");
	jw_bool(&w, "enabled", cv->enabled);
	if (cv->enabled) {
		jw_str(&w, "cluster_id", cv->id);
		jw_u64(&w, "rank", cv->rank);
		jw_str(&w, "state", cv->state);
		jw_u64(&w, "partitions", cv->partitions);
		jw_u64(&w, "epoch", cv->epoch);
		jw_u64(&w, "rows", cv->rows);
		jw_u64(&w, "bytes", cv->bytes);
		if (cv->cluster_rows.known && cv->cluster_bytes.known) {
			jw_u64(&w, "cluster_rows", cv->cluster_rows.v);
			jw_u64(&w, "cluster_bytes", cv->cluster_bytes.v);
		}
		jw_arr(&w, "nodes");
		for (uint64_t r = 0; r < cv->nodes && r < MAX_NODES; r++) {
			const node_row *n = &cv->row[r];
			jw_obj(&w, NULL);
			jw_u64(&w, "rank", r);
			jw_str(&w, "addr", n->addr);
			jw_str(&w, "state", n->state);
			if (n->rows.known && n->bytes.known) {
				jw_u64(&w, "rows", n->rows.v);
				jw_u64(&w, "bytes", n->bytes.v);
			}
			if (strcmp(n->state, "self") != 0)
				for (size_t i = 0; i < N_FIELDS; i++)
					jw_u64(&w, node_fields[i], n->v[i]);
			if (n->last_error[0])
				jw_str(&w, "last_error", n->last_error);
			jw_obj_end(&w);
		}
		jw_arr_end(&w);
	}
	jw_obj_end(&w);
	jw_close(&w);
}

static void print_table(const cluster_view *cv)
{
	if (!cv->enabled) {
		printf("not part of a cluster (a single node)\n");
		return;
	}
	printf("cluster %s: rank %" PRIu64 " of %" PRIu64 ", %s, %" PRIu64 " partitions, epoch %" PRIu64 "\n", cv->id,
	       cv->rank, cv->nodes, cv->state, cv->partitions, cv->epoch);
	printf("this node: %" PRIu64 " rows, %" PRIu64 " bytes\n", cv->rows, cv->bytes);
	if (cv->cluster_rows.known && cv->cluster_bytes.known)
		printf("cluster: %" PRIu64 " rows, %" PRIu64 " bytes\n", cv->cluster_rows.v, cv->cluster_bytes.v);
	else
		printf("cluster: rows and bytes unknown (a node did not answer)\n");
	printf("%-4s %-22s %-10s %12s %14s %14s %10s %14s %10s %8s %7s %9s %8s\n", "NODE", "ADDRESS", "STATE", "ROWS",
	       "BYTES", "BYTES_SENT", "MSGS_SENT", "BYTES_RECV", "MSGS_RECV", "CALLS", "FAILED", "TIMED_OUT", "SERVED");
	for (uint64_t r = 0; r < cv->nodes && r < MAX_NODES; r++) {
		const node_row *n = &cv->row[r];
		char rows[24] = "unknown", bytes[24] = "unknown";
		if (n->rows.known)
			snprintf(rows, sizeof(rows), "%" PRIu64, n->rows.v);
		if (n->bytes.known)
			snprintf(bytes, sizeof(bytes), "%" PRIu64, n->bytes.v);
		if (!strcmp(n->state, "self")) {
			printf("%-4" PRIu64 " %-22s %-10s %12s %14s\n", r, n->addr, "self", rows, bytes);
			continue;
		}
		printf("%-4" PRIu64 " %-22s %-10s %12s %14s %14" PRIu64 " %10" PRIu64 " %14" PRIu64 " %10" PRIu64
		       " %8" PRIu64 " %7" PRIu64 " %9" PRIu64 " %8" PRIu64 "\n",
		       r, n->addr, n->state, rows, bytes, n->v[0], n->v[1], n->v[2], n->v[3], n->v[4], n->v[5], n->v[6],
		       n->v[7]);
	}
	for (uint64_t r = 0; r < cv->nodes && r < MAX_NODES; r++)
		if (cv->row[r].last_error[0])
			printf("node %" PRIu64 " last error: %s\n", r, cv->row[r].last_error);
}

/* The node's INFO cluster section, parsed into *cv (cv->row: the
 * caller's to free).  CLI_OK, or the session's failure. */
static cli_status read_view(cli_session *s, emdb_client *c, cluster_view *cv)
{
	char *text = NULL;
	int rc = emdb_client_info(c, "cluster", &text);
	if (rc != EMDB_OK)
		return session_fail(s, rc);
	memset(cv, 0, sizeof(*cv));
	cv->row = calloc(MAX_NODES, sizeof(*cv->row));
	if (!cv->row) {
		emdb_free(text);
		return session_fail(s, EMDB_ERR_NOMEM);
	}
	parse(cv, text);
	emdb_free(text);
	return CLI_OK;
}

cli_status cmd_cluster_info(cli_session *s, emdb_client *c, int argc, char **argv)
{
	cluster_view cv;
	cli_status st = read_view(s, c, &cv);
	if (st != CLI_OK)
		return st;
	if (s->json)
		print_json(&cv);
	else
		print_table(&cv);
	free(cv.row);
	return CLI_OK;
}

/* A byte count: digits with an optional K, M or G (binary). */
static int parse_bytes(const char *v, uint64_t *out)
{
	char *end;
	unsigned long long x = strtoull(v, &end, 10);
	if (end == v || v[0] == '-')
		return -1;
	uint64_t mul = 1;
	if (*end == 'k' || *end == 'K')
		mul = 1024, end++;
	else if (*end == 'm' || *end == 'M')
		mul = 1024 * 1024, end++;
	else if (*end == 'g' || *end == 'G')
		mul = 1024 * 1024 * 1024, end++;
	if (*end || x > UINT64_MAX / mul)
		return -1;
	*out = x * mul;
	return 0;
}

static void print_linktest(const cli_session *s, const emdb_linktest_msg *m, uint32_t n, uint32_t depth,
			   double seconds, const emdb_linktest_result *r)
{
	double el = (double)r->elapsed_ns / 1e9;
	double rps = el > 0 ? (double)r->rounds / el : 0;
	double mbps = el > 0 ? (double)(r->bytes_sent + r->bytes_received) / el / 1e6 : 0;
	double us_msg = r->rounds ? (double)r->elapsed_ns / 1e3 / ((double)r->rounds * n) : 0;
	double us_round = r->rounds ? (double)r->elapsed_ns / 1e3 * depth / (double)r->rounds : 0;
	if (s->json) {
		jw w;
		jw_open(&w, stdout);
		jw_bool(&w, "ok", true);
		jw_obj(&w, "linktest");
		jw_arr(&w, "peers");
		for (uint32_t i = 0; i < n; i++) {
			jw_obj(&w, NULL);
			jw_u64(&w, "rank", m[i].rank);
			jw_obj_end(&w);
		}
		jw_arr_end(&w);
		jw_u64(&w, "request_bytes", m[0].request_bytes);
		jw_u64(&w, "reply_bytes", m[0].reply_bytes);
		jw_u64(&w, "depth", depth);
		jw_double(&w, "seconds", seconds);
		jw_u64(&w, "rounds", r->rounds);
		jw_u64(&w, "elapsed_ns", r->elapsed_ns);
		jw_u64(&w, "bytes_sent", r->bytes_sent);
		jw_u64(&w, "bytes_received", r->bytes_received);
		jw_double(&w, "rounds_per_sec", rps);
		jw_double(&w, "mb_per_sec", mbps);
		jw_double(&w, "us_per_message", us_msg);
		jw_double(&w, "us_per_round_in_flight", us_round);
		jw_obj_end(&w);
		jw_close(&w);
		return;
	}
	printf("linktest: %u message%s per round (to node", n, n == 1 ? "" : "s");
	for (uint32_t i = 0; i < n; i++)
		printf("%s%u", i ? ", " : " ", m[i].rank);
	printf("), %" PRIu64 " bytes out, %" PRIu64 " back, %u rounds in flight, %.2f s\n",
	       r->rounds ? r->bytes_sent / r->rounds / n : 0, r->rounds ? r->bytes_received / r->rounds / n : 0, depth,
	       el);
	printf("rounds: %" PRIu64 "  (%.1f rounds/s)\n", r->rounds, rps);
	printf("bytes:  %" PRIu64 " sent, %" PRIu64 " received  (%.1f MB/s both ways)\n", r->bytes_sent,
	       r->bytes_received, mbps);
	printf("per message: %.2f us; per round, with %u in flight: %.2f us\n", us_msg, depth, us_round);
}

cli_status cmd_cluster_linktest(cli_session *s, emdb_client *c, int argc, char **argv)
{
	double seconds = 1;
	uint64_t depth = 1, req = 4096, rep = 4096;
	for (int i = 0; i < argc; i++) {
		const char *o = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		char *end = NULL;
		if (!v)
			return cmd_usage(s, "%s needs a value", o);
		if (!strcmp(o, "--seconds")) {
			seconds = strtod(v, &end);
			if (*end || !(seconds > 0) || seconds > 10)
				return cmd_usage(s, "--seconds %s: more than 0, at most 10", v);
		} else if (!strcmp(o, "--depth")) {
			depth = strtoull(v, &end, 10);
			if (*end || v[0] == '-' || !depth || depth > 64)
				return cmd_usage(s, "--depth %s: 1 to 64", v);
		} else if (!strcmp(o, "--request") || !strcmp(o, "--reply")) {
			if (parse_bytes(v, !strcmp(o, "--request") ? &req : &rep) < 0)
				return cmd_usage(s, "%s %s: bytes, with an optional K, M or G", o, v);
		} else {
			return cmd_usage(s, "unknown option %s", o);
		}
		i++;
	}
	cluster_view cv;
	cli_status st = read_view(s, c, &cv);
	if (st != CLI_OK)
		return st;
	free(cv.row);
	emdb_linktest_msg m[64];
	uint32_t n = 0;
	for (uint64_t r = 0; cv.enabled && r < cv.nodes && n < 64; r++)
		if (r != cv.rank)
			m[n++] = (emdb_linktest_msg){ .rank = (uint32_t)r, .request_bytes = req, .reply_bytes = rep };
	emdb_linktest_result res;
	/* Not in a cluster: n is 0 and the server says why it cannot. */
	int rc = emdb_client_linktest(c, m, n, (uint32_t)depth, (uint32_t)(seconds * 1000 + 0.5), &res);
	if (rc != EMDB_OK)
		return session_fail(s, rc);
	print_linktest(s, m, n, (uint32_t)depth, seconds, &res);
	return CLI_OK;
}
