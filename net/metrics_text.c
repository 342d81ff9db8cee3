/*
 * metrics_text.c - the body of GET /metrics: the server's figures in
 * Prometheus's text exposition format, version 0.0.4 (net/metrics.h;
 * docs/server.md lists every metric and what it means).
 *
 * Invariants:
 *   1. Each family is written whole, its HELP and TYPE lines and then
 *      every sample of it, so no family is split (the format wants it).
 *   2. Names follow Prometheus's conventions: the emdb_ prefix, base
 *      units (_seconds, _bytes), _total on counters and on nothing else;
 *      label values are escaped (backslash, double quote, newline).
 *   3. A figure is read where INFO reads it (net/figures.h, the engine's
 *      stats calls, ckpts_report_get), never counted a second way.
 *   4. A histogram's cumulative buckets, its +Inf bucket and its _count
 *      come from one read of the buckets, so they agree; _sum is the
 *      same requests' total time, read beside them (a request apart at
 *      most while traffic flows).
 *   5. Seconds derived from nanoseconds are printed exactly, as integer
 *      seconds and nine decimals, with no rounding through a double.
 *
 * State changes: none.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>

#include <emdb/alloc.h>
#include <emdb/db.h>
#include <emdb/error.h>

#include "net/checkpoint.h"
#include "net/figures.h"
#include "net/metrics.h"
#include "net/node_link.h"
#include "net/server.h"
#include "net/stats.h"
#include "protocol/proto.h"

/* Latency buckets exported: le = 2^(b+1) ns for b in FIRST..LAST, i.e.
 * 1.024 us to 68.7 s; faster requests count in the first, slower ones in
 * +Inf only. */
#define HIST_FIRST 9
#define HIST_LAST 35
_Static_assert(HIST_LAST < STATS_BUCKETS, "HIST_LAST past the stats buckets");

#define LABELS_MAX 256 /* a table name (EMDB_NAME_MAX) escaped, and more */

typedef struct mtext {
	struct evbuffer *b;
	int err;
} mtext;

static void out(mtext *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out(mtext *t, const char *fmt, ...)
{
	if (t->err)
		return;
	va_list ap;
	va_start(ap, fmt);
	if (evbuffer_add_vprintf(t->b, fmt, ap) < 0)
		t->err = EMDB_ERR_NOMEM;
	va_end(ap);
}

static void family(mtext *t, const char *name, const char *type, const char *help)
{
	out(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Append `key="value"` (after a comma when buf is not empty) to buf[len],
 * the value escaped; a value that does not fit is cut whole characters at
 * a time, never inside an escape. */
static void label(char *buf, size_t len, const char *key, const char *value)
{
	size_t n = strlen(buf);
	int k = snprintf(buf + n, len - n, "%s%s=\"", n ? "," : "", key);
	if (k < 0 || (size_t)k >= len - n) {
		buf[n] = '\0';
		return;
	}
	n += (size_t)k;
	for (const char *p = value; *p && n + 3 < len; p++) {
		char c = *p;
		if (c == '\\' || c == '"' || c == '\n') {
			buf[n++] = '\\';
			c = c == '\n' ? 'n' : c;
		}
		buf[n++] = c;
	}
	buf[n++] = '"';
	buf[n] = '\0';
}

static void sample(mtext *t, const char *name, const char *labels, uint64_t v)
{
	if (labels && labels[0])
		out(t, "%s{%s} %" PRIu64 "\n", name, labels, v);
	else
		out(t, "%s %" PRIu64 "\n", name, v);
}

/* ns as seconds, exactly (invariant 5), into buf; returns buf. */
#define SECS_MAX 32
static const char *secs(char buf[SECS_MAX], uint64_t ns)
{
	snprintf(buf, SECS_MAX, "%" PRIu64 ".%09" PRIu64, ns / UINT64_C(1000000000), ns % UINT64_C(1000000000));
	return buf;
}

static void sample_ns(mtext *t, const char *name, const char *labels, uint64_t ns)
{
	char v[SECS_MAX];
	if (labels && labels[0])
		out(t, "%s{%s} %s\n", name, labels, secs(v, ns));
	else
		out(t, "%s %s\n", name, secs(v, ns));
}

/* A family of one sample without labels. */
static void single(mtext *t, const char *name, const char *type, const char *help, uint64_t v)
{
	family(t, name, type, help);
	sample(t, name, NULL, v);
}

static void put_server(server *s, mtext *t)
{
	char lab[LABELS_MAX] = "";
	label(lab, sizeof(lab), "version", EMDB_SERVER_NAME);
	family(t, "emdb_build_info", "gauge", "Always 1; the label says which server this is");
	sample(t, "emdb_build_info", lab, 1);
	family(t, "emdb_uptime_seconds", "gauge", "Seconds since the server started");
	sample_ns(t, "emdb_uptime_seconds", NULL, stats_now_ns() - s->start_ns);
}

/* One operation's latency histogram (invariant 4). */
static void put_histogram(mtext *t, const char *op, const op_summary *o)
{
	static const char *name = "emdb_request_duration_seconds";
	char lab[LABELS_MAX] = "";
	label(lab, sizeof(lab), "op", op);
	char v[SECS_MAX];
	uint64_t cum = 0;
	for (unsigned b = 0; b < HIST_FIRST; b++)
		cum += o->hist[b];
	for (unsigned b = HIST_FIRST; b <= HIST_LAST; b++) {
		cum += o->hist[b];
		out(t, "%s_bucket{%s,le=\"%s\"} %" PRIu64 "\n", name, lab, secs(v, 2ull << b), cum);
	}
	for (unsigned b = HIST_LAST + 1; b < STATS_BUCKETS; b++)
		cum += o->hist[b];
	out(t, "%s_bucket{%s,le=\"+Inf\"} %" PRIu64 "\n", name, lab, cum);
	out(t, "%s_sum{%s} %s\n", name, lab, secs(v, o->ns_total));
	out(t, "%s_count{%s} %" PRIu64 "\n", name, lab, cum);
}

/* A counter family with a sample per known operation, from 0: its calls,
 * or its errors. */
static void per_op(mtext *t, const op_summary *sum, const char *name, const char *help, bool errors)
{
	family(t, name, "counter", help);
	for (unsigned i = 1; i < stats_op_known(); i++) {
		char op[32], lab[LABELS_MAX] = "";
		stats_op_label(i, op, sizeof(op));
		label(lab, sizeof(lab), "op", op);
		sample(t, name, lab, errors ? sum[i].errors : sum[i].calls);
	}
}

static void put_ops(server *s, mtext *t)
{
	op_summary sum[STATS_OPS];
	figures_ops(s, sum);
	unsigned known = stats_op_known();
	char op[32];

	per_op(t, sum, "emdb_requests_total",
	       "Requests answered, failed ones included, by operation", false);
	per_op(t, sum, "emdb_request_errors_total",
	       "Requests of emdb_requests_total answered with an error, by operation", true);
	bool any = false;
	for (unsigned i = 1; i < known; i++)
		any |= sum[i].calls != 0;
	if (!any)
		return; /* a family without samples says nothing */
	family(t, "emdb_request_duration_seconds", "histogram",
	       "Time a request spent in its handler, from decoded to reply buffered, by operation (operations called at least once)");
	for (unsigned i = 1; i < known; i++) {
		if (!sum[i].calls)
			continue;
		stats_op_label(i, op, sizeof(op));
		put_histogram(t, op, &sum[i]);
	}
}

static void put_errors(server *s, mtext *t)
{
	uint64_t codes[STATS_CODES];
	figures_codes(s, codes);
	char lab[LABELS_MAX];
	family(t, "emdb_errors_total", "counter",
	       "Error replies sent to clients, by error code (EMDB_ERRNO_MAP), whatever the operation");
	for (unsigned i = 0; i < STATS_CODES; i++) {
		if (i == 0 && !codes[0])
			continue; /* a code outside the map: none so far */
		lab[0] = '\0';
		label(lab, sizeof(lab), "code", stats_code_name(i));
		sample(t, "emdb_errors_total", lab, codes[i]);
	}
}

static void put_clients(server *s, mtext *t)
{
	uint64_t failures, throttled, addresses;
	figures_auth(s, &failures, &throttled, &addresses);
	single(t, "emdb_received_bytes_total", "counter", "Bytes received from clients",
	       FIGURES_SUM(s, bytes_in));
	single(t, "emdb_sent_bytes_total", "counter", "Bytes sent to clients", FIGURES_SUM(s, bytes_out));
	single(t, "emdb_connections", "gauge", "Client connections open now (TCP and Unix socket)",
	       FIGURES_SUM(s, n_open));
	single(t, "emdb_unix_connections", "gauge", "Of those, on the Unix socket",
	       atomic_load(&s->n_unix_conns));
	single(t, "emdb_connections_accepted_total", "counter", "Client connections accepted",
	       atomic_load(&s->conns_total));
	single(t, "emdb_connections_refused_total", "counter",
	       "Client connections refused at once: max_connections or max_unix_connections reached",
	       atomic_load(&s->conns_rejected));
	single(t, "emdb_connections_paused", "gauge",
	       "Connections not read now: their unsent replies passed output_buffer_limit",
	       FIGURES_SUM(s, n_paused));
	single(t, "emdb_protocol_errors_total", "counter",
	       "Malformed frames: answered PROTOCOL and their connection closed", FIGURES_SUM(s, frames_bad));
	single(t, "emdb_handshake_timeouts_total", "counter",
	       "Connections closed for not finishing HELLO and AUTH in handshake_timeout_ms",
	       FIGURES_SUM(s, handshake_timeouts));
	single(t, "emdb_idle_timeouts_total", "counter", "Connections closed after idle_timeout_s of silence",
	       FIGURES_SUM(s, idle_timeouts));
	single(t, "emdb_auth_failures_total", "counter", "AUTH requests with a wrong token", failures);
	single(t, "emdb_auth_throttled_total", "counter",
	       "AUTH requests refused unchecked: their address failed too often (auth_fail_burst)", throttled);
	single(t, "emdb_auth_throttled_addresses", "gauge", "Peer addresses whose AUTH is throttled now",
	       addresses);
	single(t, "emdb_busy_poll_hits_total", "counter",
	       "Busy polls (busy_poll_us) that found work: sleeps and wake-ups saved",
	       FIGURES_SUM(s, busy_poll_hits));
	single(t, "emdb_tickets", "gauge", "Live Prefetch tickets of all connections", FIGURES_SUM(s, n_tickets));
	single(t, "emdb_updates_waiting", "gauge",
	       "UPDATE requests waiting in synchronous steps for the other workers", step_waiting(s->steps));
}

static void put_memory(server *s, mtext *t)
{
	emdb_db_stats st;
	if (emdb_db_get_stats(s->db, &st) != EMDB_OK)
		memset(&st, 0, sizeof(st));
	single(t, "emdb_memory_used_bytes", "gauge",
	       "Bytes allocated through emdb's allocator: the engine, buffers, TLS", emdb_alloc_bytes());
	single(t, "emdb_memory_peak_bytes", "gauge", "Largest emdb_memory_used_bytes since start",
	       emdb_alloc_peak());
	single(t, "emdb_memory_limit_bytes", "gauge", "max_memory; 0: unlimited", emdb_alloc_limit());
	long rss = figures_rss_bytes();
	if (rss >= 0)
		single(t, "emdb_resident_memory_bytes", "gauge", "The process's resident set", (uint64_t)rss);
	static const char *name = "emdb_engine_memory_bytes";
	const struct {
		const char *kind;
		uint64_t v;
	} kinds[] = {
		{ "vectors", st.total.bytes_vectors },   { "optimizer", st.total.bytes_optimizer },
		{ "index", st.total.bytes_index },       { "gradients", st.total.bytes_grads },
		{ "overhead", st.total.bytes_overhead },
	};
	family(t, name, "gauge", "Memory of all tables, by what it holds");
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		char lab[LABELS_MAX] = "";
		label(lab, sizeof(lab), "kind", kinds[i].kind);
		sample(t, name, lab, kinds[i].v);
	}
	single(t, "emdb_connection_buffers_bytes", "gauge", "Input and output buffers of all connections",
	       FIGURES_SUM(s, mem_buffers));
}

/* One family with a sample per table: what(&table's stats). */
typedef uint64_t (*table_fig)(const emdb_table_info *t);
static uint64_t fig_rows(const emdb_table_info *t) { return t->stats.rows; }
static uint64_t fig_bytes(const emdb_table_info *t) { return figures_table_bytes(&t->stats); }
static uint64_t fig_step(const emdb_table_info *t) { return t->stats.step; }
static uint64_t fig_pending(const emdb_table_info *t) { return t->stats.pending_rows; }
static uint64_t fig_misses(const emdb_table_info *t) { return t->stats.lookup_misses; }
static uint64_t fig_updated(const emdb_table_info *t) { return t->stats.rows_updated; }

static void per_table(mtext *t, const emdb_table_info *all, size_t n, const char *name, const char *type,
		      const char *help, table_fig fig)
{
	if (!n)
		return; /* a family without samples says nothing */
	family(t, name, type, help);
	for (size_t i = 0; i < n; i++) {
		char lab[LABELS_MAX] = "";
		label(lab, sizeof(lab), "table", all[i].config.name);
		sample(t, name, lab, fig(&all[i]));
	}
}

static void put_tables(server *s, mtext *t)
{
	emdb_table_info *all;
	size_t n;
	int rc = figures_tables(s, &all, &n);
	if (rc != EMDB_OK) {
		t->err = rc;
		return;
	}
	single(t, "emdb_tables", "gauge", "Tables alive", n);
	per_table(t, all, n, "emdb_table_rows", "gauge", "IDs a table holds", fig_rows);
	per_table(t, all, n, "emdb_table_memory_bytes", "gauge",
		  "Memory a table holds: vectors, optimizer state, index, gradients, overhead", fig_bytes);
	per_table(t, all, n, "emdb_table_step", "gauge", "Updates applied to a table so far", fig_step);
	per_table(t, all, n, "emdb_table_pending_rows", "gauge",
		  "Rows of a table holding an accumulated gradient, waiting for an Update", fig_pending);
	per_table(t, all, n, "emdb_table_rows_updated_total", "counter",
		  "Row updates applied by a table's Updates", fig_updated);
	per_table(t, all, n, "emdb_table_lookup_misses_total", "counter",
		  "Lookup IDs a table did not hold (answered with its default)", fig_misses);
	static const char *ids = "emdb_table_ids_total";
	if (n)
		family(t, ids, "counter", "IDs a table's operations carried, by table and operation");
	for (size_t i = 0; i < n; i++) {
		const emdb_table_stats *st = &all[i].stats;
		const struct {
			const char *op;
			uint64_t v;
		} per_op[] = { { "prefetch", st->ids_prefetch }, { "pull", st->ids_pull },
			       { "push", st->ids_push },         { "lookup", st->ids_lookup } };
		for (size_t k = 0; k < sizeof(per_op) / sizeof(per_op[0]); k++) {
			char lab[LABELS_MAX] = "";
			label(lab, sizeof(lab), "table", all[i].config.name);
			label(lab, sizeof(lab), "op", per_op[k].op);
			sample(t, ids, lab, per_op[k].v);
		}
	}
	emdb_free(all);
}

/* Each table's device replica (docs/gpu.md): the families of
 * net/figures.h's tier figures by `table`, zero for a table without a
 * replica, and the per-device ones by `table` and `device`, written only
 * when some table has a device. */
static void put_tier(server *s, mtext *t)
{
	emdb_table_info *all;
	size_t n, k = 0;
	uint64_t devices = 0;
	int rc = figures_tables(s, &all, &n);
	if (rc != EMDB_OK) {
		t->err = rc;
		return;
	}
	emdb_tier_info *ti = emdb_calloc(n ? n : 1, sizeof(*ti));
	const emdb_table_info **tab = emdb_calloc(n ? n : 1, sizeof(*tab));
	if (!ti || !tab) {
		t->err = EMDB_ERR_NOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		if (emdb_table_tier(s->db, all[i].id, &ti[k]) == EMDB_OK) {
			devices += ti[k].devices;
			tab[k++] = &all[i];
		}
	if (!k)
		goto out;
	static const char *ndev = "emdb_tier_devices", *failed = "emdb_tier_device_failed";
	family(t, ndev, "gauge", "Devices holding a replica of a table's hot rows (0: host memory only)");
	for (size_t i = 0; i < k; i++) {
		char lab[LABELS_MAX] = "";
		label(lab, sizeof(lab), "table", tab[i]->config.name);
		sample(t, ndev, lab, ti[i].devices);
	}
	family(t, failed, "gauge", "1 when a table's device failed and its replica was dropped");
	for (size_t i = 0; i < k; i++) {
		char lab[LABELS_MAX] = "";
		label(lab, sizeof(lab), "table", tab[i]->config.name);
		sample(t, failed, lab, ti[i].failed);
	}
	char name[96];
	for (size_t f = 0; f < figures_tier_table_n; f++) {
		const tier_figure *fig = &figures_tier_table[f];
		snprintf(name, sizeof(name), "emdb_tier_%s%s", fig->name, fig->counter ? "_total" : "");
		family(t, name, fig->counter ? "counter" : "gauge", fig->help);
		for (size_t i = 0; i < k; i++) {
			char lab[LABELS_MAX] = "";
			label(lab, sizeof(lab), "table", tab[i]->config.name);
			sample(t, name, lab, figures_tier_get(fig, &ti[i]));
		}
	}
	for (size_t f = 0; devices && f < figures_tier_device_n; f++) {
		const tier_figure *fig = &figures_tier_device[f];
		snprintf(name, sizeof(name), "emdb_tier_%s%s", fig->name, fig->counter ? "_total" : "");
		family(t, name, fig->counter ? "counter" : "gauge", fig->help);
		for (size_t i = 0; i < k; i++)
			for (uint32_t d = 0; d < ti[i].devices; d++) {
				emdb_tier_device_info di;
				char lab[LABELS_MAX] = "", dev[16];
				if (emdb_table_tier_device(s->db, tab[i]->id, d, &di) != EMDB_OK)
					break; /* the device failed meanwhile */
				snprintf(dev, sizeof(dev), "%d", di.device);
				label(lab, sizeof(lab), "table", tab[i]->config.name);
				label(lab, sizeof(lab), "device", dev);
				sample(t, name, lab, figures_tier_get(fig, &di));
			}
	}
out:
	emdb_free(ti);
	emdb_free(tab);
	emdb_free(all);
}

/* Checkpoints or restores (`what`) that ended since start. */
static void put_jobs(mtext *t, const char *what, const ckpts_totals *j)
{
	char name[96], help[160];
	snprintf(name, sizeof(name), "emdb_%s_jobs_total", what);
	snprintf(help, sizeof(help), "%s jobs ended since start, by result", what);
	family(t, name, "counter", help);
	sample(t, name, "result=\"done\"", j->done);
	sample(t, name, "result=\"failed\"", j->failed);
	snprintf(name, sizeof(name), "emdb_%s_duration_seconds_total", what);
	snprintf(help, sizeof(help), "Time the %s jobs that succeeded took, summed", what);
	family(t, name, "counter", help);
	sample_ns(t, name, NULL, j->ns);
	snprintf(name, sizeof(name), "emdb_%s_bytes_total", what);
	snprintf(help, sizeof(help), "Row block bytes the %s jobs that succeeded %s, summed", what,
		 strcmp(what, "restore") ? "wrote" : "read");
	single(t, name, "counter", help, j->bytes);
	snprintf(name, sizeof(name), "emdb_%s_rows_total", what);
	snprintf(help, sizeof(help), "Rows the %s jobs that succeeded %s, summed", what,
		 strcmp(what, "restore") ? "wrote" : "restored");
	single(t, name, "counter", help, j->rows);
	if (!j->have_last)
		return;
	snprintf(name, sizeof(name), "emdb_%s_last_duration_seconds", what);
	snprintf(help, sizeof(help), "Time the last %s that succeeded took", what);
	family(t, name, "gauge", help);
	sample_ns(t, name, NULL, j->last_ns);
	snprintf(name, sizeof(name), "emdb_%s_last_bytes", what);
	snprintf(help, sizeof(help), "Row block bytes of the last %s that succeeded", what);
	single(t, name, "gauge", help, j->last_bytes);
	snprintf(name, sizeof(name), "emdb_%s_last_rows", what);
	snprintf(help, sizeof(help), "Rows of the last %s that succeeded", what);
	single(t, name, "gauge", help, j->last_rows);
	snprintf(name, sizeof(name), "emdb_%s_last_end_timestamp_seconds", what);
	snprintf(help, sizeof(help), "Unix time the last %s that succeeded ended", what);
	family(t, name, "gauge", help);
	sample_ns(t, name, NULL, j->last_end_ms * 1000000ull);
}

static void put_persistence(server *s, mtext *t)
{
	ckpts_report r;
	ckpts_report_get(s->ckpts, &r);
	single(t, "emdb_persistence_enabled", "gauge", "1 when a checkpoint store is open (data_dir)",
	       r.enabled);
	if (!r.enabled)
		return;
	single(t, "emdb_checkpoints_stored", "gauge", "Checkpoints in the store", r.checkpoints);
	single(t, "emdb_checkpoint_store_ok", "gauge",
	       "1 when the store reads and writes; 0 after a failure it has not recovered from (INFO persistence says which)",
	       r.store_error == EMDB_OK);
	if (r.have_last) {
		family(t, "emdb_checkpoint_last_created_timestamp_seconds", "gauge",
		       "Unix time of the newest checkpoint in the store (its switch)");
		sample_ns(t, "emdb_checkpoint_last_created_timestamp_seconds", NULL,
			  r.last.created_ms * 1000000ull);
	}
	single(t, "emdb_checkpoint_job_running", "gauge", "1 while a checkpoint or restore job runs",
	       r.have_job && r.job.state == PROTO_JOB_RUNNING);
	single(t, "emdb_automatic_checkpoints_total", "counter",
	       "Checkpoints started by checkpoint_every_steps or checkpoint_every_seconds", r.auto_checkpoints);
	single(t, "emdb_steps_since_checkpoint", "gauge",
	       "UPDATE and PUSH_UPDATE requests since the last checkpoint started", r.steps_since);
	put_jobs(t, "checkpoint", &r.checkpoint);
	put_jobs(t, "restore", &r.restore);
}

/* Per-peer traffic of a cluster node, read from the node link's own
 * counters as INFO's cluster section reads them (node_link_peer): one
 * sample per other node, labelled with its rank and address.  A server
 * without a cluster has no peers and writes nothing. */
typedef struct peer_family {
	const char *name, *type, *help;
	size_t off; /* of the uint64_t in node_peer_info */
} peer_family;

static void put_cluster(server *s, mtext *t)
{
	if (!s->link)
		return;
	static const peer_family fams[] = {
		{ "emdb_peer_sent_bytes_total", "counter", "Bytes this node sent to a peer node (link headers included)",
		  offsetof(node_peer_info, bytes_sent) },
		{ "emdb_peer_received_bytes_total", "counter", "Bytes this node received from a peer node",
		  offsetof(node_peer_info, bytes_received) },
		{ "emdb_peer_sent_messages_total", "counter", "Messages this node sent to a peer node",
		  offsetof(node_peer_info, msgs_sent) },
		{ "emdb_peer_received_messages_total", "counter", "Messages this node received from a peer node",
		  offsetof(node_peer_info, msgs_received) },
		{ "emdb_peer_calls_total", "counter", "Requests this node sent to a peer node",
		  offsetof(node_peer_info, calls) },
		{ "emdb_peer_calls_failed_total", "counter",
		  "Requests to a peer node that ended in error (timeouts, loss, refusals)",
		  offsetof(node_peer_info, calls_failed) },
		{ "emdb_peer_connects_total", "counter", "Handshakes completed with a peer node (1 + reconnections)",
		  offsetof(node_peer_info, connects) },
	};
	uint32_t me = node_link_rank(s->link), n = node_link_nodes(s->link);
	/* One read of each peer's counters and its labels, for every family. */
	struct peer_row {
		node_peer_info info;
		char lab[LABELS_MAX];
	} *rows = emdb_calloc(n ? n : 1, sizeof(*rows));
	if (!rows) {
		t->err = EMDB_ERR_NOMEM;
		return;
	}
	for (uint32_t r = 0; r < n; r++) {
		if (r == me)
			continue;
		char rank[16];
		node_link_peer(s->link, r, &rows[r].info);
		snprintf(rank, sizeof(rank), "%u", r);
		label(rows[r].lab, sizeof(rows[r].lab), "peer", rank);
		label(rows[r].lab, sizeof(rows[r].lab), "address", rows[r].info.addr);
	}
	family(t, "emdb_peer_up", "gauge", "1 while the link to a peer node is up, else 0");
	for (uint32_t r = 0; r < n; r++)
		if (r != me)
			sample(t, "emdb_peer_up", rows[r].lab, rows[r].info.state == NODE_PEER_UP);
	for (size_t f = 0; f < sizeof(fams) / sizeof(fams[0]); f++) {
		family(t, fams[f].name, fams[f].type, fams[f].help);
		for (uint32_t r = 0; r < n; r++) {
			if (r == me)
				continue;
			uint64_t v;
			memcpy(&v, (const char *)&rows[r].info + fams[f].off, sizeof(v));
			sample(t, fams[f].name, rows[r].lab, v);
		}
	}
	emdb_free(rows);
}

int metrics_render(server *s, struct evbuffer *b)
{
	mtext t = { b, EMDB_OK };
	put_server(s, &t);
	put_ops(s, &t);
	put_errors(s, &t);
	put_clients(s, &t);
	put_memory(s, &t);
	put_tables(s, &t);
	put_tier(s, &t);
	put_persistence(s, &t);
	put_cluster(s, &t);
	return t.err;
}
