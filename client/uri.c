/*
 * uri.c - connection URIs: tcp://HOST[:PORT], tls://HOST[:PORT],
 * unix:///PATH and mem://[NAME], each with an optional ?key=value&...
 * query.
 *
 * Invariants:
 *   1. A URI is accepted whole or not at all: every byte is accounted for
 *      by the scheme, the authority or path, and a known query key.  An
 *      unknown key or a stray character is an error, never ignored, so a
 *      misspelt "?tokn=" cannot silently connect without a token.
 *   2. Query values are percent-decoded exactly once; a '%' not followed
 *      by two hex digits is an error.  Decoded values may not contain NUL.
 *   3. On failure *u owns nothing (the strings decoded so far are freed).
 */
#include <stdlib.h>
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/client.h>

#include "client/client_int.h"
#include "client/uri.h"

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* Percent-decode p[0..n) into a new string. */
static int decode(const char *p, size_t n, const char *key, char **out)
{
	char *s = emdb_malloc(n + 1);
	size_t k = 0;
	if (!s)
		return cl_seterr(EMDB_ERR_NOMEM, "emdb_client_connect: out of memory");
	for (size_t i = 0; i < n; i++) {
		if (p[i] != '%') {
			s[k++] = p[i];
			continue;
		}
		int hi = i + 1 < n ? hexval(p[i + 1]) : -1;
		int lo = i + 2 < n ? hexval(p[i + 2]) : -1;
		if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
			emdb_free(s);
			return cl_seterr(EMDB_ERR_INVALID,
					 "URI: bad percent-escape in the value of '%s' at byte %zu", key, i);
		}
		s[k++] = (char)(hi * 16 + lo);
		i += 2;
	}
	s[k] = 0;
	*out = s;
	return EMDB_OK;
}

/* The field of a query key whose value is a string, NULL for others. */
static char **string_key(cl_uri *u, const char *k, size_t klen)
{
	const struct {
		const char *name;
		char **field;
	} keys[] = {
		{ "token", &u->token },   { "name", &u->client_name }, { "ca", &u->tls_ca },
		{ "cert", &u->tls_cert }, { "key", &u->tls_key },
	};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (strlen(keys[i].name) == klen && !memcmp(k, keys[i].name, klen))
			return keys[i].field;
	return NULL;
}

static int parse_query(const char *q, cl_uri *u)
{
	while (*q) {
		const char *amp = strchr(q, '&');
		size_t len = amp ? (size_t)(amp - q) : strlen(q);
		const char *eq = memchr(q, '=', len);
		if (!eq)
			return cl_seterr(EMDB_ERR_INVALID, "URI: query item '%.*s' has no '='", (int)len, q);
		size_t klen = (size_t)(eq - q);
		const char *v = eq + 1;
		size_t vlen = len - klen - 1;
		int rc;
		char **str = string_key(u, q, klen);
		if (str) {
			if (*str)
				return cl_seterr(EMDB_ERR_INVALID, "URI: '%.*s' given twice", (int)klen, q);
			if (str != &u->token && str != &u->client_name && u->kind != CL_URI_TLS)
				return cl_seterr(EMDB_ERR_INVALID, "URI: '%.*s' is for tls:// only", (int)klen, q);
			rc = decode(v, vlen, q, str);
		} else if (klen == 7 && !memcmp(q, "timeout", 7)) {
			uint64_t ms = 0;
			if (vlen == 0 || vlen > 10)
				return cl_seterr(EMDB_ERR_INVALID, "URI: timeout must be 0..4294967295 ms");
			for (size_t i = 0; i < vlen; i++) {
				if (v[i] < '0' || v[i] > '9')
					return cl_seterr(EMDB_ERR_INVALID,
							 "URI: timeout '%.*s' is not a number of ms",
							 (int)vlen, v);
				ms = ms * 10 + (uint64_t)(v[i] - '0');
			}
			if (ms > UINT32_MAX)
				return cl_seterr(EMDB_ERR_INVALID, "URI: timeout must be 0..4294967295 ms");
			u->has_timeout = true;
			u->timeout_ms = (uint32_t)ms;
			rc = EMDB_OK;
		} else {
			return cl_seterr(EMDB_ERR_INVALID,
					 "URI: unknown query key '%.*s' (known: token, name, timeout; "
					 "for tls:// ca, cert, key)",
					 (int)klen, q);
		}
		if (rc != EMDB_OK)
			return rc;
		q += len;
		if (*q == '&')
			q++;
	}
	return EMDB_OK;
}

static int parse_tcp(const char *a, size_t len, cl_uri *u)
{
	const char *host = a, *port = NULL;
	size_t hlen;

	if (len > 0 && a[len - 1] == '/')
		len--; /* tcp://host:port/ */
	if (len > 0 && a[0] == '[') {
		const char *rb = memchr(a, ']', len);
		if (!rb)
			return cl_seterr(EMDB_ERR_INVALID, "URI: '[' of an IPv6 address without ']'");
		host = a + 1;
		hlen = (size_t)(rb - host);
		size_t rest = len - (size_t)(rb + 1 - a);
		if (rest) {
			if (rb[1] != ':')
				return cl_seterr(EMDB_ERR_INVALID, "URI: expected ':PORT' after ']'");
			port = rb + 2;
		}
	} else {
		const char *colon = memchr(a, ':', len);
		hlen = colon ? (size_t)(colon - a) : len;
		if (colon)
			port = colon + 1;
	}
	if (hlen == 0)
		return cl_seterr(EMDB_ERR_INVALID, "URI: tcp:// needs a host");
	if (hlen >= sizeof(u->host))
		return cl_seterr(EMDB_ERR_INVALID, "URI: host longer than %zu bytes", sizeof(u->host) - 1);
	for (size_t i = 0; i < hlen; i++)
		if (host[i] == '/' || host[i] == '@' || host[i] == ' ' || host[i] == '[' || host[i] == ']')
			return cl_seterr(EMDB_ERR_INVALID, "URI: character '%c' in the host", host[i]);
	memcpy(u->host, host, hlen);
	u->host[hlen] = 0;
	u->port = EMDB_CLIENT_DEFAULT_PORT;
	if (port) {
		size_t plen = len - (size_t)(port - a);
		uint32_t p = 0;
		if (plen == 0 || plen > 5)
			return cl_seterr(EMDB_ERR_INVALID, "URI: port must be 1..65535");
		for (size_t i = 0; i < plen; i++) {
			if (port[i] < '0' || port[i] > '9')
				return cl_seterr(EMDB_ERR_INVALID, "URI: port '%.*s' is not a number",
						 (int)plen, port);
			p = p * 10 + (uint32_t)(port[i] - '0');
		}
		if (p == 0 || p > 65535)
			return cl_seterr(EMDB_ERR_INVALID, "URI: port must be 1..65535, not %u", p);
		u->port = (uint16_t)p;
	}
	return EMDB_OK;
}

static int parse_unix(const char *a, size_t len, cl_uri *u)
{
	if (len == 0 || a[0] != '/')
		return cl_seterr(EMDB_ERR_INVALID, "URI: unix:// needs an absolute path (unix:///run/emdb.sock)");
	if (len >= sizeof(u->path))
		return cl_seterr(EMDB_ERR_INVALID, "URI: socket path longer than %zu bytes",
				 sizeof(u->path) - 1);
	memcpy(u->path, a, len);
	u->path[len] = 0;
	return EMDB_OK;
}

static int parse_mem(const char *a, size_t len, cl_uri *u)
{
	if (len >= sizeof(u->name))
		return cl_seterr(EMDB_ERR_INVALID, "URI: mem:// name longer than %zu bytes",
				 sizeof(u->name) - 1);
	for (size_t i = 0; i < len; i++) {
		char ch = a[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		      ch == '_' || ch == '.' || ch == '-'))
			return cl_seterr(EMDB_ERR_INVALID,
					 "URI: mem:// name may hold only [A-Za-z0-9_.-], not '%c'", ch);
	}
	memcpy(u->name, a, len);
	u->name[len] = 0;
	return EMDB_OK;
}

int cl_uri_parse(const char *s, cl_uri *u)
{
	static const struct {
		const char *prefix;
		cl_uri_kind kind;
	} schemes[] = {
		{ "tcp://", CL_URI_TCP },
		{ "tls://", CL_URI_TLS },
		{ "unix://", CL_URI_UNIX },
		{ "mem://", CL_URI_MEM },
	};
	int rc;

	memset(u, 0, sizeof(*u));
	if (!s)
		return cl_seterr(EMDB_ERR_INVALID, "URI is NULL");
	for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
		size_t pl = strlen(schemes[i].prefix);
		if (strncmp(s, schemes[i].prefix, pl) == 0) {
			u->kind = schemes[i].kind;
			s += pl;
			break;
		}
	}
	if (!u->kind)
		return cl_seterr(EMDB_ERR_INVALID,
				 "URI '%.64s': scheme must be tcp://, tls://, unix:// or mem://", s);

	const char *q = strchr(s, '?');
	size_t len = q ? (size_t)(q - s) : strlen(s);
	switch (u->kind) {
	case CL_URI_TCP:
	case CL_URI_TLS:
		rc = parse_tcp(s, len, u);
		break;
	case CL_URI_UNIX:
		rc = parse_unix(s, len, u);
		break;
	default:
		rc = parse_mem(s, len, u);
		break;
	}
	if (rc == EMDB_OK && q)
		rc = parse_query(q + 1, u);
	if (rc != EMDB_OK)
		cl_uri_free(u);
	return rc;
}

void cl_uri_free(cl_uri *u)
{
	emdb_free(u->token);
	emdb_free(u->client_name);
	emdb_free(u->tls_ca);
	emdb_free(u->tls_cert);
	emdb_free(u->tls_key);
	u->token = u->client_name = u->tls_ca = u->tls_cert = u->tls_key = NULL;
}
