/*
 * ucx_pair.c - a bare UCX active-message exchange between two workers of
 * one process (ucx_pair.h), an asking end A and an answering end B
 * (ucx_am.h) driven by one thread that polls both.
 *
 * Invariants
 *   1. Rounds are ucx_am_rounds': a reply counts once its bytes are in,
 *      at most `depth` rounds in flight, every reply asked for came before
 *      an exchange returns (or -1, none within 10 s).
 *   2. Only the thread calling the exchange progresses either worker.
 */
#include "tools/linkbench/ucx_pair.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/clock.h"
#include "tools/linkbench/ucx_am.h"

struct ucx_pair {
	ucx_am_end a, b;
	ucp_ep_h a_ep;       /* A's endpoint to B */
};

int ucx_pair_open(ucx_pair **out, char *err, size_t errlen)
{
	ucx_pair *p = calloc(1, sizeof(*p));
	*out = NULL;
	if (!p) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (ucx_am_end_open(&p->a, UCX_AM_ASK, 0) < 0 || ucx_am_end_open(&p->b, UCX_AM_ANSWER, 0) < 0) {
		snprintf(err, errlen, "UCX: cannot open a context and worker (ucx_info -d lists the transports)");
		goto fail;
	}
	unsigned port = ucx_am_free_port();
	if (ucx_am_listen(&p->b, port) < 0) {
		snprintf(err, errlen, "UCX: cannot listen on 127.0.0.1:%u", port);
		goto fail;
	}
	if (ucx_am_connect(&p->a, port, &p->a_ep) < 0) {
		snprintf(err, errlen, "UCX: cannot connect to 127.0.0.1:%u", port);
		goto fail;
	}
	*out = p;
	return 0;
fail:
	ucx_pair_close(p);
	return -1;
}

/* One thread polls both ends. */
static int poll_both(void *ctx, char *err, size_t errlen)
{
	ucx_pair *p = ctx;
	ucp_worker_progress(p->a.worker);
	ucp_worker_progress(p->b.worker);
	if (p->b.failed) {
		snprintf(err, errlen, "UCX: B could not answer");
		return -1;
	}
	return 0;
}

int ucx_pair_exchange(ucx_pair *p, const size_t *req, const size_t *rep, unsigned n, unsigned depth,
		      uint64_t rounds, uint64_t max_ns, ucx_pair_result *out, char *err, size_t errlen)
{
	size_t max_req = 1, max_rep = 1;
	ucp_ep_h to[UCX_AM_MAX_MSGS];

	for (unsigned i = 0; i < n && i < UCX_AM_MAX_MSGS; i++) {
		max_req = req[i] > max_req ? req[i] : max_req;
		max_rep = rep[i] > max_rep ? rep[i] : max_rep;
		to[i] = p->a_ep;
	}
	if (ucx_am_reserve(&p->a, max_rep, max_req) < 0 || ucx_am_reserve(&p->b, max_req, max_rep) < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return ucx_am_rounds(&p->a, to, req, rep, n, depth, rounds, max_ns, poll_both, p, out, err, errlen);
}

void ucx_pair_close(ucx_pair *p)
{
	if (!p)
		return;
	if (p->a_ep)
		ucx_am_ep_close(p->a_ep, p->a.worker, p->b.worker);
	if (p->b.ep)
		ucx_am_ep_close(p->b.ep, p->b.worker, p->a.worker);
	ucx_am_end_close(&p->b);
	ucx_am_end_close(&p->a);
	free(p);
}
