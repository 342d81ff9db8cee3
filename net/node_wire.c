/*
 * node_wire.c - the link header and handshake bodies of the node-to-node
 * link (net/node_wire.h has the byte layout), and the handshake's MACs.
 *
 * Invariants:
 *   1. Decoders read only inside [buf, buf + len) and check every length
 *      before they read; a refusal leaves the output unspecified but
 *      touches nothing else.
 *   2. A decoded hello's cluster id is NUL-terminated, 1..63 printable
 *      bytes: safe to print.
 *   3. MACs are compared in constant time (CRYPTO_memcmp).
 *
 * State changes: none.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "net/node_wire.h"

static const char MAGIC[8] = { 'E', 'M', 'D', 'B', 'N', 'O', 'D', 'E' };

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

void node_hdr_encode(const node_hdr *h, uint8_t out[NODE_HDR_LEN])
{
	out[0] = h->kind;
	out[1] = h->version;
	out[2] = out[3] = 0;
	put32(out + 4, (uint32_t)h->status);
	put64(out + 8, h->call_id);
}

int node_hdr_decode(const void *buf, size_t len, node_hdr *h)
{
	const uint8_t *p = buf;
	if (len != NODE_HDR_LEN || p[1] != NODE_WIRE_VERSION || p[2] || p[3] || p[0] < NODE_HELLO ||
	    p[0] > NODE_REPLY)
		return -1;
	h->kind = p[0];
	h->version = p[1];
	h->status = (int32_t)get32(p + 4);
	h->call_id = get64(p + 8);
	return 0;
}

size_t node_hello_encode(const node_hello *h, uint8_t *out)
{
	size_t idlen = strnlen(h->id, CLUSTER_ID_MAX - 1);
	memcpy(out, MAGIC, sizeof(MAGIC));
	put32(out + 8, h->version);
	put32(out + 12, h->from);
	put32(out + 16, h->to);
	put32(out + 20, h->nodes);
	put32(out + 24, h->partitions);
	memcpy(out + 28, h->hash, CLUSTER_HASH_LEN);
	memcpy(out + 60, h->nonce, NODE_NONCE_LEN);
	memcpy(out + 92, h->mac, NODE_MAC_LEN);
	out[124] = (uint8_t)idlen;
	memcpy(out + NODE_HELLO_FIXED, h->id, idlen);
	return NODE_HELLO_FIXED + idlen;
}

int node_hello_decode(const void *buf, size_t len, node_hello *h, const char **why)
{
	const uint8_t *p = buf;
	if (len < NODE_HELLO_FIXED || memcmp(p, MAGIC, sizeof(MAGIC)) != 0) {
		*why = "not a handshake (bad magic or too short)";
		return -1;
	}
	size_t idlen = p[124];
	if (idlen == 0 || idlen >= CLUSTER_ID_MAX || len != NODE_HELLO_FIXED + idlen) {
		*why = "handshake length does not match its cluster id";
		return -1;
	}
	for (size_t i = 0; i < idlen; i++)
		if (!isgraph(p[NODE_HELLO_FIXED + i])) {
			*why = "cluster id is not printable";
			return -1;
		}
	h->version = get32(p + 8);
	h->from = get32(p + 12);
	h->to = get32(p + 16);
	h->nodes = get32(p + 20);
	h->partitions = get32(p + 24);
	memcpy(h->hash, p + 28, CLUSTER_HASH_LEN);
	memcpy(h->nonce, p + 60, NODE_NONCE_LEN);
	memcpy(h->mac, p + 92, NODE_MAC_LEN);
	memcpy(h->id, p + NODE_HELLO_FIXED, idlen);
	h->id[idlen] = '\0';
	return 0;
}

void node_hello_of(const cluster_conf *c, uint32_t from, uint32_t to, node_hello *h)
{
	memset(h, 0, sizeof(*h));
	h->version = NODE_WIRE_VERSION;
	h->from = from;
	h->to = to;
	h->nodes = c->nodes;
	h->partitions = c->partitions;
	memcpy(h->hash, c->hash, CLUSTER_HASH_LEN);
	snprintf(h->id, sizeof(h->id), "%s", c->id);
}

int node_hello_check(const cluster_conf *c, uint32_t self, uint32_t expect_from, const node_hello *h,
		     char *why, size_t len)
{
	if (h->version != NODE_WIRE_VERSION)
		snprintf(why, len, "node protocol version %u, this node speaks %u", h->version, NODE_WIRE_VERSION);
	else if (strcmp(h->id, c->id) != 0)
		snprintf(why, len, "cluster id '%s', this node's is '%s'", h->id, c->id);
	else if (h->nodes != c->nodes)
		snprintf(why, len, "a cluster of %u nodes, this node's file lists %u", h->nodes, c->nodes);
	else if (h->partitions != c->partitions)
		snprintf(why, len, "%u partitions, this node's file says %u", h->partitions, c->partitions);
	else if (memcmp(h->hash, c->hash, CLUSTER_HASH_LEN) != 0)
		snprintf(why, len, "a different membership (the node addresses in the cluster files differ)");
	else if (h->from >= c->nodes || h->from == self)
		snprintf(why, len, "claims rank %u, which is not another node's", h->from);
	else if (expect_from != UINT32_MAX && h->from != expect_from)
		snprintf(why, len, "answers as rank %u where the cluster file puts rank %u", h->from,
			 expect_from);
	else if (h->to != self)
		snprintf(why, len, "believes it talks to rank %u, but this node is rank %u", h->to, self);
	else
		return 0;
	return -1;
}

int node_mac(const uint8_t *secret, size_t secret_len, bool acceptor, const uint8_t hash[CLUSTER_HASH_LEN],
	     uint32_t rank_c, uint32_t rank_a, const uint8_t nonce_c[NODE_NONCE_LEN],
	     const uint8_t nonce_a[NODE_NONCE_LEN], uint8_t mac[NODE_MAC_LEN])
{
	static const char la[] = "emdb-node acceptor", lc[] = "emdb-node connector";
	const char *label = acceptor ? la : lc;
	size_t llen = acceptor ? sizeof(la) - 1 : sizeof(lc) - 1;
	uint8_t msg[sizeof(lc) + CLUSTER_HASH_LEN + 8 + 2 * NODE_NONCE_LEN];
	size_t n = 0;
	memcpy(msg, label, llen);
	n += llen;
	memcpy(msg + n, hash, CLUSTER_HASH_LEN);
	n += CLUSTER_HASH_LEN;
	put32(msg + n, rank_c);
	put32(msg + n + 4, rank_a);
	n += 8;
	memcpy(msg + n, nonce_c, NODE_NONCE_LEN);
	n += NODE_NONCE_LEN;
	memcpy(msg + n, nonce_a, NODE_NONCE_LEN);
	n += NODE_NONCE_LEN;
	unsigned int outlen = 0;
	if (!HMAC(EVP_sha256(), secret, (int)secret_len, msg, n, mac, &outlen) || outlen != NODE_MAC_LEN)
		return -1;
	return 0;
}

bool node_mac_equal(const uint8_t a[NODE_MAC_LEN], const uint8_t b[NODE_MAC_LEN])
{
	return CRYPTO_memcmp(a, b, NODE_MAC_LEN) == 0;
}

const char *node_kind_name(unsigned kind)
{
	static const char *const names[] = { "?", "HELLO", "WELCOME", "PROOF", "ACCEPT", "REQUEST", "REPLY" };
	return kind < sizeof(names) / sizeof(names[0]) ? names[kind] : "?";
}
