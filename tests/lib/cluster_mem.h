/*
 * tests/lib/cluster_mem.h - a cluster of N nodes in one process, for the
 * cluster layer's tests: N engines, each with its cluster layer
 * (cluster/cluster.h), joined by an in-process cluster_link (cluster/link.h)
 * whose one thread plays the network: it delivers each request frame to its
 * node's cluster_serve and each reply to its caller's done(), in order.
 *
 * The link copies every frame, as a transport does, counts calls and
 * bytes (requests and replies) per (from, to), and can take a node down: calls to it then end with
 * EMDB_ERR_NODE and a message naming it, and a node that is down answers
 * nothing (as a SIGKILLed process), so its callers end with NODE too.
 *
 * Each node serves on the link's thread, or on EMDB_TEST_SERVE_THREADS
 * serve threads (cluster_set_serve_threads) when that is set.
 *
 * Header only; one memnet per test.  memnet_close waits for the link's
 * queue and the nodes' serve threads to empty, stops its thread, closes every node.
 */
#ifndef EMDB_TESTS_CLUSTER_MEM_H
#define EMDB_TESTS_CLUSTER_MEM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/db.h>
#include <emdb/error.h>

#include "base/error_int.h"
#include "cluster/cluster.h"

#define MEMNET_MAX 4

typedef struct memnet memnet;

typedef struct memnet_ev {
	struct memnet_ev *next;
	enum { MEMNET_REQ, MEMNET_REP, MEMNET_FN } kind;
	uint32_t from, to;
	uint8_t *frame;
	size_t len;
	cluster_call *call;
	void (*fn)(void *);
	void *arg;
} memnet_ev;

struct cluster_responder {
	memnet *net;
	cluster_call *call;
	uint32_t from, to;
};

typedef struct memnode {
	memnet *net;
	uint32_t rank;
	emdb_db *db;
	cluster *cl;
} memnode;

struct memnet {
	uint32_t nodes;
	memnode node[MEMNET_MAX];
	cluster_link link[MEMNET_MAX];
	pthread_t thr;
	pthread_mutex_t mu;
	pthread_cond_t cv, idle;
	memnet_ev *head, *tail;
	bool stop, busy;
	_Atomic bool down[MEMNET_MAX];
	_Atomic uint64_t calls[MEMNET_MAX][MEMNET_MAX];
	_Atomic uint64_t bytes[MEMNET_MAX][MEMNET_MAX];
};

static inline void memnet_push(memnet *net, memnet_ev *e)
{
	pthread_mutex_lock(&net->mu);
	if (net->tail)
		net->tail->next = e;
	else
		net->head = e;
	net->tail = e;
	pthread_cond_signal(&net->cv);
	pthread_mutex_unlock(&net->mu);
}

static inline uint8_t *memnet_copy(const void *frame, size_t len)
{
	uint8_t *p = emdb_malloc(len ? len : 1);
	if (!p)
		abort();
	memcpy(p, frame, len);
	return p;
}

static inline int memnet_call(void *ctx, uint32_t rank, const void *frame, size_t len, cluster_call *call)
{
	memnode *me = ctx;
	memnet *net = me->net;
	if (rank >= net->nodes || rank == me->rank)
		return emdb__seterr(EMDB_ERR_INVALID, "memnet: call to rank %u", rank);
	memnet_ev *e = calloc(1, sizeof(*e));
	if (!e)
		abort();
	e->kind = MEMNET_REQ;
	e->from = me->rank;
	e->to = rank;
	e->frame = memnet_copy(frame, len);
	e->len = len;
	e->call = call;
	call->peer = rank;
	memnet_push(net, e);
	/* counted once queued, so that a test that saw the count change can
	 * wait for the link to go idle and know the call was delivered */
	atomic_fetch_add(&net->calls[me->rank][rank], 1);
	atomic_fetch_add(&net->bytes[me->rank][rank], len);
	return EMDB_OK;
}

static inline int memnet_reply(void *ctx, cluster_responder *r, const void *frame, size_t len)
{
	memnet *net = r->net;
	memnet_ev *e = calloc(1, sizeof(*e));
	if (!e)
		abort();
	e->kind = MEMNET_REP;
	e->from = r->to;
	e->to = r->from;
	e->frame = memnet_copy(frame, len);
	e->len = len;
	e->call = r->call;
	atomic_fetch_add(&net->bytes[r->to][r->from], len);
	free(r);
	memnet_push(net, e);
	return EMDB_OK;
}

static inline void memnet_post(void *ctx, void (*fn)(void *), void *arg)
{
	memnode *me = ctx;
	memnet_ev *e = calloc(1, sizeof(*e));
	if (!e)
		abort();
	e->kind = MEMNET_FN;
	e->fn = fn;
	e->arg = arg;
	memnet_push(me->net, e);
}

static const cluster_link_ops memnet_ops = { .call = memnet_call, .reply = memnet_reply, .post = memnet_post };

static inline void memnet_run_ev(memnet *net, memnet_ev *e)
{
	switch (e->kind) {
	case MEMNET_REQ:
		if (atomic_load(&net->down[e->to])) {
			emdb__seterr(EMDB_ERR_NODE, "node %u (memnet) did not answer: it is down", e->to);
			e->call->done(e->call, EMDB_ERR_NODE, NULL, 0);
		} else {
			cluster_responder *r = calloc(1, sizeof(*r));
			if (!r)
				abort();
			*r = (cluster_responder){ net, e->call, e->from, e->to };
			cluster_serve(net->node[e->to].cl, e->from, e->frame, e->len, r);
		}
		break;
	case MEMNET_REP:
		if (atomic_load(&net->down[e->from])) { /* went down before answering */
			emdb__seterr(EMDB_ERR_NODE, "node %u (memnet) did not answer: it is down", e->from);
			e->call->done(e->call, EMDB_ERR_NODE, NULL, 0);
		} else {
			e->call->done(e->call, EMDB_OK, e->frame, e->len);
		}
		break;
	case MEMNET_FN:
		e->fn(e->arg);
		break;
	}
	emdb_free(e->frame);
	free(e);
}

static inline void *memnet_thread(void *arg)
{
	memnet *net = arg;
	pthread_mutex_lock(&net->mu);
	for (;;) {
		while (!net->head && !net->stop) {
			net->busy = false;
			pthread_cond_broadcast(&net->idle);
			pthread_cond_wait(&net->cv, &net->mu);
		}
		if (!net->head && net->stop)
			break;
		memnet_ev *e = net->head;
		net->head = e->next;
		if (!net->head)
			net->tail = NULL;
		net->busy = true;
		pthread_mutex_unlock(&net->mu);
		memnet_run_ev(net, e);
		pthread_mutex_lock(&net->mu);
	}
	net->busy = false;
	pthread_cond_broadcast(&net->idle);
	pthread_mutex_unlock(&net->mu);
	return NULL;
}

/* The nodes' serve threads (cluster_set_serve_threads): the
 * environment's EMDB_TEST_SERVE_THREADS, else 0 (the link's thread), so
 * that every memnet test runs either way. */
static inline uint32_t memnet_serve_threads(void)
{
	const char *v = getenv("EMDB_TEST_SERVE_THREADS");
	return v ? (uint32_t)strtoul(v, NULL, 10) : 0;
}

/* N nodes of P partitions (0: default), engines with config cfg (NULL:
 * the default).  Returns NULL on failure (with a message on stderr). */
static inline memnet *memnet_open_cfg(uint32_t nodes, uint32_t partitions, const emdb_db_config *cfg)
{
	memnet *net = calloc(1, sizeof(*net));
	if (!net || nodes == 0 || nodes > MEMNET_MAX)
		return NULL;
	net->nodes = nodes;
	pthread_mutex_init(&net->mu, NULL);
	pthread_cond_init(&net->cv, NULL);
	pthread_cond_init(&net->idle, NULL);
	for (uint32_t r = 0; r < nodes; r++) {
		memnode *n = &net->node[r];
		n->net = net;
		n->rank = r;
		net->link[r] = (cluster_link){ &memnet_ops, n, r, nodes, 0 };
		if (emdb_db_open(cfg, &n->db) || cluster_open(n->db, &net->link[r], partitions, &n->cl) ||
		    cluster_set_serve_threads(n->cl, memnet_serve_threads())) {
			fprintf(stderr, "memnet_open: node %u: %s\n", r, emdb_last_error());
			return NULL;
		}
	}
	if (pthread_create(&net->thr, NULL, memnet_thread, net))
		return NULL;
	return net;
}

static inline memnet *memnet_open(uint32_t nodes, uint32_t partitions)
{
	return memnet_open_cfg(nodes, partitions, NULL);
}

/* Wait until the link has nothing left to deliver. */
static inline void memnet_quiesce(memnet *net)
{
	bool again = true;
	while (again) { /* a serve thread's reply makes the link busy again */
		pthread_mutex_lock(&net->mu);
		while (net->head || net->busy)
			pthread_cond_wait(&net->idle, &net->mu);
		pthread_mutex_unlock(&net->mu);
		again = false;
		for (uint32_t r = 0; r < net->nodes; r++)
			again |= cluster_serve_drain(net->node[r].cl);
	}
}

static inline void memnet_close(memnet *net)
{
	if (!net)
		return;
	memnet_quiesce(net);
	pthread_mutex_lock(&net->mu);
	net->stop = true;
	pthread_cond_signal(&net->cv);
	pthread_mutex_unlock(&net->mu);
	pthread_join(net->thr, NULL);
	for (uint32_t r = 0; r < net->nodes; r++) {
		cluster_close(net->node[r].cl);
		emdb_db_close(net->node[r].db);
	}
	pthread_cond_destroy(&net->idle);
	pthread_cond_destroy(&net->cv);
	pthread_mutex_destroy(&net->mu);
	free(net);
}

static inline cluster *memnet_cl(memnet *net, uint32_t r)
{
	return net->node[r].cl;
}

static inline emdb_db *memnet_db(memnet *net, uint32_t r)
{
	return net->node[r].db;
}

static inline void memnet_set_down(memnet *net, uint32_t r, bool down)
{
	atomic_store(&net->down[r], down);
}

/* Bytes from `from` to `to` so far: its requests and its replies. */
static inline uint64_t memnet_bytes(memnet *net, uint32_t from, uint32_t to)
{
	return atomic_load(&net->bytes[from][to]);
}

/* Calls from `from` to `to` so far. */
static inline uint64_t memnet_calls(memnet *net, uint32_t from, uint32_t to)
{
	return atomic_load(&net->calls[from][to]);
}

/* A raw frame from rank `from` to `to`, answered synchronously: *reply
 * (emdb_malloc'd, the caller frees) and *reply_len. */
typedef struct memnet_raw {
	cluster_call call;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done;
	int rc;
	uint8_t *reply;
	size_t len;
} memnet_raw;

static inline void memnet_raw_done(cluster_call *call, int rc, const uint8_t *frame, size_t len)
{
	memnet_raw *w = call->arg;
	pthread_mutex_lock(&w->mu);
	w->rc = rc;
	w->reply = frame ? memnet_copy(frame, len) : NULL;
	w->len = len;
	w->done = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

static inline int memnet_send_raw(memnet *net, uint32_t from, uint32_t to, const void *frame, size_t len, uint8_t **reply,
			   size_t *reply_len)
{
	memnet_raw w = { .done = false };
	pthread_mutex_init(&w.mu, NULL);
	pthread_cond_init(&w.cv, NULL);
	w.call.done = memnet_raw_done;
	w.call.arg = &w;
	int rc = memnet_call(&net->node[from], to, frame, len, &w.call);
	if (rc == EMDB_OK) {
		pthread_mutex_lock(&w.mu);
		while (!w.done)
			pthread_cond_wait(&w.cv, &w.mu);
		pthread_mutex_unlock(&w.mu);
		rc = w.rc;
	}
	pthread_cond_destroy(&w.cv);
	pthread_mutex_destroy(&w.mu);
	*reply = w.reply;
	*reply_len = w.len;
	return rc;
}

#endif
