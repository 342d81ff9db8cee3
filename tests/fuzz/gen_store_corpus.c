/*
 * tests/fuzz/gen_store_corpus.c - writes the hand-made seeds of the
 * fuzz_store target (a valid value of every kind the store decodes) into
 * the directory given: `fuzz_gen_store_corpus tests/fuzz/corpus_store`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/db.h>

#include "checkpoint/cluster_ckpt.h"
#include "checkpoint/format.h"

static void seed(const char *dir, const char *name, uint8_t kind, const void *p, size_t n)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f) {
		perror(path);
		exit(1);
	}
	fputc(kind, f);
	fwrite(p, 1, n, f);
	fclose(f);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: fuzz_gen_store_corpus DIR\n");
		return 2;
	}
	const char *dir = argv[1];

	store_hdr h = { STORE_VERSION, 42, { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 } };
	uint8_t hb[STORE_HDR_LEN];
	store_hdr_encode(hb, &h);
	seed(dir, "store-hdr", 0, hb, sizeof(hb));

	manifest_table t[2];
	memset(t, 0, sizeof(t));
	for (int i = 0; i < 2; i++) {
		emdb_table_config c = EMDB_TABLE_CONFIG_INIT;
		snprintf(c.name, sizeof(c.name), "table_%d", i);
		c.dim = 4;
		emdb_optimizer_defaults(i ? EMDB_OPT_ADAM : EMDB_OPT_SGD, &c.optimizer);
		c.init.kind = EMDB_INIT_UNIFORM;
		c.init.a = -0.1;
		c.init.b = 0.1;
		t[i].id = (uint32_t)i + 1;
		t[i].flags = (uint32_t)i ? 0 : MANIFEST_TABLE_FULL;
		t[i].step = 7;
		t[i].rows_total = 100;
		t[i].rows = 10;
		t[i].blocks = 1;
		t[i].bytes = 500;
		t[i].hash = 0x1234;
		t[i].state_floats = emdb_optimizer_state_floats(c.optimizer.kind, 4);
		t[i].cfg = c;
	}
	manifest m;
	memset(&m, 0, sizeof(m));
	m.info.id = 5;
	m.info.kind = EMDB_CKPT_INCREMENTAL;
	m.info.parent = 4;
	m.info.base = 1;
	m.info.created_ms = 1700000000000ull;
	m.info.duration_ms = 12;
	m.info.tables = 2;
	m.tables = t;
	uint8_t *mb = malloc(manifest_size(2));
	manifest_encode(mb, &m);
	seed(dir, "manifest-incremental", 1, mb, manifest_size(2));
	m.info.kind = EMDB_CKPT_FULL;
	m.info.parent = 0;
	m.info.base = 5;
	t[1].flags = MANIFEST_TABLE_FULL;
	manifest_encode(mb, &m);
	seed(dir, "manifest-full", 1, mb, manifest_size(2));

	uint32_t rank_of[4] = { 0, 0, 1, 2 };
	cman_table ct[2] = { { 1, 7 }, { 2, 9 } };
	cman_part cp[3];
	memset(cp, 0, sizeof(cp));
	for (uint32_t r = 0; r < 3; r++) {
		cp[r] = (cman_part){ .rank = r, .part = 3 + r, .rows = 40 * r, .sum = 0x5151 + r };
		snprintf(cp[r].addr, sizeof(cp[r].addr), "node%u.example:7900", r);
	}
	cman_seq cs[2] = { { 1, 0, 0xa11ce, 3, 40 }, { 2, 1, 0xb0b, 5, 80 } }; /* ranked workers' steps */
	cman cm = { .id = 2, .kind = 1, .created_ms = 1700000000000ull, .nodes = 3, .partitions = 4, .epoch = 1,
		    .rank_of = rank_of, .n_tables = 2, .tables = ct, .parts = cp, .n_seqs = 2, .seqs = cs };
	strcpy(cm.cluster_id, "ads-training");
	uint8_t *cmb;
	size_t cml;
	if (cman_encode(&cm, &cmb, &cml) != 0) {
		fprintf(stderr, "cluster manifest seed\n");
		return 1;
	}
	seed(dir, "cluster-manifest", 0xE0, cmb, cml);
	emdb_free(cmb);
	free(mb);

	uint32_t n = 3, rf = 5;
	uint8_t *blk = calloc(1, block_size(n, rf));
	for (uint32_t i = 0; i < n; i++) {
		uint64_t id = 1000 + i;
		memcpy(blk + BLOCK_HDR_LEN + i * 8, &id, 8);
		for (uint32_t k = 0; k < rf; k++) {
			float v = (float)(i * rf + k) / 4.0f;
			memcpy(blk + BLOCK_HDR_LEN + n * 8 + (i * rf + k) * 4, &v, 4);
		}
	}
	block_seal(blk, n, rf);
	seed(dir, "block", 2, blk, block_size(n, rf));
	free(blk);

	uint8_t k[ROW_KEY_LEN];
	store_key_row(k, 5, 2, 9);
	seed(dir, "row-key", 3, k, sizeof(k));
	uint8_t mk[META_KEY_CKPT_LEN];
	store_key_ckpt(mk, 5);
	seed(dir, "manifest-key", 3, mk, sizeof(mk));

	catalog_entry done[2] = { { 3, 0x1111 }, { 5, 0x2222 } };
	uint64_t pending[1] = { 6 };
	store_catalog cat = { { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 }, 7, 2, 1, done, pending };
	uint8_t *cb = malloc(catalog_size(2, 1));
	catalog_encode(cb, &cat);
	seed(dir, "catalog", 0xF0, cb, catalog_size(2, 1));
	free(cb);
	return 0;
}
