/*
 * net/server.h - the emdb server process: configuration, the engine, the
 * listeners, the I/O threads, and the orderly shutdown.
 *
 * Life cycle (main thread):
 *   server_create(cfg)  opens the engine, applies the memory limit, opens
 *                       the checkpoint store and restores from it when
 *                       asked (net/checkpoint.h), starts the job thread;
 *   server_start        starts the I/O threads, waits for the cluster to
 *                       form (a node of one: net/server_cluster.h), binds
 *                       the listeners, writes the port file;
 *   server_run          accepts connections and hands them to the I/O
 *                       threads round robin, until SIGTERM/SIGINT or a
 *                       SHUTDOWN request; then stops accepting, drains the
 *                       threads (requests received are answered, replies
 *                       flushed, within drain_timeout_ms) and joins them;
 *   server_destroy      waits for a running checkpoint job, closes the
 *                       store, closes the engine, removes the Unix socket.
 *
 * Threads: the main thread accepts and handles signals; each I/O thread
 * serves its own connections and calls the engine directly.  The fields
 * below marked "any thread" may be read from I/O threads; the rest belong
 * to the main thread.
 */
#ifndef EMDB_NET_SERVER_H
#define EMDB_NET_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <emdb/db.h>

#include "net/auth_limit.h"
#include "net/config.h"
#include "db/step.h"
#include "net/loop.h"
#include "net/checkpoint.h"

#define EMDB_SERVER_NAME "emdb 0.1.0"
#define STEP_TICK_MS 100 /* how late a synchronous step's timeout may act */

/* Run-time settable values, published for the I/O threads (any thread,
 * relaxed loads; CONFIG SET stores). */
typedef struct server_runtime {
	_Atomic uint64_t max_connections;
	_Atomic uint64_t max_unix_connections;
	_Atomic uint64_t max_frame;
	_Atomic uint64_t output_buffer_limit;
	_Atomic uint64_t max_tickets;
	_Atomic uint64_t drain_timeout_ms;
	_Atomic uint64_t handshake_timeout_ms;
	_Atomic uint64_t idle_timeout_s;
	_Atomic uint64_t busy_poll_us;
	_Atomic uint64_t update_barrier_timeout_ms;
	_Atomic uint64_t auth_fail_burst;
	_Atomic uint64_t auth_fail_window_ms;
} server_runtime;

typedef struct listener listener;
typedef struct conn_handler conn_handler;

struct server {
	/* any thread */
	emdb_db *db;
	ckpts *ckpts;              /* never NULL once created (off without data_dir) */
	server_runtime rt;
	uint32_t max_batch;        /* fixed at start */
	int unix_sndbuf;           /* unix_send_buffer, fixed at start: read
				      by the acceptor without cfg_lock */
	bool auth_required;        /* some token is configured */
	struct tls_server *tls;    /* TLS on TCP connections (net/tls.h); NULL: plain */
	const conn_handler *handler; /* runs the connections' frames (net/conn.h) */
	uint64_t start_ns;         /* stats_now_ns() at start */
	io_backend_kind backend;   /* what the threads actually run */
	uint16_t tcp_port;         /* bound port, 0 if no TCP */
	io_thread *threads;
	uint32_t n_threads;
	_Atomic uint64_t n_conns;  /* TCP: accepted and not yet destroyed */
	_Atomic uint64_t n_unix_conns; /* the same on the Unix socket */
	_Atomic uint64_t conns_total, conns_rejected, next_conn_id;
	_Atomic bool shutting_down;
	_Atomic bool sndbuf_capped; /* the unix_send_buffer cap was logged */
	step_barrier *steps;       /* synchronous steps of UPDATE (db/step.h) */
	struct node_link *link;    /* this node's link to the others
				      (net/server_cluster.h); NULL: one node */
	struct cluster *cluster;   /* this node's cluster layer (cluster/cluster.h),
				      set before the threads start; NULL on a
				      server alone (net/handle_cluster.c) */
	struct server_cckpt *cckpt; /* cluster checkpoints (net/cluster_ckpt.h);
				      NULL: this node checkpoints itself only */
	uint64_t *peer_connects;   /* [nodes]: each peer's handshakes seen by
				      server_cluster_tick (main thread) */
	auth_limit auth;           /* failed AUTH per peer address */
	pthread_mutex_t bg_lock;   /* guards bg_running */
	pthread_cond_t bg_idle;    /* signalled when bg_running drops to 0 */
	uint32_t bg_running;       /* TABLE_RESERVE threads (net/handle_reserve.c) */

	/* behind cfg_lock, any thread */
	pthread_mutex_t cfg_lock;
	net_config cfg;

	/* main thread */
	struct event_base *base;
	listener *tcp, *unix_l;
	struct metrics *metrics;   /* GET /metrics (net/metrics.h); NULL: off */
	struct event *ev_sigterm, *ev_sigint, *ev_sighup, *ev_wake;
	struct event *ev_tick;     /* every STEP_TICK_MS: steps past their deadline */
	int wake_fd;               /* eventfd: shutdown requests from I/O threads */
	uint32_t rr;               /* next thread for round robin */
	bool threads_started;
	char shutdown_reason[128];
};

typedef struct server server;

/* Open the engine and prepare (no socket yet).  Returns 0, or -1 with a
 * message in err.  *out is freed with server_destroy. */
int server_create(const net_config *cfg, server **out, char *err, size_t errlen);
/* Bind, write the port file, start the threads.  Returns 0 or -1 (logged). */
int server_start(server *s);
/* Serve until shutdown, then drain and join the I/O threads.  Returns the
 * process exit status (0 after a clean drain). */
int server_run(server *s);
void server_destroy(server *s);

/* Ask for an orderly shutdown (any thread, async-signal-safe apart from
 * the reason copy).  The first reason is kept for the log. */
void server_request_shutdown(server *s, const char *reason);

/* CONFIG GET/SET from any thread.  server_config_set checks the key is
 * settable at run time, validates, applies it (memory limit, log level,
 * the published runtime values) and returns 0, or -1 with a message. */
int server_config_set(server *s, const char *key, const char *val, char *err, size_t errlen);
/* keys[i] = vals[i] for i < n, all or none: every pair is checked, then
 * the whole configuration validated, then, when a tls_* key is among them,
 * the TLS files loaded (for connections accepted from then on); the first
 * refusal returns -1 with its message and changes nothing.  TLS cannot be
 * turned on or off while the server runs. */
int server_config_set_many(server *s, size_t n, const char *const *keys, const char *const *vals, char *err,
			   size_t errlen);
int server_config_get(server *s, const char *key, char *buf, size_t len);
/* A copy of the current configuration. */
void server_config_copy(server *s, net_config *out);

/* A connection counted in on_accept is gone (destroyed, or closed
 * unserved): give its slot back (any thread). */
void server_conn_gone(server *s, bool unix_sock);

/* The role a token grants, PROTO_ROLE_NONE when it matches none
 * (constant-time comparisons). */
int server_token_role(server *s, const char *token, size_t len);

#endif
