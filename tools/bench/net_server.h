/*
 * net_server.h - the servers emdb-bench's network mode measures: an
 * emdb-server and a redis-server, started as child processes that listen
 * on loopback (an ephemeral port) or on a Unix socket in a fresh temporary
 * directory, and killed on every way out of the bench.
 */
#ifndef EMDB_BENCH_NET_SERVER_H
#define EMDB_BENCH_NET_SERVER_H

#include <stdint.h>
#include <sys/types.h>

#include "tools/bench/net_sock.h"

#define NET_CLUSTER_MAX 4 /* nodes of a cluster on this machine */

typedef struct net_server {
	pid_t pid;
	net_transport tr;
	int tls;
	const char *log;      /* emdb: its log file, removed at exit */
	const char *portfile;
	uint16_t port;      /* TCP: the port it listens on; 0 on Unix */
	char sock[160];     /* Unix: the socket path; "" on TCP */
	char uri[256];      /* emdb: the client URI */
} net_server;

/* Make the temporary directory and install the atexit and signal
 * handlers that kill every started server and remove the directory.
 * Call once, before starting any server. */
void net_servers_init(void);

/* The temporary directory ("/tmp/emdb-bench-XXXXXX"). */
const char *net_servers_dir(void);

/* The path of file `name` in that directory, registered for removal at
 * exit (a file written there that is not registered would keep the
 * directory).  Valid until exit. */
const char *net_servers_file(const char *name);

/* Start emdb-server (EMDB_SERVER_BIN) with I/O backend `backend`
 * ("libevent" or "uring") on transport tr and wait until it accepts
 * connections.  With tls (TCP only) the server presents the certificate
 * of net_tls_make_cert in net_servers_dir() and s->uri is tls://, trusting
 * it.  Servers of different backends, or with and without TLS, may run
 * side by side.  Exits the process on failure. */
void net_server_start_emdb(net_server *s, net_transport tr, const char *backend, int tls);

/* Start an n-node cluster of emdb-servers (1..NET_CLUSTER_MAX): a cluster
 * file of free loopback ports and a secret file in net_servers_dir(), node
 * i in s[i], each listening for clients on tr, with the extra arguments
 * (NULL-terminated, may be NULL, at most 9); wait until every node is
 * ready (a node opens its client listener only once the cluster formed).
 * UCX reads the bench's environment (UCX_TLS ...), which the nodes
 * inherit.  Exits the process on failure. */
void net_server_start_cluster(net_server *s, int n, net_transport tr, const char *const *extra);

/* Start redis-server (NET_REDIS_BIN) without persistence on transport tr.
 * Returns 0, or -1 when the binary is missing (the anchor is skipped). */
int net_server_start_redis(net_server *s, net_transport tr);

/* Kill and reap the server.  Idempotent. */
void net_server_stop(net_server *s);

/* Kill pid with the servers on every way out (exit, SIGINT ...): a child
 * started elsewhere, such as the bare UCX group's (tools/linkbench/
 * ucx_group.h).  net_servers_release it before reaping it yourself. */
void net_servers_adopt(pid_t pid);
void net_servers_release(pid_t pid);

#define NET_REDIS_BIN "/usr/bin/redis-server"

#endif
