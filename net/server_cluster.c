/*
 * server_cluster.c - emdb-server's side of the cluster: loading the
 * cluster file and the secret, the node link's life in the server, and the
 * wait for the cluster to form (net/server_cluster.h).
 *
 * Invariants:
 *   1. The secret is read once, kept only inside the link, and wiped from
 *      this file's buffers before they are released.
 *   2. server_cluster_wait returns only when the link is ready, a peer
 *      disagreed, cluster_start_timeout_ms passed, or a signal asked for
 *      shutdown: forming never hangs the start.
 *
 * State changes: s->link (server_cluster_open, server_cluster_close).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <event2/event.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "base/clock.h"
#include "cluster/cluster.h"
#include "net/cluster_ckpt.h"
#include "net/cluster_conf.h"
#include "net/log.h"
#include "net/node_link.h"
#include "net/server.h"
#include "net/server_cluster.h"

#define SECRET_MIN 16

static void link_log(void *arg, int level, const char *msg)
{
	(void)arg;
	log_msg((log_level)level, "%s", msg);
}

/* The first line of path, without its newline, into buf.  Returns its
 * length, or -1 with the reason in err. */
static int read_secret(const char *path, char *buf, size_t cap, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(err, errlen, "cluster_secret_file %s: %s", path, strerror(errno));
		return -1;
	}
	struct stat st;
	if (fstat(fileno(f), &st) == 0 && (st.st_mode & 0077))
		log_warn("cluster_secret_file %s can be read by other users (mode %03o): chmod 600 it", path,
			 (unsigned)(st.st_mode & 0777));
	int n = -1;
	if (!fgets(buf, (int)cap, f)) {
		snprintf(err, errlen, "cluster_secret_file %s is empty", path);
	} else {
		size_t len = strcspn(buf, "\r\n");
		buf[len] = '\0';
		if (len < SECRET_MIN)
			snprintf(err, errlen, "cluster_secret_file %s: the secret must be at least %d bytes", path,
				 SECRET_MIN);
		else if (len >= cap - 1)
			snprintf(err, errlen, "cluster_secret_file %s: the secret is longer than %zu bytes", path,
				 cap - 2);
		else
			n = (int)len;
	}
	fclose(f);
	return n;
}

int server_cluster_open(server *s, char *err, size_t errlen)
{
	const net_config *c = &s->cfg;
	if (!c->cluster_file[0])
		return 0;
	cluster_conf conf;
	if (cluster_conf_load(c->cluster_file, &conf, err, errlen) < 0)
		return -1;
	if (c->cluster_rank >= conf.nodes) {
		snprintf(err, errlen, "cluster_rank %u is not in %s (ranks 0..%u)", c->cluster_rank, c->cluster_file,
			 conf.nodes - 1);
		cluster_conf_free(&conf);
		return -1;
	}
	/* A cluster checkpoint's restore, before the link exists (no peer or
	 * client sees this node half restored). */
	if (cckpt_restore_at_start(s, &conf, err, errlen) != EMDB_OK) {
		cluster_conf_free(&conf);
		return -1;
	}
	char secret[NODE_LINK_SECRET_MAX + 2];
	int n = read_secret(c->cluster_secret_file, secret, sizeof(secret), err, errlen);
	if (n < 0) {
		cluster_conf_free(&conf);
		return -1;
	}
	node_link_config lc = NODE_LINK_CONFIG_INIT;
	lc.conf = &conf;
	lc.rank = c->cluster_rank;
	lc.secret = (const uint8_t *)secret;
	lc.secret_len = (size_t)n;
	lc.node_timeout_ms = c->node_timeout_ms;
	lc.busy_poll = c->cluster_busy_poll != 0;
	lc.log = link_log;
	int rc = node_link_create(&lc, &s->link, err, errlen);
	memset(secret, 0, sizeof(secret));
	uint32_t partitions = conf.partitions;
	if (rc != EMDB_OK) {
		cluster_conf_free(&conf);
		return -1;
	}
	/* The cluster layer over the link, serving the peers' requests from
	 * now on (before: BUSY); the handlers route through it (s->cluster). */
	cluster_link cl;
	node_link_as_cluster_link(s->link, &cl);
	int crc = cluster_open(s->db, &cl, partitions, &s->cluster);
	if (crc == EMDB_OK) /* the owners' engine calls on their own threads */
		crc = cluster_set_serve_threads(s->cluster, c->cluster_serve_threads);
	if (crc != EMDB_OK || cckpt_attach(s, &conf, err, errlen) != EMDB_OK) {
		if (crc != EMDB_OK)
			snprintf(err, errlen, "the cluster layer: %s", emdb_last_error());
		cluster_conf_free(&conf);
		cluster_close(s->cluster);
		s->cluster = NULL;
		node_link_destroy(s->link);
		s->link = NULL;
		return -1;
	}
	cluster_conf_free(&conf);
	node_link_serve(s->link, cluster_serve, s->cluster);
	s->peer_connects = emdb_calloc(node_link_nodes(s->link), sizeof(*s->peer_connects));
	return 0;
}

void server_cluster_tick(server *s)
{
	if (!s->link || !s->cluster || !s->peer_connects)
		return;
	for (uint32_t r = 0; r < node_link_nodes(s->link); r++) {
		node_peer_info pi;
		node_link_peer(s->link, r, &pi);
		if (pi.connects > s->peer_connects[r] && s->peer_connects[r])
			cluster_peer_lost(s->cluster, r); /* a new process: its old tickets are gone */
		s->peer_connects[r] = pi.connects;
	}
}

/* A node that found a disagreement stays LINGER_MS more, answering
 * handshakes, so that the nodes still retrying towards it (their backoff
 * reaches 1 s) find it too and stop with the reason rather than a
 * timeout.  SIGTERM/SIGINT cut it short. */
#define LINGER_MS 2500
#define NOTE_EVERY_NS (5ull * 1000000000ull) /* "still forming" in the log */

static void linger(server *s)
{
	uint64_t until = emdb__now_ns() + LINGER_MS * 1000000ull;
	while (emdb__now_ns() < until && !atomic_load(&s->shutting_down)) {
		event_base_loop(s->base, EVLOOP_NONBLOCK);
		struct timespec ts = { 0, 50 * 1000000L };
		nanosleep(&ts, NULL);
	}
}

int server_cluster_wait(server *s)
{
	if (!s->link)
		return 0;
	const cluster_conf *cc = node_link_conf(s->link);
	uint32_t limit = s->cfg.cluster_start_timeout_ms;
	uint64_t until = emdb__now_ns() + (uint64_t)limit * 1000000ull;
	char err[512];
	log_info("forming cluster '%s': rank %u of %u, waiting up to %u ms for every node", cc->id,
		 node_link_rank(s->link), cc->nodes, limit);
	uint64_t next_note = emdb__now_ns() + NOTE_EVERY_NS;
	for (;;) {
		/* SIGTERM/SIGINT are libevent's: let them in. */
		event_base_loop(s->base, EVLOOP_NONBLOCK);
		if (atomic_load(&s->shutting_down)) {
			log_error("cluster '%s' not formed: %s", cc->id,
				  s->shutdown_reason[0] ? s->shutdown_reason : "shutdown requested");
			return -1;
		}
		int rc = node_link_wait_ready(s->link, 100, err, sizeof(err));
		if (rc == EMDB_OK)
			return 0;
		if (rc == EMDB_ERR_NODE) {
			log_error("cannot form cluster '%s': %s", cc->id, err);
			linger(s);
			return -1;
		}
		if (emdb__now_ns() >= next_note) {
			log_info("cluster '%s' still forming: %s", cc->id, err);
			next_note += NOTE_EVERY_NS;
		}
		if (emdb__now_ns() >= until) {
			log_error("cluster '%s' did not form within %u ms (cluster_start_timeout_ms): %s", cc->id, limit,
				  err);
			return -1;
		}
	}
}

void server_cluster_close(server *s)
{
	if (s->link)
		node_link_serve(s->link, NULL, NULL);
	cckpt_detach(s); /* a part job ending later reaches no cluster */
	cluster_drain(s->cluster); /* waiting steps answered before the link goes */
	node_link_destroy(s->link);
	s->link = NULL;
	cluster_close(s->cluster);
	s->cluster = NULL;
	emdb_free(s->peer_connects);
	s->peer_connects = NULL;
}
