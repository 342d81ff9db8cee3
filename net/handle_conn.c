/*
 * handle_conn.c - the connection and server requests: HELLO, AUTH, PING,
 * INFO, CONFIG GET/SET, SHUTDOWN.
 *
 * Invariants:
 *   1. HELLO runs once per connection and fixes its protocol version,
 *      the highest both sides speak; no later frame may carry a higher
 *      one (conn.c checks), so a version-1 connection has no PUSH_UPDATE
 *      and no TABLE_RESERVE.
 *   2. A role is granted only by HELLO on a loopback connection when no
 *      token is configured (admin), or by AUTH with a configured token.
 *      A wrong token closes the connection: guesses cost a reconnect.
 *      And they are counted per peer address (net/auth_limit.h): an
 *      address past auth_fail_burst recent failures has its AUTH refused
 *      before the token is compared, and closed, so it learns nothing
 *      until it has waited; the refusal is immediate (no I/O thread
 *      sleeps) and says how long to wait.  A correct token is never held
 *      back by failures from other addresses.
 *   3. CONFIG GET never returns a token (config_get hides them).
 *
 * State changes: c->version, c->client, c->role (HELLO, AUTH); the server
 * configuration (CONFIG SET, through server_config_set); shutdown
 * (SHUTDOWN, through server_request_shutdown).
 */
#include <ctype.h>
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "net/conn.h"
#include "net/handle_int.h"
#include "net/info.h"
#include "net/log.h"
#include "net/loop.h"
#include "net/server.h"
#include "net/stats.h"

int handle_hello(conn *c, const proto_hdr *h, const uint8_t *body)
{
	proto_hello_req m;
	int rc = proto_hello_req_decode(h, body, &m);
	if (rc)
		return rc;
	if (c->version) {
		conn_fail(c, h->id, h->opcode, EMDB_ERR_PROTOCOL, "HELLO was already sent");
		return HANDLED_DONE;
	}
	uint16_t lo = m.ver_min > PROTO_VERSION_MIN ? m.ver_min : PROTO_VERSION_MIN;
	uint16_t hi = m.ver_max < PROTO_VERSION_MAX ? m.ver_max : PROTO_VERSION_MAX;
	if (lo > hi) {
		char msg[128];
		snprintf(msg, sizeof(msg), "client speaks versions %u..%u, server %u..%u", m.ver_min,
			 m.ver_max, PROTO_VERSION_MIN, PROTO_VERSION_MAX);
		conn_fail(c, h->id, h->opcode, EMDB_ERR_UNSUPPORTED, msg);
		return HANDLED_DONE;
	}
	size_t n = m.name.len < CONN_NAME_MAX - 1 ? m.name.len : CONN_NAME_MAX - 1;
	for (size_t i = 0; i < n; i++)
		c->client[i] = isprint((unsigned char)m.name.p[i]) ? m.name.p[i] : '?';
	c->client[n] = '\0';

	server *s = c->srv;
	if (!s->auth_required) {
		if (!c->loopback) {
			conn_fail(c, h->id, h->opcode, EMDB_ERR_AUTH,
				  "no token is configured on this server: only loopback clients are served");
			return HANDLED_DONE;
		}
		c->role = PROTO_ROLE_ADMIN;
	}
	proto_hello_resp r = {
		.version = hi,
		.flags = s->auth_required ? PROTO_HELLO_AUTH_REQUIRED : 0,
		.max_body = (uint32_t)atomic_load_explicit(&s->rt.max_frame, memory_order_relaxed),
		.max_batch = s->max_batch,
		.server = proto_cstr(EMDB_SERVER_NAME),
	};
	rc = HANDLE_REPLY(c, h->id, proto_hello_resp_encode, &r);
	if (rc)
		return rc;
	c->version = (uint8_t)hi;
	log_debug("conn %llu (%s): HELLO from '%s', version %u, role %s",
		  (unsigned long long)c->id, c->peer, c->client, hi, proto_role_name(c->role));
	return HANDLED_OK;
}

int handle_auth(conn *c, const proto_hdr *h, const uint8_t *body)
{
	proto_auth_req m;
	int rc = proto_auth_req_decode(h, body, &m);
	if (rc)
		return rc;
	server *s = c->srv;
	int role;
	char key[AUTH_LIMIT_KEY_MAX];
	auth_rules rules = {
		.burst = (uint32_t)atomic_load_explicit(&s->rt.auth_fail_burst, memory_order_relaxed),
		.window_ms = (uint32_t)atomic_load_explicit(&s->rt.auth_fail_window_ms, memory_order_relaxed),
	};
	auth_limit_key(c->peer, key);
	if (!s->auth_required) {
		role = c->role; /* loopback admin already; tokens mean nothing */
	} else {
		uint64_t wait_ms = auth_limit_admit(&s->auth, key, &rules, stats_now_ns());
		if (wait_ms) {
			char msg[160];
			snprintf(msg, sizeof(msg), "too many failed AUTH attempts from %s: retry in %llu ms", key,
				 (unsigned long long)wait_ms);
			conn_fail(c, h->id, h->opcode, EMDB_ERR_AUTH, msg);
			return HANDLED_DONE;
		}
		role = server_token_role(s, m.token.p, m.token.len);
	}
	if (role == PROTO_ROLE_NONE) {
		log_info("conn %llu (%s): AUTH refused", (unsigned long long)c->id, c->peer);
		if (auth_limit_failed(&s->auth, key, &rules, stats_now_ns()))
			log_warn("AUTH from %s throttled: %u failed attempts within %u ms; its AUTH is refused "
				 "unchecked until it slows down (auth_fail_burst, auth_fail_window_ms)",
				 key, rules.burst, rules.window_ms);
		conn_fail(c, h->id, h->opcode, EMDB_ERR_AUTH, "invalid token");
		return HANDLED_DONE;
	}
	proto_auth_resp r = { .role = (proto_role)role };
	rc = HANDLE_REPLY(c, h->id, proto_auth_resp_encode, &r);
	if (rc)
		return rc;
	c->role = (proto_role)role;
	log_debug("conn %llu (%s): authenticated as %s", (unsigned long long)c->id, c->peer,
		  proto_role_name(c->role));
	return HANDLED_OK;
}

/* WORKER: the connection's later pushes are worker m.rank's: summed per
 * row in rank order with the other workers' (emdb_push_as), on a node of
 * a cluster at every owner (PUSH_RANKED). */
int handle_worker(conn *c, const proto_hdr *h, const uint8_t *body)
{
	proto_worker_req m;
	int rc = proto_worker_req_decode(h, body, &m);
	if (rc)
		return rc;
	uint8_t *p = conn_reply_reserve(c, PROTO_HDR_SIZE);
	if (!p)
		return EMDB_ERR_NOMEM;
	size_t len;
	proto_empty_encode(p, PROTO_HDR_SIZE, h->id, h->opcode, true, &len);
	obuf_commit(&c->out, len);
	c->worker_rank = m.rank;
	return HANDLED_OK;
}

int handle_ping(conn *c, const proto_hdr *h, const uint8_t *body)
{
	proto_ping m;
	int rc = proto_ping_req_decode(h, body, &m);
	if (rc)
		return rc;
	return HANDLE_REPLY(c, h->id, proto_ping_resp_encode, &m);
}

int handle_info(conn *c, const proto_hdr *h, const uint8_t *body)
{
	proto_info_req m;
	int rc = proto_info_req_decode(h, body, &m);
	if (rc)
		return rc;
	char section[PROTO_NAME_MAX + 1];
	rc = handle_cstr(m.section, section, sizeof(section), "INFO section");
	if (rc)
		return rc;
	char *text = NULL;
	size_t len = 0;
	rc = info_build(c->srv, section, NULL, &text, &len);
	if (rc)
		return rc == EMDB_ERR_INVALID
			       ? handle_fail(rc, "unknown INFO section '%s' (try server, clients, memory, ops, tables, persistence or all)",
					     section)
			       : rc;
	proto_info_resp r = { .text = { text, (uint32_t)len } };
	rc = HANDLE_REPLY(c, h->id, proto_info_resp_encode, &r);
	emdb_free(text);
	return rc;
}

#define CONFIG_VAL_MAX 1100

int handle_config_get(conn *c, const proto_hdr *h, const uint8_t *body)
{
	proto_config_get_req m;
	int rc = proto_config_get_req_decode(h, body, &m);
	if (rc)
		return rc;
	char pattern[PROTO_NAME_MAX + 1];
	rc = handle_cstr(m.pattern, pattern, sizeof(pattern), "CONFIG GET pattern");
	if (rc)
		return rc;
	if (!pattern[0])
		strcpy(pattern, "*");

	size_t nkeys = config_key_count();
	proto_kv *kv = emdb_calloc(nkeys, sizeof(*kv));
	char *vals = emdb_malloc(nkeys * CONFIG_VAL_MAX);
	if (!kv || !vals) {
		emdb_free(kv);
		emdb_free(vals);
		return EMDB_ERR_NOMEM;
	}
	net_config cfg;
	server_config_copy(c->srv, &cfg);
	uint32_t n = 0;
	for (size_t i = 0; i < nkeys; i++) {
		const char *key = config_key_name(i);
		if (fnmatch(pattern, key, 0) != 0)
			continue;
		char *v = vals + n * CONFIG_VAL_MAX;
		config_get(&cfg, key, v, CONFIG_VAL_MAX);
		kv[n].key = proto_cstr(key);
		kv[n].val = proto_cstr(v);
		n++;
	}
	proto_config_get_resp r = { .n = n, .kv = kv };
	rc = HANDLE_REPLY(c, h->id, proto_config_get_resp_encode, &r);
	emdb_free(kv);
	emdb_free(vals);
	return rc;
}

/* CONFIG SET with one or more pairs: all applied or none (the server's
 * configuration is replaced whole under its lock). */
int handle_config_set(conn *c, const proto_hdr *h, const uint8_t *body)
{
	proto_config_set_req m;
	int rc = proto_config_set_req_decode(h, body, &m);
	if (rc)
		return rc;
	enum { KEY_CAP = PROTO_NAME_MAX + 1, PAIR_CAP = KEY_CAP + CONFIG_VAL_MAX };
	char *strs = emdb_malloc((size_t)m.n * PAIR_CAP);
	const char *keys[PROTO_CONFIG_SET_MAX], *vals[PROTO_CONFIG_SET_MAX];
	if (!strs)
		return EMDB_ERR_NOMEM;
	proto_kv kv;
	size_t pos = 0;
	uint32_t n = 0;
	while (n < m.n && proto_kv_list_next(&m, &pos, &kv)) {
		char *k = strs + (size_t)n * PAIR_CAP, *v = k + KEY_CAP;
		if ((rc = handle_cstr(kv.key, k, KEY_CAP, "CONFIG SET key")) ||
		    (rc = handle_cstr(kv.val, v, CONFIG_VAL_MAX, "CONFIG SET value")))
			goto out;
		keys[n] = k;
		vals[n++] = v;
	}
	uint8_t *p = conn_reply_reserve(c, PROTO_HDR_SIZE);
	if (!p) {
		rc = EMDB_ERR_NOMEM;
		goto out;
	}
	char err[CONFIG_PATH_MAX + 256];
	if (server_config_set_many(c->srv, n, keys, vals, err, sizeof(err)) < 0) {
		obuf_cancel(&c->out);
		rc = handle_fail(EMDB_ERR_INVALID, "%s", err);
		goto out;
	}
	for (uint32_t i = 0; i < n; i++)
		log_info("conn %llu (%s): CONFIG SET %s %s%s", (unsigned long long)c->id, c->peer, keys[i],
			 vals[i], n > 1 ? " (one of several set together)" : "");
	size_t len;
	rc = proto_empty_encode(p, PROTO_HDR_SIZE, h->id, h->opcode, true, &len);
	if (rc) {
		obuf_cancel(&c->out);
		goto out;
	}
	obuf_commit(&c->out, len);
	rc = HANDLED_OK;
out:
	emdb_free(strs);
	return rc;
}

int handle_shutdown(conn *c, const proto_hdr *h, const uint8_t *body)
{
	int rc = proto_empty_decode(h);
	if (rc)
		return rc;
	rc = conn_reply_empty(c, h->id, h->opcode);
	if (rc)
		return rc;
	char why[160];
	snprintf(why, sizeof(why), "SHUTDOWN from conn %llu (%s, '%s')", (unsigned long long)c->id,
		 c->peer, c->client);
	server_request_shutdown(c->srv, why);
	return HANDLED_OK;
}
