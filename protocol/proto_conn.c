/*
 * protocol/proto_conn.c - bodies of the connection and server opcodes:
 * HELLO, AUTH, PING, WORKER, INFO, CONFIG_GET, CONFIG_SET (docs/protocol.md,
 * "Connection and server").
 *
 * Invariants:
 *   1. Every string is a u32 length followed by its bytes; the body ends
 *      with zero padding to a multiple of 8.  Length limits are checked by
 *      the encoder (INVALID) and again by the decoder (PROTOCOL).
 *   2. A decoded key/value list (CONFIG_GET response, CONFIG_SET request)
 *      has been walked completely once, so proto_kv_list_next can walk it
 *      again without checks.
 *   3. Each encoder is the exact mirror of its decoder: field order,
 *      limits and padding.
 */
#include "base/error_int.h"
#include "protocol/proto_int.h"

/* A body that is one string: u32 length, bytes, padding. */
static int str_body_encode(uint8_t *buf, size_t cap, uint64_t id, uint16_t op, bool response,
			   proto_str s, uint32_t max, const char *field, size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	if (wr_str_ok(&w, s, max, field)) {
		wr_u32(&w, s.len);
		wr_bytes(&w, s.p, s.len);
		wr_pad(&w);
	}
	return wr_end(&w, op, response, 0, id, len);
}

static int str_body_decode(const proto_hdr *h, const uint8_t *body, uint16_t op, bool response,
			   proto_str *s, uint32_t max, const char *field)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, op, response);
	if (rc)
		return rc;
	uint32_t n = rd_u32(&r, field);
	*s = rd_str(&r, n, max, field);
	rd_pad(&r);
	return rd_end(&r);
}

/* ---- HELLO --------------------------------------------------------- */

int proto_hello_req_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_hello_req *m,
			   size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	if (m->ver_min < 1 || m->ver_min > m->ver_max)
		proto__wr_fail(&w, "HELLO versions %u..%u: need 1 <= min <= max", m->ver_min,
			       m->ver_max);
	if (wr_str_ok(&w, m->name, PROTO_NAME_MAX, "client name")) {
		wr_u16(&w, m->ver_min);
		wr_u16(&w, m->ver_max);
		wr_u32(&w, m->name.len);
		wr_bytes(&w, m->name.p, m->name.len);
		wr_pad(&w);
	}
	return wr_end(&w, PROTO_OP_HELLO, false, 0, id, len);
}

int proto_hello_req_decode(const proto_hdr *h, const uint8_t *body, proto_hello_req *m)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, PROTO_OP_HELLO, false);
	if (rc)
		return rc;
	m->ver_min = rd_u16(&r, "ver_min");
	m->ver_max = rd_u16(&r, "ver_max");
	uint32_t n = rd_u32(&r, "name_len");
	m->name = rd_str(&r, n, PROTO_NAME_MAX, "client name");
	rd_pad(&r);
	if (!r.err && (m->ver_min < 1 || m->ver_min > m->ver_max))
		proto__rd_fail(&r, "versions %u..%u: need 1 <= min <= max", m->ver_min, m->ver_max);
	return rd_end(&r);
}

int proto_hello_resp_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_hello_resp *m,
			    size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	if (m->version < 1)
		proto__wr_fail(&w, "HELLO version 0");
	if (m->flags & ~PROTO_HELLO_AUTH_REQUIRED)
		proto__wr_fail(&w, "undefined HELLO flags 0x%04x", m->flags);
	if (wr_str_ok(&w, m->server, PROTO_NAME_MAX, "server name")) {
		wr_u16(&w, m->version);
		wr_u16(&w, m->flags);
		wr_u32(&w, m->max_body);
		wr_u32(&w, m->max_batch);
		wr_u32(&w, m->server.len);
		wr_bytes(&w, m->server.p, m->server.len);
		wr_pad(&w);
	}
	return wr_end(&w, PROTO_OP_HELLO, true, 0, id, len);
}

int proto_hello_resp_decode(const proto_hdr *h, const uint8_t *body, proto_hello_resp *m)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, PROTO_OP_HELLO, true);
	if (rc)
		return rc;
	m->version = rd_u16(&r, "version");
	m->flags = rd_u16(&r, "flags");
	m->max_body = rd_u32(&r, "max_body");
	m->max_batch = rd_u32(&r, "max_batch");
	uint32_t n = rd_u32(&r, "server_len");
	m->server = rd_str(&r, n, PROTO_NAME_MAX, "server name");
	rd_pad(&r);
	if (!r.err && m->version < 1)
		proto__rd_fail(&r, "version 0");
	if (!r.err && (m->flags & ~PROTO_HELLO_AUTH_REQUIRED))
		proto__rd_fail(&r, "undefined flags 0x%04x", m->flags);
	return rd_end(&r);
}

/* ---- AUTH ---------------------------------------------------------- */

int proto_auth_req_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_auth_req *m,
			  size_t *len)
{
	return str_body_encode(buf, cap, id, PROTO_OP_AUTH, false, m->token, PROTO_TOKEN_MAX,
			       "token", len);
}

int proto_auth_req_decode(const proto_hdr *h, const uint8_t *body, proto_auth_req *m)
{
	return str_body_decode(h, body, PROTO_OP_AUTH, false, &m->token, PROTO_TOKEN_MAX, "token");
}

static bool role_ok(uint32_t role)
{
	return role >= PROTO_ROLE_READER && role <= PROTO_ROLE_ADMIN;
}

int proto_auth_resp_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_auth_resp *m,
			   size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	if (!role_ok(m->role))
		proto__wr_fail(&w, "AUTH grants role %d, not reader, trainer or admin", (int)m->role);
	wr_u32(&w, m->role);
	wr_zero(&w, 4);
	return wr_end(&w, PROTO_OP_AUTH, true, 0, id, len);
}

int proto_auth_resp_decode(const proto_hdr *h, const uint8_t *body, proto_auth_resp *m)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, PROTO_OP_AUTH, true);
	if (rc)
		return rc;
	uint32_t role = rd_u32(&r, "role");
	rd_zero(&r, 4, "reserved");
	if (!r.err && !role_ok(role))
		proto__rd_fail(&r, "role %u is not reader (1), trainer (2) or admin (3)", role);
	m->role = r.err ? PROTO_ROLE_NONE : (proto_role)role;
	return rd_end(&r);
}

/* ---- PING ---------------------------------------------------------- */

int proto_ping_req_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_ping *m,
			  size_t *len)
{
	return str_body_encode(buf, cap, id, PROTO_OP_PING, false, m->data, UINT32_MAX, "data",
			       len);
}

int proto_ping_req_decode(const proto_hdr *h, const uint8_t *body, proto_ping *m)
{
	return str_body_decode(h, body, PROTO_OP_PING, false, &m->data, UINT32_MAX, "data");
}

int proto_ping_resp_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_ping *m,
			   size_t *len)
{
	return str_body_encode(buf, cap, id, PROTO_OP_PING, true, m->data, UINT32_MAX, "data",
			       len);
}

int proto_ping_resp_decode(const proto_hdr *h, const uint8_t *body, proto_ping *m)
{
	return str_body_decode(h, body, PROTO_OP_PING, true, &m->data, UINT32_MAX, "data");
}

/* ---- WORKER: u32 rank, u32 reserved --------------------------------- */

static bool rank_ok(uint32_t rank)
{
	return rank < EMDB_WORKERS_MAX || rank == EMDB_WORKER_NONE;
}

int proto_worker_req_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_worker_req *m,
			    size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	if (!rank_ok(m->rank))
		proto__wr_fail(&w, "worker rank %u, not below %u", m->rank, EMDB_WORKERS_MAX);
	wr_u32(&w, m->rank);
	wr_zero(&w, 4);
	return wr_end(&w, PROTO_OP_WORKER, false, 0, id, len);
}

int proto_worker_req_decode(const proto_hdr *h, const uint8_t *body, proto_worker_req *m)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, PROTO_OP_WORKER, false);
	if (rc)
		return rc;
	m->rank = rd_u32(&r, "rank");
	rd_zero(&r, 4, "reserved");
	if (!r.err && !rank_ok(m->rank))
		proto__rd_fail(&r, "worker rank %u, not below %u (or 0xFFFFFFFF: none)", m->rank,
			       EMDB_WORKERS_MAX);
	return rd_end(&r);
}

/* ---- INFO ---------------------------------------------------------- */

int proto_info_req_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_info_req *m,
			  size_t *len)
{
	return str_body_encode(buf, cap, id, PROTO_OP_INFO, false, m->section, PROTO_NAME_MAX,
			       "section", len);
}

int proto_info_req_decode(const proto_hdr *h, const uint8_t *body, proto_info_req *m)
{
	return str_body_decode(h, body, PROTO_OP_INFO, false, &m->section, PROTO_NAME_MAX,
			       "section");
}

int proto_info_resp_encode(uint8_t *buf, size_t cap, uint64_t id, const proto_info_resp *m,
			   size_t *len)
{
	return str_body_encode(buf, cap, id, PROTO_OP_INFO, true, m->text, UINT32_MAX, "text",
			       len);
}

int proto_info_resp_decode(const proto_hdr *h, const uint8_t *body, proto_info_resp *m)
{
	return str_body_decode(h, body, PROTO_OP_INFO, true, &m->text, UINT32_MAX, "text");
}

/* ---- CONFIG_GET ---------------------------------------------------- */

int proto_config_get_req_encode(uint8_t *buf, size_t cap, uint64_t id,
				const proto_config_get_req *m, size_t *len)
{
	return str_body_encode(buf, cap, id, PROTO_OP_CONFIG_GET, false, m->pattern,
			       PROTO_NAME_MAX, "pattern", len);
}

int proto_config_get_req_decode(const proto_hdr *h, const uint8_t *body,
				proto_config_get_req *m)
{
	return str_body_decode(h, body, PROTO_OP_CONFIG_GET, false, &m->pattern, PROTO_NAME_MAX,
			       "pattern");
}

/* Key/value entry: u32 key_len, u32 val_len, key, value, padding. */
static void kv_encode(proto_wr *w, const proto_kv *kv)
{
	if (!wr_str_ok(w, kv->key, PROTO_NAME_MAX, "config key") ||
	    !wr_str_ok(w, kv->val, UINT32_MAX, "config value"))
		return;
	wr_u32(w, kv->key.len);
	wr_u32(w, kv->val.len);
	wr_bytes(w, kv->key.p, kv->key.len);
	wr_bytes(w, kv->val.p, kv->val.len);
	wr_pad(w);
}

static void kv_decode(proto_rd *r, proto_kv *kv)
{
	uint32_t kn = rd_u32(r, "key_len");
	uint32_t vn = rd_u32(r, "val_len");
	kv->key = rd_str(r, kn, PROTO_NAME_MAX, "config key");
	kv->val = rd_str(r, vn, UINT32_MAX, "config value");
	rd_pad(r);
}

/* The list both CONFIG_GET responses and CONFIG_SET requests carry: n,
 * four reserved bytes, then n entries.  Encoding takes kv[0..n) or, with
 * kv NULL, copies raw (so a decoded message re-encodes). */
static void kv_list_encode(proto_wr *w, const proto_kv_list *m)
{
	wr_u32(w, m->n);
	wr_zero(w, 4);
	if (m->kv) {
		for (uint32_t i = 0; i < m->n && !w->err; i++)
			kv_encode(w, &m->kv[i]);
	} else if (m->n || m->raw_len) {
		if (!m->raw || m->raw_len % PROTO_ALIGN)
			proto__wr_fail(w, "a key/value list without kv[] or valid raw entries");
		wr_bytes(w, m->raw, m->raw_len);
	}
}

/* Validates every entry; *raw and *raw_len then span them. */
static void kv_list_decode(proto_rd *r, uint32_t max, proto_kv_list *m)
{
	proto_kv kv;
	m->n = rd_u32(r, "n");
	rd_zero(r, 4, "reserved");
	if (!r->err && m->n > max)
		proto__rd_fail(r, "%u key/value pairs: at most %u allowed", m->n, max);
	m->kv = NULL;
	m->raw = r->p + r->off;
	for (uint32_t i = 0; i < m->n && !r->err; i++)
		kv_decode(r, &kv); /* each entry takes >= 8 bytes: bounded by len */
	m->raw_len = r->err ? 0 : r->off - 8;
}

bool proto_kv_list_next(const proto_kv_list *m, size_t *pos, proto_kv *kv)
{
	proto_rd r = { m->raw, m->raw_len, *pos, EMDB_OK, 0, false };
	if (m->kv) {
		if (*pos >= m->n)
			return false;
		*kv = m->kv[(*pos)++];
		return true;
	}
	if (!m->raw || *pos >= m->raw_len)
		return false;
	kv_decode(&r, kv);
	assert(!r.err); /* invariant 2 */
	*pos = r.off;
	return !r.err;
}

int proto_config_get_resp_encode(uint8_t *buf, size_t cap, uint64_t id,
				 const proto_config_get_resp *m, size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	kv_list_encode(&w, m);
	return wr_end(&w, PROTO_OP_CONFIG_GET, true, 0, id, len);
}

int proto_config_get_resp_decode(const proto_hdr *h, const uint8_t *body,
				 proto_config_get_resp *m)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, PROTO_OP_CONFIG_GET, true);
	if (rc)
		return rc;
	kv_list_decode(&r, UINT32_MAX, m);
	return rd_end(&r);
}


/* ---- CONFIG_SET ---------------------------------------------------- */

/* The same list as the CONFIG_GET response, of 1 to 64 pairs. */
int proto_config_set_req_encode(uint8_t *buf, size_t cap, uint64_t id,
				const proto_config_set_req *m, size_t *len)
{
	proto_wr w;
	wr_begin(&w, buf, cap);
	if (m->n == 0 || m->n > PROTO_CONFIG_SET_MAX)
		proto__wr_fail(&w, "CONFIG_SET takes 1 to %u pairs, not %u", PROTO_CONFIG_SET_MAX, m->n);
	kv_list_encode(&w, m);
	return wr_end(&w, PROTO_OP_CONFIG_SET, false, 0, id, len);
}

int proto_config_set_req_decode(const proto_hdr *h, const uint8_t *body,
				proto_config_set_req *m)
{
	proto_rd r;
	int rc = proto__rd_begin(&r, h, body, PROTO_OP_CONFIG_SET, false);
	if (rc)
		return rc;
	kv_list_decode(&r, PROTO_CONFIG_SET_MAX, m);
	if (!r.err && m->n == 0)
		proto__rd_fail(&r, "CONFIG_SET carries no pair");
	return rd_end(&r);
}

