/*
 * info.c - INFO's report, assembled from the server, its I/O threads and
 * the engine.
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
#include <unistd.h>

#include <emdb/alloc.h>
#include <emdb/db.h>
#include <emdb/error.h>

#include "net/info.h"
#include "net/loop.h"
#include "net/server.h"
#include "net/stats.h"
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

static uint64_t sum_thread(server *s, size_t off)
{
	uint64_t v = 0;
	for (uint32_t i = 0; i < s->n_threads; i++)
		v += atomic_load_explicit((_Atomic uint64_t *)((char *)&s->threads[i] + off),
					  memory_order_relaxed);
	return v;
}

#define SUM(s, field) sum_thread(s, offsetof(io_thread, field))

static void sec_server(server *s, sbuf *b)
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
	put(b, "shutting_down: %s\n", atomic_load(&s->shutting_down) ? "yes" : "no");
}

static void sec_clients(server *s, sbuf *b)
{
	put(b, "# Clients\n");
	put(b, "connections: %" PRIu64 "\n", SUM(s, n_open));
	put(b, "connections_total: %" PRIu64 "\n", atomic_load(&s->conns_total));
	put(b, "connections_rejected: %" PRIu64 "\n", atomic_load(&s->conns_rejected));
	put(b, "max_connections: %" PRIu64 "\n", atomic_load(&s->rt.max_connections));
	put(b, "connections_paused: %" PRIu64 "\n", SUM(s, n_paused));
	put(b, "protocol_errors: %" PRIu64 "\n", SUM(s, frames_bad));
	put(b, "tickets: %" PRIu64 "\n", SUM(s, n_tickets));
	put(b, "bytes_received: %" PRIu64 "\n", SUM(s, bytes_in));
	put(b, "bytes_sent: %" PRIu64 "\n", SUM(s, bytes_out));
}

static long rss_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long pages = 0, rss = 0;
	if (!f)
		return -1;
	if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
		rss = -1;
	fclose(f);
	return rss < 0 ? -1 : rss * sysconf(_SC_PAGESIZE);
}

static void sec_memory(server *s, sbuf *b)
{
	emdb_db_stats st;
	if (emdb_db_get_stats(s->db, &st) != EMDB_OK)
		memset(&st, 0, sizeof(st));
	put(b, "# Memory\n");
	put(b, "used_bytes: %zu\n", emdb_alloc_bytes());
	put(b, "peak_bytes: %zu\n", emdb_alloc_peak());
	put(b, "max_memory: %zu\n", emdb_alloc_limit());
	put(b, "rss_bytes: %ld\n", rss_bytes());
	put(b, "vectors_bytes: %" PRIu64 "\n", st.total.bytes_vectors);
	put(b, "optimizer_bytes: %" PRIu64 "\n", st.total.bytes_optimizer);
	put(b, "index_bytes: %" PRIu64 "\n", st.total.bytes_index);
	put(b, "gradients_bytes: %" PRIu64 "\n", st.total.bytes_grads);
	put(b, "overhead_bytes: %" PRIu64 "\n", st.total.bytes_overhead);
	put(b, "connection_buffers_bytes: %" PRIu64 "\n", SUM(s, mem_buffers));
}

static void sec_ops(server *s, sbuf *b)
{
	op_summary sum[STATS_OPS];
	memset(sum, 0, sizeof(sum));
	for (uint32_t i = 0; i < s->n_threads; i++)
		stats_add(sum, &s->threads[i].stats);
	put(b, "# Ops\n");
	for (unsigned i = 1; i < STATS_OPS; i++) {
		const op_summary *o = &sum[i];
		if (!o->calls)
			continue;
		char name[32];
		snprintf(name, sizeof(name), "%s", stats_op_name(i));
		for (char *q = name; *q; q++)
			*q = (char)(*q >= 'A' && *q <= 'Z' ? *q - 'A' + 'a' : *q);
		put(b, "op_%s: calls=%" PRIu64 " errors=%" PRIu64 " avg_us=%.1f p50_us=%.1f p99_us=%.1f\n",
		    name, o->calls, o->errors, (double)o->ns_total / (double)o->calls / 1e3,
		    (double)stats_percentile(o, 0.50) / 1e3, (double)stats_percentile(o, 0.99) / 1e3);
	}
}

static void sec_tables(server *s, sbuf *b)
{
	size_t n = 0;
	emdb_table_list(s->db, NULL, 0, &n);
	uint32_t *ids = emdb_malloc((n + 8) * sizeof(*ids));
	if (!ids) {
		b->err = EMDB_ERR_NOMEM;
		return;
	}
	size_t got = 0;
	emdb_table_list(s->db, ids, n + 8, &got);
	if (got > n + 8)
		got = n + 8;
	put(b, "# Tables\n");
	put(b, "tables: %zu\n", got);
	for (size_t i = 0; i < got; i++) {
		emdb_table_info t;
		if (emdb_table_describe(s->db, ids[i], &t) != EMDB_OK)
			continue;
		const char *opt = emdb_optimizer_name(t.config.optimizer.kind);
		put(b, "table_%s: id=%u dim=%u optimizer=%s rows=%" PRIu64 " step=%" PRIu64
		       " pending_rows=%" PRIu64 " bytes=%" PRIu64 "\n",
		    t.config.name, t.id, t.config.dim, opt ? opt : "?", t.stats.rows, t.stats.step,
		    t.stats.pending_rows,
		    t.stats.bytes_vectors + t.stats.bytes_optimizer + t.stats.bytes_index +
			    t.stats.bytes_grads + t.stats.bytes_overhead);
	}
	emdb_free(ids);
}

static const struct {
	const char *name;
	void (*fn)(server *, sbuf *);
} sections[] = {
	{ "server", sec_server }, { "clients", sec_clients }, { "memory", sec_memory },
	{ "ops", sec_ops },       { "tables", sec_tables },
};

int info_build(server *s, const char *section, char **out, size_t *len)
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
		sections[i].fn(s, &b);
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
