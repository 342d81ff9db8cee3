/*
 * test_cluster_manifest.c - the cluster manifest (checkpoint/cluster_ckpt.h):
 * its codec and its files, and read-only stores.
 *
 * What is checked: a manifest round-trips field for field (the ranked
 * workers' last steps too), one of version 1 (no workers' steps) reads; every shorter
 * prefix, a flipped byte anywhere (checksum), another magic or version,
 * and fields that break a rule (re-checksummed so that the rule, not the
 * checksum, refuses them) are refused with CORRUPT and leave nothing
 * allocated; the encoder refuses what the decoder would.  Files: written
 * manifests are listed in id order, read back (0: the newest), a .tmp
 * leftover is ignored, an id is not written twice, retention keeps the
 * newest.  A store opened read-only lists and restores, and refuses
 * checkpoints, deletes and retention.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include <emdb/alloc.h>
#include <emdb/checkpoint.h>
#include <emdb/error.h>

#include "checkpoint/cluster_ckpt.h"
#include "tests/lib/tmpdir.h"

static void tmpdir_make(char *dir, size_t len)
{
	snprintf(dir, len, "/tmp/emdb-cman-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static uint32_t rank_of[8] = { 0, 0, 0, 1, 1, 1, 2, 2 };
static cman_table tables[2] = { { 1, 5 }, { 3, 9 } };
static cman_seq seqs[2] = { { 1, 0, 0xa11ce, 5, 640 }, { 3, 7, 0xb0b, 9, 12 } };

static cman sample(cman_part parts[3])
{
	cman m = { .id = 4, .kind = 1, .created_ms = 1700000000000ull, .nodes = 3, .partitions = 8, .epoch = 1,
		   .rank_of = rank_of, .n_tables = 2, .tables = tables, .parts = parts, .n_seqs = 2, .seqs = seqs };
	strcpy(m.cluster_id, "ads-training");
	for (uint32_t r = 0; r < 3; r++) {
		parts[r] = (cman_part){ .rank = r, .part = 10 + r, .rows = 100 * r, .sum = 0xabc0 + r };
		snprintf(parts[r].addr, sizeof(parts[r].addr), "10.0.0.%u:7900", r + 1);
	}
	return m;
}

static void resum(uint8_t *p, size_t len)
{
	uint64_t s = XXH3_64bits(p, len - 8);
	memcpy(p + len - 8, &s, 8);
}

Test(cluster_manifest, round_trip)
{
	cman_part parts[3];
	cman m = sample(parts), d;
	uint8_t *buf;
	size_t len;
	cr_assert_eq(cman_encode(&m, &buf, &len), EMDB_OK, "%s", emdb_last_error());
	cr_assert_eq(cman_decode(buf, len, &d), EMDB_OK, "%s", emdb_last_error());
	cr_assert_eq(d.id, 4);
	cr_assert_eq(d.kind, 1);
	cr_assert_eq(d.created_ms, m.created_ms);
	cr_assert_str_eq(d.cluster_id, "ads-training");
	cr_assert_eq(d.nodes, 3);
	cr_assert_eq(d.partitions, 8);
	cr_assert_eq(d.epoch, 1);
	cr_assert(memcmp(d.rank_of, rank_of, sizeof(rank_of)) == 0);
	cr_assert_eq(d.n_tables, 2);
	cr_assert_eq(d.tables[1].id, 3);
	cr_assert_eq(d.tables[1].step, 9);
	for (uint32_t r = 0; r < 3; r++) {
		cr_assert_eq(d.parts[r].rank, r);
		cr_assert_eq(d.parts[r].part, 10 + r);
		cr_assert_eq(d.parts[r].rows, 100 * r);
		cr_assert_eq(d.parts[r].sum, 0xabc0 + r);
		cr_assert_str_eq(d.parts[r].addr, parts[r].addr);
	}
	cr_assert_eq(d.n_seqs, 2);
	cr_assert(memcmp(d.seqs, seqs, sizeof(seqs)) == 0, "the workers' steps differ");
	cman_free(&d);
	emdb_free(buf);
}

Test(cluster_manifest, version_1_is_read_without_workers_steps)
{
	cman_part parts[3];
	cman m = sample(parts), d;
	m.n_seqs = 0;
	m.seqs = NULL;
	uint8_t *buf;
	size_t len;
	cr_assert_eq(cman_encode(&m, &buf, &len), EMDB_OK);
	uint32_t v1 = 1;
	memcpy(buf + 4, &v1, 4); /* what a build before the workers' steps wrote */
	resum(buf, len);
	cr_assert_eq(cman_decode(buf, len, &d), EMDB_OK, "%s", emdb_last_error());
	cr_assert_eq(d.n_seqs, 0);
	cr_assert_eq(d.parts[2].part, 12);
	cman_free(&d);
	emdb_free(buf);
	/* Version 1 with a step count where its reserved bytes were: refused. */
	m = sample(parts);
	cr_assert_eq(cman_encode(&m, &buf, &len), EMDB_OK);
	memcpy(buf + 4, &v1, 4);
	resum(buf, len);
	cr_assert_eq(cman_decode(buf, len, &d), EMDB_ERR_CORRUPT);
	cr_assert(strstr(emdb_last_error(), "reserved"), "%s", emdb_last_error());
	emdb_free(buf);
}

Test(cluster_manifest, damage_refused)
{
	cman_part parts[3];
	cman m = sample(parts), d;
	uint8_t *buf;
	size_t len;
	cr_assert_eq(cman_encode(&m, &buf, &len), EMDB_OK);
	for (size_t n = 0; n < len; n++) /* every truncation */
		cr_assert_eq(cman_decode(buf, n, &d), EMDB_ERR_CORRUPT, "a prefix of %zu of %zu bytes", n, len);
	for (size_t i = 0; i < len; i++) { /* every flipped byte */
		buf[i] ^= 0x20;
		cr_assert_eq(cman_decode(buf, len, &d), EMDB_ERR_CORRUPT, "byte %zu flipped", i);
		buf[i] ^= 0x20;
	}
	cr_assert_eq(cman_decode(buf, len, &d), EMDB_OK);
	cman_free(&d);
	/* Rules, past the checksum (re-summed): version, a rank past the
	 * nodes, a part of rank 0 at position 1, a count larger than the
	 * bytes, trailing bytes. */
	uint8_t *c = malloc(len + 8);
	struct {
		size_t at;
		uint32_t v;
		const char *what;
	} bad[] = {
		/* layout: 56-byte head, the 12-byte id, rank_of at 68, tables
		 * at 100, parts at 132 (32 bytes and the 13-byte address each) */
		{ 4, 3, "version 3" },
		{ 0, 0x4e444d45, "another magic" },
		{ 24, 3, "kind 3" },
		{ 28, 9, "9 nodes for 8 partitions" },
		{ 28, 4, "4 nodes, 3 parts there" },
		{ 36, 3, "a table count larger than the bytes" },
		{ 52, 3, "a count of workers' steps larger than the bytes" },
		{ 68 + 4 * 7, 3, "partition 7 mapped to rank 3 of 3" },
		{ 100 + 16, 1, "table 1 twice" },
		{ 132 + 45, 0, "part 1 says rank 0" },
		{ 132 + 4, 300, "an address longer than 255 bytes" },
		/* the workers' steps at 132 + 3 * 45 = 267, 32 bytes each */
		{ 267, 0, "a worker's step of table 0" },
		{ 267 + 32 + 4, 65536, "worker 65536" },
		{ 267 + 32 + 16, 0, "a worker's step 0" },
	};
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		memcpy(c, buf, len);
		memcpy(c + bad[k].at, &bad[k].v, 4);
		resum(c, len);
		cr_assert_eq(cman_decode(c, len, &d), EMDB_ERR_CORRUPT, "%s: %s", bad[k].what, emdb_last_error());
	}
	memcpy(c, buf, len - 8);
	memset(c + len - 8, 0, 8);
	resum(c, len + 8);
	cr_assert_eq(cman_decode(c, len + 8, &d), EMDB_ERR_CORRUPT, "trailing bytes");
	cr_assert(strstr(emdb_last_error(), "after the last part"), "%s", emdb_last_error());
	free(c);
	emdb_free(buf);
}

Test(cluster_manifest, encoder_refuses_what_the_decoder_would)
{
	cman_part parts[3];
	cman m = sample(parts);
	uint8_t *buf;
	size_t len;
	m.kind = 3;
	cr_assert_eq(cman_encode(&m, &buf, &len), EMDB_ERR_INVALID);
	m = sample(parts);
	parts[2].part = 0;
	cr_assert_eq(cman_encode(&m, &buf, &len), EMDB_ERR_INVALID);
	m = sample(parts);
	m.cluster_id[0] = 0;
	cr_assert_eq(cman_encode(&m, &buf, &len), EMDB_ERR_INVALID);
	m = sample(parts);
	uint32_t bad_map[8] = { 0, 0, 0, 1, 1, 1, 2, 3 };
	m.rank_of = bad_map;
	cr_assert_eq(cman_encode(&m, &buf, &len), EMDB_ERR_INVALID);
	cr_assert_null(buf);
	m = sample(parts);
	cman_seq zero[1] = { { 1, 0, 1, 0, 0 } };
	m.seqs = zero;
	m.n_seqs = 1;
	cr_assert_eq(cman_encode(&m, &buf, &len), EMDB_ERR_INVALID);
}

Test(cluster_manifest, files)
{
	char dir[64];
	tmpdir_make(dir, sizeof(dir));
	cman_part parts[3];
	cman m = sample(parts), d;
	uint64_t *ids;
	size_t n;
	cr_assert_eq(cman_list(dir, &ids, &n), EMDB_OK);
	cr_assert_eq(n, 0);
	cr_assert_eq(cman_read(dir, 0, &d), EMDB_ERR_INVALID);
	for (uint64_t id = 1; id <= 3; id++) {
		m.id = id;
		cr_assert_eq(cman_write(dir, &m), EMDB_OK, "%s", emdb_last_error());
	}
	cr_assert_eq(cman_write(dir, &m), EMDB_ERR_EXISTS);
	char tmp[128];
	snprintf(tmp, sizeof(tmp), "%s/manifests/%020d.ecm.tmp", dir, 9);
	int fd = open(tmp, O_WRONLY | O_CREAT, 0644);
	cr_assert_geq(fd, 0);
	close(fd);
	cr_assert_eq(cman_list(dir, &ids, &n), EMDB_OK);
	cr_assert_eq(n, 3, "a .tmp leftover is not a manifest");
	cr_assert(ids[0] == 1 && ids[2] == 3);
	emdb_free(ids);
	cr_assert_eq(cman_read(dir, 0, &d), EMDB_OK, "%s", emdb_last_error());
	cr_assert_eq(d.id, 3);
	cman_free(&d);
	cr_assert_eq(cman_read(dir, 7, &d), EMDB_ERR_INVALID);
	uint32_t gone;
	cr_assert_eq(cman_retain(dir, 2, &gone), EMDB_OK);
	cr_assert_eq(gone, 1);
	cr_assert_eq(cman_read(dir, 1, &d), EMDB_ERR_INVALID);
	cr_assert_eq(cman_read(dir, 2, &d), EMDB_OK);
	cman_free(&d);
	unlink(tmp);
	tmpdir_remove(dir);
}

Test(cluster_manifest, read_only_store)
{
	char dir[64];
	tmpdir_make(dir, sizeof(dir));
	emdb_store_options so = EMDB_STORE_OPTIONS_INIT;
	so.read_only = 1;
	emdb_store *ro;
	cr_assert_eq(emdb_store_open_ex(dir, &so, &ro), EMDB_ERR_INVALID, "no store there yet");
	emdb_db *db;
	cr_assert_eq(emdb_db_open(NULL, &db), 0);
	emdb_table_config cfg = EMDB_TABLE_CONFIG_INIT;
	strcpy(cfg.name, "t");
	cfg.dim = 4;
	uint32_t t;
	cr_assert_eq(emdb_table_create(db, &cfg, &t), 0);
	uint64_t ids[3] = { 1, 2, 3 };
	float out[12];
	cr_assert_eq(emdb_pull(db, t, ids, 3, 4, out), 0);
	emdb_store *st;
	cr_assert_eq(emdb_store_open(dir, &st), 0);
	emdb_ckpt_info info;
	cr_assert_eq(emdb_checkpoint(db, st, EMDB_CKPT_FULL, &info), 0);
	/* Read-only while the writer keeps it open. */
	cr_assert_eq(emdb_store_open_ex(dir, &so, &ro), EMDB_OK, "%s", emdb_last_error());
	size_t n;
	cr_assert_eq(emdb_store_list(ro, NULL, 0, &n), 0);
	cr_assert_eq(n, 1);
	emdb_db *db2;
	cr_assert_eq(emdb_db_open(NULL, &db2), 0);
	cr_assert_eq(emdb_restore(db2, ro, 0, NULL), 0, "%s", emdb_last_error());
	float back[12];
	cr_assert_eq(emdb_lookup(db2, t, ids, 3, 4, back, NULL), 0);
	cr_assert(memcmp(out, back, sizeof(out)) == 0);
	cr_assert_eq(emdb_checkpoint(db2, ro, EMDB_CKPT_FULL, NULL), EMDB_ERR_INVALID);
	cr_assert_eq(emdb_store_delete(ro, info.id), EMDB_ERR_INVALID);
	cr_assert_eq(emdb_store_retain(ro, 1, NULL), EMDB_ERR_INVALID);
	emdb_store_close(ro);
	emdb_store_close(st);
	emdb_db_close(db2);
	emdb_db_close(db);
	tmpdir_remove(dir);
}
