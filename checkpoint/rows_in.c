/*
 * checkpoint/rows_in.c - rows written into a private table by ID
 * (rows_in.h), for the two restores.
 *
 * Invariants:
 *   1. The scratch holds at least n rows and t->shards + 1 shard starts
 *      before a batch is resolved; it grows only, and a failed growth
 *      leaves it empty (cap 0), never half-sized.
 *   2. A batch is resolved whole (table_resolve_prepare, then
 *      table_resolve_commit_raw) before any row is written, so a refused
 *      batch inserts nothing.
 */
#include "checkpoint/rows_in.h"

#include <string.h>

#include <emdb/alloc.h>

#include "base/error_int.h"

void rows_in_free(rows_in *r)
{
	emdb_free(r->ids);
	emdb_free(r->locs);
	emdb_free(r->hash);
	emdb_free(r->order);
	emdb_free(r->start);
	memset(r, 0, sizeof(*r));
}

static int grow(rows_in *r, size_t n, uint32_t shards)
{
	if (n <= r->cap && shards <= r->shards_cap)
		return EMDB_OK;
	rows_in_free(r);
	r->ids = emdb_malloc(n * 8);
	r->locs = emdb_malloc(n * 8);
	r->hash = emdb_malloc(n * 8);
	r->order = emdb_malloc(n * 4);
	r->start = emdb_malloc(((size_t)shards + 1) * 4);
	if (!(r->ids && r->locs && r->hash && r->order && r->start)) {
		rows_in_free(r);
		return emdb__seterr(EMDB_ERR_NOMEM, "restoring %zu rows", n);
	}
	r->cap = n;
	r->shards_cap = shards;
	return EMDB_OK;
}

int rows_in_put(rows_in *r, tbl *t, const void *ids, const void *rows, size_t n, size_t row_bytes)
{
	if (!n)
		return EMDB_OK;
	int rc = grow(r, n, t->shards);
	if (rc != EMDB_OK)
		return rc;
	memcpy(r->ids, ids, n * 8);
	dit_plan plan = { 0, r->hash, r->order, r->start };
	if ((rc = table_resolve_prepare(t, r->ids, n, &plan)) != EMDB_OK)
		return rc;
	table_resolve_commit_raw(t, r->ids, &plan, r->locs, NULL);
	const uint8_t *src = rows;
	for (size_t i = 0; i < n; i++)
		memcpy(table_row(t, r->locs[i]), src + i * row_bytes, row_bytes);
	return EMDB_OK;
}
