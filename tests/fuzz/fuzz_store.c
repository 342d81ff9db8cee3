/*
 * tests/fuzz/fuzz_store.c - libFuzzer target for the checkpoint store's
 * decoders (checkpoint/format.h): the store header, manifests, row blocks,
 * row keys and the catalog, which open and restore read from disk and so
 * must survive any bytes; and the cluster manifest
 * (checkpoint/cluster_ckpt.h), which every node of a cluster reads.
 *
 * The first input byte picks the decoder (0xF0 and above: the catalog;
 * 0xE0 to 0xEF: the cluster manifest; below, its value modulo 4: the
 * others), the rest is its input.  A value
 * that decodes is encoded again and must give back the same bytes (the
 * encodings are canonical).  Besides sanitizer findings, the target aborts
 * when a decoder fails with anything but CORRUPT (or NOMEM), or a round
 * trip differs.
 *
 * Built with clang -fsanitize=fuzzer when EMDB_FUZZ=ON; built with the
 * normal compiler into fuzz_replay_store, which replays
 * tests/fuzz/corpus_store in every test run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "checkpoint/cluster_ckpt.h"
#include "checkpoint/format.h"
#include "tests/fuzz/fuzz.h"

static void must(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz_store: %s (%s)\n", what, emdb_last_error());
		abort();
	}
}

static void bad_code(int rc)
{
	must(rc == EMDB_OK || rc == EMDB_ERR_CORRUPT || rc == EMDB_ERR_NOMEM, "unexpected error code");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const uint8_t *p = data + 1;
	size_t n = size - 1;
	uint8_t *copy = malloc(n ? n : 1);
	if (n)
		memcpy(copy, p, n);
	switch (data[0] >= 0xF0 ? 4 : data[0] >= 0xE0 ? 5 : data[0] % 4) {
	case 0: {
		store_hdr h;
		int rc = store_hdr_decode(copy, n, &h);
		bad_code(rc);
		if (rc == EMDB_OK) {
			uint8_t out[STORE_HDR_LEN];
			store_hdr_encode(out, &h);
			must(memcmp(out, copy, STORE_HDR_LEN) == 0, "store header round trip");
		}
		break;
	}
	case 1: {
		manifest m;
		int rc = manifest_decode(copy, n, &m);
		bad_code(rc);
		if (rc == EMDB_OK) {
			uint8_t *out = malloc(manifest_size(m.info.tables));
			manifest_encode(out, &m);
			must(manifest_size(m.info.tables) == n && memcmp(out, copy, n) == 0,
			     "manifest round trip");
			free(out);
			manifest_free(&m);
		}
		break;
	}
	case 2: {
		block_view v;
		int rc = block_decode(copy, n, &v);
		bad_code(rc);
		if (rc == EMDB_OK) {
			must(block_size(v.n, v.row_floats) == n, "block size");
			uint8_t *out = malloc(n);
			memcpy(out, copy, n);
			memset(out, 0, BLOCK_HDR_LEN);
			must(block_seal(out, v.n, v.row_floats) == v.hash && memcmp(out, copy, n) == 0,
			     "block round trip");
			free(out);
		}
		break;
	}
	case 3: {
		uint64_t ck, blk;
		uint32_t tb;
		int rc = store_key_row_decode(copy, n, &ck, &tb, &blk);
		bad_code(rc);
		if (rc == EMDB_OK) {
			uint8_t out[ROW_KEY_LEN];
			store_key_row(out, ck, tb, blk);
			must(memcmp(out, copy, ROW_KEY_LEN) == 0, "row key round trip");
		}
		uint64_t id = store_key_ckpt_id(copy, n);
		if (id) {
			uint8_t out[META_KEY_CKPT_LEN];
			store_key_ckpt(out, id);
			must(memcmp(out, copy, META_KEY_CKPT_LEN) == 0, "manifest key round trip");
		}
		break;
	}
	case 4: {
		store_catalog c;
		int rc = catalog_decode(copy, n, &c);
		bad_code(rc);
		if (rc == EMDB_OK) {
			size_t len = catalog_size(c.n_done, c.n_pending);
			uint8_t *out = malloc(len);
			catalog_encode(out, &c);
			must(len == n && memcmp(out, copy, n) == 0, "catalog round trip");
			free(out);
			catalog_free(&c);
		}
		break;
	}
	case 5: {
		cman m;
		int rc = cman_decode(copy, n, &m);
		bad_code(rc);
		if (rc == EMDB_OK) {
			uint8_t *out;
			size_t len;
			must(cman_encode(&m, &out, &len) == EMDB_OK, "cluster manifest encodes");
			uint32_t version;
			memcpy(&version, copy + 4, 4);
			if (version == CMAN_VERSION) {
				must(len == n && memcmp(out, copy, n) == 0, "cluster manifest round trip");
			} else { /* an older version is written as the current one: that reads back */
				cman again;
				must(cman_decode(out, len, &again) == EMDB_OK, "an older cluster manifest, rewritten, reads");
				must(again.id == m.id && again.nodes == m.nodes && again.n_tables == m.n_tables &&
					     again.n_seqs == m.n_seqs,
				     "an older cluster manifest, rewritten, reads the same");
				cman_free(&again);
			}
			emdb_free(out);
			cman_free(&m);
		}
		break;
	}
	}
	free(copy);
	return 0;
}
