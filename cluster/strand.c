/*
 * cluster/strand.c - the owner's engine calls off the link's thread: a
 * pool of serve threads and one strand per peer (cluster_set_serve_threads).
 *
 * With a pool, cluster_serve hands every request frame of a peer to that
 * peer's strand: a FIFO of jobs (the frame copied, the responder) of which
 * one at a time runs.  A data-plane request (serve_on_pool: engine and
 * owner tickets only) runs on a pool thread; any other (steps, table
 * changes, checkpoint phases, scans, statistics, a frame whose opcode
 * cannot be read) runs on the link's thread through the link's post(),
 * and the strand goes on after it.  A linktest's ECHO, which changes
 * nothing, skips the strand: serve.c answers it at once.  Without a pool
 * (threads 0) cluster_serve runs every request on the link's thread.
 *
 * Invariants:
 *   1. A peer's requests run in the order they arrived, one at a time:
 *      a strand is `active` from its first job's dispatch until it is
 *      empty, and only the thread that finished its head dispatches the
 *      next.  Different peers' requests may run at once.
 *   2. Every job queued is run exactly once (its handler replies once),
 *      also at drain and stop: serve_pool_drain waits for `queued` 0.
 *   3. The link thread only copies and queues; decoding, checks, engine
 *      calls and reply encoding run where the job runs.
 *
 * State changes: strands, the ready list, the counters, under mu.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include <stdio.h>
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "base/error_int.h"
#include "cluster/cluster_int.h"

typedef struct sjob {
	struct sjob *next;
	cluster *cl;
	uint32_t from;
	bool on_link;
	size_t len;
	cluster_responder *r;
	uint64_t frame[]; /* len bytes, 8-aligned for the decoder */
} sjob;

typedef struct strand {
	sjob *head, *tail;
	bool active;              /* a job of it is ready, running or posted */
	struct strand *next_ready;
} strand;

struct serve_pool {
	pthread_mutex_t mu;
	pthread_cond_t work, idle;
	strand *peer;             /* [cl->nodes] */
	strand *ready_head, *ready_tail;
	uint64_t queued;          /* jobs in strands, not yet finished */
	uint32_t running, max_running;
	uint64_t on_pool, on_link;
	bool stop;
	uint32_t threads;
	pthread_t *thr;
};

/* Opcodes whose handlers touch only the engine, the owner tickets and
 * the atomic counters (serve.c), so that any thread may run them. */
static bool serve_on_pool(uint16_t op)
{
	switch (op) {
	case PROTO_NODE_PREFETCH:
	case PROTO_NODE_PULL:
	case PROTO_NODE_PUSH:
	case PROTO_NODE_PUSH_RANKED:
	case PROTO_NODE_PUSH_UPDATE:
	case PROTO_NODE_UPDATE:
	case PROTO_NODE_LOOKUP:
	case PROTO_NODE_READ_STATE:
	case PROTO_NODE_TICKET_FREE:
	case PROTO_NODE_LOAD:
		return true;
	}
	return false;
}

static void run_on_link(void *arg);

/* s's head is next: queue it for the pool, or return it to be posted to
 * the link's thread (outside mu). */
static sjob *dispatch_locked(serve_pool *p, strand *s)
{
	if (s->head->on_link)
		return s->head;
	s->next_ready = NULL;
	if (p->ready_tail)
		p->ready_tail->next_ready = s;
	else
		p->ready_head = s;
	p->ready_tail = s;
	pthread_cond_signal(&p->work);
	return NULL;
}

/* The head job of s ran: drop it and start the next (invariant 1). */
static sjob *finish_locked(serve_pool *p, strand *s)
{
	sjob *j = s->head;
	s->head = j->next;
	if (!s->head)
		s->tail = NULL;
	emdb_free(j);
	sjob *post = NULL;
	if (s->head)
		post = dispatch_locked(p, s);
	else
		s->active = false;
	if (--p->queued == 0)
		pthread_cond_broadcast(&p->idle);
	return post;
}

static void post_job(cluster *cl, sjob *j)
{
	if (j)
		cl->link.ops->post(cl->link.ctx, run_on_link, j);
}

static void run_job(sjob *j)
{
	cluster__serve_frame(j->cl, j->from, (const uint8_t *)j->frame, j->len, j->r);
}

static void run_on_link(void *arg)
{
	sjob *j = arg;
	cluster *cl = j->cl;
	serve_pool *p = cl->pool;
	strand *s = &p->peer[j->from];
	pthread_mutex_lock(&p->mu);
	p->on_link++; /* counted before it runs: a reply seen is counted */
	pthread_mutex_unlock(&p->mu);
	run_job(j);
	pthread_mutex_lock(&p->mu);
	sjob *next = finish_locked(p, s);
	pthread_mutex_unlock(&p->mu);
	post_job(cl, next);
}

static void *pool_thread(void *arg)
{
	cluster *cl = arg;
	serve_pool *p = cl->pool;
	pthread_setname_np(pthread_self(), "emdb-serve");
	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->ready_head && !p->stop)
			pthread_cond_wait(&p->work, &p->mu);
		if (!p->ready_head)
			break;
		strand *s = p->ready_head;
		p->ready_head = s->next_ready;
		if (!p->ready_head)
			p->ready_tail = NULL;
		if (++p->running > p->max_running)
			p->max_running = p->running;
		p->on_pool++;
		sjob *j = s->head; /* stays the head until finish_locked */
		pthread_mutex_unlock(&p->mu);
		run_job(j);
		pthread_mutex_lock(&p->mu);
		p->running--;
		sjob *next = finish_locked(p, s);
		if (next) {
			pthread_mutex_unlock(&p->mu);
			post_job(cl, next);
			pthread_mutex_lock(&p->mu);
		}
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int cluster_set_serve_threads(cluster *cl, uint32_t threads)
{
	if (!cl || cl->pool || threads > CLUSTER_SERVE_THREADS_MAX)
		return emdb__seterr(EMDB_ERR_INVALID,
				    "cluster_set_serve_threads: once per cluster, before any request, 0..%u threads",
				    CLUSTER_SERVE_THREADS_MAX);
	if (!threads)
		return EMDB_OK;
	serve_pool *p = emdb_calloc(1, sizeof(*p));
	if (!p || !(p->peer = emdb_calloc(cl->nodes, sizeof(*p->peer))) ||
	    !(p->thr = emdb_calloc(threads, sizeof(*p->thr)))) {
		if (p)
			emdb_free(p->peer);
		emdb_free(p);
		return emdb__seterr(EMDB_ERR_NOMEM, "a pool of %u serve threads", threads);
	}
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->idle, NULL);
	cl->pool = p;
	for (; p->threads < threads; p->threads++)
		if (pthread_create(&p->thr[p->threads], NULL, pool_thread, cl)) {
			serve_pool_stop(cl);
			return emdb__seterr(EMDB_ERR_NOMEM, "a pool of %u serve threads: thread %u", threads,
					    p->threads);
		}
	return EMDB_OK;
}

void serve_pool_take(cluster *cl, uint32_t from, const uint8_t *frame, size_t len, cluster_responder *r)
{
	serve_pool *p = cl->pool;
	sjob *j = emdb_malloc(sizeof(*j) + len);
	if (!j) {
		/* Answered at once, changing nothing: order does not matter. */
		cluster__reply(cl, r, proto_node_peek_op(frame, len), 0, NULL, 0,
			       emdb__seterr(EMDB_ERR_NOMEM, "a %zu-byte request from node %u", len, from));
		return;
	}
	*j = (sjob){ .cl = cl, .from = from, .on_link = !serve_on_pool(proto_node_peek_op(frame, len)), .len = len, .r = r };
	memcpy(j->frame, frame, len);
	strand *s = &p->peer[from];
	sjob *post = NULL;
	pthread_mutex_lock(&p->mu);
	if (s->tail)
		s->tail->next = j;
	else
		s->head = j;
	s->tail = j;
	p->queued++;
	if (!s->active) {
		s->active = true;
		post = dispatch_locked(p, s);
	}
	pthread_mutex_unlock(&p->mu);
	post_job(cl, post);
}

bool cluster_serve_drain(cluster *cl)
{
	serve_pool *p = cl ? cl->pool : NULL;
	if (!p)
		return false;
	pthread_mutex_lock(&p->mu);
	bool any = p->queued != 0;
	while (p->queued)
		pthread_cond_wait(&p->idle, &p->mu);
	pthread_mutex_unlock(&p->mu);
	return any;
}

void serve_pool_stop(cluster *cl)
{
	serve_pool *p = cl->pool;
	if (!p)
		return;
	cluster_serve_drain(cl);
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->mu);
	for (uint32_t i = 0; i < p->threads; i++)
		pthread_join(p->thr[i], NULL);
	pthread_cond_destroy(&p->idle);
	pthread_cond_destroy(&p->work);
	pthread_mutex_destroy(&p->mu);
	emdb_free(p->thr);
	emdb_free(p->peer);
	emdb_free(p);
	cl->pool = NULL;
}

void cluster_get_serve_counters(cluster *cl, cluster_serve_counters *out)
{
	memset(out, 0, sizeof(*out));
	serve_pool *p = cl->pool;
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	out->threads = p->threads;
	out->on_pool = p->on_pool;
	out->on_link = p->on_link;
	out->max_running = p->max_running;
	pthread_mutex_unlock(&p->mu);
}
