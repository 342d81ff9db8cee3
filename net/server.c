/*
 * server.c - the server process: engine, configuration, listeners, I/O
 * threads, signals and the orderly shutdown.
 *
 * Invariants:
 *   1. The main thread owns the listeners and the main event_base; it
 *      alone accepts, and it alone drains and joins the I/O threads.
 *   2. n_conns counts every accepted TCP descriptor, n_unix_conns every
 *      Unix-socket one, until its connection is destroyed (or it is
 *      closed unserved), so max_connections and max_unix_connections hold
 *      across threads; a connection over its limit gets a LIMIT error
 *      frame and is closed at once.  The two are apart so that TCP
 *      clients, however many, never keep the admin off the Unix socket.
 *   3. Shutdown happens once: the first SIGTERM/SIGINT or SHUTDOWN stops
 *      accepting and drains; later requests only log.  The engine is
 *      closed only after every I/O thread has ended and after the
 *      checkpoint job thread ended and the store closed (ckpts_close
 *      waits for a running job).
 *   4. The values in rt always equal the ones in cfg; both are written
 *      together under cfg_lock by server_config_set.
 *   5. With no token configured every loopback client is admin and every
 *      other client is refused; the log says so at start.
 *   6. SIGHUP, and a CONFIG SET naming a tls_* key, reload the TLS files
 *      for connections accepted afterwards; a reload that fails leaves
 *      the context in use as it was (and the CONFIG SET changes nothing).
 *
 *   7. The synchronous steps (s->steps, db/step.h) fail past their
 *      deadline on the main thread's tick, and all of them, with later
 *      ones refused, before the I/O threads drain (step_close), so every
 *      answer is posted while its thread still runs.
 *
 * State changes: server_create (engine, store, restore at start, the
 * node link of a cluster: net/server_cluster.h),
 * server_start (listeners, threads), on_accept (n_conns),
 * server_request_shutdown / on_shutdown (shutting_down, drain),
 * server_config_set_many (cfg, rt, memory limit, log level, the TLS
 * context), reload_tls (the TLS context, on SIGHUP).
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include <emdb/alloc.h>
#include <emdb/db.h>

#include "base/clock.h"
#include "cluster/cluster.h"
#include "net/handle.h"
#include "net/listen.h"
#include "net/log.h"
#include "net/loop.h"
#include "net/metrics.h"
#include "net/server.h"
#include "net/cluster_ckpt.h"
#include "net/server_cluster.h"
#include "net/stats.h"
#include "net/tls.h"
#include "protocol/proto.h"

static ckpts_settings ckpts_settings_of(const net_config *c)
{
	ckpts_settings ps = {
		.keep = c->checkpoint_keep,
		.every_steps = c->checkpoint_every_steps,
		.every_seconds = c->checkpoint_every_seconds,
		.full_every = c->checkpoint_full_every,
	};
	return ps;
}

static void publish_runtime(server *s)
{
	atomic_store(&s->rt.max_connections, s->cfg.max_connections);
	atomic_store(&s->rt.max_unix_connections, s->cfg.max_unix_connections);
	atomic_store(&s->rt.max_frame, s->cfg.max_frame);
	atomic_store(&s->rt.output_buffer_limit, s->cfg.output_buffer_limit);
	atomic_store(&s->rt.max_tickets, s->cfg.max_tickets);
	atomic_store(&s->rt.drain_timeout_ms, s->cfg.drain_timeout_ms);
	atomic_store(&s->rt.handshake_timeout_ms, s->cfg.handshake_timeout_ms);
	atomic_store(&s->rt.idle_timeout_s, s->cfg.idle_timeout_s);
	atomic_store(&s->rt.busy_poll_us, s->cfg.busy_poll_us);
	atomic_store(&s->rt.update_barrier_timeout_ms, s->cfg.update_barrier_timeout_ms);
	atomic_store(&s->rt.auth_fail_burst, s->cfg.auth_fail_burst);
	atomic_store(&s->rt.auth_fail_window_ms, s->cfg.auth_fail_window_ms);
	emdb_alloc_set_limit((size_t)s->cfg.max_memory);
	emdb_alloc_set_huge_pages((emdb_huge_pages)s->cfg.huge_pages);
	log_set_level((log_level)s->cfg.log_level);
	if (s->ckpts) {
		ckpts_settings ps = ckpts_settings_of(&s->cfg);
		ckpts_configure(s->ckpts, &ps);
	}
}

/* The steps' failures (db/step.h), in the log as before. */
static void log_step_failed(void *arg, const char *msg)
{
	(void)arg;
	log_warn("%s", msg);
}

/* The synchronous steps of UPDATE: the engine's barrier, each step's
 * Update the engine's.  Returns EMDB_OK, or NOMEM with err filled. */
static int open_steps(server *s, char *err, size_t errlen)
{
	step_hooks h = { .apply = step_apply_update, .arg = s->db, .failed = log_step_failed };
	int rc = step_barrier_create(&h, &s->steps);
	if (rc != EMDB_OK)
		snprintf(err, errlen, "%s", emdb_last_error());
	return rc;
}

int server_create(const net_config *cfg, server **out, char *err, size_t errlen)
{
	if (config_validate(cfg, err, errlen) < 0)
		return -1;
	server *s = emdb_calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	s->cfg = *cfg;
	s->wake_fd = -1;
	s->handler = &handle_requests;
	pthread_mutex_init(&s->cfg_lock, NULL);
	pthread_mutex_init(&s->bg_lock, NULL);
	pthread_cond_init(&s->bg_idle, NULL);
	s->max_batch = cfg->max_batch;
	s->unix_sndbuf = (int)cfg->unix_send_buffer;
	s->auth_required = cfg->admin_token[0] || cfg->trainer_token[0] || cfg->reader_token[0];
	s->start_ns = stats_now_ns();
	if (tls_server_create(cfg, &s->tls, err, errlen) < 0) {
		pthread_mutex_destroy(&s->cfg_lock);
		emdb_free(s);
		return -1;
	}

	emdb_db_config dc = EMDB_DB_CONFIG_INIT;
	dc.shards = cfg->shards;
	dc.chunk_bytes = cfg->chunk_bytes;
	dc.max_batch = cfg->max_batch;
	dc.max_tables = cfg->max_tables;
	dc.gpu_memory = cfg->gpu_memory;
	if (emdb_db_open(&dc, &s->db) != EMDB_OK) {
		snprintf(err, errlen, "cannot open the engine: %s", emdb_last_error());
		tls_server_free(s->tls);
		pthread_mutex_destroy(&s->cfg_lock);
		emdb_free(s);
		return -1;
	}
	publish_runtime(s);
	/* The store, then the restore at start: all before any listener, so
	 * that no client ever sees the database half restored. */
	ckpts_settings ps = ckpts_settings_of(cfg);
	/* On a cluster with cluster_checkpoint_dir the store is this node's
	 * part store there, and the restore at start is the cluster's
	 * (server_cluster_open, net/cluster_ckpt.h). */
	char part_dir[CONFIG_PATH_MAX + 32];
	bool clustered = cckpt_store_dir(cfg, part_dir, sizeof(part_dir));
	if (ckpts_open(s->db, clustered ? part_dir : cfg->data_dir, cfg->accept_data_loss != 0, &ps, &s->ckpts, err,
		       errlen) != EMDB_OK ||
	    (!clustered && ckpts_restore_at_start(s->ckpts, cfg->restore, err, errlen) != EMDB_OK) ||
	    ckpts_start(s->ckpts, err, errlen) != EMDB_OK || open_steps(s, err, errlen) != EMDB_OK ||
	    server_cluster_open(s, err, errlen) < 0) {
		step_barrier_destroy(s->steps);
		ckpts_close(s->ckpts);
		emdb_db_close(s->db);
		tls_server_free(s->tls);
		pthread_mutex_destroy(&s->cfg_lock);
		emdb_free(s);
		return -1;
	}
	auth_limit_init(&s->auth);
	*out = s;
	return 0;
}

/* ---- accepting ------------------------------------------------------ */

/* Close fd, first telling a plain client why (a TLS client would take the
 * frame for a broken handshake: it just sees the connection close). */
static void refuse(int fd, bool tls, int status, const char *msg)
{
	uint8_t buf[256];
	size_t len;
	if (!tls && proto_err_encode(buf, sizeof(buf), 0, PROTO_OP_NONE, status, msg, &len) == EMDB_OK) {
		ssize_t w = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		(void)w; /* best effort: the connection is going anyway */
	}
	close(fd);
}

/* unix_send_buffer on a Unix-socket connection (TCP sizes its own).  The
 * kernel caps the request at net.core.wmem_max and reports twice what
 * it granted; a cap is logged once. */
static void size_send_buffer(server *s, int fd)
{
	int domain = 0, want = s->unix_sndbuf, got = 0;
	socklen_t len = sizeof(domain);
	if (!want || getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 || domain != AF_UNIX)
		return;
	len = sizeof(got);
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &want, sizeof(want)) != 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &got, &len) != 0)
		return;
	if (got / 2 < want && !atomic_exchange(&s->sndbuf_capped, true))
		log_warn("unix_send_buffer %d: the kernel grants %d bytes (raise net.core.wmem_max)",
			 want, got / 2);
}

/* fd's address family (AF_UNIX, AF_INET, ...), -1 if it cannot be told. */
static int sock_domain(int fd)
{
	int domain = -1;
	socklen_t len = sizeof(domain);
	return getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 ? domain : -1;
}

void server_conn_gone(server *s, bool unix_sock)
{
	atomic_fetch_sub(unix_sock ? &s->n_unix_conns : &s->n_conns, 1);
}

static void on_accept(void *arg, int fd, bool loopback, const char *peer)
{
	server *s = arg;
	int domain = sock_domain(fd);
	bool unix_sock = domain == AF_UNIX;
	/* a TCP connection on a server with TLS must speak it */
	bool tls = s->tls && domain >= 0 && !unix_sock;
	if (atomic_load(&s->shutting_down)) {
		close(fd);
		return;
	}
	_Atomic uint64_t *count = unix_sock ? &s->n_unix_conns : &s->n_conns;
	uint64_t max = atomic_load(unix_sock ? &s->rt.max_unix_connections : &s->rt.max_connections);
	if (atomic_fetch_add(count, 1) >= max) {
		const char *key = unix_sock ? "max_unix_connections" : "max_connections";
		char msg[96];
		atomic_fetch_sub(count, 1);
		atomic_fetch_add(&s->conns_rejected, 1);
		log_warn("refusing %s: %s (%llu) reached", peer, key, (unsigned long long)max);
		snprintf(msg, sizeof(msg), "too many connections (%s)", key);
		refuse(fd, tls, EMDB_ERR_LIMIT, msg);
		return;
	}
	atomic_fetch_add(&s->conns_total, 1);
	size_send_buffer(s, fd);
	new_conn nc = { .fd = fd, .loopback = loopback, .tls = tls, .unix_sock = unix_sock };
	snprintf(nc.peer, sizeof(nc.peer), "%s", peer);
	io_thread *t = &s->threads[s->rr++ % s->n_threads];
	if (io_thread_post_conn(t, &nc) < 0) {
		server_conn_gone(s, unix_sock);
		refuse(fd, tls, EMDB_ERR_NOMEM, "server out of memory");
	}
}

/* ---- shutdown ------------------------------------------------------- */

void server_request_shutdown(server *s, const char *reason)
{
	bool was = atomic_exchange(&s->shutting_down, true);
	if (!was) {
		snprintf(s->shutdown_reason, sizeof(s->shutdown_reason), "%s", reason);
		uint64_t one = 1;
		ssize_t w = write(s->wake_fd, &one, sizeof(one));
		(void)w;
	} else {
		log_info("shutdown already in progress (%s)", reason);
	}
}

/* Every STEP_TICK_MS: the synchronous steps past update_barrier_timeout_ms
 * fail (TIMEOUT for all, nothing applied), answered through their
 * connections' threads. */
static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	server *s = arg;
	(void)fd;
	(void)what;
	step_expire(s->steps, stats_now_ns(), EMDB_ERR_TIMEOUT, "within update_barrier_timeout_ms");
	if (s->cluster) {
		cluster_tick(s->cluster, emdb__now_ns());
		server_cluster_tick(s);
	}
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
	server *s = arg;
	uint64_t v;
	ssize_t r = read(fd, &v, sizeof(v));
	(void)r;
	if (atomic_load(&s->shutting_down))
		event_base_loopbreak(s->base);
}

/* Load cfg's TLS files into the context new connections get, and log it
 * for `who`.  Called with cfg_lock held, by SIGHUP and by CONFIG SET
 * alike: the two never interleave, so the context in use is always that
 * of the paths in cfg.  Returns 0, or -1 with the reason in err and the
 * context unchanged. */
static int reload_tls_locked(server *s, const net_config *cfg, const char *who, char *err, size_t errlen)
{
	if (tls_server_reload(s->tls, cfg, err, errlen) < 0)
		return -1;
	char line[TLS_DESCRIBE_MAX];
	tls_server_describe(s->tls, line, sizeof(line));
	log_info("%s: TLS reloaded for new connections: %s", who, line);
	return 0;
}

/* SIGHUP: read the TLS files again (docs/server.md, "TLS"). */
static void reload_tls(server *s)
{
	if (!s->tls) {
		log_info("SIGHUP: no TLS configured, nothing to reload");
		return;
	}
	char err[CONFIG_PATH_MAX * 2];
	pthread_mutex_lock(&s->cfg_lock);
	int rc = reload_tls_locked(s, &s->cfg, "SIGHUP", err, sizeof(err));
	pthread_mutex_unlock(&s->cfg_lock);
	if (rc < 0)
		log_error("SIGHUP: TLS reload failed, the old certificates stay in use: %s", err);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	server *s = arg;
	char why[32];
	if (sig == SIGHUP) {
		reload_tls(s);
		return;
	}
	snprintf(why, sizeof(why), "%s", sig == SIGTERM ? "SIGTERM" : "SIGINT");
	server_request_shutdown(s, why);
}

/* ---- start and run -------------------------------------------------- */

static int write_port_file(const char *path, uint16_t port)
{
	char tmp[CONFIG_PATH_MAX + 16];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (!f)
		return -1;
	fprintf(f, "%u\n", port);
	if (fclose(f) != 0 || rename(tmp, path) != 0) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

static io_backend_kind pick_backend(server *s)
{
	if (s->cfg.io_backend != IO_BACKEND_URING)
		return IO_BACKEND_LIBEVENT;
	/* One probe ring, so that an unavailable io_uring costs one log line,
	 * not one per thread. */
	io_thread probe;
	int rc = 0;
	memset(&probe, 0, sizeof(probe));
	probe.srv = s;
	probe.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (probe.wake_fd < 0)
		rc = -errno;
	if (rc == 0)
		rc = io_backend_uring.init(&probe);
	if (rc == 0)
		io_backend_uring.destroy(&probe);
	if (probe.wake_fd >= 0)
		close(probe.wake_fd);
	if (rc < 0) {
		log_warn("io_backend uring: io_uring is not available here (%s): using libevent",
			 strerror(-rc));
		return IO_BACKEND_LIBEVENT;
	}
	return IO_BACKEND_URING;
}

int server_start(server *s)
{
	char err[512];
	net_config *c = &s->cfg;

	s->base = event_base_new();
	s->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!s->base || s->wake_fd < 0) {
		log_error("cannot create the main event loop");
		return -1;
	}
	s->ev_wake = event_new(s->base, s->wake_fd, EV_READ | EV_PERSIST, on_wake, s);
	s->ev_sigterm = evsignal_new(s->base, SIGTERM, on_signal, s);
	s->ev_sigint = evsignal_new(s->base, SIGINT, on_signal, s);
	s->ev_sighup = evsignal_new(s->base, SIGHUP, on_signal, s);
	s->ev_tick = event_new(s->base, -1, EV_PERSIST, on_tick, s);
	struct timeval tick = { 0, STEP_TICK_MS * 1000 };
	if (!s->ev_wake || !s->ev_sigterm || !s->ev_sigint || !s->ev_sighup || !s->ev_tick ||
	    event_add(s->ev_wake, NULL) || event_add(s->ev_sigterm, NULL) || event_add(s->ev_sigint, NULL) ||
	    event_add(s->ev_sighup, NULL) || event_add(s->ev_tick, &tick)) {
		log_error("cannot set up signal handling");
		return -1;
	}

	/* I/O threads first (they inherit a mask without SIGTERM/SIGINT/SIGHUP,
	 * so the signals reach the main thread), then the listeners. */
	uint32_t n = c->io_threads;
	if (n == 0) {
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		n = cpus > 0 ? (uint32_t)cpus : 1;
	}
	s->backend = pick_backend(s);
	s->threads = emdb_calloc(n, sizeof(*s->threads));
	if (!s->threads) {
		log_error("out of memory for %u I/O threads", n);
		return -1;
	}
	bool any_uring = false;
	for (uint32_t i = 0; i < n; i++) {
		int rc = io_thread_init(&s->threads[i], s, i, s->backend);
		if (rc < 0) {
			log_error("io thread %u: %s", i, strerror(-rc));
			for (uint32_t j = 0; j < i; j++)
				io_thread_cleanup(&s->threads[j]);
			emdb_free(s->threads);
			s->threads = NULL;
			return -1;
		}
		any_uring |= s->threads[i].be == &io_backend_uring;
	}
	s->n_threads = n;
	if (s->backend == IO_BACKEND_URING && !any_uring)
		s->backend = IO_BACKEND_LIBEVENT;

	sigset_t block, old;
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	for (uint32_t i = 0; i < n; i++) {
		int rc = io_thread_start(&s->threads[i]);
		if (rc < 0) {
			log_error("cannot start io thread %u: %s", i, strerror(-rc));
			pthread_sigmask(SIG_SETMASK, &old, NULL);
			/* the ones started stop through a drain */
			for (uint32_t j = 0; j < i; j++) {
				io_thread_drain(&s->threads[j]);
				io_thread_join(&s->threads[j]);
			}
			for (uint32_t j = i; j < n; j++)
				io_thread_cleanup(&s->threads[j]);
			emdb_free(s->threads);
			s->threads = NULL;
			s->n_threads = 0;
			return -1;
		}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	s->threads_started = true;

	if (c->huge_pages != EMDB_HUGE_OFF) {
		long free_pages = emdb_alloc_pool_free();
		if (free_pages > 0)
			log_info("huge_pages %s: the kernel's pool has %ld of %ld huge pages free",
				 emdb_huge_pages_name((emdb_huge_pages)c->huge_pages), free_pages,
				 emdb_alloc_pool_total());
		else
			log_warn("huge_pages %s: the kernel's huge page pool is empty (sysctl vm.nr_hugepages)%s",
				 emdb_huge_pages_name((emdb_huge_pages)c->huge_pages),
				 c->huge_pages == EMDB_HUGE_ON ? ": every table's memory will fail with NOMEM"
							       : ": ordinary memory is used");
	}
	if (c->gpu_memory) {
		char why[200];
		if (emdb_gpu_available(why, sizeof(why)))
			log_info("gpu: each table keeps its most prefetched rows in up to %" PRIu64
				 " bytes of GPU memory too", c->gpu_memory);
		else
			log_warn("gpu: %s: tables stay in host memory (gpu_memory ignored)", why);
	}
	/* A node of a cluster opens its listeners only once every node is
	 * reachable and agrees (net/server_cluster.h). */
	if (server_cluster_wait(s) < 0)
		return -1;
	if (c->bind[0]) {
		if (listener_open_tcp(s->base, c->bind, (uint16_t)c->port, (int)c->backlog, on_accept, s,
				      &s->tcp, &s->tcp_port, err, sizeof(err)) < 0) {
			log_error("%s", err);
			return -1;
		}
		log_info("listening on tcp %s:%u%s", c->bind, s->tcp_port, s->tls ? " (TLS only)" : "");
		if (s->tls) {
			char line[TLS_DESCRIBE_MAX];
			tls_server_describe(s->tls, line, sizeof(line));
			log_info("TLS: %s", line);
		}
	}
	if (c->unix_socket[0]) {
		if (listener_open_unix(s->base, c->unix_socket, (int)c->backlog, on_accept, s,
				       &s->unix_l, err, sizeof(err)) < 0) {
			log_error("%s", err);
			return -1;
		}
		log_info("listening on unix %s", c->unix_socket);
	}
	/* After the I/O threads, whose counters it reads; it stops before
	 * they drain (server_run), so before the store and the engine close. */
	if (metrics_start(s, &s->metrics, err, sizeof(err)) < 0) {
		log_error("%s", err);
		return -1;
	}
	if (c->port_file[0] && c->bind[0] && write_port_file(c->port_file, s->tcp_port) < 0) {
		log_error("cannot write the port file %s: %s", c->port_file, strerror(errno));
		return -1;
	}
	log_info("emdb server ready: %u io threads on %s, max_connections %u, max_frame %llu, max_memory %llu%s",
		 n, s->backend == IO_BACKEND_URING ? "io_uring" : "libevent", c->max_connections,
		 (unsigned long long)c->max_frame, (unsigned long long)c->max_memory,
		 c->max_memory ? "" : " (unlimited)");
	if (!s->auth_required)
		log_warn("no auth token configured: loopback and Unix-socket clients get the admin role, all other clients are refused");
	return 0;
}

/* Drain every I/O thread, wait for all, then free their state: one may
 * post a completion to another until it ends (net/loop.h). */
static void stop_threads(server *s)
{
	for (uint32_t i = 0; i < s->n_threads; i++)
		io_thread_drain(&s->threads[i]);
	for (uint32_t i = 0; i < s->n_threads; i++)
		io_thread_wait(&s->threads[i]);
	handle_reserve_wait_all(s); /* they post to the threads' mailboxes */
	for (uint32_t i = 0; i < s->n_threads; i++)
		io_thread_cleanup(&s->threads[i]);
	s->threads_started = false;
}

int server_run(server *s)
{
	if (!atomic_load(&s->shutting_down))
		event_base_dispatch(s->base);
	log_info("shutting down (%s): draining %u io threads, up to %llu ms",
		 s->shutdown_reason[0] ? s->shutdown_reason : "requested", s->n_threads,
		 (unsigned long long)atomic_load(&s->rt.drain_timeout_ms));
	listener_close(s->tcp);
	listener_close(s->unix_l);
	s->tcp = s->unix_l = NULL;
	metrics_stop(s->metrics);
	s->metrics = NULL;
	/* Before the drain, so that the answers are queued ahead of it. */
	step_close(s->steps, EMDB_ERR_CLOSED, "before the server shut down", "the server is shutting down");
	stop_threads(s);
	log_info("all connections closed");
	return 0;
}

void server_destroy(server *s)
{
	if (!s)
		return;
	listener_close(s->tcp);
	listener_close(s->unix_l);
	metrics_stop(s->metrics); /* it reads the threads, the store and the engine */
	if (s->threads_started)
		stop_threads(s);
	server_cluster_close(s); /* after the threads that may call through it */
	step_barrier_destroy(s->steps);
	auth_limit_destroy(&s->auth);
	emdb_free(s->threads);
	if (s->ev_wake)
		event_free(s->ev_wake);
	if (s->ev_tick)
		event_free(s->ev_tick);
	if (s->ev_sigterm)
		event_free(s->ev_sigterm);
	if (s->ev_sigint)
		event_free(s->ev_sigint);
	if (s->ev_sighup)
		event_free(s->ev_sighup);
	if (s->base)
		event_base_free(s->base);
	if (s->wake_fd >= 0)
		close(s->wake_fd);
	ckpts_close(s->ckpts); /* before the engine it checkpoints */
	emdb_db_close(s->db);
	tls_server_free(s->tls);
	pthread_mutex_destroy(&s->cfg_lock);
	pthread_cond_destroy(&s->bg_idle);
	pthread_mutex_destroy(&s->bg_lock);
	emdb_free(s);
}

/* ---- configuration at run time -------------------------------------- */

/* A CONFIG SET that names a tls_* key: load next's files into the context
 * in use, or refuse.  Called with cfg_lock held. */
static int retls_locked(server *s, const net_config *next, char *err, size_t errlen)
{
	if (!s->tls) {
		snprintf(err, errlen, "TLS is off in this server and cannot be turned on while it runs: "
				      "set tls_cert_file and tls_key_file in its configuration and restart it");
		return -1;
	}
	if (!next->tls_cert_file[0]) {
		snprintf(err, errlen, "TLS cannot be turned off while the server runs");
		return -1;
	}
	return reload_tls_locked(s, next, "CONFIG SET", err, errlen);
}

int server_config_set_many(server *s, size_t n, const char *const *keys, const char *const *vals, char *err,
			   size_t errlen)
{
	bool tls = false;
	int rc = 0;
	pthread_mutex_lock(&s->cfg_lock);
	net_config next = s->cfg;
	for (size_t i = 0; i < n && rc == 0; i++) {
		rc = config_set(&next, keys[i], vals[i], true, err, errlen);
		tls |= strncmp(keys[i], "tls_", 4) == 0;
	}
	if (rc == 0)
		rc = config_validate(&next, err, errlen);
	/* Last, as it is the one step with an effect outside cfg: nothing can
	 * fail after it. */
	if (rc == 0 && tls)
		rc = retls_locked(s, &next, err, errlen);
	if (rc == 0) {
		s->cfg = next;
		publish_runtime(s);
	}
	pthread_mutex_unlock(&s->cfg_lock);
	return rc;
}

int server_config_set(server *s, const char *key, const char *val, char *err, size_t errlen)
{
	return server_config_set_many(s, 1, &key, &val, err, errlen);
}

int server_config_get(server *s, const char *key, char *buf, size_t len)
{
	pthread_mutex_lock(&s->cfg_lock);
	int rc = config_get(&s->cfg, key, buf, len);
	pthread_mutex_unlock(&s->cfg_lock);
	return rc;
}

void server_config_copy(server *s, net_config *out)
{
	pthread_mutex_lock(&s->cfg_lock);
	*out = s->cfg;
	pthread_mutex_unlock(&s->cfg_lock);
}

/* ---- tokens --------------------------------------------------------- */

static bool token_eq(const char *want, const char *got, size_t len)
{
	size_t wl = strlen(want);
	if (!wl)
		return false;
	unsigned char diff = (unsigned char)(wl != len);
	for (size_t i = 0; i < len; i++)
		diff |= (unsigned char)(got[i] ^ want[i < wl ? i : 0]);
	return diff == 0;
}

int server_token_role(server *s, const char *token, size_t len)
{
	/* Every comparison runs whatever the result, so timing says
	 * nothing about which token was close. */
	pthread_mutex_lock(&s->cfg_lock);
	bool admin = token_eq(s->cfg.admin_token, token, len);
	bool trainer = token_eq(s->cfg.trainer_token, token, len);
	bool reader = token_eq(s->cfg.reader_token, token, len);
	pthread_mutex_unlock(&s->cfg_lock);
	if (admin)
		return PROTO_ROLE_ADMIN;
	if (trainer)
		return PROTO_ROLE_TRAINER;
	if (reader)
		return PROTO_ROLE_READER;
	return PROTO_ROLE_NONE;
}
