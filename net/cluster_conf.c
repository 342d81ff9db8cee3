/*
 * cluster_conf.c - reading the cluster file (net/cluster_conf.h) and the
 * membership hash the nodes compare at their handshake.
 *
 * Invariants:
 *   1. A refused file changes nothing: the result is built in a local
 *      struct and copied out only once every check passed.
 *   2. Every rank 0 .. N-1 is defined exactly once and no two ranks share
 *      an address (host text and port), so a rank names one node.
 *   3. The hash covers exactly what the nodes must agree on: a canonical
 *      text "emdb-cluster 1\nid ID\npartitions P\nnode R HOST:PORT\n..." in
 *      rank order; comments, blanks and the order of lines do not count.
 *
 * State changes: none outside the caller's struct.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include <emdb/alloc.h>

#include "net/cluster_conf.h"

#define LINE_MAX_LEN 1024

static void errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* A decimal integer in [lo, hi] spanning all of s. */
static int parse_uint(const char *s, unsigned long lo, unsigned long hi, unsigned long *out)
{
	if (!isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	char *end;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

/* "host:port" or "[v6]:port" into n.  Returns 0 or -1 with a reason. */
static int parse_addr(char *s, cluster_node *n, const char **why)
{
	char *host = s, *colon;
	if (*s == '[') {
		char *close = strchr(s, ']');
		if (!close || close[1] != ':') {
			*why = "an IPv6 address is written [ADDR]:PORT";
			return -1;
		}
		*close = '\0';
		host = s + 1;
		colon = close + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon || strchr(s, ':') != colon) {
			*why = "the address must be HOST:PORT (an IPv6 literal in brackets)";
			return -1;
		}
		*colon = '\0';
	}
	unsigned long port;
	if (!*host || strlen(host) >= CLUSTER_HOST_MAX) {
		*why = "the host is empty or too long";
		return -1;
	}
	if (parse_uint(colon + 1, 1, 65535, &port) < 0) {
		*why = "the port must be 1..65535";
		return -1;
	}
	for (const char *p = host; *p; p++) {
		if (!isalnum((unsigned char)*p) && !strchr(".-_:%", *p)) {
			*why = "the host has a character that no host name or address has";
			return -1;
		}
	}
	strcpy(n->host, host);
	n->port = (uint16_t)port;
	return 0;
}

void cluster_conf_addr(const cluster_conf *c, uint32_t rank, char *buf, size_t len)
{
	if (rank >= c->nodes) {
		snprintf(buf, len, "?");
		return;
	}
	const cluster_node *n = &c->node[rank];
	if (strchr(n->host, ':'))
		snprintf(buf, len, "[%s]:%u", n->host, n->port);
	else
		snprintf(buf, len, "%s:%u", n->host, n->port);
}

static int hash_membership(cluster_conf *c)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned int outlen = 0;
	char line[CLUSTER_HOST_MAX + 64];
	int ok = md && EVP_DigestInit_ex(md, EVP_sha256(), NULL);
	int n = snprintf(line, sizeof(line), "emdb-cluster 1\nid %s\npartitions %u\n", c->id, c->partitions);
	ok = ok && EVP_DigestUpdate(md, line, (size_t)n);
	for (uint32_t r = 0; ok && r < c->nodes; r++) {
		char addr[CLUSTER_HOST_MAX + 16];
		cluster_conf_addr(c, r, addr, sizeof(addr));
		n = snprintf(line, sizeof(line), "node %u %s\n", r, addr);
		ok = EVP_DigestUpdate(md, line, (size_t)n);
	}
	ok = ok && EVP_DigestFinal_ex(md, c->hash, &outlen) && outlen == CLUSTER_HASH_LEN;
	EVP_MD_CTX_free(md);
	return ok ? 0 : -1;
}

/* The next whitespace-separated word of *s, NUL-terminated in place. */
static char *word(char **s)
{
	char *p = *s;
	while (isspace((unsigned char)*p))
		p++;
	if (!*p)
		return NULL;
	char *w = p;
	while (*p && !isspace((unsigned char)*p))
		p++;
	if (*p)
		*p++ = '\0';
	*s = p;
	return w;
}

/* The nodes seen so far, grown as lines come (ranks may come in any
 * order; the count is known only at the end). */
typedef struct seen {
	cluster_node *node;
	uint8_t *set;
	uint32_t cap;
} seen;

static int seen_put(seen *s, unsigned long rank, const cluster_node *n)
{
	if (rank >= s->cap) {
		uint32_t cap = s->cap ? s->cap : 8;
		while (cap <= rank)
			cap *= 2;
		cluster_node *nn = emdb_realloc(s->node, cap * sizeof(*nn));
		if (!nn)
			return -1;
		s->node = nn;
		uint8_t *ns = emdb_realloc(s->set, cap);
		if (!ns)
			return -1;
		memset(ns + s->cap, 0, cap - s->cap);
		s->set = ns;
		s->cap = cap;
	}
	s->node[rank] = *n;
	s->set[rank] = 1;
	return 0;
}

/* One line (comment already cut).  Returns 0 or -1 with the reason. */
static int parse_line(char *s, cluster_conf *c, seen *sn, bool *have_id, bool *have_p, char *why,
		      size_t whylen)
{
	char *key = word(&s);
	if (!key)
		return 0;
	char *v1 = word(&s), *v2 = word(&s), *extra = word(&s);
	if (!strcmp(key, "cluster_id")) {
		if (!v1 || v2) {
			errf(why, whylen, "cluster_id takes one word");
			return -1;
		}
		if (*have_id) {
			errf(why, whylen, "cluster_id given twice");
			return -1;
		}
		if (strlen(v1) >= CLUSTER_ID_MAX) {
			errf(why, whylen, "cluster_id longer than %d bytes", CLUSTER_ID_MAX - 1);
			return -1;
		}
		for (const char *p = v1; *p; p++)
			if (!isgraph((unsigned char)*p)) {
				errf(why, whylen, "cluster_id must be printable ASCII");
				return -1;
			}
		strcpy(c->id, v1);
		*have_id = true;
		return 0;
	}
	if (!strcmp(key, "partitions")) {
		unsigned long p;
		if (!v1 || v2 || parse_uint(v1, 1, CLUSTER_PARTITIONS_MAX, &p) < 0) {
			errf(why, whylen, "partitions takes one number in 1..%u", CLUSTER_PARTITIONS_MAX);
			return -1;
		}
		if (*have_p) {
			errf(why, whylen, "partitions given twice");
			return -1;
		}
		c->partitions = (uint32_t)p;
		*have_p = true;
		return 0;
	}
	if (!strcmp(key, "node")) {
		unsigned long rank;
		cluster_node n;
		const char *bad = NULL;
		if (!v1 || !v2 || extra) {
			errf(why, whylen, "a node line is: node RANK HOST:PORT");
			return -1;
		}
		if (parse_uint(v1, 0, CLUSTER_MAX_NODES - 1, &rank) < 0) {
			errf(why, whylen, "rank '%s' is not a number in 0..%d", v1, CLUSTER_MAX_NODES - 1);
			return -1;
		}
		if (parse_addr(v2, &n, &bad) < 0) {
			errf(why, whylen, "node %lu: %s", rank, bad);
			return -1;
		}
		if (rank < sn->cap && sn->set[rank]) {
			errf(why, whylen, "node %lu defined twice", rank);
			return -1;
		}
		if (seen_put(sn, rank, &n) < 0) {
			errf(why, whylen, "out of memory");
			return -1;
		}
		return 0;
	}
	errf(why, whylen, "unknown keyword '%s' (cluster_id, partitions or node)", key);
	return -1;
}

/* Whole-file checks once every line is read. */
static int check_whole(cluster_conf *c, seen *sn, bool have_id, char *why, size_t whylen)
{
	if (!have_id) {
		errf(why, whylen, "no cluster_id line");
		return -1;
	}
	uint32_t n = 0;
	for (uint32_t r = 0; r < sn->cap; r++)
		if (sn->set[r])
			n = r + 1;
	if (n == 0) {
		errf(why, whylen, "no node lines");
		return -1;
	}
	for (uint32_t r = 0; r < n; r++) {
		if (!sn->set[r]) {
			errf(why, whylen, "node %u is missing: ranks must be 0..%u without a gap", r, n - 1);
			return -1;
		}
		for (uint32_t q = 0; q < r; q++)
			if (sn->node[q].port == sn->node[r].port && !strcmp(sn->node[q].host, sn->node[r].host)) {
				errf(why, whylen, "nodes %u and %u have the same address", q, r);
				return -1;
			}
	}
	if (c->partitions < n) {
		errf(why, whylen, "partitions (%u) must be at least the number of nodes (%u)", c->partitions, n);
		return -1;
	}
	c->nodes = n;
	return 0;
}

int cluster_conf_parse(const char *text, size_t len, const char *name, cluster_conf *out, char *err,
		       size_t errlen)
{
	cluster_conf c;
	seen sn = { 0 };
	bool have_id = false, have_p = false;
	char why[256], line[LINE_MAX_LEN + 2];
	unsigned lineno = 0;
	size_t pos = 0;
	memset(&c, 0, sizeof(c));
	c.partitions = CLUSTER_PARTITIONS_DEFAULT;
	while (pos < len) {
		size_t end = pos;
		while (end < len && text[end] != '\n')
			end++;
		lineno++;
		if (end - pos > LINE_MAX_LEN) {
			errf(err, errlen, "%s:%u: line longer than %d bytes", name, lineno, LINE_MAX_LEN);
			goto fail;
		}
		memcpy(line, text + pos, end - pos);
		line[end - pos] = '\0';
		if (memchr(line, '\0', end - pos)) {
			errf(err, errlen, "%s:%u: a NUL byte: not a text file", name, lineno);
			goto fail;
		}
		pos = end + 1;
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		if (parse_line(line, &c, &sn, &have_id, &have_p, why, sizeof(why)) < 0) {
			errf(err, errlen, "%s:%u: %s", name, lineno, why);
			goto fail;
		}
	}
	if (check_whole(&c, &sn, have_id, why, sizeof(why)) < 0) {
		errf(err, errlen, "%s: %s", name, why);
		goto fail;
	}
	c.node = emdb_malloc(c.nodes * sizeof(*c.node));
	if (!c.node) {
		errf(err, errlen, "%s: out of memory", name);
		goto fail;
	}
	memcpy(c.node, sn.node, c.nodes * sizeof(*c.node));
	if (hash_membership(&c) < 0) {
		errf(err, errlen, "%s: cannot compute the membership hash (OpenSSL)", name);
		emdb_free(c.node);
		goto fail;
	}
	emdb_free(sn.node);
	emdb_free(sn.set);
	*out = c;
	return 0;
fail:
	emdb_free(sn.node);
	emdb_free(sn.set);
	return -1;
}

int cluster_conf_load(const char *path, cluster_conf *out, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		errf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	size_t cap = 4096, len = 0;
	char *text = emdb_malloc(cap);
	int rc = -1;
	while (text) {
		if (len == cap) {
			if (cap >= (16u << 20)) {
				errf(err, errlen, "%s: larger than 16 MiB", path);
				goto done;
			}
			char *t = emdb_realloc(text, cap * 2);
			if (!t)
				break;
			text = t;
			cap *= 2;
		}
		size_t k = fread(text + len, 1, cap - len, f);
		len += k;
		if (k == 0)
			break;
	}
	if (!text) {
		errf(err, errlen, "%s: out of memory", path);
		goto done;
	}
	if (ferror(f)) {
		errf(err, errlen, "%s: read error", path);
		goto done;
	}
	rc = cluster_conf_parse(text, len, path, out, err, errlen);
done:
	emdb_free(text);
	fclose(f);
	return rc;
}

void cluster_conf_free(cluster_conf *c)
{
	emdb_free(c->node);
	memset(c, 0, sizeof(*c));
}
