/*
 * tests/fuzz/fuzz_link.c - libFuzzer target for the node-to-node link's
 * decoders: the link header of every active message and the handshake's
 * hello body (net/node_wire.h), checked against this node's view as the
 * link checks them, and the cluster file (net/cluster_conf.h).
 *
 * The first byte of an input picks the decoder (modulo 3); the rest is
 * the bytes.  Besides sanitizer findings, the target aborts when a decoder
 * breaks its contract:
 *   - node_hdr_decode: a success whose re-encoding differs from the input
 *     (a header with bits the decoder ignored);
 *   - node_hello_decode: a success whose re-encoding differs from the
 *     input, a cluster id that is empty, unterminated or not printable, or
 *     a refusal without a reason; node_hello_check: a refusal without a
 *     reason, or a success for a hello that is not this node's view;
 *   - cluster_conf_parse: a refusal without a message or one that changed
 *     the output, or a success with a rank without a host or port, fewer
 *     partitions than nodes, or two nodes at one address.
 *
 * Built with clang -fsanitize=fuzzer,address,undefined when EMDB_FUZZ=ON;
 * built with the normal compiler into fuzz_replay_link, which replays
 * tests/fuzz/corpus_link in every test run.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/cluster_conf.h"
#include "net/node_wire.h"
#include "tests/fuzz/fuzz.h"

enum { D_HDR, D_HELLO, D_CONF, N_DECODERS };

static void die(const char *what)
{
	fprintf(stderr, "fuzz_link: %s\n", what);
	abort();
}

/* The view the hellos are checked against: 3 nodes. */
static const cluster_conf *view(void)
{
	static cluster_conf c;
	static int ready;
	if (!ready) {
		static const char text[] = "cluster_id fuzz\npartitions 64\nnode 0 127.0.0.1:7000\n"
					   "node 1 127.0.0.1:7001\nnode 2 127.0.0.1:7002\n";
		char err[256];
		if (cluster_conf_parse(text, sizeof(text) - 1, "view", &c, err, sizeof(err)) < 0)
			die(err);
		ready = 1;
	}
	return &c;
}

static void fuzz_hdr(const uint8_t *p, size_t n)
{
	node_hdr h;
	if (node_hdr_decode(p, n, &h) < 0)
		return;
	uint8_t out[NODE_HDR_LEN];
	node_hdr_encode(&h, out);
	if (memcmp(out, p, NODE_HDR_LEN) != 0)
		die("a header decoded with bits its encoding does not give back");
}

static void fuzz_hello(const uint8_t *p, size_t n)
{
	node_hello h;
	const char *why = NULL;
	if (node_hello_decode(p, n, &h, &why) < 0) {
		if (!why || !*why)
			die("a hello refused without a reason");
		return;
	}
	size_t idlen = strnlen(h.id, sizeof(h.id));
	if (idlen == 0 || idlen == sizeof(h.id))
		die("a decoded cluster id empty or unterminated");
	for (size_t i = 0; i < idlen; i++)
		if (!isgraph((unsigned char)h.id[i]))
			die("a decoded cluster id with an unprintable byte");
	uint8_t out[NODE_HELLO_MAX];
	size_t m = node_hello_encode(&h, out);
	if (m != n || memcmp(out, p, n) != 0)
		die("a hello whose re-encoding differs");
	const cluster_conf *c = view();
	char reason[256] = "";
	for (uint32_t self = 0; self < c->nodes; self++) {
		int rc = node_hello_check(c, self, UINT32_MAX, &h, reason, sizeof(reason));
		if (rc < 0 && !reason[0])
			die("a hello refused by the check without a reason");
		if (rc == 0 && (h.to != self || h.from == self || h.from >= c->nodes || h.nodes != c->nodes ||
				h.partitions != c->partitions || strcmp(h.id, c->id) != 0 ||
				memcmp(h.hash, c->hash, CLUSTER_HASH_LEN) != 0 || h.version != NODE_WIRE_VERSION))
			die("a hello accepted that is not this node's view");
	}
}

static void fuzz_conf(const uint8_t *p, size_t n)
{
	cluster_conf c;
	memset(&c, 0xA5, sizeof(c));
	cluster_conf before = c;
	char err[512] = "";
	if (cluster_conf_parse((const char *)p, n, "fuzz", &c, err, sizeof(err)) < 0) {
		if (!err[0])
			die("a cluster file refused without a message");
		if (memcmp(&c, &before, sizeof(c)) != 0)
			die("a refused cluster file changed the output");
		return;
	}
	if (c.nodes == 0 || c.partitions < c.nodes || !c.id[0])
		die("a cluster file accepted without nodes, id or enough partitions");
	for (uint32_t r = 0; r < c.nodes; r++) {
		if (!c.node[r].host[0] || !c.node[r].port)
			die("a node accepted without host or port");
		for (uint32_t q = 0; q < r; q++)
			if (c.node[q].port == c.node[r].port && !strcmp(c.node[q].host, c.node[r].host))
				die("two nodes accepted at one address");
	}
	cluster_conf_free(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	switch (data[0] % N_DECODERS) {
	case D_HDR: fuzz_hdr(data + 1, size - 1); break;
	case D_HELLO: fuzz_hello(data + 1, size - 1); break;
	case D_CONF: fuzz_conf(data + 1, size - 1); break;
	}
	return 0;
}
