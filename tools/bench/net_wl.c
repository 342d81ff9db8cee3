/*
 * net_wl.c - the emdb workloads of the network mode (net_wl.h).
 *
 * Design
 *   One client handle, one connection, one submitting thread: the harness
 *   step keeps a ring of `depth` futures, waits for the oldest, counts its
 *   IDs and submits the next batch in its slot, so `depth` requests are
 *   always in flight, exactly as the echo and Redis anchors pipeline.
 *   Each slot has its own output buffer (the lifetime rule of
 *   emdb/client.h: an output stays untouched until its future completes).
 *
 * Invariants
 *   1. Every future is waited for and freed before a measurement returns;
 *      every ticket is freed before its handle is closed.
 *   2. A failed request ends the process with the client's message.
 */
#include "tools/bench/net_wl.h"

#include <stdlib.h>
#include <string.h>

#include "tools/bench/keys.h"

#define HDR 24u /* frame header */
#define PRELOAD_BATCH 65536u
#define MAX_DEPTH 1024u

static const char *const names[NET_N_OPS] = { "pull", "pull_ticket", "push", "push_ticket", "lookup",
						       "prefetch", "push_update", "push_update_ticket",
						       "update" };

const char *net_op_name(net_op op)
{
	return names[op];
}

bool net_op_pushes(net_op op)
{
	return op == NET_PUSH || op == NET_PUSH_TICKET || op == NET_PUSH_UPDATE ||
	       op == NET_PUSH_UPDATE_TICKET;
}

static size_t pad8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

size_t net_op_req_bytes(net_op op, size_t n, uint32_t dim)
{
	switch (op) {
	case NET_PULL:
		return HDR + 32 + 8 * n;
	case NET_PULL_TICKET:
		return HDR + 32;
	case NET_PUSH:
	case NET_PUSH_UPDATE:
		return HDR + pad8(32 + 8 * n + 4 * n * dim);
	case NET_PUSH_TICKET:
	case NET_PUSH_UPDATE_TICKET:
		return HDR + pad8(32 + 4 * n * dim);
	case NET_LOOKUP:
		return HDR + 16 + 8 * n;
	case NET_UPDATE:
		return HDR + 8;
	case NET_PREFETCH:
	default:
		return HDR + 8 + 8 * n;
	}
}

size_t net_op_resp_bytes(net_op op, size_t n, uint32_t dim)
{
	switch (op) {
	case NET_PULL:
	case NET_PULL_TICKET:
		return HDR + pad8(8 + 4 * n * dim);
	case NET_PUSH:
	case NET_PUSH_TICKET:
		return HDR;
	case NET_PUSH_UPDATE:
	case NET_PUSH_UPDATE_TICKET:
	case NET_UPDATE:
		return HDR + 8;
	case NET_LOOKUP:
		return HDR + 16 + pad8(4 * n * dim);
	case NET_PREFETCH:
	default:
		return HDR + 16;
	}
}

int net_wl_ops(int pull, int push, int update, int lookup, int prefetch, net_op *ops)
{
	int n = 0;
	if (pull) {
		ops[n++] = NET_PULL;
		ops[n++] = NET_PULL_TICKET;
	}
	if (push) {
		ops[n++] = NET_PUSH;
		ops[n++] = NET_PUSH_TICKET;
		if (update)
			ops[n++] = NET_UPDATE;
		ops[n++] = NET_PUSH_UPDATE;
		ops[n++] = NET_PUSH_UPDATE_TICKET;
	}
	if (lookup)
		ops[n++] = NET_LOOKUP;
	if (prefetch)
		ops[n++] = NET_PREFETCH;
	return n;
}

void net_wl_die(const char *what, int rc)
{
	harness_die("%s: %s (%s)", what, emdb_strerror(rc), emdb_client_last_error());
}

void net_wl_preload(const net_wl *w, uint64_t rows, net_redis *r)
{
	uint64_t *ids = malloc(PRELOAD_BATCH * sizeof(uint64_t));
	float *vecs = r ? malloc((size_t)PRELOAD_BATCH * w->dim * sizeof(float)) : NULL;
	double t0 = harness_now();

	if (!ids || (r && !vecs))
		harness_die("out of memory");
	for (uint64_t lo = 1; lo <= rows; lo += PRELOAD_BATCH) {
		size_t n = rows - lo + 1 < PRELOAD_BATCH ? (size_t)(rows - lo + 1) : PRELOAD_BATCH;
		emdb_client_ticket *tk;
		int rc;

		for (size_t i = 0; i < n; i++)
			ids[i] = keys_id(lo + i);
		rc = emdb_client_prefetch(w->c, w->table, ids, n, &tk);
		if (rc != EMDB_OK)
			net_wl_die("emdb_client_prefetch", rc);
		if (r) {
			rc = emdb_client_pull_ticket(w->c, w->table, tk, w->dim, vecs);
			if (rc != EMDB_OK)
				net_wl_die("emdb_client_pull_ticket", rc);
			net_redis_load(r, ids, n, w->dim, vecs);
		}
		emdb_client_ticket_free(tk);
	}
	harness_log("preloaded %llu rows over the socket%s in %.1f s", (unsigned long long)rows,
		    r ? " (and into Redis)" : "", harness_now() - t0);
	free(ids);
	free(vecs);
}

typedef struct ring {
	const net_wl *w;
	const pool *p;
	net_op op;
	emdb_future *f[MAX_DEPTH];
	emdb_client_ticket *made[MAX_DEPTH]; /* Prefetch results */
	float *out[MAX_DEPTH];
	float *grads;
	emdb_client_ticket **tk;             /* by ticket: one per batch */
	uint64_t sent;                       /* requests submitted */
} ring;

/* Wait for slot s; returns its IDs, 0 when it was empty. */
static uint64_t ring_complete(ring *g, size_t s)
{
	int rc;

	if (!g->f[s])
		return 0;
	rc = emdb_future_wait(g->f[s], -1);
	emdb_future_free(g->f[s]);
	g->f[s] = NULL;
	if (rc != EMDB_OK)
		net_wl_die(net_op_name(g->op), rc);
	if (g->made[s]) {
		emdb_client_ticket_free(g->made[s]);
		g->made[s] = NULL;
	}
	return g->p->batch;
}

static uint64_t ring_step(void *arg, unsigned t, uint64_t iter)
{
	ring *g = arg;
	const net_wl *w = g->w;
	size_t s = iter % w->depth, n = g->p->batch;
	uint64_t done = ring_complete(g, s);
	const uint64_t *ids = pool_ids(g->p, t, iter);

	switch (g->op) {
	case NET_PULL:
		g->f[s] = emdb_client_pull_async(w->c, w->table, ids, n, w->dim, g->out[s]);
		break;
	case NET_PULL_TICKET:
		g->f[s] = emdb_client_pull_ticket_async(w->c, w->table,
							g->tk[iter % g->p->batches], w->dim, g->out[s]);
		break;
	case NET_PUSH:
		g->f[s] = emdb_client_push_async(w->c, w->table, ids, n, w->dim, g->grads);
		break;
	case NET_PUSH_TICKET:
		g->f[s] = emdb_client_push_ticket_async(w->c, w->table, g->tk[iter % g->p->batches],
							w->dim, g->grads);
		break;
	case NET_PUSH_UPDATE:
		g->f[s] = emdb_client_push_update_async(w->c, w->table, ids, n, w->dim, g->grads, NULL);
		break;
	case NET_PUSH_UPDATE_TICKET:
		g->f[s] = emdb_client_push_update_ticket_async(w->c, w->table, g->tk[iter % g->p->batches],
							       w->dim, g->grads, NULL);
		break;
	case NET_LOOKUP:
		g->f[s] = emdb_client_lookup_async(w->c, w->table, ids, n, w->dim, g->out[s], NULL);
		break;
	case NET_UPDATE:
		g->f[s] = emdb_client_update_async(w->c, w->table, NULL);
		break;
	default:
		g->f[s] = emdb_client_prefetch_async(w->c, w->table, ids, n, &g->made[s]);
	}
	if (!g->f[s])
		harness_die("out of memory");
	g->sent++;
	return done;
}

void net_wl_measure(const net_wl *w, net_op op, const pool *p, harness_result *out)
{
	net_wl_measure_marked(w, op, p, out, NULL, NULL);
}

void net_wl_measure_marked(const net_wl *w, net_op op, const pool *p, harness_result *out,
			   net_wl_mark_fn mark, void *ctx)
{
	ring *g = calloc(1, sizeof(*g));
	size_t vec = p->batch * w->dim;

	if (!g || w->depth > MAX_DEPTH)
		harness_die("out of memory");
	g->w = w;
	g->p = p;
	g->op = op;
	for (unsigned s = 0; s < w->depth; s++)
		if (!(g->out[s] = malloc(vec * sizeof(float))))
			harness_die("out of memory");
	if (net_op_pushes(op)) {
		g->grads = malloc(vec * sizeof(float));
		if (!g->grads)
			harness_die("out of memory");
		for (size_t i = 0; i < vec; i++)
			g->grads[i] = 1e-6f;
	}
	if (op == NET_PULL_TICKET || op == NET_PUSH_TICKET || op == NET_PUSH_UPDATE_TICKET) {
		g->tk = calloc(p->batches, sizeof(*g->tk));
		if (!g->tk)
			harness_die("out of memory");
		for (size_t b = 0; b < p->batches; b++) {
			int rc = emdb_client_prefetch(w->c, w->table, pool_ids(p, 0, b), p->batch, &g->tk[b]);
			if (rc != EMDB_OK)
				net_wl_die("emdb_client_prefetch", rc);
		}
	}
	if (mark)
		mark(ctx, 0, 0);
	harness_measure(1, w->seconds, ring_step, g, out);
	for (unsigned s = 0; s < w->depth; s++) {
		ring_complete(g, s);
		free(g->out[s]);
	}
	if (mark)
		mark(ctx, 1, g->sent);
	if (g->tk) {
		for (size_t b = 0; b < p->batches; b++)
			emdb_client_ticket_free(g->tk[b]);
		free(g->tk);
	}
	free(g->grads);
	free(g);
}

typedef struct one_ctx {
	const net_wl *w;
	const pool *p;
	size_t i;
	float *out;
} one_ctx;

static void lookup_once(void *arg)
{
	one_ctx *o = arg;
	const uint64_t *id = &o->p->ids[o->i++ % o->p->len];
	int rc = emdb_client_lookup(o->w->c, o->w->table, id, 1, o->w->dim, o->out, NULL);

	if (rc != EMDB_OK)
		net_wl_die("emdb_client_lookup", rc);
}

void net_wl_lookup_latency(const net_wl *w, const pool *p, double seconds, net_lat *out)
{
	one_ctx o = { .w = w, .p = p, .i = out->n };

	o.out = malloc((size_t)w->dim * sizeof(float));
	if (!o.out)
		harness_die("out of memory");
	net_lat_measure(lookup_once, &o, seconds, out);
	free(o.out);
}
