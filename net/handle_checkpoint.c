/*
 * handle_checkpoint.c - the persistence requests: CHECKPOINT, RESTORE,
 * JOB_STATUS, CHECKPOINT_LIST, CHECKPOINT_DELETE.  The work is
 * net/checkpoint.h's; these decode, call it, and reply.
 *
 * Invariants:
 *   1. CHECKPOINT, RESTORE and CHECKPOINT_DELETE reserve their reply
 *      before they start a job or delete, so a job is never started (nor a
 *      checkpoint deleted) without the client hearing of it.
 *   2. A refusal carries the checkpoint module's reason (BUSY names the running job;
 *      UNSUPPORTED says how to turn persistence on), and the connection
 *      stays open: only a body that does not decode closes it.
 *
 * State changes: none here; checkpoint.c's jobs and store.
 */
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "net/checkpoint.h"
#include "net/cluster_ckpt.h"
#include "net/conn.h"
#include "net/handle_int.h"
#include "net/server.h"

/* Reply with an emdb_err and the checkpoint module's reason. */
static int refuse(int rc, const char *err)
{
	return handle_fail(rc, "%s", err);
}

/* CHECKPOINT and RESTORE: start the job with the reply reserved, then
 * answer with its number. */
static int start_job(conn *c, const proto_hdr *h, bool restore, uint64_t arg)
{
	char err[CKPTS_MSG_MAX];
	proto_checkpoint_resp r = { 0 };
	size_t len;
	proto_checkpoint_resp_encode(NULL, 0, h->id, &r, &len);
	uint8_t *p = conn_reply_reserve(c, len);
	if (!p)
		return EMDB_ERR_NOMEM;
	ckpts *ps = c->srv->ckpts;
	int rc;
	if (c->srv->cckpt && restore) { /* a cluster's: docs/cluster.md */
		rc = cckpt_restore(c->srv, arg, &r.job, err, sizeof(err));
	} else if (c->srv->cckpt) {
		rc = cckpt_checkpoint(c->srv, (emdb_ckpt_kind)arg, &r.job, err, sizeof(err));
	} else {
		rc = restore ? ckpts_restore(ps, arg, &r.job, err, sizeof(err))
			     : ckpts_checkpoint(ps, (emdb_ckpt_kind)arg, &r.job, err, sizeof(err));
	}
	if (rc != EMDB_OK) {
		obuf_cancel(&c->out);
		return refuse(rc, err);
	}
	/* Same layout for both: one u64. */
	if (restore) {
		proto_restore_resp rr = { r.job };
		proto_restore_resp_encode(p, len, h->id, &rr, &len);
	} else {
		proto_checkpoint_resp_encode(p, len, h->id, &r, &len);
	}
	obuf_commit(&c->out, len);
	return HANDLED_OK;
}

int handle_checkpoint(conn *c, const proto_hdr *h, const uint8_t *body)
{
	proto_checkpoint_req m;
	int rc = proto_checkpoint_req_decode(h, body, &m);
	if (rc)
		return rc;
	return start_job(c, h, false, m.kind);
}

int handle_restore(conn *c, const proto_hdr *h, const uint8_t *body)
{
	proto_restore_req m;
	int rc = proto_restore_req_decode(h, body, &m);
	if (rc)
		return rc;
	return start_job(c, h, true, m.ckpt);
}

int handle_job_status(conn *c, const proto_hdr *h, const uint8_t *body)
{
	proto_job_status_req m;
	int rc = proto_job_status_req_decode(h, body, &m);
	if (rc)
		return rc;
	char err[CKPTS_MSG_MAX];
	ckpts_job_status *st = emdb_malloc(sizeof(*st));
	if (!st)
		return EMDB_ERR_NOMEM;
	rc = ckpts_status(c->srv->ckpts, m.job, st, err, sizeof(err));
	if (rc != EMDB_OK) {
		emdb_free(st);
		return refuse(rc, err);
	}
	proto_job_status_resp r = {
		.job = st->job,
		.kind = st->kind,
		.state = st->state,
		.progress = st->progress,
		.result = st->result,
		.error = st->error,
		.message = proto_cstr(st->message),
	};
	rc = HANDLE_REPLY(c, h->id, proto_job_status_resp_encode, &r);
	emdb_free(st);
	return rc;
}

int handle_checkpoint_list(conn *c, const proto_hdr *h, const uint8_t *body)
{
	int rc = proto_empty_decode(h);
	if (rc)
		return rc;
	char err[CKPTS_MSG_MAX];
	emdb_ckpt_info *v = NULL;
	size_t n = 0;
	rc = c->srv->cckpt ? cckpt_list(c->srv, &v, &n, err, sizeof(err))
			   : ckpts_list(c->srv->ckpts, &v, &n, err, sizeof(err));
	if (rc != EMDB_OK)
		return refuse(rc, err);
	if (n > UINT32_MAX) {
		emdb_free(v);
		return handle_fail(EMDB_ERR_LIMIT, "%zu checkpoints do not fit in a reply", n);
	}
	proto_checkpoint_list_resp r = { (uint32_t)n, v };
	rc = HANDLE_REPLY(c, h->id, proto_checkpoint_list_resp_encode, &r);
	emdb_free(v);
	return rc;
}

int handle_checkpoint_delete(conn *c, const proto_hdr *h, const uint8_t *body)
{
	proto_checkpoint_delete_req m;
	int rc = proto_checkpoint_delete_req_decode(h, body, &m);
	if (rc)
		return rc;
	uint8_t *p = conn_reply_reserve(c, PROTO_HDR_SIZE);
	if (!p)
		return EMDB_ERR_NOMEM;
	char err[CKPTS_MSG_MAX];
	rc = c->srv->cckpt ? cckpt_delete(c->srv, m.ckpt, err, sizeof(err))
			   : ckpts_delete(c->srv->ckpts, m.ckpt, err, sizeof(err));
	if (rc != EMDB_OK) {
		obuf_cancel(&c->out);
		return refuse(rc, err);
	}
	size_t len;
	proto_empty_encode(p, PROTO_HDR_SIZE, h->id, h->opcode, true, &len);
	obuf_commit(&c->out, len);
	return HANDLED_OK;
}
