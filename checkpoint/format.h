/*
 * format.h - the bytes of the checkpoint store: RocksDB keys, the
 * store header, checkpoint manifests and row blocks.  docs/checkpoint.md
 * is the specification (OFFSET / SIZE / MEANING tables); this is its one
 * implementation.  All integers little-endian except keys, which are
 * big-endian so that RocksDB's bytewise order is numeric order.
 *
 * Decoders never trust their input: every count is checked against the
 * length before use, with overflow-safe arithmetic, and every checksum is
 * verified.  They return EMDB_OK or EMDB_ERR_CORRUPT with a message naming
 * the field.  They are fuzzed (tests/fuzz/fuzz_store.c).
 */
#ifndef EMDB_STORE_FMT_H
#define EMDB_STORE_FMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <emdb/checkpoint.h>
#include <emdb/db.h>

#define STORE_VERSION 1
#define STORE_MAGIC "EMDBSTOR"      /* store header, 8 bytes      */
#define MANIFEST_MAGIC "EMDBCKPT"   /* manifest, 8 bytes          */
#define BLOCK_MAGIC 0x4B424D45u     /* "EMBK" as a LE u32         */

#define CF_META "emdb_meta"
#define CF_ROWS "emdb_rows"
#define META_KEY_STORE "store"      /* the store header           */
#define META_KEY_CKPT "ckpt:"       /* + u64 BE id: a manifest    */
#define META_KEY_CKPT_LEN 13
#define ROW_KEY_LEN 20              /* u64 BE ckpt, u32 BE table, u64 BE block */

#define STORE_HDR_LEN 40
#define MANIFEST_HDR_LEN 64
#define MANIFEST_TABLE_LEN 256
#define BLOCK_HDR_LEN 24

#define CATALOG_MAGIC "EMDBCATL"    /* catalog file, 8 bytes      */
#define CATALOG_VERSION 1
#define CATALOG_HDR_LEN 48
#define CATALOG_MAX 0x1000000u      /* ids per list: far beyond any real store */

typedef struct store_hdr {
	uint32_t version;
	uint64_t next_id;       /* the id the next checkpoint gets */
	uint8_t uuid[16];       /* names this store                */
} store_hdr;

/* One table in a manifest. */
typedef struct manifest_table {
	uint32_t id;
	uint32_t flags;          /* MANIFEST_TABLE_FULL */
	uint64_t step;
	uint64_t rows_total;     /* rows of the table in the restored state */
	uint64_t rows;           /* rows written in this checkpoint         */
	uint64_t blocks;         /* row blocks written, keys 0 .. blocks-1  */
	uint64_t bytes;          /* bytes of those blocks                   */
	uint64_t hash;           /* chain of the blocks' hashes (store_hash_chain) */
	uint32_t state_floats;
	emdb_table_config cfg;
} manifest_table;

#define MANIFEST_TABLE_FULL 1u /* every row written here, not a delta */

typedef struct manifest {
	emdb_ckpt_info info;     /* id, kind, parent, base, created_ms, duration_ms,
				    tables, max_step, rows, rows_total, bytes */
	manifest_table *tables;  /* [info.tables] */
} manifest;

void store_key_ckpt(uint8_t out[META_KEY_CKPT_LEN], uint64_t id);
/* The id of a manifest key; 0 when key is not one. */
uint64_t store_key_ckpt_id(const uint8_t *key, size_t len);
void store_key_row(uint8_t out[ROW_KEY_LEN], uint64_t ckpt, uint32_t table, uint64_t block);
int store_key_row_decode(const uint8_t *key, size_t len, uint64_t *ckpt, uint32_t *table,
			 uint64_t *block);

void store_hdr_encode(uint8_t out[STORE_HDR_LEN], const store_hdr *h);
int store_hdr_decode(const uint8_t *p, size_t len, store_hdr *h);

/* The catalog (<dir>/CATALOG, docs/checkpoint.md): the store's own record,
 * outside RocksDB, of which checkpoints are complete (with the checksum of
 * each one's manifest) and which ids are unfinished (taken by a checkpoint
 * not yet published, or being deleted), so that a manifest RocksDB lost is
 * detected rather than taken for "never written". */
typedef struct catalog_entry {
	uint64_t id;
	uint64_t sum;            /* the manifest's trailing XXH3-64 */
} catalog_entry;

typedef struct store_catalog {
	uint8_t uuid[16];        /* the store header's                      */
	uint64_t next_id;        /* the id the next checkpoint gets         */
	uint32_t n_done, n_pending;
	catalog_entry *done;     /* complete checkpoints, ascending id      */
	uint64_t *pending;       /* unfinished ids, ascending               */
} store_catalog;

size_t catalog_size(uint32_t n_done, uint32_t n_pending);
void catalog_encode(uint8_t *out, const store_catalog *c);
/* Decode into *c (done and pending emdb_malloc'd; free with catalog_free). */
int catalog_decode(const uint8_t *p, size_t len, store_catalog *c);
void catalog_free(store_catalog *c);

/* The checksum a manifest's encoding ends with (its last 8 bytes). */
uint64_t manifest_sum(const uint8_t *p, size_t len);

/* Bytes of the manifest of n tables. */
size_t manifest_size(uint32_t n_tables);
void manifest_encode(uint8_t *out, const manifest *m);
/* Decode into *m; m->tables is emdb_malloc'd (free with manifest_free). */
int manifest_decode(const uint8_t *p, size_t len, manifest *m);
void manifest_free(manifest *m);

/* Row blocks: header, ids[n], then n rows of row_floats floats. */
static inline size_t block_size(uint32_t n, uint32_t row_floats)
{
	return BLOCK_HDR_LEN + (size_t)n * 8 + (size_t)n * row_floats * 4;
}
/* Write the header of a block whose ids and rows are already in place
 * after it (the hash covers them). Returns the block's hash. */
uint64_t block_seal(uint8_t *block, uint32_t n, uint32_t row_floats);

typedef struct block_view {
	uint32_t n;
	uint32_t row_floats;
	uint64_t hash;
	const uint8_t *ids;      /* n little-endian u64, maybe unaligned */
	const uint8_t *rows;     /* n * row_floats little-endian floats  */
} block_view;

/* Check a block (header, length, hash) and point *v into it. */
int block_decode(const uint8_t *p, size_t len, block_view *v);

/* The running hash of a table's blocks in key order. */
uint64_t store_hash_chain(uint64_t acc, uint64_t block_hash);

#endif
