/*
 * net/node_wire.h - the bytes of the node-to-node link (net/node_link.h)
 * around the cluster layer's frames: the link header of every message and
 * the bodies of the handshake.  Pure functions, no I/O, fuzzed
 * (tests/fuzz/fuzz_link.c).
 *
 * Every message is one UCX active message whose AM header is the link
 * header (little-endian):
 *
 *   OFFSET SIZE MEANING
 *   0      1    kind: 1 HELLO, 2 WELCOME, 3 PROOF, 4 ACCEPT, 5 REQUEST, 6 REPLY
 *   1      1    link version (NODE_WIRE_VERSION)
 *   2      2    reserved, 0
 *   4      4    status, i32: EMDB_OK or an emdb error (WELCOME, ACCEPT, REPLY)
 *   8      8    call id (REQUEST, REPLY; 0 otherwise)
 *
 * The AM data is the body: a handshake body (below), the cluster layer's
 * frame (REQUEST, REPLY with status EMDB_OK), or the reason as text (any
 * message with an error status).
 *
 * Handshake, on the endpoint the connecting node (C) opened to the
 * accepting node (A):
 *   C -> A  HELLO    hello{C's view, nonce_c}
 *   A -> C  WELCOME  hello{A's view, nonce_a, mac_a}   or an error + reason
 *   C -> A  PROOF    hello{C's view, nonce_c, mac_c}
 *   A -> C  ACCEPT   status only                         or an error + reason
 * mac_a = HMAC-SHA256(secret, "emdb-node acceptor" | transcript),
 * mac_c = HMAC-SHA256(secret, "emdb-node connector" | transcript),
 * transcript = membership hash | rank C | rank A | nonce_c | nonce_a
 * (ranks u32 LE).  Each side proves it holds the secret over the other's
 * fresh nonce, the labels keep one side's proof from serving as the
 * other's, and the secret never crosses.
 *
 * Hello body:
 *   OFFSET SIZE MEANING
 *   0      8    magic "EMDBNODE"
 *   8      4    protocol version (NODE_WIRE_VERSION)
 *   12     4    sender's rank
 *   16     4    the rank the sender believes it talks to
 *   20     4    nodes (N)
 *   24     4    partitions (P)
 *   28     32   membership hash (net/cluster_conf.h)
 *   60     32   nonce (the sender's)
 *   92     32   mac (zero in HELLO)
 *   124    1    length L of the cluster id, 1..63
 *   125    L    cluster id
 */
#ifndef EMDB_NET_NODE_WIRE_H
#define EMDB_NET_NODE_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net/cluster_conf.h"

#define NODE_WIRE_VERSION 1
#define NODE_HDR_LEN 16
#define NODE_NONCE_LEN 32
#define NODE_MAC_LEN 32
#define NODE_HELLO_FIXED 125
#define NODE_HELLO_MAX (NODE_HELLO_FIXED + CLUSTER_ID_MAX)

typedef enum node_kind {
	NODE_HELLO = 1,
	NODE_WELCOME = 2,
	NODE_PROOF = 3,
	NODE_ACCEPT = 4,
	NODE_REQUEST = 5,
	NODE_REPLY = 6,
} node_kind;

typedef struct node_hdr {
	uint8_t kind;
	uint8_t version;
	int32_t status;
	uint64_t call_id;
} node_hdr;

typedef struct node_hello {
	uint32_t version;
	uint32_t from, to;
	uint32_t nodes, partitions;
	uint8_t hash[CLUSTER_HASH_LEN];
	uint8_t nonce[NODE_NONCE_LEN];
	uint8_t mac[NODE_MAC_LEN];
	char id[CLUSTER_ID_MAX];
} node_hello;

/* The header into out[NODE_HDR_LEN]. */
void node_hdr_encode(const node_hdr *h, uint8_t out[NODE_HDR_LEN]);
/* Decode a received AM header.  Returns 0, or -1 when it is not a link
 * header of this version (wrong length, kind, version, reserved bits). */
int node_hdr_decode(const void *buf, size_t len, node_hdr *h);

/* Encode h into out[NODE_HELLO_MAX]; returns the length. */
size_t node_hello_encode(const node_hello *h, uint8_t *out);
/* Decode a hello body.  Returns 0, or -1 with a reason in why (wrong
 * magic, length, an empty or unprintable cluster id). */
int node_hello_decode(const void *buf, size_t len, node_hello *h, const char **why);

/* This node's view of the cluster as a hello (nonce and mac left zero). */
void node_hello_of(const cluster_conf *c, uint32_t from, uint32_t to, node_hello *h);

/* Compare a peer's hello against this node's view: the peer claims rank
 * `expect_from` (or any rank but `self` when expect_from is UINT32_MAX)
 * and believes it talks to `self`.  Returns 0, or -1 with the
 * disagreement described in why[len]. */
int node_hello_check(const cluster_conf *c, uint32_t self, uint32_t expect_from, const node_hello *h,
		     char *why, size_t len);

/* mac = HMAC-SHA256(secret, label | transcript) as in the comment above;
 * acceptor selects the label.  Returns 0, or -1 if OpenSSL fails. */
int node_mac(const uint8_t *secret, size_t secret_len, bool acceptor, const uint8_t hash[CLUSTER_HASH_LEN],
	     uint32_t rank_c, uint32_t rank_a, const uint8_t nonce_c[NODE_NONCE_LEN],
	     const uint8_t nonce_a[NODE_NONCE_LEN], uint8_t mac[NODE_MAC_LEN]);

/* Constant-time equality of two macs. */
bool node_mac_equal(const uint8_t a[NODE_MAC_LEN], const uint8_t b[NODE_MAC_LEN]);

/* A kind's name for logs ("HELLO", ...; "?" when unknown). */
const char *node_kind_name(unsigned kind);

#endif
