/*
 * tests/fuzz/node_samples.h - one well-formed frame of every node-to-node
 * opcode and direction (protocol/proto_node.h), the seeds of
 * tests/fuzz/corpus_node (gen_node_corpus.c) and the round trips of
 * tests/unit/test_proto_node.c.
 */
#ifndef EMDB_TESTS_NODE_SAMPLES_H
#define EMDB_TESTS_NODE_SAMPLES_H

#include <string.h>

#include "protocol/proto_node.h"

static const uint64_t node_sample_ids[5] = { 0, 1, 42, 1ull << 40, UINT64_MAX };
static const uint32_t node_sample_rows[5] = { 0, 0, 1, 2, 2 };
static const float node_sample_scale[3] = { 1.0f, 0.5f, 0.25f };
static const float node_sample_f[5 * 4] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20 };
static const uint8_t node_sample_found[5] = { 1, 0, 1, 1, 0 };
static const float node_sample_w[5] = { 0.5f, -1.0f, 2.0f, 0.0f, 3.0f };
static const uint8_t node_sample_echo[16] = { 'e', 'm', 'd', 'b', 0, 1, 2, 3, 0xff, 0xfe, 0, 0, 7, 7, 7, 7 };

/* Fill m with sample k (0 .. NODE_SAMPLES-1); false past the last. */
#define NODE_SAMPLES 42
static inline bool node_sample(int k, proto_node_msg *m)
{
	memset(m, 0, sizeof(*m));
	proto_node_hdr h = { PROTO_NODE_VERSION, 0, 0, 0, 3, 1, 0 };
	proto_node_hdr r = { PROTO_NODE_VERSION, PROTO_NODE_FLAG_RESPONSE, 0, 0, 3, 1, 0 };
	switch (k) {
	case 0:
		m->hdr = h, m->hdr.opcode = PROTO_NODE_PREFETCH;
		m->u.sel = (proto_node_sel){ 0, 5, 0, 0, node_sample_ids };
		return true;
	case 1:
		m->hdr = r, m->hdr.opcode = PROTO_NODE_PREFETCH;
		m->u.ticket = (proto_node_ticket){ 0x100000001ull, 5 };
		return true;
	case 2:
		m->hdr = h, m->hdr.opcode = PROTO_NODE_PULL;
		m->u.sel = (proto_node_sel){ 0x100000001ull, 5, 4, 0, NULL };
		return true;
	case 3:
		m->hdr = h, m->hdr.opcode = PROTO_NODE_PULL;
		m->u.sel = (proto_node_sel){ 0, 5, 4, 0, node_sample_ids };
		return true;
	case 4:
		m->hdr = r, m->hdr.opcode = PROTO_NODE_PULL;
		m->u.vecs = (proto_node_vecs){ 5, 4, 0, node_sample_f, NULL };
		return true;
	case 5:
		m->hdr = h, m->hdr.opcode = PROTO_NODE_PUSH;
		m->u.grads = (proto_node_grads){ 0, 5, 4, 5, 0, node_sample_ids, NULL, NULL, node_sample_f, 0 };
		return true;
	case 6:
		m->hdr = h, m->hdr.opcode = PROTO_NODE_PUSH;
		m->u.grads = (proto_node_grads){ 0x200000003ull, 5, 4, 3, PROTO_NODE_GRADS_MAPPED, NULL, node_sample_rows,
						 node_sample_scale, node_sample_f, 0 };
		return true;
	case 7:
		m->hdr = h, m->hdr.opcode = PROTO_NODE_PUSH_UPDATE;
		m->u.grads = (proto_node_grads){ 0, 0, 4, 0, 0, NULL, NULL, NULL, NULL, 0 };
		return true;
	case 8:
		m->hdr = r, m->hdr.opcode = PROTO_NODE_PUSH_UPDATE;
		m->u.rows.rows = 17;
		return true;
	case 9:
		m->hdr = h, m->hdr.opcode = PROTO_NODE_UPDATE, m->hdr.table = 0;
		return true;
	case 10:
		m->hdr = h, m->hdr.opcode = PROTO_NODE_LOOKUP;
		m->u.sel = (proto_node_sel){ 0, 5, 4, PROTO_NODE_SEL_FOUND, node_sample_ids };
		return true;
	case 11:
		m->hdr = r, m->hdr.opcode = PROTO_NODE_LOOKUP;
		m->u.vecs = (proto_node_vecs){ 5, 4, PROTO_NODE_VECS_FOUND, node_sample_f, node_sample_found };
		return true;
	case 12:
		m->hdr = h, m->hdr.opcode = PROTO_NODE_READ_STATE;
		m->u.sel = (proto_node_sel){ 0, 5, 0, 0, node_sample_ids };
		return true;
	case 13:
		m->hdr = h, m->hdr.opcode = PROTO_NODE_TICKET_FREE;
		m->u.sel = (proto_node_sel){ 0x100000001ull, 0, 0, 0, NULL };
		return true;
	case 14:
		m->hdr = h, m->hdr.opcode = PROTO_NODE_STEP_ARRIVE;
		m->u.step = (proto_node_step){ 3, 1000, (2ull << 48) | 7, 0, 0, 0 };
		return true;
	case 15:
		m->hdr = h, m->hdr.opcode = PROTO_NODE_TABLE_PREPARE, m->hdr.table = 0;
		m->u.admin.action = PROTO_NODE_ADMIN_CREATE;
		m->u.admin.txn = 9;
		m->u.admin.cfg = (emdb_table_config)EMDB_TABLE_CONFIG_INIT;
		strcpy(m->u.admin.cfg.name, "ads");
		m->u.admin.cfg.dim = 16;
		return true;
	case 16:
		m->hdr = h, m->hdr.opcode = PROTO_NODE_TABLE_COMMIT;
		m->u.admin = (proto_node_admin){ .action = PROTO_NODE_ADMIN_RESERVE, .txn = 10, .rows = 1000000 };
		return true;
	case 17:
		m->hdr = h, m->hdr.opcode = PROTO_NODE_TABLE_ADMIN;
		m->u.admin = (proto_node_admin){ .action = PROTO_NODE_ADMIN_DROP };
		return true;
	case 18:
		m->hdr = r, m->hdr.opcode = PROTO_NODE_TABLE_PREPARE;
		m->u.rows.rows = 4;
		return true;
	case 19:
		m->hdr = r, m->hdr.opcode = PROTO_NODE_PULL, m->hdr.status = EMDB_ERR_NO_TABLE;
		m->u.err = (proto_str){ "no such table: 3", 16 };
		return true;
	case 20:
		m->hdr = h, m->hdr.opcode = PROTO_NODE_STEP_LEAVE, m->hdr.table = 0;
		m->u.step = (proto_node_step){ 0, 0, (2ull << 48) | 7, 0, 0, 0 };
		return true;
	case 21: /* a weighted pooled PUSH by IDs: a weight per position */
		m->hdr = h, m->hdr.opcode = PROTO_NODE_PUSH;
		m->u.grads = (proto_node_grads){ 0, 5, 4, 3, PROTO_NODE_GRADS_MAPPED | PROTO_NODE_GRADS_WEIGHTED,
						 node_sample_ids, node_sample_rows, node_sample_w, node_sample_f, 0 };
		return true;
	case 22:
		m->hdr = h, m->hdr.opcode = PROTO_NODE_TABLE_PREPARE;
		m->u.admin = (proto_node_admin){ .action = PROTO_NODE_ADMIN_ALTER, .txn = 11 };
		m->u.admin.opt = (emdb_optimizer){ .kind = EMDB_OPT_ADAM, .lr = 0.01, .eps = 1e-8, .beta1 = 0.9,
						   .beta2 = 0.999 };
		return true;
	case 23:
		m->hdr = h, m->hdr.opcode = PROTO_NODE_SCAN;
		m->u.scan = (proto_node_scan){ 17, 4, 4, PROTO_NODE_SCAN_STATE };
		return true;
	case 24:
		m->hdr = r, m->hdr.opcode = PROTO_NODE_SCAN;
		m->u.page = (proto_node_page){ 2, 4, 2, 19, 7, node_sample_ids, node_sample_f, node_sample_f + 8 };
		return true;
	case 25:
		m->hdr = h, m->hdr.opcode = PROTO_NODE_LOAD;
		m->u.load = (proto_node_load){ 5, 4, 0, node_sample_ids, node_sample_f, NULL };
		return true;
	case 26:
		m->hdr = h, m->hdr.opcode = PROTO_NODE_TABLE_STATS;
		return true;
	case 27:
		m->hdr = r, m->hdr.opcode = PROTO_NODE_TABLE_STATS;
		m->u.stats.stats = (emdb_table_stats){ .rows = 5, .step = 2, .bytes_vectors = 80, .bytes_index = 4096 };
		m->u.stats.alloc_bytes = 1 << 20;
		return true;
	case 28:
		m->hdr = h, m->hdr.opcode = PROTO_NODE_CKPT_ASK, m->hdr.table = 0;
		m->u.ckpt = (proto_node_ckpt){ .kind = 2 };
		return true;
	case 29:
		m->hdr = r, m->hdr.opcode = PROTO_NODE_CKPT_ASK, m->hdr.table = 0;
		m->u.rows.rows = 7;
		return true;
	case 30:
		m->hdr = h, m->hdr.opcode = PROTO_NODE_CKPT_HOLD, m->hdr.table = 0;
		m->u.ckpt = (proto_node_ckpt){ .kind = 1, .id = 7, .timeout_ms = 600000 };
		return true;
	case 31:
		m->hdr = h, m->hdr.opcode = PROTO_NODE_CKPT_WRITE, m->hdr.table = 0;
		m->u.ckpt = (proto_node_ckpt){ .kind = 1, .id = 7 };
		return true;
	case 32:
		m->hdr = r, m->hdr.opcode = PROTO_NODE_CKPT_WRITE, m->hdr.table = 0;
		m->u.ckpt = (proto_node_ckpt){ .kind = 1, .id = 7, .part = 12, .rows = 600 };
		return true;
	case 33:
		m->hdr = h, m->hdr.opcode = PROTO_NODE_CKPT_END, m->hdr.table = 0;
		m->u.ckpt = (proto_node_ckpt){ .kind = 1, .flags = PROTO_NODE_CKPT_COMMIT, .id = 7 };
		return true;
	case 34:
		m->hdr = h, m->hdr.opcode = PROTO_NODE_CKPT_RESTORE, m->hdr.table = 0;
		m->u.ckpt = (proto_node_ckpt){ .kind = 1 };
		return true;
	case 35:
		m->hdr = h, m->hdr.opcode = PROTO_NODE_CKPT_LOAD, m->hdr.table = 0;
		m->u.ckpt = (proto_node_ckpt){ .kind = 1, .id = 7 };
		return true;
	case 36:
		m->hdr = h, m->hdr.opcode = PROTO_NODE_CKPT_SWAP, m->hdr.table = 0;
		m->u.ckpt = (proto_node_ckpt){ .kind = 1, .id = 7 };
		return true;
	case 37: /* a weighted pooled PUSH by IDs of worker 2 */
		m->hdr = h, m->hdr.opcode = PROTO_NODE_PUSH_RANKED;
		m->u.grads = (proto_node_grads){ 0, 5, 4, 3, PROTO_NODE_GRADS_MAPPED | PROTO_NODE_GRADS_WEIGHTED,
						 node_sample_ids, node_sample_rows, node_sample_w, node_sample_f, 2 };
		return true;
	case 38: /* worker 1's step 5 (of its session), numbered */
		m->hdr = h, m->hdr.opcode = PROTO_NODE_STEP_ARRIVE_SEQ;
		m->u.step = (proto_node_step){ 3, 1000, (2ull << 48) | 7, 5, 0x9e3779b97f4a7c15ull, 1 };
		return true;
	case 39: /* a linktest message: 16 payload bytes, 64 wanted back */
		m->hdr = h, m->hdr.opcode = PROTO_NODE_ECHO, m->hdr.table = 0;
		m->u.echo = (proto_node_echo){ .reply_len = 64, .len = 16, .payload = node_sample_echo };
		return true;
	case 40: /* the smallest one: no payload, an empty reply wanted */
		m->hdr = h, m->hdr.opcode = PROTO_NODE_ECHO, m->hdr.table = 0;
		m->u.echo = (proto_node_echo){ .reply_len = 0, .len = 0, .payload = NULL };
		return true;
	case 41:
		m->hdr = r, m->hdr.opcode = PROTO_NODE_ECHO, m->hdr.table = 0;
		m->u.echo = (proto_node_echo){ .reply_len = 0, .len = 16, .payload = node_sample_echo };
		return true;
	}
	return false;
}

#endif
