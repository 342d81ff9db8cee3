/*
 * tests/fuzz/samples.h - one or more valid messages of every opcode and
 * direction, with the error bodies: the round-trip cases of
 * tests/unit/test_proto.c and the seeds of the fuzz corpus (gen_corpus.c).
 */
#ifndef EMDB_TEST_PROTO_SAMPLES_H
#define EMDB_TEST_PROTO_SAMPLES_H

#include <string.h>

#include "protocol/proto.h"

#define PROTO_SAMPLES_MAX 128 /* room for every sample below */

typedef struct proto_sample {
	const char *name; /* file-name friendly */
	proto_hdr h;      /* opcode, flags, status, id; body_len unused */
	proto_msg m;
} proto_sample;

static const uint64_t sample_ids[5] = { 1, 0xFFFFFFFFFFFFFFFFull, 42, 7, 1ull << 40 };
static const uint64_t sample_offsets[3] = { 0, 2, 5 };
static const float sample_weights[5] = { 0.5f, 2, -1, 0, 0.25f };
static const float sample_vecs[15] = { 0.5f, -1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, -0.0f };
static const uint8_t sample_found[5] = { 1, 0, 1, 1, 0 };
static const proto_linktest_msg sample_linktest[2] = { { .rank = 1, .request_bytes = 11024, .reply_bytes = 699056 },
						       { .rank = 2, .request_bytes = 56, .reply_bytes = 48 } };
static const proto_kv sample_kv[3] = {
	{ { "maxmemory", 9 }, { "1073741824", 10 } },
	{ { "bind", 4 }, { "127.0.0.1 ::1", 13 } },
	{ { "empty", 5 }, { NULL, 0 } },
};
static proto_table_entry sample_tables[3] = {
	{ 1, 0, "ads" }, { 2, 0, "user.id-v2_x" }, { 9, 0, "a" },
};
static const emdb_ckpt_info sample_ckpts[2] = {
	{ 4, EMDB_CKPT_FULL, 3, 0, 4, 1767225600123ull, 1500, 1000, 123456, 123456, 1ull << 33 },
	{ 5, EMDB_CKPT_INCREMENTAL, 3, 4, 4, 1767225660456ull, 20, 1010, 77, 123500, 4096 },
};

static inline emdb_table_config sample_cfg(const char *name)
{
	emdb_table_config c = EMDB_TABLE_CONFIG_INIT;
	c.dim = 64;
	strcpy(c.name, name);
	emdb_optimizer_defaults(EMDB_OPT_ADAM, &c.optimizer);
	c.optimizer.lr = 0.125;
	c.init.kind = EMDB_INIT_NORMAL;
	c.init.a = 0;
	c.init.b = 0.01;
	c.seed = 0x1234567890abcdefull;
	c.lookup_default = EMDB_DEFAULT_INIT;
	return c;
}

/* Fill out[0..cap) and return how many samples there are. */
static inline size_t proto_samples(proto_sample *out, size_t cap)
{
	proto_sample s[PROTO_SAMPLES_MAX];
	size_t n = 0;
	memset(s, 0, sizeof(s));
#define REQ_(nm, op) \
	(s[n].name = (nm), s[n].h.opcode = PROTO_OP_##op, s[n].h.id = 100 + n, &s[n++].m)
#define RESP_(nm, op)                                                                     \
	(s[n].name = (nm), s[n].h.opcode = PROTO_OP_##op, s[n].h.flags = PROTO_FLAG_RESPONSE, \
	 s[n].h.id = 100 + n, &s[n++].m)
	proto_msg *m;

	m = REQ_("hello_req", HELLO);
	m->hello_req = (proto_hello_req){ 1, 1, { "test-client", 11 } };
	m = RESP_("hello_resp", HELLO);
	m->hello_resp = (proto_hello_resp){ 1, PROTO_HELLO_AUTH_REQUIRED, 1u << 30, 4u << 20,
					    { "emdb 0.1.0", 10 } };
	m = REQ_("auth_req", AUTH);
	m->auth_req.token = (proto_str){ "s3cret-token", 12 };
	m = RESP_("auth_resp", AUTH);
	m->auth_resp.role = PROTO_ROLE_TRAINER;
	m = REQ_("ping_req", PING);
	m->ping_req.data = (proto_str){ "ping!", 5 };
	m = RESP_("ping_resp", PING);
	m->ping_resp.data = (proto_str){ "ping!", 5 };
	m = REQ_("ping_req_empty", PING);
	m = REQ_("info_req", INFO);
	m->info_req.section = (proto_str){ "memory", 6 };
	m = RESP_("info_resp", INFO);
	m->info_resp.text = (proto_str){ "# Memory\nused_bytes: 123\n", 25 };
	m = REQ_("config_get_req", CONFIG_GET);
	m->config_get_req.pattern = (proto_str){ "*", 1 };
	m = RESP_("config_get_resp", CONFIG_GET);
	m->config_get_resp = (proto_config_get_resp){ 3, sample_kv, NULL, 0 };
	m = REQ_("config_set_req", CONFIG_SET);
	m->config_set_req = (proto_config_set_req){ 1, sample_kv, NULL, 0 };
	m = REQ_("config_set_req_3", CONFIG_SET);
	m->config_set_req = (proto_config_set_req){ 3, sample_kv, NULL, 0 };
	m = RESP_("config_set_resp", CONFIG_SET);
	m = REQ_("shutdown_req", SHUTDOWN);
	m = RESP_("shutdown_resp", SHUTDOWN);
	m = REQ_("table_create_req", TABLE_CREATE);
	m->table_create_req.cfg = sample_cfg("ads.user_id");
	m = RESP_("table_create_resp", TABLE_CREATE);
	m->table_create_resp.table = 7;
	m = REQ_("table_drop_req", TABLE_DROP);
	m->table_drop_req.table = 7;
	m = RESP_("table_drop_resp", TABLE_DROP);
	m = REQ_("table_describe_req_id", TABLE_DESCRIBE);
	m->table_describe_req.table = 7;
	m = REQ_("table_describe_req_name", TABLE_DESCRIBE);
	strcpy(m->table_describe_req.name, "ads.user_id");
	m = RESP_("table_describe_resp", TABLE_DESCRIBE);
	m->table_describe_resp.info.id = 7;
	m->table_describe_resp.info.config = sample_cfg("ads.user_id");
	for (int i = 0; i < 20; i++)
		((uint64_t *)&m->table_describe_resp.info.stats)[i] = 1000 + (uint64_t)i;
	m = REQ_("table_list_req", TABLE_LIST);
	m = RESP_("table_list_resp", TABLE_LIST);
	m->table_list_resp = (proto_table_list_resp){ 3, sample_tables };
	m = RESP_("table_list_resp_empty", TABLE_LIST);
	m = REQ_("stats_req", STATS);
	m = RESP_("stats_resp", STATS);
	m->stats_resp.stats.tables = 3;
	for (int i = 0; i < 20; i++)
		((uint64_t *)&m->stats_resp.stats.total)[i] = 7 * (uint64_t)i;
	m->stats_resp.stats.alloc_bytes = 1 << 20;
	m->stats_resp.stats.alloc_peak = 1 << 21;
	m = REQ_("prefetch_req", PREFETCH);
	m->prefetch_req = (proto_prefetch_req){ 1, 5, sample_ids };
	m = RESP_("prefetch_resp", PREFETCH);
	m->prefetch_resp = (proto_prefetch_resp){ 0xabcdef, 5, 1 };
	m = REQ_("ticket_free_req", TICKET_FREE);
	m->ticket_free_req.ticket = 0xabcdef;
	m = RESP_("ticket_free_resp", TICKET_FREE);
	m = REQ_("pull_req_ids", PULL);
	m->pull_req = (proto_pull_req){ 1, 3, 0, 5, sample_ids, 0, 0, NULL };
	m = REQ_("pull_req_ticket_bags", PULL);
	m->pull_req = (proto_pull_req){ 1, 3, 0xabcdef, 0, NULL, 2, EMDB_POOL_MEAN, sample_offsets };
	m = RESP_("pull_resp", PULL);
	m->pull_resp = (proto_pull_resp){ 5, 3, sample_vecs };
	m = RESP_("pull_resp_odd", PULL);
	m->pull_resp = (proto_pull_resp){ 1, 3, sample_vecs };
	m = REQ_("push_req_ids", PUSH);
	m->push_req = (proto_push_req){ 1, 3, 0, 5, sample_ids, 0, 0, NULL, 5, sample_vecs };
	m = REQ_("push_req_ticket", PUSH);
	m->push_req = (proto_push_req){ 1, 3, 0xabcdef, 0, NULL, 0, 0, NULL, 5, sample_vecs };
	m = REQ_("push_req_bags", PUSH);
	m->push_req = (proto_push_req){ 1, 3, 0, 5, sample_ids, 2, EMDB_POOL_SUM, sample_offsets,
					2, sample_vecs };
	m = RESP_("push_resp", PUSH);
	m = REQ_("update_req", UPDATE);
	m = REQ_("update_req_sync", UPDATE);
	m->update_req = (proto_update_req){ 7, 3, 0, 0 };
	m = REQ_("update_req_numbered", UPDATE);
	m->update_req = (proto_update_req){ 7, 3, 12, 0x9e3779b97f4a7c15ull };
	m = RESP_("update_resp", UPDATE);
	m->update_resp.rows = 42;
	m = REQ_("lookup_req", LOOKUP);
	m->lookup_req = (proto_lookup_req){ 1, 3, 5, true, sample_ids };
	m = RESP_("lookup_resp_found", LOOKUP);
	m->lookup_resp = (proto_lookup_resp){ 5, 3, sample_vecs, sample_found };
	m = RESP_("lookup_resp", LOOKUP);
	m->lookup_resp = (proto_lookup_resp){ 5, 3, sample_vecs, NULL };
	m = REQ_("read_state_req", READ_STATE);
	m->read_state_req = (proto_read_state_req){ 1, 5, sample_ids };
	m = RESP_("read_state_resp", READ_STATE);
	m->read_state_resp = (proto_read_state_resp){ 5, 3, sample_vecs, sample_found };
	m = RESP_("error_pull", PULL);
	s[n - 1].h.status = EMDB_ERR_DIM;
	m->err = (proto_str){ "dimension mismatch: table 'ads': dim 5 given, table has 3", 57 };
	m = RESP_("error_none", NONE);
	s[n - 1].h.status = EMDB_ERR_PROTOCOL;
	m->err = (proto_str){ "protocol error: bad magic", 25 };
	m = REQ_("checkpoint_req", CHECKPOINT);
	m->checkpoint_req.kind = EMDB_CKPT_FULL;
	m = REQ_("checkpoint_req_incremental", CHECKPOINT);
	m->checkpoint_req.kind = EMDB_CKPT_INCREMENTAL;
	m = RESP_("checkpoint_resp", CHECKPOINT);
	m->checkpoint_resp.job = 3;
	m = REQ_("restore_req", RESTORE);
	m->restore_req.ckpt = 0;
	m = RESP_("restore_resp", RESTORE);
	m->restore_resp.job = 4;
	m = REQ_("job_status_req", JOB_STATUS);
	m->job_status_req.job = 3;
	m = RESP_("job_status_resp_running", JOB_STATUS);
	m->job_status_resp = (proto_job_status_resp){
		.job = 3, .kind = PROTO_JOB_CHECKPOINT_FULL, .state = PROTO_JOB_RUNNING,
		.progress = { EMDB_PHASE_WRITE, 500, 1000, 64000, 128000, 2000000000ull, 350000, 12, 4 },
	};
	m = RESP_("job_status_resp_done", JOB_STATUS);
	m->job_status_resp = (proto_job_status_resp){
		.job = 4, .kind = PROTO_JOB_RESTORE, .state = PROTO_JOB_DONE,
		.progress = { EMDB_PHASE_DONE, 123500, 123500, 1ull << 33, 1ull << 33, 9000000000ull, 0, 0, 5 },
		.result = sample_ckpts[1],
	};
	m = RESP_("job_status_resp_failed", JOB_STATUS);
	m->job_status_resp = (proto_job_status_resp){
		.job = 5, .kind = PROTO_JOB_CHECKPOINT_INCREMENTAL, .state = PROTO_JOB_FAILED,
		.progress = { EMDB_PHASE_FAILED, 0, 0, 0, 0, 1000, 0, 0, 0 },
		.error = EMDB_ERR_IO, .message = { "IO error: No space left on device", 33 },
	};
	m = RESP_("job_status_resp_idle", JOB_STATUS);
	m = REQ_("checkpoint_list_req", CHECKPOINT_LIST);
	m = RESP_("checkpoint_list_resp", CHECKPOINT_LIST);
	m->checkpoint_list_resp = (proto_checkpoint_list_resp){ 2, sample_ckpts };
	m = RESP_("checkpoint_list_resp_empty", CHECKPOINT_LIST);
	m = REQ_("checkpoint_delete_req", CHECKPOINT_DELETE);
	m->checkpoint_delete_req.ckpt = 4;
	m = RESP_("checkpoint_delete_resp", CHECKPOINT_DELETE);
	m = RESP_("error_checkpoint_busy", CHECKPOINT);
	s[n - 1].h.status = EMDB_ERR_BUSY;
	m->err = (proto_str){ "job 3 (full checkpoint) is running", 34 };
	/* Appended last, so that the ids (and seed files) of the others stay. */
	m = REQ_("push_update_req_ids", PUSH_UPDATE);
	m->push_update_req = (proto_push_update_req){ 1, 3, 0, 5, sample_ids, 0, 0, NULL, 5,
						      sample_vecs };
	m = REQ_("push_update_req_ticket", PUSH_UPDATE);
	m->push_update_req = (proto_push_update_req){ 1, 3, 0xabcdef, 0, NULL, 0, 0, NULL, 5,
						      sample_vecs };
	m = RESP_("push_update_resp", PUSH_UPDATE);
	m->push_update_resp.rows = 5;
	m = RESP_("error_push_update", PUSH_UPDATE);
	s[n - 1].h.status = EMDB_ERR_BATCH;
	m->err = (proto_str){ "4 gradient rows for a ticket of 5 IDs", 37 };
	m = REQ_("table_reserve_req", TABLE_RESERVE);
	m->table_reserve_req = (proto_table_reserve_req){ 7, 40000000000ull };
	m = RESP_("table_reserve_resp", TABLE_RESERVE);
	m = RESP_("error_table_reserve", TABLE_RESERVE);
	s[n - 1].h.status = EMDB_ERR_NOMEM;
	m->err = (proto_str){ "table 'ads': room for 40000000000 rows needs about 1200000 MB more", 66 };
	m = REQ_("pull_weighted_req_ids", PULL_WEIGHTED);
	m->pull_weighted_req = (proto_pull_weighted_req){
		{ 1, 3, 0, 5, sample_ids, 2, EMDB_POOL_SUM, sample_offsets }, 5, sample_weights };
	m = REQ_("pull_weighted_req_ticket", PULL_WEIGHTED);
	m->pull_weighted_req = (proto_pull_weighted_req){
		{ 1, 3, 0xabcdef, 0, NULL, 2, EMDB_POOL_SUM, sample_offsets }, 5, sample_weights };
	m = RESP_("pull_weighted_resp", PULL_WEIGHTED);
	m->pull_weighted_resp = (proto_pull_weighted_resp){ 2, 3, sample_vecs };
	m = REQ_("push_weighted_req_ids", PUSH_WEIGHTED);
	m->push_weighted_req = (proto_push_weighted_req){
		{ 1, 3, 0, 5, sample_ids, 2, EMDB_POOL_SUM, sample_offsets, 2, sample_vecs }, 5,
		sample_weights };
	m = REQ_("push_weighted_req_ticket", PUSH_WEIGHTED);
	m->push_weighted_req = (proto_push_weighted_req){
		{ 1, 3, 0xabcdef, 0, NULL, 2, EMDB_POOL_SUM, sample_offsets, 2, sample_vecs }, 3,
		sample_weights };
	m = RESP_("push_weighted_resp", PUSH_WEIGHTED);
	m = RESP_("error_pull_weighted", PULL_WEIGHTED);
	s[n - 1].h.status = EMDB_ERR_INVALID;
	m->err = (proto_str){ "per-sample weights need pooling SUM", 35 };
	m = REQ_("table_alter_req", TABLE_ALTER);
	m->table_alter_req.table = 7;
	m->table_alter_req.opt = sample_cfg("x").optimizer;
	m->table_alter_req.opt.lr = 0.0625;
	m = RESP_("table_alter_resp", TABLE_ALTER);
	m = RESP_("error_table_alter", TABLE_ALTER);
	s[n - 1].h.status = EMDB_ERR_INVALID;
	m->err = (proto_str){ "table 'ads': the optimizer is adam; it cannot become sgd", 56 };
	m = REQ_("table_scan_req", TABLE_SCAN);
	m->table_scan_req = (proto_table_scan_req){ 7, 3, 12345, 1000, PROTO_SCAN_STATE };
	m = RESP_("table_scan_resp", TABLE_SCAN);
	m->table_scan_resp = (proto_table_scan_resp){ 99, 4, 3, 3, 2, sample_ids, sample_vecs,
						      sample_vecs + 9 };
	m = RESP_("table_scan_resp_last", TABLE_SCAN);
	m->table_scan_resp = (proto_table_scan_resp){ 0, 4, 1, 3, 0, sample_ids, sample_vecs, NULL };
	m = REQ_("table_load_req", TABLE_LOAD);
	m->table_load_req = (proto_table_load_req){ 7, 3, 3, 2, sample_ids, sample_vecs,
						    sample_vecs + 9 };
	m = REQ_("table_load_req_vectors", TABLE_LOAD);
	m->table_load_req = (proto_table_load_req){ 7, 3, 5, 0, sample_ids, sample_vecs, NULL };
	m = RESP_("table_load_resp", TABLE_LOAD);
	m = REQ_("worker_req", WORKER);
	m->worker_req = (proto_worker_req){ 2 };
	m = REQ_("worker_req_none", WORKER);
	m->worker_req = (proto_worker_req){ EMDB_WORKER_NONE };
	m = RESP_("worker_resp", WORKER);
	m = REQ_("linktest_req", LINKTEST);
	m->linktest_req = (proto_linktest_req){ .duration_ms = 1000, .depth = 4, .n = 2, .msgs = sample_linktest };
	m = RESP_("linktest_resp", LINKTEST);
	m->linktest_resp = (proto_linktest_resp){ .rounds = 5000, .elapsed_ns = 1000123456, .bytes_sent = 55400000,
						  .bytes_received = 3495520000ull };
#undef REQ_
#undef RESP_
	for (size_t i = 0; i < n && i < cap; i++) {
		out[i] = s[i];
		out[i].h.version = proto_op_version(out[i].h.opcode);
	}
	return n;
}

#endif
