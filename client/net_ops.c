/*
 * net_ops.c - each operation's wire form for the tcp://, tls:// and
 * unix:// transport: the encode and receive columns of CL_OP_MAP
 * (client/client_int.h), as the table net_ops that net.c reads.
 *
 * A request is encoded from its cl_args as client.c described it (by IDs
 * or ticket, pooled or not: rows_req), either flat (the small requests,
 * into the caller's stack buffer, retried on the heap when larger) or as
 * a scatter-gather list over the caller's own arrays (PREFETCH, PULL,
 * PUSH, PUSH_UPDATE, LOOKUP, READ_STATE, PULL_WEIGHTED, PUSH_WEIGHTED),
 * never copying IDs, weights or gradients.
 * A buffered response is decoded with proto_msg_decode and delivered to
 * the request's outputs by the operation's dec_ function.
 *
 * Invariants:
 *   1. net_ops has a row for every cl_op but CL_NONE, with exactly one of
 *      flat and iov; the wire opcode of a row is the one its request and
 *      its response carry.
 *   2. An encoder reads the caller's arguments and writes nothing but the
 *      frame (and msg when it refuses); a dec_ function writes only the
 *      request's outputs (and, for a PREFETCH whose ticket cannot be
 *      allocated, queues the ticket as an orphan under c->lock).
 *   3. Nothing here touches the socket: net.c sends and receives.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/client.h>

#include "client/client_int.h"
#include "client/net_int.h"
#include "protocol/proto.h"

/* ---- encoding requests: CL_OP_MAP's encode column ----------------- */

#define ENC_FLAT_OP(name)                                                                      \
	static int enc_##name(const cl_args *a, uint16_t op, uint64_t id, uint8_t *buf, size_t cap, \
			      size_t *len, char *msg, size_t msglen)
#define ENC_IOV_OP(name) static int iov_##name(const cl_args *a, uint64_t id, proto_iov *v)

/* SHUTDOWN, TABLE_LIST, STATS, CHECKPOINT_LIST: no body. */
ENC_FLAT_OP(empty)
{
	return proto_empty_encode(buf, cap, id, op, false, len);
}

ENC_FLAT_OP(ping)
{
	proto_ping m = { { NULL, 0 } };
	return proto_ping_req_encode(buf, cap, id, &m, len);
}

ENC_FLAT_OP(info)
{
	proto_info_req m = { proto_cstr(a->s1) };
	return proto_info_req_encode(buf, cap, id, &m, len);
}

ENC_FLAT_OP(config_get)
{
	proto_config_get_req m = { proto_cstr(a->s1) };
	return proto_config_get_req_encode(buf, cap, id, &m, len);
}

ENC_FLAT_OP(config_set)
{
	proto_kv pairs[PROTO_CONFIG_SET_MAX]; /* borrowed from a */
	_Static_assert(EMDB_CLIENT_CONFIG_SET_MAX == PROTO_CONFIG_SET_MAX, "one limit on both sides");
	for (size_t i = 0; i < a->n_kv && i < PROTO_CONFIG_SET_MAX; i++)
		pairs[i] = (proto_kv){ proto_cstr(a->keys[i]), proto_cstr(a->values[i]) };
	proto_config_set_req m = { (uint32_t)a->n_kv, pairs, NULL, 0 };
	return proto_config_set_req_encode(buf, cap, id, &m, len);
}

ENC_FLAT_OP(table_create)
{
	/* The engine's size rule, so that a caller built against a shorter
	 * struct is not read past its end. */
	emdb_table_config d = EMDB_TABLE_CONFIG_INIT;
	if (a->cfg->size == 0 || a->cfg->size > sizeof(d)) {
		snprintf(msg, msglen, "%s: emdb_table_config.size is %u: initialize with EMDB_TABLE_CONFIG_INIT",
			 a->what, a->cfg->size);
		return EMDB_ERR_INVALID;
	}
	memcpy(&d, a->cfg, a->cfg->size);
	d.size = sizeof(d);
	proto_table_create_req m = { d };
	return proto_table_create_req_encode(buf, cap, id, &m, len);
}

ENC_FLAT_OP(table_drop)
{
	proto_table_drop_req m = { a->table };
	return proto_table_drop_req_encode(buf, cap, id, &m, len);
}

ENC_FLAT_OP(table_reserve)
{
	proto_table_reserve_req m = { a->table, a->arg };
	return proto_table_reserve_req_encode(buf, cap, id, &m, len);
}

ENC_FLAT_OP(table_find)
{
	proto_table_describe_req m;
	memset(&m, 0, sizeof(m));
	if (strlen(a->s1) >= EMDB_NAME_MAX || !a->s1[0]) {
		snprintf(msg, msglen, "%s: no table is named '%.80s'", a->what, a->s1);
		return EMDB_ERR_NO_TABLE;
	}
	strcpy(m.name, a->s1);
	return proto_table_describe_req_encode(buf, cap, id, &m, len);
}

/* On the wire, table 0 means "by name" (TABLE_DESCRIBE) and "every table"
 * (UPDATE): a call by id must not send it. */
static int no_table_zero(const cl_args *a, char *msg, size_t msglen)
{
	if (a->table != 0)
		return EMDB_OK;
	snprintf(msg, msglen, "%s: no table with id 0", a->what);
	return EMDB_ERR_NO_TABLE;
}

ENC_FLAT_OP(table_alter)
{
	int rc = no_table_zero(a, msg, msglen);
	if (rc != EMDB_OK)
		return rc;
	proto_table_alter_req m = { a->table, *a->opt };
	return proto_table_alter_req_encode(buf, cap, id, &m, len);
}

ENC_FLAT_OP(table_scan)
{
	int rc = no_table_zero(a, msg, msglen);
	if (rc != EMDB_OK)
		return rc;
	proto_table_scan_req m = { a->table, a->dim, a->arg, (uint32_t)a->n,
				   a->per_row ? PROTO_SCAN_STATE : 0 };
	return proto_table_scan_req_encode(buf, cap, id, &m, len);
}

ENC_FLAT_OP(table_describe)
{
	proto_table_describe_req m;
	memset(&m, 0, sizeof(m));
	int rc = no_table_zero(a, msg, msglen);
	if (rc != EMDB_OK)
		return rc;
	m.table = a->table;
	return proto_table_describe_req_encode(buf, cap, id, &m, len);
}

ENC_FLAT_OP(update)
{
	int rc = a->all ? EMDB_OK : no_table_zero(a, msg, msglen);
	if (rc != EMDB_OK)
		return rc;
	proto_update_req m = { .table = a->table, .workers = a->workers, .seq = a->seq, .session = a->session };
	return proto_update_req_encode(buf, cap, id, &m, len);
}

ENC_FLAT_OP(checkpoint)
{
	proto_checkpoint_req m = { (uint32_t)a->arg };
	return proto_checkpoint_req_encode(buf, cap, id, &m, len);
}

ENC_FLAT_OP(restore)
{
	proto_restore_req m = { a->arg };
	return proto_restore_req_encode(buf, cap, id, &m, len);
}

ENC_FLAT_OP(job_status)
{
	proto_job_status_req m = { a->arg };
	return proto_job_status_req_encode(buf, cap, id, &m, len);
}

ENC_FLAT_OP(ckpt_delete)
{
	proto_checkpoint_delete_req m = { a->arg };
	return proto_checkpoint_delete_req_encode(buf, cap, id, &m, len);
}

_Static_assert(sizeof(emdb_linktest_msg) == sizeof(proto_linktest_msg) &&
		       offsetof(emdb_linktest_msg, request_bytes) == offsetof(proto_linktest_msg, request_bytes) &&
		       offsetof(emdb_linktest_msg, reply_bytes) == offsetof(proto_linktest_msg, reply_bytes),
	       "emdb_linktest_msg is a LINKTEST record");

ENC_FLAT_OP(linktest)
{
	proto_linktest_req m = { .duration_ms = (uint32_t)a->arg, .depth = a->workers, .n = (uint32_t)a->n,
				 .msgs = (const proto_linktest_msg *)a->lt_msgs };
	return proto_linktest_req_encode(buf, cap, id, &m, len);
}

ENC_IOV_OP(prefetch)
{
	proto_prefetch_req r = { a->table, (uint32_t)a->n, a->ids };
	return proto_prefetch_req_iov(v, id, &r);
}

/* PULL's, PUSH's and PUSH_UPDATE's body: the rows as cl_args describes
 * them (by IDs or ticket, maybe pooled) and, to push, the gradients. */
static proto_push_req rows_req(const cl_args *a)
{
	return (proto_push_req){ .table = a->table, .dim = a->dim,
				 .ticket = a->ticket ? a->ticket->handle : 0,
				 .n_ids = a->ticket ? 0 : (uint32_t)a->n, .ids = a->ids,
				 .n_bags = a->bags ? (uint32_t)a->n_bags : 0,
				 .pool = a->bags ? (uint32_t)a->pool : 0,
				 .offsets = a->bags ? a->offsets : NULL,
				 .n_rows = (uint32_t)a->n_rows, .grads = a->grads };
}

ENC_IOV_OP(pull)
{
	proto_push_req r = rows_req(a);
	proto_pull_req p = { .table = r.table, .dim = r.dim, .ticket = r.ticket, .n_ids = r.n_ids,
			     .ids = r.ids, .n_bags = r.n_bags, .pool = r.pool, .offsets = r.offsets };
	return proto_pull_req_iov(v, id, &p);
}

ENC_IOV_OP(pull_weighted)
{
	proto_push_req r = rows_req(a);
	proto_pull_weighted_req p = {
		.pull = { .table = r.table, .dim = r.dim, .ticket = r.ticket, .n_ids = r.n_ids,
			  .ids = r.ids, .n_bags = r.n_bags, .pool = r.pool, .offsets = r.offsets },
		.n_weights = (uint32_t)a->n, .weights = a->weights };
	return proto_pull_weighted_req_iov(v, id, &p);
}

ENC_IOV_OP(push_weighted)
{
	proto_push_weighted_req r = { .push = rows_req(a), .n_weights = (uint32_t)a->n,
				       .weights = a->weights };
	return proto_push_weighted_req_iov(v, id, &r);
}

ENC_IOV_OP(push)
{
	proto_push_req r = rows_req(a);
	return proto_push_req_iov(v, id, &r);
}

ENC_IOV_OP(push_update) /* a->bags is false: client.c never pools it */
{
	proto_push_update_req r = rows_req(a);
	return proto_push_update_req_iov(v, id, &r);
}

ENC_IOV_OP(table_load)
{
	proto_table_load_req r = { a->table, a->dim, (uint32_t)a->n, a->per_row, a->ids, a->vecs_in,
				   a->per_row ? a->state_in : NULL };
	return proto_table_load_req_iov(v, id, &r);
}

ENC_IOV_OP(lookup)
{
	proto_lookup_req r = { a->table, a->dim, (uint32_t)a->n, a->found != NULL, a->ids };
	return proto_lookup_req_iov(v, id, &r);
}

ENC_IOV_OP(read_state)
{
	proto_read_state_req r = { a->table, (uint32_t)a->n, a->ids };
	return proto_read_state_req_iov(v, id, &r);
}

/* ---- decoding responses: CL_OP_MAP's receive column ---------------- */

#define DEC_OP(name) static int dec_##name(emdb_client *c, emdb_future *f, const proto_msg *m)

/* Copy s to p as a C string; returns the byte after its NUL. */
static char *put_str(char *p, proto_str s)
{
	if (s.len)
		memcpy(p, s.p, s.len);
	p[s.len] = 0;
	return p + s.len + 1;
}

DEC_OP(info)
{
	proto_str text = m->info_resp.text;
	char *t = emdb_malloc((size_t)text.len + 1);
	if (!t)
		return EMDB_ERR_NOMEM;
	if (text.len)
		memcpy(t, text.p, text.len);
	t[text.len] = 0;
	*f->a.text = t;
	return EMDB_OK;
}

DEC_OP(config_get)
{
	size_t pos = 0, k = 0, bytes = 0;
	proto_kv kv;
	while (proto_kv_list_next(&m->config_get_resp, &pos, &kv)) {
		k++;
		bytes += (size_t)kv.key.len + kv.val.len + 2;
	}
	emdb_client_kv *out = emdb_malloc(k * sizeof(*out) + bytes);
	if (!out)
		return EMDB_ERR_NOMEM;
	char *p = (char *)(out + k);
	pos = 0;
	for (size_t i = 0; proto_kv_list_next(&m->config_get_resp, &pos, &kv); i++) {
		out[i].key = p;
		p = put_str(p, kv.key);
		out[i].value = p;
		p = put_str(p, kv.val);
	}
	*f->a.kv = out;
	*f->a.n_out = k;
	return EMDB_OK;
}

DEC_OP(table_create)
{
	if (f->a.id_out)
		*f->a.id_out = m->table_create_resp.table;
	return EMDB_OK;
}

DEC_OP(table_find)
{
	if (f->a.id_out)
		*f->a.id_out = m->table_describe_resp.info.id;
	return EMDB_OK;
}

/* A page of a scan into the caller's arrays; a page that is not the
 * shape asked for (more rows, another dim or state width) is PROTOCOL. */
DEC_OP(table_scan)
{
	const proto_table_scan_resp *r = &m->table_scan_resp;
	const cl_args *a = &f->a;
	if (r->n > a->n || r->dim != a->dim || r->per_row != a->per_row)
		return r->per_row != a->per_row && r->n <= a->n && r->dim == a->dim ? EMDB_ERR_DIM
										   : EMDB_ERR_PROTOCOL;
	if (r->n) {
		memcpy(a->ids_out, r->ids, (size_t)r->n * sizeof(uint64_t));
		memcpy(a->out, r->vecs, (size_t)r->n * r->dim * sizeof(float));
		if (r->per_row)
			memcpy(a->state_out, r->state, (size_t)r->n * r->per_row * sizeof(float));
	}
	*a->n_out = r->n;
	*a->next_out = r->next_cursor;
	if (a->step_out)
		*a->step_out = r->step;
	return EMDB_OK;
}

DEC_OP(table_describe)
{
	*f->a.info = m->table_describe_resp.info;
	return EMDB_OK;
}

DEC_OP(table_list)
{
	const cl_args *a = &f->a;
	for (size_t i = 0; i < m->table_list_resp.n && i < a->list_cap; i++)
		a->list_ids[i] = m->table_list_resp.entries[i].id;
	*a->n_out = m->table_list_resp.n;
	return EMDB_OK;
}

DEC_OP(stats)
{
	*f->a.stats = m->stats_resp.stats;
	return EMDB_OK;
}

DEC_OP(prefetch)
{
	emdb_client_ticket *t = cl_ticket_new(c, m->prefetch_resp.table, m->prefetch_resp.count);
	if (!t) {
		/* The server holds it; let the next sender release it. */
		net_state *n = c->priv;
		pthread_mutex_lock(&c->lock);
		if (n->n_orphans < n->cap_orphans)
			n->orphans[n->n_orphans++] = m->prefetch_resp.ticket;
		pthread_mutex_unlock(&c->lock);
		return EMDB_ERR_NOMEM;
	}
	t->handle = m->prefetch_resp.ticket;
	f->tk = t;
	return EMDB_OK;
}

DEC_OP(update)
{
	if (f->a.rows)
		*f->a.rows = m->update_resp.rows;
	return EMDB_OK;
}

DEC_OP(push_update)
{
	if (f->a.rows)
		*f->a.rows = m->push_update_resp.rows;
	return EMDB_OK;
}

DEC_OP(linktest)
{
	const proto_linktest_resp *r = &m->linktest_resp;
	*f->a.lt_out = (emdb_linktest_result){ .rounds = r->rounds, .elapsed_ns = r->elapsed_ns,
					       .bytes_sent = r->bytes_sent, .bytes_received = r->bytes_received };
	return EMDB_OK;
}

DEC_OP(checkpoint)
{
	if (f->a.job_out)
		*f->a.job_out = m->checkpoint_resp.job;
	return EMDB_OK;
}

DEC_OP(restore)
{
	if (f->a.job_out)
		*f->a.job_out = m->restore_resp.job;
	return EMDB_OK;
}

/* A JOB_STATUS response as emdb_job_status (whose enums have the wire's
 * values); the message is cut to fit. */
DEC_OP(job_status)
{
	_Static_assert((int)EMDB_JOB_RESTORE == (int)PROTO_JOB_RESTORE &&
			       (int)EMDB_JOB_FAILED == (int)PROTO_JOB_FAILED &&
			       (int)EMDB_JOB_CHECKPOINT_FULL == (int)EMDB_CKPT_FULL &&
			       (int)EMDB_JOB_CHECKPOINT_INCREMENTAL == (int)EMDB_CKPT_INCREMENTAL,
		       "emdb_job_kind/state must keep the wire's values");
	const proto_job_status_resp *r = &m->job_status_resp;
	emdb_job_status *out = f->a.job;
	memset(out, 0, sizeof(*out));
	out->job = r->job;
	out->kind = (emdb_job_kind)r->kind;
	out->state = (emdb_job_state)r->state;
	out->progress = r->progress;
	out->result = r->result;
	out->error = r->error;
	size_t n = r->message.len < sizeof(out->message) ? r->message.len : sizeof(out->message) - 1;
	if (n)
		memcpy(out->message, r->message.p, n);
	return EMDB_OK;
}

DEC_OP(ckpt_list)
{
	size_t k = m->checkpoint_list_resp.n;
	emdb_ckpt_info *out = emdb_malloc(k ? k * sizeof(*out) : 1);
	if (!out)
		return EMDB_ERR_NOMEM;
	if (k)
		memcpy(out, m->checkpoint_list_resp.ckpts, k * sizeof(*out));
	*f->a.ckpts = out;
	*f->a.n_out = k;
	return EMDB_OK;
}

/* ---- the table ------------------------------------------------------ */

#define ENC_FLAT(fn) .flat = (fn)
#define ENC_IOV(fn) .iov = (fn)
#define RX_BODY(fn) .dec = (fn)
#define RX_VECTORS .vectors = true
const net_op net_ops[CL_OP_COUNT] = {
#define NET_ROW_(NAME, wire_, check, encode, receive, mem) \
	[CL_##NAME] = { .wire = PROTO_OP_##wire_, encode, receive },
	CL_OP_MAP(NET_ROW_)
#undef NET_ROW_
};
#undef RX_VECTORS
#undef RX_BODY
#undef ENC_IOV
#undef ENC_FLAT

int net_encode(const cl_args *a, uint64_t id, proto_iov *v, uint8_t *flat, uint8_t **heap, char *msg,
	       size_t msglen)
{
	const net_op *o = &net_ops[a->op];
	int rc;
	size_t len = 0;

	*heap = NULL;
	msg[0] = 0;
	if (o->iov) {
		rc = o->iov(a, id, v);
		if (rc != EMDB_OK)
			snprintf(msg, msglen, "%s: %s", a->what, emdb_last_error());
		return rc;
	}
	/* Small requests: flat, retried on the heap when larger than flat. */
	rc = o->flat(a, o->wire, id, flat, NET_FLAT_MAX, &len, msg, msglen);
	if (rc == EMDB_ERR_LIMIT && !msg[0]) {
		*heap = emdb_malloc(len);
		if (!*heap) {
			snprintf(msg, msglen, "%s: out of memory for a %zu-byte request", a->what, len);
			return EMDB_ERR_NOMEM;
		}
		rc = o->flat(a, o->wire, id, *heap, len, &len, msg, msglen);
	}
	if (rc != EMDB_OK) {
		if (!msg[0])
			snprintf(msg, msglen, "%s: %s", a->what, emdb_last_error());
		return rc;
	}
	v->iov[0].iov_base = *heap ? *heap : flat;
	v->iov[0].iov_len = len;
	v->n = 1;
	v->len = len;
	return EMDB_OK;
}

int net_decode_resp(emdb_client *c, emdb_future *f, const proto_hdr *h, const uint8_t *body,
		    char *msg, size_t msglen)
{
	proto_msg m;
	int rc = proto_msg_decode(h, body, &m);
	if (rc != EMDB_OK) {
		snprintf(msg, msglen, "%s: malformed response: %s", f->a.what, emdb_last_error());
		return EMDB_ERR_PROTOCOL;
	}
	dec_fn dec = net_ops[f->a.op].dec;
	rc = dec ? dec(c, f, &m) : EMDB_OK;
	if (rc == EMDB_ERR_NOMEM)
		snprintf(msg, msglen, "%s: out of memory for the response", f->a.what);
	else if (rc != EMDB_OK)
		snprintf(msg, msglen, "%s: the response is not the shape asked for (%s)", f->a.what,
			 emdb_err_name(rc));
	return rc;
}

