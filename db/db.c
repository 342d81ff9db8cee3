/*
 * db.c - the database handle: configuration and the registry of tables.
 *
 * Invariants:
 *   1. live[0..n_live) are the live tables in creation order, with distinct
 *      names and ids; ids grow from 1 and are never reused.
 *   2. The registry owns one reference on each live table.  Dropping
 *      removes the table from live[] under the write lock and releases that
 *      reference; calls and tickets holding their own reference finish
 *      safely, and the memory goes when the last one lets go.
 *
 *   3. db_replace_tables swaps the whole of live[] in one critical section
 *      (restore): a reader sees the old tables or the new ones, never a
 *      mix; ids stay never reused (next_id moves past the restored ones).
 *
 * State changes: live[], n_live and next_id under reg_lock (write); ck by
 * the one checkpoint job running (checkpoint/job.c).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <emdb/alloc.h>
#include <emdb/db.h>

#include "base/error_int.h"
#include "base/meminfo.h"
#include "db/db_cluster.h"
#include "db/db_int.h"
#include "db/optim_math.h"
#include "db/table.h"

struct emdb_db {
	emdb_db_config cfg;
	pthread_rwlock_t reg_lock;
	tbl **live;      /* [cfg.max_tables] */
	uint32_t n_live;
	uint32_t next_id;
	db_ckpt_state ck;
};

static int check_db_config(const emdb_db_config *c)
{
	if (c->shards == 0 || c->shards > DIT_MAX_SHARDS || (c->shards & (c->shards - 1)))
		return emdb__seterr(EMDB_ERR_INVALID, "shards must be a power of two in 1..%u, not %u",
				    DIT_MAX_SHARDS, c->shards);
	if (c->chunk_bytes < (64u << 10) || c->chunk_bytes > (1ull << 34))
		return emdb__seterr(EMDB_ERR_INVALID, "chunk_bytes must be in 64 KiB..16 GiB, not %llu",
				    (unsigned long long)c->chunk_bytes);
	if (c->max_batch == 0 || c->max_batch > (1u << 30))
		return emdb__seterr(EMDB_ERR_INVALID, "max_batch must be in 1..2^30, not %u", c->max_batch);
	if (c->max_tables == 0 || c->max_tables > (1u << 20))
		return emdb__seterr(EMDB_ERR_INVALID, "max_tables must be in 1..2^20, not %u", c->max_tables);
	return EMDB_OK;
}

int emdb_db_open(const emdb_db_config *cfg, emdb_db **out)
{
	emdb_db_config c = EMDB_DB_CONFIG_INIT;
	if (!out)
		return emdb__seterr(EMDB_ERR_INVALID, "emdb_db_open: out is NULL");
	if (cfg) {
		if (cfg->size == 0 || cfg->size > sizeof(c))
			return emdb__seterr(EMDB_ERR_INVALID,
					    "emdb_db_config.size is %u: initialize with EMDB_DB_CONFIG_INIT",
					    cfg->size);
		memcpy(&c, cfg, cfg->size);
		c.size = sizeof(c);
	}
	int rc = check_db_config(&c);
	if (rc != EMDB_OK)
		return rc;
	emdb_db *db = emdb_calloc(1, sizeof(*db));
	if (!db)
		return EMDB_ERR_NOMEM;
	db->live = emdb_calloc(c.max_tables, sizeof(*db->live));
	if (!db->live) {
		emdb_free(db);
		return EMDB_ERR_NOMEM;
	}
	db->cfg = c;
	db->next_id = 1;
	pthread_rwlock_init(&db->reg_lock, NULL);
	*out = db;
	return EMDB_OK;
}

void emdb_db_close(emdb_db *db)
{
	if (!db)
		return;
	for (uint32_t i = 0; i < db->n_live; i++)
		table_release(db->live[i]);
	emdb_free(db->live);
	pthread_rwlock_destroy(&db->reg_lock);
	emdb_free(db);
}

void emdb_db_get_config(const emdb_db *db, emdb_db_config *out)
{
	*out = db->cfg;
}

static bool name_ok(const char *name)
{
	size_t n = strnlen(name, EMDB_NAME_MAX);
	if (n == 0 || n == EMDB_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = name[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		      ch == '_' || ch == '.' || ch == '-'))
			return false;
	}
	return true;
}

/* Index of the live table with this name or id, or -1.  Caller holds reg_lock. */
static int find_locked(const emdb_db *db, const char *name, uint32_t id)
{
	for (uint32_t i = 0; i < db->n_live; i++) {
		const tbl *t = db->live[i];
		if (name ? strcmp(t->cfg.name, name) == 0 : t->id == id)
			return (int)i;
	}
	return -1;
}

int db_check_table_config(const emdb_table_config *c)
{
	char why[160];
	if (!name_ok(c->name))
		return emdb__seterr(EMDB_ERR_INVALID, "table name must be 1..%d bytes of [A-Za-z0-9_.-]",
				    EMDB_NAME_MAX - 1);
	if (c->dim == 0 || c->dim > EMDB_DIM_MAX)
		return emdb__seterr(EMDB_ERR_INVALID, "table '%s': dim must be in 1..%d, not %u", c->name,
				    EMDB_DIM_MAX, c->dim);
	if (emdb__optimizer_check(&c->optimizer, why, sizeof(why)) != EMDB_OK)
		return emdb__seterr(EMDB_ERR_INVALID, "table '%s': %s", c->name, why);
	if (emdb__init_check(&c->init, why, sizeof(why)) != EMDB_OK)
		return emdb__seterr(EMDB_ERR_INVALID, "table '%s': %s", c->name, why);
	if (c->lookup_default != EMDB_DEFAULT_ZEROS && c->lookup_default != EMDB_DEFAULT_INIT)
		return emdb__seterr(EMDB_ERR_INVALID, "table '%s': unknown lookup_default %d", c->name,
				    (int)c->lookup_default);
	return EMDB_OK;
}

/* May a table named name be created now (name free, under max_tables)?
 * Caller holds reg_lock. */
static int room_locked(const emdb_db *db, const char *name)
{
	if (find_locked(db, name, 0) >= 0)
		return emdb__seterr(EMDB_ERR_EXISTS, "table '%s' already exists", name);
	if (db->n_live == db->cfg.max_tables)
		return emdb__seterr(EMDB_ERR_LIMIT, "table '%s': already %u tables (max_tables)", name,
				    db->cfg.max_tables);
	return EMDB_OK;
}

/* cfg (of any size up to ours) completed with the defaults into *c, and
 * checked. */
static int take_config(const emdb_db *db, const emdb_table_config *cfg, emdb_table_config *c)
{
	*c = (emdb_table_config)EMDB_TABLE_CONFIG_INIT;
	if (!db || !cfg)
		return emdb__seterr(EMDB_ERR_INVALID, "emdb_table_create: db or cfg is NULL");
	if (cfg->size == 0 || cfg->size > sizeof(*c))
		return emdb__seterr(EMDB_ERR_INVALID,
				    "emdb_table_config.size is %u: initialize with EMDB_TABLE_CONFIG_INIT", cfg->size);
	memcpy(c, cfg, cfg->size);
	c->size = sizeof(*c);
	return db_check_table_config(c);
}

/* Create a table with id `want`, or the next id when want is 0. */
static int table_create_id(emdb_db *db, const emdb_table_config *cfg, uint32_t want, uint32_t *out_id)
{
	emdb_table_config c;
	int rc = take_config(db, cfg, &c);
	if (rc != EMDB_OK)
		return rc;

	pthread_rwlock_wrlock(&db->reg_lock);
	uint32_t id = want ? want : db->next_id;
	rc = room_locked(db, c.name);
	if (rc == EMDB_OK && (id < db->next_id || id == UINT32_MAX))
		rc = emdb__seterr(EMDB_ERR_EXISTS, "table '%s': id %u was given before (ids are never reused; next is %u)",
				  c.name, id, db->next_id);
	tbl *t;
	if (rc == EMDB_OK && (rc = table_create(&c, id, &db->cfg, &t)) == EMDB_OK) {
		db->live[db->n_live++] = t;
		db->next_id = id + 1;
		if (out_id)
			*out_id = t->id;
	}
	pthread_rwlock_unlock(&db->reg_lock);
	return rc;
}

int emdb_table_create(emdb_db *db, const emdb_table_config *cfg, uint32_t *out_id)
{
	return table_create_id(db, cfg, 0, out_id);
}

int emdb__table_create_as(emdb_db *db, const emdb_table_config *cfg, uint32_t id)
{
	if (!id)
		return emdb__seterr(EMDB_ERR_INVALID, "table id 0");
	return table_create_id(db, cfg, id, NULL);
}

int emdb__table_check_create(emdb_db *db, const emdb_table_config *cfg, uint32_t *next_id)
{
	emdb_table_config c;
	int rc = take_config(db, cfg, &c);
	if (rc != EMDB_OK)
		return rc;
	pthread_rwlock_rdlock(&db->reg_lock);
	rc = room_locked(db, c.name);
	*next_id = db->next_id;
	pthread_rwlock_unlock(&db->reg_lock);
	return rc;
}

int emdb_table_drop(emdb_db *db, uint32_t id)
{
	if (!db)
		return emdb__seterr(EMDB_ERR_INVALID, "emdb_table_drop: db is NULL");
	pthread_rwlock_wrlock(&db->reg_lock);
	int i = find_locked(db, NULL, id);
	tbl *t = NULL;
	if (i >= 0) {
		t = db->live[i];
		memmove(&db->live[i], &db->live[i + 1], (db->n_live - (uint32_t)i - 1) * sizeof(*db->live));
		db->n_live--;
	}
	pthread_rwlock_unlock(&db->reg_lock);
	if (!t)
		return emdb__seterr(EMDB_ERR_NO_TABLE, "no table with id %u", id);
	table_release(t);
	return EMDB_OK;
}

int db_table_get(emdb_db *db, uint32_t id, tbl **out)
{
	if (!db)
		return emdb__seterr(EMDB_ERR_INVALID, "db is NULL");
	pthread_rwlock_rdlock(&db->reg_lock);
	int i = find_locked(db, NULL, id);
	if (i >= 0) {
		*out = db->live[i];
		table_acquire(*out);
	}
	pthread_rwlock_unlock(&db->reg_lock);
	if (i < 0)
		return emdb__seterr(EMDB_ERR_NO_TABLE, "no table with id %u", id);
	return EMDB_OK;
}

int db_tables_snapshot(emdb_db *db, tbl ***out, uint32_t *n)
{
	pthread_rwlock_rdlock(&db->reg_lock);
	tbl **v = emdb_malloc((db->n_live ? db->n_live : 1) * sizeof(*v));
	if (v) {
		for (uint32_t i = 0; i < db->n_live; i++) {
			v[i] = db->live[i];
			table_acquire(v[i]);
		}
		*n = db->n_live;
	}
	pthread_rwlock_unlock(&db->reg_lock);
	*out = v;
	return v ? EMDB_OK : EMDB_ERR_NOMEM;
}

db_ckpt_state *db_ckpt(emdb_db *db)
{
	return &db->ck;
}

int db_replace_tables(emdb_db *db, tbl **v, uint32_t n)
{
	if (n > db->cfg.max_tables)
		return emdb__seterr(EMDB_ERR_LIMIT, "%u tables to restore, max_tables is %u", n,
				    db->cfg.max_tables);
	tbl **old = emdb_malloc((db->n_live ? db->n_live : 1) * sizeof(*old));
	if (!old)
		return EMDB_ERR_NOMEM;
	pthread_rwlock_wrlock(&db->reg_lock);
	uint32_t n_old = db->n_live;
	memcpy(old, db->live, n_old * sizeof(*old));
	memcpy(db->live, v, n * sizeof(*v));
	db->n_live = n;
	for (uint32_t i = 0; i < n; i++)
		if (v[i]->id >= db->next_id)
			db->next_id = v[i]->id + 1;
	pthread_rwlock_unlock(&db->reg_lock);
	for (uint32_t i = 0; i < n_old; i++)
		table_release(old[i]);
	emdb_free(old);
	return EMDB_OK;
}

/* Bytes the kernel says can be allocated now without swapping
 * (MemAvailable: free memory plus what reclaim would give back), or the
 * machine's memory where /proc/meminfo does not say. */
static double mem_available(void)
{
	static const char *const keys[] = { "MemAvailable" };
	long kb;
	meminfo_read(keys, &kb, 1);
	if (kb >= 0)
		return (double)kb * 1024.0;
	return (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
}

/* The memory a reservation would add, checked before any of it is
 * mapped: against the allocation limit and the memory available now, so
 * that a mistyped count fails cleanly instead of waking the OOM killer
 * while the chunks are backed. */
static int reserve_fits(tbl *t, uint64_t rows)
{
	/* What chunk_prepare and dit_presize will map, worked out as they
	 * will (their rounding, the index's peak while a shard is rehashed). */
	double need = (double)chunk_grow_bytes(&t->rows, rows) + (double)dit_presize_bytes(t->index, rows);
	if (need == 0)
		return EMDB_OK;
	int rc = table_check_memory(t, (uint64_t)need, "room for", rows);
	if (rc != EMDB_OK)
		return rc;
	double avail = mem_available();
	long pool = emdb_alloc_huge_pages() != EMDB_HUGE_OFF ? emdb_alloc_pool_free() : 0;
	if (avail > 0 && pool > 0) /* the pool is not in MemAvailable */
		avail += (double)pool * (double)(2u << 20);
	if (avail > 0 && need > avail)
		return emdb__seterr(EMDB_ERR_NOMEM,
				    "table '%s': room for %llu rows needs about %.0f MB more, over the "
				    "memory this machine has available (%.0f MB)",
				    t->cfg.name, (unsigned long long)rows, need / 1e6, avail / 1e6);
	return EMDB_OK;
}

int emdb_table_reserve(emdb_db *db, uint32_t id, uint64_t rows)
{
	tbl *t;
	int rc = db_table_get(db, id, &t);
	if (rc != EMDB_OK)
		return rc;
	if (rows > (uint64_t)LOC_MAX_CHUNKS * t->rows.rows_per_chunk)
		rc = emdb__seterr(EMDB_ERR_LIMIT, "table '%s': %llu rows do not fit in a table (%u chunks of %u rows)",
				  t->cfg.name, (unsigned long long)rows, LOC_MAX_CHUNKS,
				  t->rows.rows_per_chunk);
	if (rc == EMDB_OK)
		rc = reserve_fits(t, rows);
	/* The index first: chunk_prepare maps all of its chunks or none,
	 * while shards grown before a failure stay grown (dit.h), so a
	 * failure after this point leaves no row chunk behind. */
	if (rc == EMDB_OK)
		rc = dit_presize(t->index, rows);
	if (rc == EMDB_OK)
		rc = chunk_prepare(&t->rows, rows);
	table_release(t);
	return rc;
}

int emdb_table_find(emdb_db *db, const char *name, uint32_t *out_id)
{
	if (!db || !name || !out_id)
		return emdb__seterr(EMDB_ERR_INVALID, "emdb_table_find: NULL argument");
	pthread_rwlock_rdlock(&db->reg_lock);
	int i = find_locked(db, name, 0);
	if (i >= 0)
		*out_id = db->live[i]->id;
	pthread_rwlock_unlock(&db->reg_lock);
	if (i < 0)
		return emdb__seterr(EMDB_ERR_NO_TABLE, "no table named '%.*s'", EMDB_NAME_MAX, name);
	return EMDB_OK;
}

int emdb_table_describe(emdb_db *db, uint32_t id, emdb_table_info *out)
{
	tbl *t;
	if (!out)
		return emdb__seterr(EMDB_ERR_INVALID, "emdb_table_describe: out is NULL");
	int rc = db_table_get(db, id, &t);
	if (rc != EMDB_OK)
		return rc;
	out->id = t->id;
	pthread_mutex_lock(&t->cfg_mu);
	out->config = t->cfg;
	pthread_mutex_unlock(&t->cfg_mu);
	table_stats(t, &out->stats);
	table_release(t);
	return EMDB_OK;
}

int emdb_table_get_config(emdb_db *db, uint32_t id, emdb_table_config *out)
{
	tbl *t;
	if (!out)
		return emdb__seterr(EMDB_ERR_INVALID, "emdb_table_get_config: out is NULL");
	int rc = db_table_get(db, id, &t);
	if (rc != EMDB_OK)
		return rc;
	pthread_mutex_lock(&t->cfg_mu);
	*out = t->cfg;
	pthread_mutex_unlock(&t->cfg_mu);
	table_release(t);
	return EMDB_OK;
}

int emdb_table_list(emdb_db *db, uint32_t *ids, size_t cap, size_t *n_out)
{
	if (!db || !n_out || (cap && !ids))
		return emdb__seterr(EMDB_ERR_INVALID, "emdb_table_list: NULL argument");
	pthread_rwlock_rdlock(&db->reg_lock);
	for (uint32_t i = 0; i < db->n_live && i < cap; i++)
		ids[i] = db->live[i]->id;
	*n_out = db->n_live;
	pthread_rwlock_unlock(&db->reg_lock);
	return EMDB_OK;
}

int emdb_table_tier(emdb_db *db, uint32_t id, emdb_tier_info *out)
{
	tbl *t;
	int rc;

	if (!out)
		return emdb__seterr(EMDB_ERR_INVALID, "emdb_table_tier: out is NULL");
	rc = db_table_get(db, id, &t);
	if (rc != EMDB_OK)
		return rc;
	table_tier(t, out);
	table_release(t);
	return EMDB_OK;
}

int emdb_table_tier_device(emdb_db *db, uint32_t id, uint32_t device, emdb_tier_device_info *out)
{
	tbl *t;
	int rc;

	if (!out)
		return emdb__seterr(EMDB_ERR_INVALID, "emdb_table_tier_device: out is NULL");
	rc = db_table_get(db, id, &t);
	if (rc != EMDB_OK)
		return rc;
	rc = table_tier_device(t, device, out);
	table_release(t);
	return rc;
}

bool emdb_gpu_available(char *why, size_t why_len)
{
	return tier_available(TIER_CUDA, why, why_len);
}

int emdb_db_get_stats(emdb_db *db, emdb_db_stats *out)
{
	if (!db || !out)
		return emdb__seterr(EMDB_ERR_INVALID, "emdb_db_get_stats: NULL argument");
	memset(out, 0, sizeof(*out));
	pthread_rwlock_rdlock(&db->reg_lock);
	for (uint32_t i = 0; i < db->n_live; i++) {
		emdb_table_stats s;
		table_stats(db->live[i], &s);
		emdb_table_stats *a = &out->total;
		out->tables++;
		a->rows += s.rows;
		a->step = s.step > a->step ? s.step : a->step;
		a->pending_rows += s.pending_rows;
		a->bytes_vectors += s.bytes_vectors;
		a->bytes_optimizer += s.bytes_optimizer;
		a->bytes_index += s.bytes_index;
		a->bytes_grads += s.bytes_grads;
		a->bytes_overhead += s.bytes_overhead;
		a->calls_prefetch += s.calls_prefetch;
		a->calls_pull += s.calls_pull;
		a->calls_push += s.calls_push;
		a->calls_update += s.calls_update;
		a->calls_lookup += s.calls_lookup;
		a->ids_prefetch += s.ids_prefetch;
		a->ids_pull += s.ids_pull;
		a->ids_push += s.ids_push;
		a->ids_lookup += s.ids_lookup;
		a->lookup_misses += s.lookup_misses;
		a->rows_updated += s.rows_updated;
		a->index_resizes += s.index_resizes;
	}
	pthread_rwlock_unlock(&db->reg_lock);
	out->alloc_bytes = emdb_alloc_bytes();
	out->alloc_peak = emdb_alloc_peak();
	return EMDB_OK;
}
