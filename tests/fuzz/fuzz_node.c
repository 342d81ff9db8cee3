/*
 * tests/fuzz/fuzz_node.c - libFuzzer target for the node-to-node decoder
 * (protocol/proto_node.h), what a node runs on every frame a peer sends.
 *
 * One input is decoded three ways: as sent, with the direction flipped
 * (request <-> response, status cleared), and as an error response, so
 * that every body codec sees every byte pattern.  Each frame that decodes
 * must:
 *   - point its arrays inside the frame;
 *   - encode back (proto_node_encode) to exactly the same bytes: the
 *     encoding is canonical and the encoder accepts all that the decoder
 *     does.
 * Besides sanitizer findings, the target aborts when the decoder returns
 * anything but OK, PROTOCOL or UNSUPPORTED for a well-aligned frame, or a
 * round trip differs.
 *
 * Built with clang -fsanitize=fuzzer,address,undefined when EMDB_FUZZ=ON
 * (tests/fuzz/CMakeLists.txt); built with the normal compiler into
 * fuzz_replay_node, which replays tests/fuzz/corpus_node in every test run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <emdb/alloc.h>

#include "protocol/proto_node.h"
#include "tests/fuzz/fuzz.h"

static void die(const char *what, const proto_node_msg *m, int rc)
{
	fprintf(stderr, "fuzz_node: %s: node %s %s rc %d: %s\n", what, proto_node_op_name(m->hdr.opcode),
		m->hdr.flags & PROTO_NODE_FLAG_RESPONSE ? "response" : "request", rc, emdb_last_error());
	abort();
}

static void inside(const void *p, size_t bytes, const uint8_t *f, size_t len, const proto_node_msg *m)
{
	if (p && ((const uint8_t *)p < f || (const uint8_t *)p + bytes > f + len))
		die("an array points outside the frame", m, 0);
}

static void one(const uint8_t *f, size_t len)
{
	proto_node_msg m;
	int rc = proto_node_decode(f, len, &m);
	if (rc != EMDB_OK) {
		if (rc != EMDB_ERR_PROTOCOL && rc != EMDB_ERR_UNSUPPORTED)
			die("decoder error code", &m, rc);
		return;
	}
	const proto_node_sel *s = &m.u.sel;
	const proto_node_grads *g = &m.u.grads;
	const proto_node_vecs *v = &m.u.vecs;
	switch (m.hdr.opcode) {
	case PROTO_NODE_PREFETCH:
	case PROTO_NODE_PULL:
	case PROTO_NODE_LOOKUP:
	case PROTO_NODE_READ_STATE:
		if (!(m.hdr.flags & PROTO_NODE_FLAG_RESPONSE))
			inside(s->ids, (size_t)s->n * 8, f, len, &m);
		else if (m.hdr.status == 0 && m.hdr.opcode != PROTO_NODE_PREFETCH) {
			inside(v->vecs, (size_t)v->n * v->width * 4, f, len, &m);
			inside(v->found, v->n, f, len, &m);
		}
		break;
	case PROTO_NODE_PUSH:
	case PROTO_NODE_PUSH_RANKED:
	case PROTO_NODE_PUSH_UPDATE:
		if (!(m.hdr.flags & PROTO_NODE_FLAG_RESPONSE)) {
			inside(g->ids, (size_t)g->n * 8, f, len, &m);
			inside(g->row_of, (size_t)g->n * 4, f, len, &m);
			inside(g->scale, (size_t)((g->flags & PROTO_NODE_GRADS_WEIGHTED) ? g->n : g->n_rows) * 4, f, len, &m);
			inside(g->grads, (size_t)g->n_rows * g->dim * 4, f, len, &m);
		}
		break;
	case PROTO_NODE_SCAN:
	case PROTO_NODE_LOAD: {
		bool page = m.hdr.opcode == PROTO_NODE_SCAN;
		if (page != !!(m.hdr.flags & PROTO_NODE_FLAG_RESPONSE) || m.hdr.status < 0)
			break;
		uint32_t n = page ? m.u.page.n : m.u.load.n, dim = page ? m.u.page.dim : m.u.load.dim;
		uint32_t per_row = page ? m.u.page.per_row : m.u.load.per_row;
		inside(page ? m.u.page.ids : m.u.load.ids, (size_t)n * 8, f, len, &m);
		inside(page ? m.u.page.vecs : m.u.load.vecs, (size_t)n * dim * 4, f, len, &m);
		inside(page ? m.u.page.state : m.u.load.state, (size_t)n * per_row * 4, f, len, &m);
		break;
	}
	default:
		break;
	}
	size_t need = 0;
	rc = proto_node_encode(NULL, 0, &m, &need, NULL);
	if (rc != EMDB_ERR_LIMIT || need != len)
		die("size of the re-encoding", &m, rc);
	uint8_t *out = malloc(len);
	if (!out)
		abort();
	size_t got = 0;
	rc = proto_node_encode(out, len, &m, &got, NULL);
	if (rc != EMDB_OK || got != len || memcmp(out, f, len))
		die("the re-encoding differs", &m, rc);
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* An exactly-sized copy, 8-aligned as malloc's blocks are. */
	uint8_t *p = malloc(size ? size : 1);
	if (!p)
		return 0;
	if (size)
		memcpy(p, data, size);
	size_t before = emdb_alloc_bytes();
	one(p, size);
	if (size >= PROTO_NODE_HDR_SIZE) {
		int32_t zero = 0, err = EMDB_ERR_NO_TABLE;
		p[5] ^= PROTO_NODE_FLAG_RESPONSE;
		memcpy(p + 8, &zero, 4);
		one(p, size);
		p[5] |= PROTO_NODE_FLAG_RESPONSE;
		memcpy(p + 8, &err, 4);
		one(p, size);
	}
	if (emdb_alloc_bytes() != before) {
		fprintf(stderr, "fuzz_node: %zu bytes leaked through emdb_malloc\n", emdb_alloc_bytes() - before);
		abort();
	}
	free(p);
	return 0;
}
