/*
 * info.c - INFO's report, assembled from the server, its I/O threads and
 * the engine (the figures /metrics shares come from net/figures.h).
 *
 * Invariants:
 *   1. Reading never blocks a serving thread: thread counters are relaxed
 *      atomics, engine figures come from its thread-safe stats calls.
 *   2. Figures are a snapshot taken field by field, not atomically: sums
 *      may be a request apart.
 *
 * State changes: none.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <emdb/alloc.h>
#include <emdb/db.h>
#include <emdb/error.h>

#include "net/checkpoint.h"
#include "net/cluster_ckpt.h"
#include "net/figures.h"
#include "net/info.h"
#include "net/loop.h"
#include "net/node_link.h"
#include "net/server.h"
#include "net/stats.h"
#include "net/tls.h"
#include "protocol/proto.h"

typedef struct sbuf {
	char *p;
	size_t len, cap;
	int err;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...)
{
	if (b->err)
		return;
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->err = EMDB_ERR_INTERNAL;
			return;
		}
		if ((size_t)n < b->cap - b->len) {
			b->len += (size_t)n;
			return;
		}
		size_t cap = b->cap * 2 + (size_t)n;
		char *p = emdb_realloc(b->p, cap);
		if (!p) {
			b->err = EMDB_ERR_NOMEM;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
}

#define SUM(s, field) FIGURES_SUM(s, field)

static void sec_server(server *s, sbuf *b, const cluster_node_stats *per_node)
{
	net_config cfg;
	server_config_copy(s, &cfg);
	uint64_t up = (stats_now_ns() - s->start_ns) / 1000000000ull;
	put(b, "# Server\n");
	put(b, "version: %s\n", EMDB_SERVER_NAME);
	put(b, "protocol_versions: %u..%u\n", PROTO_VERSION_MIN, PROTO_VERSION_MAX);
	put(b, "pid: %ld\n", (long)getpid());
	put(b, "uptime_seconds: %" PRIu64 "\n", up);
	put(b, "io_backend: %s\n", s->backend == IO_BACKEND_URING ? "uring" : "libevent");
	put(b, "io_threads: %u\n", s->n_threads);
	put(b, "tcp_bind: %s\n", cfg.bind);
	put(b, "tcp_port: %u\n", s->tcp_port);
	put(b, "unix_socket: %s\n", cfg.unix_socket);
	put(b, "auth: %s\n", s->auth_required ? "token" : "none (loopback only)");
	if (s->tls) {
		char line[TLS_DESCRIBE_MAX];
		tls_server_describe(s->tls, line, sizeof(line));
		put(b, "tls: %s\n", line);
		put(b, "tls_reloads: %" PRIu64 "\n", tls_server_reloads(s->tls));
	} else {
		put(b, "tls: off\n");
	}
	put(b, "shutting_down: %s\n", atomic_load(&s->shutting_down) ? "yes" : "no");
}

/* Failed AUTH (net/auth_limit.h): wrong tokens checked, AUTH refused
 * unchecked from throttled addresses, and those addresses now. */
static void auth_lines(server *s, sbuf *b)
{
	uint64_t failures, throttled, addrs;
	figures_auth(s, &failures, &throttled, &addrs);
	put(b, "auth_failures: %" PRIu64 "\n", failures);
	put(b, "auth_throttled: %" PRIu64 "\n", throttled);
	put(b, "auth_throttled_addresses: %" PRIu64 "\n", addrs);
}

static void sec_clients(server *s, sbuf *b, const cluster_node_stats *per_node)
{
	put(b, "# Clients\n");
	put(b, "connections: %" PRIu64 "\n", SUM(s, n_open));
	put(b, "connections_total: %" PRIu64 "\n", atomic_load(&s->conns_total));
	put(b, "connections_rejected: %" PRIu64 "\n", atomic_load(&s->conns_rejected));
	put(b, "max_connections: %" PRIu64 "\n", atomic_load(&s->rt.max_connections));
	put(b, "unix_connections: %" PRIu64 "\n", atomic_load(&s->n_unix_conns));
	put(b, "max_unix_connections: %" PRIu64 "\n", atomic_load(&s->rt.max_unix_connections));
	put(b, "connections_paused: %" PRIu64 "\n", SUM(s, n_paused));
	put(b, "protocol_errors: %" PRIu64 "\n", SUM(s, frames_bad));
	put(b, "handshake_timeouts: %" PRIu64 "\n", SUM(s, handshake_timeouts));
	put(b, "idle_timeouts: %" PRIu64 "\n", SUM(s, idle_timeouts));
	put(b, "busy_poll_hits: %" PRIu64 "\n", SUM(s, busy_poll_hits));
	put(b, "updates_waiting: %" PRIu64 "\n", step_waiting(s->steps));
	put(b, "tickets: %" PRIu64 "\n", SUM(s, n_tickets));
	put(b, "bytes_received: %" PRIu64 "\n", SUM(s, bytes_in));
	put(b, "bytes_sent: %" PRIu64 "\n", SUM(s, bytes_out));
	auth_lines(s, b);
}

static void sec_memory(server *s, sbuf *b, const cluster_node_stats *per_node)
{
	emdb_db_stats st;
	if (emdb_db_get_stats(s->db, &st) != EMDB_OK)
		memset(&st, 0, sizeof(st));
	put(b, "# Memory\n");
	put(b, "used_bytes: %zu\n", emdb_alloc_bytes());
	put(b, "peak_bytes: %zu\n", emdb_alloc_peak());
	put(b, "max_memory: %zu\n", emdb_alloc_limit());
	put(b, "rss_bytes: %ld\n", figures_rss_bytes());
	put(b, "vectors_bytes: %" PRIu64 "\n", st.total.bytes_vectors);
	put(b, "optimizer_bytes: %" PRIu64 "\n", st.total.bytes_optimizer);
	put(b, "index_bytes: %" PRIu64 "\n", st.total.bytes_index);
	put(b, "gradients_bytes: %" PRIu64 "\n", st.total.bytes_grads);
	put(b, "overhead_bytes: %" PRIu64 "\n", st.total.bytes_overhead);
	put(b, "connection_buffers_bytes: %" PRIu64 "\n", SUM(s, mem_buffers));
	put(b, "huge_pages: %s\n", emdb_huge_pages_name(emdb_alloc_huge_pages()));
	put(b, "huge_pages_regions: %" PRIu64 "\n", emdb_alloc_huge_maps());
	put(b, "huge_pages_fallbacks: %" PRIu64 "\n", emdb_alloc_huge_fallbacks());
	put(b, "huge_pages_pool_free: %ld\n", emdb_alloc_pool_free());
	put(b, "huge_pages_pool_total: %ld\n", emdb_alloc_pool_total());
}

static void sec_ops(server *s, sbuf *b, const cluster_node_stats *per_node)
{
	op_summary sum[STATS_OPS];
	figures_ops(s, sum);
	put(b, "# Ops\n");
	for (unsigned i = 1; i < STATS_OPS; i++) {
		const op_summary *o = &sum[i];
		if (!o->calls)
			continue;
		char name[32];
		stats_op_label(i, name, sizeof(name));
		put(b, "op_%s: calls=%" PRIu64 " errors=%" PRIu64 " avg_us=%.1f p50_us=%.1f p99_us=%.1f\n",
		    name, o->calls, o->errors, (double)o->ns_total / (double)o->calls / 1e3,
		    (double)stats_percentile(o, 0.50) / 1e3, (double)stats_percentile(o, 0.99) / 1e3);
	}
}

static void sec_tables(server *s, sbuf *b, const cluster_node_stats *per_node)
{
	emdb_table_info *all;
	size_t got;
	int rc = figures_tables(s, &all, &got);
	if (rc != EMDB_OK) {
		b->err = rc;
		return;
	}
	put(b, "# Tables\n");
	put(b, "tables: %zu\n", got);
	for (size_t i = 0; i < got; i++) {
		const emdb_table_info t = all[i];
		const char *opt = emdb_optimizer_name(t.config.optimizer.kind);
		emdb_tier_info ti;
		if (emdb_table_tier(s->db, t.id, &ti) != EMDB_OK)
			memset(&ti, 0, sizeof(ti));
		put(b, "table_%s: id=%u dim=%u optimizer=%s rows=%" PRIu64 " step=%" PRIu64
		       " pending_rows=%" PRIu64 " bytes=%" PRIu64 " tier=%s hot_rows=%" PRIu64
		       " device_bytes=%" PRIu64 "%s\n",
		    t.config.name, t.id, t.config.dim, opt ? opt : "?", t.stats.rows, t.stats.step,
		    t.stats.pending_rows, figures_table_bytes(&t.stats), ti.tier ? ti.tier : "host",
		    ti.hot_rows, ti.bytes_device, ti.failed ? " device_failed=1" : "");
	}
	emdb_free(all);
}

/* Each table's device replica (docs/gpu.md): one line per table with its
 * tier and what the replica served, then one per device. */
static void sec_tier(server *s, sbuf *b, const cluster_node_stats *per_node)
{
	emdb_table_info *all;
	size_t got;
	int rc = figures_tables(s, &all, &got);
	(void)per_node;
	if (rc != EMDB_OK) {
		b->err = rc;
		return;
	}
	put(b, "# Tier\n");
	for (size_t i = 0; i < got; i++) {
		const char *name = all[i].config.name;
		emdb_tier_info ti;
		if (emdb_table_tier(s->db, all[i].id, &ti) != EMDB_OK)
			continue; /* dropped meanwhile */
		put(b, "tier_%s: tier=%s devices=%u failed=%d", name, ti.tier ? ti.tier : "host",
		    ti.devices, ti.failed ? 1 : 0);
		for (size_t k = 0; k < figures_tier_table_n; k++)
			put(b, " %s=%" PRIu64, figures_tier_table[k].name,
			    figures_tier_get(&figures_tier_table[k], &ti));
		put(b, "\n");
		for (uint32_t d = 0; d < ti.devices; d++) {
			emdb_tier_device_info di;
			if (emdb_table_tier_device(s->db, all[i].id, d, &di) != EMDB_OK)
				break; /* the device failed meanwhile */
			put(b, "tier_%s_device_%u: device=%d", name, d, di.device);
			for (size_t k = 0; k < figures_tier_device_n; k++)
				put(b, " %s=%" PRIu64, figures_tier_device[k].name,
				    figures_tier_get(&figures_tier_device[k], &di));
			put(b, "\n");
		}
	}
	emdb_free(all);
}

static const char *job_state_name(uint32_t state)
{
	switch (state) {
	case PROTO_JOB_RUNNING: return "running";
	case PROTO_JOB_DONE: return "done";
	case PROTO_JOB_FAILED: return "failed";
	}
	return "idle";
}

static const char *job_kind_name(uint32_t kind)
{
	switch (kind) {
	case PROTO_JOB_CHECKPOINT_FULL: return "checkpoint_full";
	case PROTO_JOB_CHECKPOINT_INCREMENTAL: return "checkpoint_incremental";
	case PROTO_JOB_RESTORE: return "restore";
	}
	return "none";
}

/* The job under way, with its rate and an estimate of the time left. */
static void put_running_job(sbuf *b, const ckpts_job_status *j)
{
	const emdb_progress *p = &j->progress;
	double secs = (double)p->elapsed_ns / 1e9;
	double rate = secs > 0 ? (double)p->bytes_done / 1e6 / secs : 0;
	double left = -1;
	if (p->bytes_total > p->bytes_done && p->bytes_done && secs > 0)
		left = secs * (double)(p->bytes_total - p->bytes_done) / (double)p->bytes_done;
	else if (p->rows_total > p->rows_done && p->rows_done && secs > 0)
		left = secs * (double)(p->rows_total - p->rows_done) / (double)p->rows_done;
	const char *phase = emdb_job_phase_name(p->phase);
	put(b, "job_phase: %s\n", phase ? phase : "?");
	put(b, "job_rows_done: %" PRIu64 "\n", p->rows_done);
	put(b, "job_rows_total: %" PRIu64 "\n", p->rows_total);
	put(b, "job_mb_done: %.1f\n", (double)p->bytes_done / 1e6);
	put(b, "job_mb_total: %.1f\n", (double)p->bytes_total / 1e6);
	put(b, "job_mb_per_second: %.1f\n", rate);
	if (left >= 0)
		put(b, "job_seconds_left: %.1f\n", left);
	else
		put(b, "job_seconds_left: unknown\n");
	put(b, "job_switch_ms: %.3f\n", (double)p->switch_ns / 1e6);
	put(b, "job_cow_rows: %" PRIu64 "\n", p->cow_rows);
}

static void sec_persistence(server *s, sbuf *b, const cluster_node_stats *per_node)
{
	ckpts_report r;
	ckpts_report_get(s->ckpts, &r);
	put(b, "# Persistence\n");
	put(b, "enabled: %s\n", r.enabled ? "yes" : "no");
	put(b, "data_dir: %s\n", r.data_dir);
	if (!r.enabled)
		return;
	put(b, "checkpoints: %zu\n", r.checkpoints);
	/* Without it a store that cannot be read would pass for an empty one. */
	put(b, "store_error: %s\n", r.store_error == EMDB_OK ? "none" : emdb_err_name(r.store_error));
	if (s->cckpt) { /* a cluster's checkpoints (net/cluster_ckpt.h) */
		cckpt_report *c = emdb_malloc(sizeof(*c));
		if (c) {
			cckpt_report_get(s, c);
			put(b, "cluster_checkpoint_dir: %s\n", c->dir);
			if (c->error)
				put(b, "cluster_checkpoints_error: %s: %s\n", emdb_err_name(c->error), c->err);
			put(b, "cluster_checkpoints: %zu\n", c->count);
			if (c->count) {
				put(b, "last_cluster_checkpoint_id: %" PRIu64 "\n", c->last.id);
				put(b, "last_cluster_checkpoint_step: %" PRIu64 "\n", c->last.max_step);
				put(b, "last_cluster_checkpoint_rows: %" PRIu64 "\n", c->last.rows_total);
			}
			emdb_free(c);
		}
	}
	if (r.have_last) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		uint64_t now_ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
		uint64_t age = now_ms > r.last.created_ms ? now_ms - r.last.created_ms : 0;
		const char *kind = emdb_ckpt_kind_name(r.last.kind);
		put(b, "last_checkpoint_id: %" PRIu64 "\n", r.last.id);
		put(b, "last_checkpoint_kind: %s\n", kind ? kind : "?");
		put(b, "last_checkpoint_age_seconds: %.1f\n", (double)age / 1e3);
		put(b, "last_checkpoint_rows: %" PRIu64 "\n", r.last.rows_total);
	}
	if (r.have_job) {
		const ckpts_job_status *j = &r.job;
		put(b, "job: %" PRIu64 "\n", j->job);
		put(b, "job_kind: %s\n", job_kind_name(j->kind));
		put(b, "job_state: %s\n", job_state_name(j->state));
		if (j->state == PROTO_JOB_RUNNING) {
			put_running_job(b, j);
		} else if (j->state == PROTO_JOB_DONE) {
			put(b, "job_checkpoint: %" PRIu64 "\n", j->result.id);
			put(b, "job_rows: %" PRIu64 "\n",
			    j->kind == PROTO_JOB_RESTORE ? j->result.rows_total : j->result.rows);
			put(b, "job_seconds: %.3f\n", (double)j->progress.elapsed_ns / 1e9);
			put(b, "job_switch_ms: %.3f\n", (double)j->progress.switch_ns / 1e6);
		} else {
			put(b, "job_error: %s\n", emdb_err_name(j->error));
			put(b, "job_message: %s\n", j->message);
		}
	}
	put(b, "checkpoint_every_steps: %" PRIu64 "\n", r.settings.every_steps);
	put(b, "checkpoint_every_seconds: %u\n", r.settings.every_seconds);
	put(b, "checkpoint_full_every: %u\n", r.settings.full_every);
	put(b, "checkpoint_keep: %u\n", r.settings.keep);
	put(b, "steps_since_checkpoint: %" PRIu64 "\n", r.steps_since);
	put(b, "automatic_checkpoints: %" PRIu64 "\n", r.auto_checkpoints);
}

/* The bytes a table (or every table) holds: rows, state, index, gradients,
 * overhead. */
static uint64_t stats_bytes(const emdb_table_stats *t)
{
	return t->bytes_vectors + t->bytes_optimizer + t->bytes_index + t->bytes_grads + t->bytes_overhead;
}

/* The cluster this node belongs to, its rows and bytes and the cluster's
 * (per_node: every node asked, cluster_stats_total; unknown when a node
 * did not answer), and one line per node with its rows and bytes and the
 * link's own counters of what crossed to and from it (net/node_link.h). */
static void sec_cluster(server *s, sbuf *b, const cluster_node_stats *per_node)
{
	put(b, "# Cluster\n");
	if (!s->link) {
		put(b, "enabled: no\n");
		return;
	}
	node_link *l = s->link;
	const cluster_conf *cc = node_link_conf(l);
	emdb_db_stats st;
	if (emdb_db_get_stats(s->db, &st) != EMDB_OK)
		memset(&st, 0, sizeof(st));
	put(b, "enabled: yes\n");
	put(b, "cluster_id: %s\n", cc->id);
	put(b, "rank: %u\n", node_link_rank(l));
	put(b, "nodes: %u\n", cc->nodes);
	put(b, "state: %s\n", node_link_state_name(node_link_get_state(l)));
	put(b, "partitions: %u\n", cc->partitions);
	put(b, "epoch: 1\n");
	net_config cfg;
	server_config_copy(s, &cfg);
	put(b, "node_timeout_ms: %u\n", cfg.node_timeout_ms);
	put(b, "rows: %" PRIu64 "\n", st.total.rows);
	put(b, "bytes: %" PRIu64 "\n", stats_bytes(&st.total));
	emdb_table_stats sum;
	if (per_node && cluster_stats_total(s->cluster, per_node, &sum, NULL) == EMDB_OK) {
		put(b, "cluster_rows: %" PRIu64 "\n", sum.rows);
		put(b, "cluster_bytes: %" PRIu64 "\n", stats_bytes(&sum));
	} else {
		put(b, "cluster_rows: unknown\n");
		put(b, "cluster_bytes: unknown\n");
	}
	for (uint32_t r = 0; r < cc->nodes; r++) {
		node_peer_info p;
		node_link_peer(l, r, &p);
		put(b, "node_%u: addr=%s state=%s", r, p.addr, node_peer_state_name(p.state));
		if (per_node && per_node[r].status == EMDB_OK)
			put(b, " rows=%" PRIu64 " bytes=%" PRIu64, per_node[r].stats.rows, stats_bytes(&per_node[r].stats));
		else
			put(b, " rows=unknown bytes=unknown");
		if (p.state != NODE_PEER_SELF)
			put(b, " bytes_sent=%" PRIu64 " msgs_sent=%" PRIu64 " bytes_received=%" PRIu64
			       " msgs_received=%" PRIu64 " calls=%" PRIu64 " calls_failed=%" PRIu64
			       " calls_timed_out=%" PRIu64 " requests_served=%" PRIu64 " connects=%" PRIu64,
			    p.bytes_sent, p.msgs_sent, p.bytes_received, p.msgs_received, p.calls, p.calls_failed,
			    p.calls_timed_out, p.requests_served, p.connects);
		put(b, "\n");
		if (p.last_error[0])
			put(b, "node_%u_last_error: %s\n", r, p.last_error);
	}
}

static const struct {
	const char *name;
	void (*fn)(server *, sbuf *, const cluster_node_stats *);
} sections[] = {
	{ "server", sec_server }, { "clients", sec_clients }, { "memory", sec_memory },
	{ "ops", sec_ops },       { "tables", sec_tables },   { "persistence", sec_persistence },
	{ "tier", sec_tier },     { "cluster", sec_cluster },
};

int info_build(server *s, const char *section, const cluster_node_stats *per_node, char **out, size_t *len)
{
	bool all = !section[0] || strcasecmp(section, "all") == 0 || strcasecmp(section, "default") == 0;
	sbuf b = { emdb_malloc(4096), 0, 4096, 0 };
	if (!b.p)
		return EMDB_ERR_NOMEM;
	b.p[0] = '\0';
	bool any = false;
	for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); i++) {
		if (!all && strcasecmp(section, sections[i].name) != 0)
			continue;
		if (any)
			put(&b, "\n");
		sections[i].fn(s, &b, per_node);
		any = true;
	}
	if (!any || b.err) {
		emdb_free(b.p);
		return any ? b.err : EMDB_ERR_INVALID;
	}
	*out = b.p;
	*len = b.len;
	return EMDB_OK;
}
