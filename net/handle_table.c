/*
 * handle_table.c - table administration and statistics: TABLE_CREATE,
 * TABLE_DROP, TABLE_ALTER, TABLE_DESCRIBE, TABLE_LIST, STATS
 * (TABLE_RESERVE, which runs on a thread of its own, is in
 * handle_reserve.c).
 *
 * Invariants:
 *   1. CREATE and DROP reserve their reply before calling the engine, so a
 *      table is never created or dropped without the client being told.
 *   2. Validation of a table configuration is the engine's: its error and
 *      message go back unchanged.
 *
 * State changes: the engine's table registry (CREATE, DROP), a table's
 * hyperparameters (ALTER).
 */
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/db.h>
#include <emdb/error.h>

#include "net/conn.h"
#include "net/handle_int.h"
#include "net/log.h"
#include "net/server.h"

int handle_table_create(conn *c, const proto_hdr *h, const uint8_t *body)
{
	proto_table_create_req m;
	int rc = proto_table_create_req_decode(h, body, &m);
	if (rc)
		return rc;
	proto_table_create_resp r = { 0 };
	size_t len;
	proto_table_create_resp_encode(NULL, 0, h->id, &r, &len);
	uint8_t *p = conn_reply_reserve(c, len);
	if (!p)
		return EMDB_ERR_NOMEM;
	rc = emdb_table_create(c->srv->db, &m.cfg, &r.table);
	if (rc) {
		obuf_cancel(&c->out);
		return rc;
	}
	proto_table_create_resp_encode(p, len, h->id, &r, &len);
	obuf_commit(&c->out, len);
	log_info("conn %llu (%s): table '%s' created, id %u, dim %u", (unsigned long long)c->id,
		 c->peer, m.cfg.name, r.table, m.cfg.dim);
	return HANDLED_OK;
}

int handle_table_drop(conn *c, const proto_hdr *h, const uint8_t *body)
{
	proto_table_drop_req m;
	int rc = proto_table_drop_req_decode(h, body, &m);
	if (rc)
		return rc;
	uint8_t *p = conn_reply_reserve(c, PROTO_HDR_SIZE);
	if (!p)
		return EMDB_ERR_NOMEM;
	rc = emdb_table_drop(c->srv->db, m.table);
	if (rc) {
		obuf_cancel(&c->out);
		return rc;
	}
	size_t len;
	proto_empty_encode(p, PROTO_HDR_SIZE, h->id, h->opcode, true, &len);
	obuf_commit(&c->out, len);
	log_info("conn %llu (%s): table %u dropped", (unsigned long long)c->id, c->peer, m.table);
	return HANDLED_OK;
}

int handle_table_alter(conn *c, const proto_hdr *h, const uint8_t *body)
{
	proto_table_alter_req m;
	int rc = proto_table_alter_req_decode(h, body, &m);
	if (rc)
		return rc;
	uint8_t *p = conn_reply_reserve(c, PROTO_HDR_SIZE);
	if (!p)
		return EMDB_ERR_NOMEM;
	rc = emdb_table_alter(c->srv->db, m.table, &m.opt);
	if (rc) {
		obuf_cancel(&c->out);
		return rc;
	}
	size_t len;
	proto_empty_encode(p, PROTO_HDR_SIZE, h->id, h->opcode, true, &len);
	obuf_commit(&c->out, len);
	log_info("conn %llu (%s): table %u altered: lr %g", (unsigned long long)c->id, c->peer, m.table,
		 m.opt.lr);
	return HANDLED_OK;
}

int handle_table_describe(conn *c, const proto_hdr *h, const uint8_t *body)
{
	proto_table_describe_req m;
	int rc = proto_table_describe_req_decode(h, body, &m);
	if (rc)
		return rc;
	uint32_t id = m.table;
	if (!id && (rc = emdb_table_find(c->srv->db, m.name, &id)))
		return rc;
	proto_table_describe_resp r;
	if ((rc = emdb_table_describe(c->srv->db, id, &r.info)))
		return rc;
	return HANDLE_REPLY(c, h->id, proto_table_describe_resp_encode, &r);
}

int handle_table_list(conn *c, const proto_hdr *h, const uint8_t *body)
{
	int rc = proto_empty_decode(h);
	if (rc)
		return rc;
	emdb_db *db = c->srv->db;
	size_t n = 0;
	if ((rc = emdb_table_list(db, NULL, 0, &n)))
		return rc;
	uint32_t *ids = NULL;
	proto_table_entry *e = NULL;
	/* Tables may come and go between the two calls: retry until the
	 * count holds still. */
	for (;;) {
		size_t cap = n + 8, got;
		emdb_free(ids);
		ids = emdb_malloc(cap * sizeof(*ids));
		if (!ids)
			return EMDB_ERR_NOMEM;
		if ((rc = emdb_table_list(db, ids, cap, &got))) {
			emdb_free(ids);
			return rc;
		}
		n = got;
		if (got <= cap)
			break;
	}
	e = emdb_calloc(n ? n : 1, sizeof(*e));
	if (!e) {
		emdb_free(ids);
		return EMDB_ERR_NOMEM;
	}
	uint32_t k = 0;
	for (size_t i = 0; i < n; i++) {
		emdb_table_info info;
		if (emdb_table_describe(db, ids[i], &info) != EMDB_OK)
			continue; /* dropped meanwhile */
		e[k].id = info.id;
		strcpy(e[k].name, info.config.name);
		k++;
	}
	proto_table_list_resp r = { .n = k, .entries = e };
	rc = HANDLE_REPLY(c, h->id, proto_table_list_resp_encode, &r);
	emdb_free(ids);
	emdb_free(e);
	return rc;
}

int handle_stats(conn *c, const proto_hdr *h, const uint8_t *body)
{
	int rc = proto_empty_decode(h);
	if (rc)
		return rc;
	proto_stats_resp r;
	if ((rc = emdb_db_get_stats(c->srv->db, &r.stats)))
		return rc;
	return HANDLE_REPLY(c, h->id, proto_stats_resp_encode, &r);
}
