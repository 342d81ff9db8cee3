/*
 * config.c - the key table behind net_config: defaults, parsing, text
 * forms, the config file reader.
 *
 * Invariants:
 *   1. keys[] is the only list of configuration keys: the file reader, the
 *      command line, CONFIG GET/SET, --help and docs/server.md all follow
 *      it, so a key cannot exist in one place and not another.
 *   2. config_set changes the field only after the whole value parsed and
 *      passed its range check: a refused value leaves *c as it was.
 *   3. Secret keys are never printed: config_get reports whether they are
 *      set, not what they hold.
 *
 * State changes: only through config_set (and config_defaults).
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "net/config.h"
#include "net/log.h"

typedef enum key_type {
	T_STR,
	T_U32,
	T_SIZE,    /* u64 with K/M/G/T suffixes */
	T_BACKEND,
	T_LEVEL,
	T_HUGE,    /* emdb_huge_pages: off, try, on */
	T_RANK,    /* u32 in min..max, or "" for CONFIG_RANK_UNSET */
} key_type;

#define F_RUNTIME 0x1 /* CONFIG SET may change it */
#define F_SECRET 0x2  /* never shown */

typedef struct key_def {
	const char *name;
	key_type type;
	size_t off;
	size_t size; /* T_STR buffer, or the integer width */
	uint64_t min, max;
	unsigned flags;
	const char *help;
} key_def;

#define OFF(f) offsetof(net_config, f), sizeof(((net_config *)0)->f)

static const key_def keys[] = {
	{ "bind", T_STR, OFF(bind), 0, 0, 0, "TCP listen address (IPv4 or IPv6 literal); empty: no TCP listener" },
	{ "port", T_U32, OFF(port), 0, 65535, 0, "TCP port; 0 picks a free one (see port_file)" },
	{ "unix_socket", T_STR, OFF(unix_socket), 0, 0, 0, "Unix socket path; empty: none" },
	{ "port_file", T_STR, OFF(port_file), 0, 0, 0, "write the bound TCP port to this file once listening" },
	{ "backlog", T_U32, OFF(backlog), 1, 65535, 0, "listen(2) backlog" },
	{ "metrics_address", T_STR, OFF(metrics_address), 0, 0, 0, "address (IPv4 or IPv6 literal) of the Prometheus endpoint, GET /metrics over HTTP, when metrics_port is set; it has no authentication: the loopback default keeps it to this machine" },
	{ "metrics_port", T_U32, OFF(metrics_port), 0, 65535, 0, "TCP port of the Prometheus endpoint (http://metrics_address:metrics_port/metrics); 0: no endpoint" },
	{ "io_threads", T_U32, OFF(io_threads), 0, 1024, 0, "I/O threads; 0: one per online CPU" },
	{ "io_backend", T_BACKEND, OFF(io_backend), 0, 0, 0, "libevent or uring (falls back to libevent)" },
	{ "uring_entries", T_U32, OFF(uring_entries), 8, 32768, 0, "io_uring submission queue entries per thread" },
	{ "busy_poll_us", T_U32, OFF(busy_poll_us), 0, 10000, F_RUNTIME, "after each event, an I/O thread polls for the next one this long before it sleeps: a request that comes within the window skips the sleep and wake-up (about 20 us a round trip on this kind of VM) at the price of a core kept busy while traffic flows; 0: sleep at once" },
	{ "max_connections", T_U32, OFF(max_connections), 1, 10000000, F_RUNTIME, "TCP connections at once; more are refused with LIMIT" },
	{ "max_unix_connections", T_U32, OFF(max_unix_connections), 1, 10000000, F_RUNTIME, "Unix-socket connections at once, counted apart from max_connections so that an admin on the Unix socket gets in while TCP clients hold every slot; more are refused with LIMIT" },
	{ "max_frame", T_SIZE, OFF(max_frame), 4096, 0xFFFFFFF8ull, F_RUNTIME, "largest frame body in either direction, bytes" },
	{ "max_batch", T_U32, OFF(max_batch), 1, 1u << 30, 0, "most IDs one request may carry" },
	{ "max_memory", T_SIZE, OFF(max_memory), 0, UINT64_MAX, F_RUNTIME, "bytes the engine and buffers may use; 0: unlimited" },
	{ "huge_pages", T_HUGE, OFF(huge_pages), 0, 0, F_RUNTIME, "where row chunks and index arrays come from: off (ordinary memory, transparent huge pages where the kernel allows), try (the kernel's pool of explicit huge pages, sysctl vm.nr_hugepages, while it has room, else ordinary memory), on (the pool only: what it cannot hold fails with NOMEM).  The pool's pages stay with this machine when freed, so on a VM whose host takes freed memory back a table filled, restored or grown into them runs at memory speed; changes apply to memory mapped afterwards" },
	{ "unix_send_buffer", T_SIZE, OFF(unix_send_buffer), 0, 1u << 30, 0, "SO_SNDBUF of each Unix-socket connection, bytes (the kernel caps it at net.core.wmem_max); 0: the kernel's default" },
	{ "output_buffer_limit", T_SIZE, OFF(output_buffer_limit), 4096, UINT64_MAX, F_RUNTIME, "per connection: unsent reply bytes above which its requests wait" },
	{ "max_tickets", T_U32, OFF(max_tickets), 1, 1u << 30, F_RUNTIME, "live Prefetch tickets per connection" },
	{ "drain_timeout_ms", T_U32, OFF(drain_timeout_ms), 0, 3600000, F_RUNTIME, "on shutdown, how long replies may take to flush" },
	{ "handshake_timeout_ms", T_U32, OFF(handshake_timeout_ms), 0, 3600000, F_RUNTIME, "a connection that has not finished HELLO (and AUTH where needed) this long after it was accepted gets TIMEOUT and is closed; 0: never" },
	{ "idle_timeout_s", T_U32, OFF(idle_timeout_s), 0, 100u * 365 * 86400, F_RUNTIME, "close a connection that has sent nothing for this long and has no reply pending; 0: never" },
	{ "update_barrier_timeout_ms", T_U32, OFF(update_barrier_timeout_ms), 0, 86400000, F_RUNTIME, "a synchronous step (UPDATE with workers >= 2) not complete this long after its first UPDATE answers all of them TIMEOUT and applies nothing; 0: wait for ever.  Keep it under the clients' own timeout (30 s by default in the client library): a request its client gave up on still counts in the step" },
	{ "auth_fail_burst", T_U32, OFF(auth_fail_burst), 0, 1000000, F_RUNTIME, "wrong AUTH tokens one peer address (all Unix-socket clients count as one) may try back to back; then its AUTH is refused unchecked, with AUTH 'too many failed attempts', until auth_fail_window_ms / auth_fail_burst has passed per further try; 0: no limit" },
	{ "auth_fail_window_ms", T_U32, OFF(auth_fail_window_ms), 0, 86400000, F_RUNTIME, "the time over which an address earns back auth_fail_burst failed AUTH attempts: an address that stops guessing is forgotten after it; 0: no limit" },
	{ "admin_token", T_STR, OFF(admin_token), 0, 0, F_SECRET, "AUTH token granting the admin role" },
	{ "trainer_token", T_STR, OFF(trainer_token), 0, 0, F_SECRET, "AUTH token granting the trainer role" },
	{ "reader_token", T_STR, OFF(reader_token), 0, 0, F_SECRET, "AUTH token granting the reader role" },
	{ "tls_cert_file", T_STR, OFF(tls_cert_file), 0, 0, F_RUNTIME, "PEM certificate (chain) of the server; with tls_key_file, the TCP listener speaks only TLS (the Unix socket stays plain); empty: plain TCP.  At run time only while TLS is on: a CONFIG SET naming a tls_* key reloads the files" },
	{ "tls_key_file", T_STR, OFF(tls_key_file), 0, 0, F_RUNTIME, "PEM private key of tls_cert_file" },
	{ "tls_ca_file", T_STR, OFF(tls_ca_file), 0, 0, F_RUNTIME, "PEM CA certificates: TLS clients must present a certificate one of them signed; empty: none asked for" },
	{ "log_level", T_LEVEL, OFF(log_level), 0, 0, F_RUNTIME, "debug, info, warn or error" },
	{ "log_file", T_STR, OFF(log_file), 0, 0, 0, "append the log here; empty: stderr" },
	{ "shards", T_U32, OFF(shards), 1, 4096, 0, "engine: index shards per table (power of two)" },
	{ "chunk_bytes", T_SIZE, OFF(chunk_bytes), 64u << 10, 1ull << 34, 0, "engine: bytes per row chunk" },
	{ "max_tables", T_U32, OFF(max_tables), 1, 1u << 20, 0, "engine: tables alive at once" },
	{ "gpu_memory", T_SIZE, OFF(gpu_memory), 0, 1ull << 44, 0, "engine: GPU memory per table for a replica of its most prefetched rows, kept identical to the host rows after every Update (docs/gpu.md); 0: none.  Without a GPU or its driver: one log line, and every table stays in host memory" },
	{ "data_dir", T_STR, OFF(data_dir), 0, 0, 0, "checkpoint store (RocksDB) directory, created when missing; empty: persistence off" },
	{ "restore", T_STR, OFF(restore), 0, 0, 0, "at start, before listening: restore 'latest' or a checkpoint id from data_dir" },
	{ "accept_data_loss", T_U32, OFF(accept_data_loss), 0, 1, 0, "1: open a damaged checkpoint store in data_dir anyway, keeping the checkpoints that are whole and dropping the rest (the log says what); 0: refuse to start and say what is damaged" },
	{ "checkpoint_keep", T_U32, OFF(checkpoint_keep), 0, 1u << 30, F_RUNTIME, "after each checkpoint keep the newest N (and what they need); 0: keep all" },
	{ "checkpoint_every_steps", T_U32, OFF(checkpoint_every_steps), 0, UINT32_MAX, F_RUNTIME, "automatic checkpoint after N UPDATE or PUSH_UPDATE requests; 0: off" },
	{ "checkpoint_every_seconds", T_U32, OFF(checkpoint_every_seconds), 0, 100u * 365 * 86400, F_RUNTIME, "automatic checkpoint every N seconds; 0: off" },
	{ "checkpoint_full_every", T_U32, OFF(checkpoint_full_every), 1, 1u << 30, F_RUNTIME, "every Nth automatic checkpoint is full, the others incremental" },
	{ "cluster_file", T_STR, OFF(cluster_file), 0, 0, 0, "the cluster file (docs/cluster.md): cluster_id, partitions and every node's HOST:PORT, the same file on every node; this node joins that cluster at start and opens its client listeners only once every node is reachable and agrees; empty: a single node" },
	{ "cluster_rank", T_RANK, OFF(cluster_rank), 0, 1023, 0, "this node's rank in cluster_file (its `node RANK HOST:PORT` line); required with cluster_file" },
	{ "cluster_secret_file", T_STR, OFF(cluster_secret_file), 0, 0, 0, "file holding the cluster's shared secret (its first line, 16..1024 bytes), the same on every node: nodes prove to each other they hold it (HMAC-SHA256 challenge-response), it never crosses the network; required with cluster_file" },
	{ "node_timeout_ms", T_U32, OFF(node_timeout_ms), 10, 3600000, 0, "a request to another node not answered this long fails with NODE naming that node; also how long a handshake may take" },
	{ "cluster_start_timeout_ms", T_U32, OFF(cluster_start_timeout_ms), 100, 86400000, 0, "at start, how long this node waits for every node of cluster_file to be reachable before it gives up (exit status 1, naming the node)" },
	{ "cluster_checkpoint_dir", T_STR, OFF(cluster_checkpoint_dir), 0, 0, 0, "cluster checkpoints (docs/cluster.md): a directory every node of the cluster reads and writes (a shared file system; one directory for nodes on one machine), holding each node's checkpoint store (rank-N, in place of data_dir) and the manifests; CHECKPOINT on any node then checkpoints every node, and restore reads it; empty: each node checkpoints only itself in data_dir" },
	{ "cluster_checkpoint_timeout_ms", T_U32, OFF(cluster_checkpoint_timeout_ms), 1000, 86400000, 0, "how long a cluster checkpoint or restore may hold Updates on a node, and how long its coordinator waits for a node's part (written or loaded) before it fails the checkpoint naming that node; the same on every node" },
	{ "cluster_busy_poll", T_U32, OFF(cluster_busy_poll), 0, 1, 0, "1: the node link's thread polls UCX without sleeping (lower latency, a core kept busy); 0: it sleeps on UCX's event fd" },
	{ "cluster_serve_threads", T_U32, OFF(cluster_serve_threads), 0, 256, 0, "threads that run the engine calls of the requests other nodes send this node as an owner (each peer's in arrival order); 0: the node link's thread runs them; default min(4, CPUs - 1), 0 on two CPUs or fewer" },
};

#define N_KEYS (sizeof(keys) / sizeof(keys[0]))

void config_defaults(net_config *c)
{
	memset(c, 0, sizeof(*c));
	strcpy(c->bind, "127.0.0.1");
	c->port = CONFIG_DEFAULT_PORT;
	c->backlog = 511;
	strcpy(c->metrics_address, "127.0.0.1");
	c->io_threads = 0;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	/* on two cores or fewer the hand-over costs more than a thread gives
	 * (docs/cluster.md, "The owner's serve threads") */
	c->cluster_serve_threads = cpus > 5 ? 4 : cpus > 2 ? (uint32_t)cpus - 1 : 0;
	c->io_backend = IO_BACKEND_LIBEVENT;
	c->uring_entries = 1024;
	c->max_connections = 10000;
	c->max_unix_connections = 64;
	c->max_frame = 256ull << 20;
	c->max_batch = 4u << 20;
	c->max_memory = 0;
	c->huge_pages = EMDB_HUGE_OFF;
	c->output_buffer_limit = 16ull << 20;
	c->unix_send_buffer = 4u << 20;
	c->max_tickets = 65536;
	c->drain_timeout_ms = 5000;
	c->handshake_timeout_ms = 10000;
	c->update_barrier_timeout_ms = 20000;
	c->auth_fail_burst = 10;
	c->auth_fail_window_ms = 60000;
	c->log_level = LOG_INFO;
	c->shards = 64;
	c->chunk_bytes = 2ull << 20;
	c->max_tables = 1024;
	c->checkpoint_full_every = 8;
	c->cluster_rank = CONFIG_RANK_UNSET;
	c->node_timeout_ms = 3000;
	c->cluster_start_timeout_ms = 30000;
	c->cluster_checkpoint_timeout_ms = 600000;
}

static void errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static const key_def *find_key(const char *name)
{
	char norm[64];
	size_t n = strlen(name);
	if (n >= sizeof(norm))
		return NULL;
	for (size_t i = 0; i <= n; i++)
		norm[i] = name[i] == '-' ? '_' : (char)tolower((unsigned char)name[i]);
	for (size_t i = 0; i < N_KEYS; i++)
		if (strcmp(keys[i].name, norm) == 0)
			return &keys[i];
	return NULL;
}

/* Unsigned decimal with an optional K/M/G/T suffix (suffix only when
 * allowed).  Overflow and trailing junk are errors. */
static int parse_u64(const char *s, bool suffix, uint64_t *out)
{
	while (isspace((unsigned char)*s))
		s++;
	if (!isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	unsigned shift = 0;
	if (suffix && *end) {
		switch (toupper((unsigned char)*end)) {
		case 'K': shift = 10; break;
		case 'M': shift = 20; break;
		case 'G': shift = 30; break;
		case 'T': shift = 40; break;
		default: return -1;
		}
		end++;
		if (toupper((unsigned char)*end) == 'B' || toupper((unsigned char)*end) == 'I')
			end++;
	}
	while (isspace((unsigned char)*end))
		end++;
	if (*end)
		return -1;
	if (shift && v > (UINT64_MAX >> shift))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

int config_set(net_config *c, const char *key, const char *value, bool running, char *err,
	       size_t errlen)
{
	const key_def *k = find_key(key);
	if (!k) {
		errf(err, errlen, "unknown configuration key '%s'", key);
		return -1;
	}
	if (running && !(k->flags & F_RUNTIME)) {
		errf(err, errlen, "'%s' cannot be changed while the server runs", k->name);
		return -1;
	}
	char *field = (char *)c + k->off;
	uint64_t v;
	switch (k->type) {
	case T_STR:
		if (strlen(value) >= k->size) {
			errf(err, errlen, "%s: value longer than %zu bytes", k->name, k->size - 1);
			return -1;
		}
		strcpy(field, value);
		return 0;
	case T_U32:
	case T_SIZE:
		if (parse_u64(value, k->type == T_SIZE, &v) < 0) {
			errf(err, errlen, "%s: '%s' is not a %s", k->name, value,
			     k->type == T_SIZE ? "size (a number with an optional K/M/G/T suffix)"
					       : "non-negative integer");
			return -1;
		}
		if (v < k->min || (k->max && v > k->max)) {
			errf(err, errlen, "%s: %" PRIu64 " is outside %" PRIu64 "..%" PRIu64, k->name, v,
			     k->min, k->max);
			return -1;
		}
		if (k->size == sizeof(uint32_t)) {
			uint32_t v32 = (uint32_t)v;
			memcpy(field, &v32, sizeof(v32));
		} else {
			memcpy(field, &v, sizeof(v));
		}
		return 0;
	case T_BACKEND: {
		io_backend_kind b;
		if (strcasecmp(value, "libevent") == 0 || strcasecmp(value, "event") == 0)
			b = IO_BACKEND_LIBEVENT;
		else if (strcasecmp(value, "uring") == 0 || strcasecmp(value, "io_uring") == 0)
			b = IO_BACKEND_URING;
		else {
			errf(err, errlen, "%s: '%s' is neither libevent nor uring", k->name, value);
			return -1;
		}
		memcpy(field, &b, sizeof(b));
		return 0;
	}
	case T_HUGE: {
		emdb_huge_pages m;
		if (emdb_huge_pages_parse(value, &m) != EMDB_OK) {
			errf(err, errlen, "%s: '%s' is not off, try or on", k->name, value);
			return -1;
		}
		int h = (int)m;
		memcpy(field, &h, sizeof(h));
		return 0;
	}
	case T_RANK: {
		uint32_t r = CONFIG_RANK_UNSET;
		if (*value) {
			if (parse_u64(value, false, &v) < 0 || v < k->min || v > k->max) {
				errf(err, errlen, "%s: '%s' is not a rank in %" PRIu64 "..%" PRIu64, k->name, value,
				     k->min, k->max);
				return -1;
			}
			r = (uint32_t)v;
		}
		memcpy(field, &r, sizeof(r));
		return 0;
	}
	case T_LEVEL: {
		int l = log_level_parse(value);
		if (l < 0) {
			errf(err, errlen, "%s: '%s' is not debug, info, warn or error", k->name, value);
			return -1;
		}
		memcpy(field, &l, sizeof(l));
		return 0;
	}
	}
	errf(err, errlen, "%s: internal error", k->name);
	return -1;
}

int config_get(const net_config *c, const char *key, char *buf, size_t len)
{
	const key_def *k = find_key(key);
	if (!k)
		return -1;
	const char *field = (const char *)c + k->off;
	uint32_t v32;
	uint64_t v64;
	int iv;
	switch (k->type) {
	case T_STR:
		if (k->flags & F_SECRET)
			snprintf(buf, len, "%s", field[0] ? "<hidden>" : "");
		else
			snprintf(buf, len, "%s", field);
		break;
	case T_U32:
		memcpy(&v32, field, sizeof(v32));
		snprintf(buf, len, "%" PRIu32, v32);
		break;
	case T_RANK:
		memcpy(&v32, field, sizeof(v32));
		if (v32 == CONFIG_RANK_UNSET)
			snprintf(buf, len, "%s", "");
		else
			snprintf(buf, len, "%" PRIu32, v32);
		break;
	case T_SIZE:
		memcpy(&v64, field, sizeof(v64));
		snprintf(buf, len, "%" PRIu64, v64);
		break;
	case T_BACKEND:
		memcpy(&iv, field, sizeof(iv));
		snprintf(buf, len, "%s", iv == IO_BACKEND_URING ? "uring" : "libevent");
		break;
	case T_LEVEL:
		memcpy(&iv, field, sizeof(iv));
		snprintf(buf, len, "%s", log_level_name((log_level)iv));
		break;
	case T_HUGE:
		memcpy(&iv, field, sizeof(iv));
		snprintf(buf, len, "%s", emdb_huge_pages_name((emdb_huge_pages)iv));
		break;
	}
	return 0;
}

size_t config_key_count(void)
{
	return N_KEYS;
}

const char *config_key_name(size_t i)
{
	return i < N_KEYS ? keys[i].name : NULL;
}

const char *config_key_help(size_t i)
{
	return i < N_KEYS ? keys[i].help : NULL;
}

bool config_key_settable(const char *key)
{
	const key_def *k = find_key(key);
	return k && (k->flags & F_RUNTIME);
}

const char *config_key_lookup(const char *name)
{
	const key_def *k = find_key(name);
	return k ? k->name : NULL;
}

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	char *e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

int config_load_file(net_config *c, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		errf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	char line[4096];
	unsigned lineno = 0;
	int rc = 0;
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		size_t n = strlen(line);
		if (n == sizeof(line) - 1 && line[n - 1] != '\n') {
			errf(err, errlen, "%s:%u: line longer than %zu bytes", path, lineno, sizeof(line) - 2);
			rc = -1;
			break;
		}
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		char *s = trim(line);
		if (!*s)
			continue;
		char *v = s;
		while (*v && !isspace((unsigned char)*v))
			v++;
		if (*v)
			*v++ = '\0';
		v = trim(v);
		char msg[512];
		if (config_set(c, s, v, false, msg, sizeof(msg)) < 0) {
			errf(err, errlen, "%s:%u: %s", path, lineno, msg);
			rc = -1;
			break;
		}
	}
	if (rc == 0 && ferror(f)) {
		errf(err, errlen, "%s: read error", path);
		rc = -1;
	}
	fclose(f);
	return rc;
}

int config_validate(const net_config *c, char *err, size_t errlen)
{
	if (!c->bind[0] && !c->unix_socket[0]) {
		errf(err, errlen, "neither bind nor unix_socket is set: nothing to listen on");
		return -1;
	}
	if (!c->tls_cert_file[0] != !c->tls_key_file[0]) {
		errf(err, errlen, "TLS needs both tls_cert_file and tls_key_file, not only %s",
		     c->tls_cert_file[0] ? "tls_cert_file" : "tls_key_file");
		return -1;
	}
	if (c->tls_ca_file[0] && !c->tls_cert_file[0]) {
		errf(err, errlen, "tls_ca_file asks TLS clients for certificates: it needs tls_cert_file and tls_key_file");
		return -1;
	}
	if (c->metrics_port && !c->metrics_address[0]) {
		errf(err, errlen, "metrics_port %u needs metrics_address: the address to serve /metrics on",
		     c->metrics_port);
		return -1;
	}
	if (c->shards & (c->shards - 1)) {
		errf(err, errlen, "shards must be a power of two, not %u", c->shards);
		return -1;
	}
	if (c->cluster_checkpoint_dir[0] && !c->cluster_file[0]) {
		errf(err, errlen, "cluster_checkpoint_dir needs cluster_file: it holds a cluster's checkpoints");
		return -1;
	}
	if (c->restore[0] && !c->data_dir[0] && !c->cluster_checkpoint_dir[0]) {
		errf(err, errlen, "restore '%s' needs data_dir: the checkpoint store to restore from",
		     c->restore);
		return -1;
	}
	if (c->restore[0] && strcmp(c->restore, "latest") != 0) {
		uint64_t id;
		if (parse_u64(c->restore, false, &id) < 0 || id == 0) {
			errf(err, errlen, "restore must be \"latest\" or a checkpoint id (1, 2, ...), not '%s'",
			     c->restore);
			return -1;
		}
	}
	if (c->cluster_file[0] && c->cluster_rank == CONFIG_RANK_UNSET) {
		errf(err, errlen, "cluster_file needs cluster_rank: this node's rank in it");
		return -1;
	}
	if (c->cluster_file[0] && !c->cluster_secret_file[0]) {
		errf(err, errlen, "cluster_file needs cluster_secret_file: nodes authenticate each other with it");
		return -1;
	}
	if (!c->cluster_file[0] && c->cluster_rank != CONFIG_RANK_UNSET) {
		errf(err, errlen, "cluster_rank %u without cluster_file: a rank in which cluster?", c->cluster_rank);
		return -1;
	}
	if (c->max_frame % 8) {
		errf(err, errlen, "max_frame must be a multiple of 8, not %llu",
		     (unsigned long long)c->max_frame);
		return -1;
	}
	return 0;
}
