/*
 * store.c - the checkpoint store: one embedded RocksDB database holding
 * manifests (column family emdb_meta) and row blocks (emdb_rows); opening
 * it, listing, deleting and retaining checkpoints.
 *
 * Invariants:
 *   1. A checkpoint is visible exactly when its manifest is in emdb_meta.
 *      Manifests are written last (synced) and deleted first, so a crash
 *      at any point leaves only whole checkpoints visible; rows without a
 *      manifest are leftovers, removed by emdb_store_open.
 *   2. Checkpoint ids come from the header's next_id, persisted (synced)
 *      before the id is used, so an id is never given twice in one store.
 *   3. An incremental checkpoint's parent is never deleted while it is
 *      there (emdb_store_delete refuses, emdb_store_retain keeps chains).
 *
 * State changes: the header, manifests and deletions under mu; row blocks
 * arrive by ingestion (write.c).
 */
#define _GNU_SOURCE /* O_DIRECT */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <emdb/alloc.h>

#include "base/error_int.h"
#include "checkpoint/store_int.h"

int store_rocks_err(char *err, const char *what)
{
	if (!err)
		return EMDB_OK;
	int code = strncmp(err, "Corruption", 10) == 0 ? EMDB_ERR_CORRUPT : EMDB_ERR_IO;
	emdb__seterr(code, "%s: %s", what, err);
	rocksdb_free(err);
	return code;
}

static char *path_join(const char *a, const char *b)
{
	size_t n = strlen(a) + strlen(b) + 2;
	char *p = emdb_malloc(n);
	if (p)
		snprintf(p, n, "%s/%s", a, b);
	return p;
}

static int make_dir(const char *p)
{
	if (mkdir(p, 0755) == 0 || errno == EEXIST)
		return EMDB_OK;
	return emdb__seterr(EMDB_ERR_IO, "cannot create directory %s: %s", p, strerror(errno));
}

/* Remove what a crash left in tmp/. */
static void clear_tmp(const char *tmp)
{
	DIR *d = opendir(tmp);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		char *p = path_join(tmp, e->d_name);
		if (p)
			unlink(p);
		emdb_free(p);
	}
	closedir(d);
}

/* Whether files in dir can be opened with O_DIRECT (tmpfs and some
 * network file systems refuse it). */
static bool direct_io_works(const char *dir)
{
	char *p = path_join(dir, "direct-probe");
	if (!p)
		return false;
	int fd = open(p, O_CREAT | O_RDWR | O_DIRECT | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
	unlink(p);
	emdb_free(p);
	return fd >= 0;
}

static void new_uuid(uint8_t out[16])
{
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	ssize_t got = fd >= 0 ? read(fd, out, 16) : -1;
	if (fd >= 0)
		close(fd);
	if (got != 16) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		uint64_t a = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec, b = (uint64_t)getpid();
		memcpy(out, &a, 8);
		memcpy(out + 8, &b, 8);
	}
}

static int write_header_locked(emdb_store *st)
{
	uint8_t buf[STORE_HDR_LEN];
	char *err = NULL;
	store_hdr_encode(buf, &st->hdr);
	rocksdb_put_cf(st->db, st->wsync, STORE_CF_META(st), META_KEY_STORE, strlen(META_KEY_STORE),
		       (const char *)buf, sizeof(buf), &err);
	return store_rocks_err(err, "writing the store header");
}

static int load_header(emdb_store *st)
{
	char *err = NULL;
	size_t len = 0;
	char *v = rocksdb_get_cf(st->db, st->ropts, STORE_CF_META(st), META_KEY_STORE,
				 strlen(META_KEY_STORE), &len, &err);
	int rc = store_rocks_err(err, "reading the store header");
	if (rc != EMDB_OK)
		return rc;
	if (!v) {
		st->hdr.version = STORE_VERSION;
		st->hdr.next_id = 1;
		new_uuid(st->hdr.uuid);
		return write_header_locked(st);
	}
	rc = store_hdr_decode((const uint8_t *)v, len, &st->hdr);
	rocksdb_free(v);
	return rc;
}

static bool manifest_exists(emdb_store *st, uint64_t id)
{
	uint8_t key[META_KEY_CKPT_LEN];
	char *err = NULL;
	size_t len = 0;
	store_key_ckpt(key, id);
	char *v = rocksdb_get_cf(st->db, st->ropts, STORE_CF_META(st), (const char *)key, sizeof(key), &len,
				 &err);
	if (err) {
		rocksdb_free(err);
		return true; /* when in doubt, keep the rows */
	}
	rocksdb_free(v);
	return v != NULL;
}

/* Rows of checkpoints that never got a manifest: a crash mid-checkpoint. */
static int drop_leftovers(emdb_store *st)
{
	rocksdb_iterator_t *it = rocksdb_create_iterator_cf(st->db, st->ropts, STORE_CF_ROWS(st));
	int rc = EMDB_OK;
	rocksdb_iter_seek_to_first(it);
	while (rc == EMDB_OK && rocksdb_iter_valid(it)) {
		size_t klen;
		const char *k = rocksdb_iter_key(it, &klen);
		uint64_t ck, blk;
		uint32_t tb;
		if (store_key_row_decode((const uint8_t *)k, klen, &ck, &tb, &blk) != EMDB_OK) {
			rc = EMDB_ERR_CORRUPT;
			break;
		}
		if (!manifest_exists(st, ck))
			rc = store_drop_rows(st, ck);
		uint8_t next[ROW_KEY_LEN];
		store_key_row(next, ck + 1, 0, 0);
		rocksdb_iter_seek(it, (const char *)next, sizeof(next));
	}
	char *err = NULL;
	rocksdb_iter_get_error(it, &err);
	if (rc == EMDB_OK)
		rc = store_rocks_err(err, "scanning the store for leftovers");
	else if (err)
		rocksdb_free(err);
	rocksdb_iter_destroy(it);
	return rc;
}

static void store_free(emdb_store *st)
{
	for (int i = 0; i < 3; i++)
		if (st->cf[i])
			rocksdb_column_family_handle_destroy(st->cf[i]);
	if (st->db)
		rocksdb_close(st->db);
	if (st->opts)
		rocksdb_options_destroy(st->opts);
	if (st->rows_opts)
		rocksdb_options_destroy(st->rows_opts);
	if (st->meta_opts)
		rocksdb_options_destroy(st->meta_opts);
	if (st->wsync)
		rocksdb_writeoptions_destroy(st->wsync);
	if (st->ropts)
		rocksdb_readoptions_destroy(st->ropts);
	pthread_mutex_destroy(&st->mu);
	emdb_free(st->dir);
	emdb_free(st->db_dir);
	emdb_free(st->tmp_dir);
	emdb_free(st);
}

int emdb_store_open(const char *dir, emdb_store **out)
{
	if (!out || !dir || !dir[0])
		return emdb__seterr(EMDB_ERR_INVALID, "emdb_store_open: no directory given");
	*out = NULL;
	emdb_store *st = emdb_calloc(1, sizeof(*st));
	if (!st)
		return EMDB_ERR_NOMEM;
	pthread_mutex_init(&st->mu, NULL);
	size_t dl = strlen(dir) + 1;
	st->dir = emdb_malloc(dl);
	if (st->dir)
		memcpy(st->dir, dir, dl);
	st->db_dir = path_join(dir, "rocksdb");
	st->tmp_dir = path_join(dir, "tmp");
	int rc = EMDB_ERR_NOMEM;
	if (!st->dir || !st->db_dir || !st->tmp_dir)
		goto fail;
	if ((rc = make_dir(dir)) != EMDB_OK || (rc = make_dir(st->tmp_dir)) != EMDB_OK)
		goto fail;
	clear_tmp(st->tmp_dir);

	st->opts = rocksdb_options_create();
	rocksdb_options_set_create_if_missing(st->opts, 1);
	rocksdb_options_set_create_missing_column_families(st->opts, 1);
	rocksdb_options_set_keep_log_file_num(st->opts, 4);
	rocksdb_options_set_max_log_file_size(st->opts, 8u << 20);
	/* Without direct reads, restore reads row files front to back: let
	 * the kernel read ahead (RocksDB's default advises random access,
	 * which turns that off). */
	rocksdb_options_set_advise_random_on_open(st->opts, 0);
	/* Restore reads row blocks with O_DIRECT where the file system allows
	 * it: into RocksDB's buffer straight from the disk, instead of through
	 * the page cache (fresh page-cache memory and a kernel copy of every
	 * byte: 30-40% less CPU for the same restore). */
	if (direct_io_works(st->tmp_dir))
		rocksdb_options_set_use_direct_reads(st->opts, 1);
	st->meta_opts = rocksdb_options_create();
	st->rows_opts = rocksdb_options_create();
	char *err = NULL;
	/* Rows are floats: compression gains little and costs bandwidth.  A
	 * row block is one value of about 4 MiB, read in one call: RocksDB's
	 * automatic read-ahead (which the C API cannot set) would only copy
	 * it once more through its prefetch buffer. */
	rocksdb_get_options_from_string(st->meta_opts,
					"compression=kNoCompression;block_based_table_factory="
					"{block_size=262144;max_auto_readahead_size=0}",
					st->rows_opts, &err);
	if (err) {
		rc = store_rocks_err(err, "setting the options of the rows column family");
		goto fail;
	}
	st->wsync = rocksdb_writeoptions_create();
	rocksdb_writeoptions_set_sync(st->wsync, 1);
	st->ropts = rocksdb_readoptions_create();

	const char *names[3] = { "default", CF_META, CF_ROWS };
	const rocksdb_options_t *cfo[3] = { st->opts, st->meta_opts, st->rows_opts };
	st->db = rocksdb_open_column_families(st->opts, st->db_dir, 3, names, cfo, st->cf, &err);
	if (err) {
		rc = store_rocks_err(err, "opening the checkpoint store");
		st->db = NULL;
		goto fail;
	}
	if ((rc = load_header(st)) != EMDB_OK)
		goto fail;
	/* Best effort: a store whose rows cannot even be scanned still opens,
	 * so that its manifests can be listed and the damage is reported by
	 * the restore that needs the damaged rows. */
	drop_leftovers(st);
	*out = st;
	return EMDB_OK;
fail:
	store_free(st);
	return rc;
}

void emdb_store_close(emdb_store *st)
{
	if (st)
		store_free(st);
}

const char *emdb_store_dir(const emdb_store *st)
{
	return st->dir;
}

int store_take_id(emdb_store *st, uint64_t *id)
{
	pthread_mutex_lock(&st->mu);
	*id = st->hdr.next_id++;
	int rc = write_header_locked(st);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int store_publish(emdb_store *st, const manifest *m)
{
	size_t len = manifest_size(m->info.tables);
	uint8_t *buf = emdb_malloc(len);
	if (!buf)
		return EMDB_ERR_NOMEM;
	manifest_encode(buf, m);
	uint8_t key[META_KEY_CKPT_LEN];
	store_key_ckpt(key, m->info.id);
	char *err = NULL;
	pthread_mutex_lock(&st->mu);
	rocksdb_put_cf(st->db, st->wsync, STORE_CF_META(st), (const char *)key, sizeof(key),
		       (const char *)buf, len, &err);
	pthread_mutex_unlock(&st->mu);
	emdb_free(buf);
	return store_rocks_err(err, "writing the manifest");
}

/* Every manifest, oldest first: *out emdb_malloc'd array of *n (each
 * manifest's tables freed with manifest_free). */
static int load_all(emdb_store *st, manifest **out, size_t *n)
{
	size_t cap = 0, cnt = 0;
	manifest *v = NULL;
	int rc = EMDB_OK;
	rocksdb_iterator_t *it = rocksdb_create_iterator_cf(st->db, st->ropts, STORE_CF_META(st));
	uint8_t first[META_KEY_CKPT_LEN];
	store_key_ckpt(first, 0);
	for (rocksdb_iter_seek(it, (const char *)first, sizeof(first)); rocksdb_iter_valid(it);
	     rocksdb_iter_next(it)) {
		size_t klen, vlen;
		const char *k = rocksdb_iter_key(it, &klen);
		if (!store_key_ckpt_id((const uint8_t *)k, klen))
			break;
		const char *val = rocksdb_iter_value(it, &vlen);
		if (cnt == cap) {
			size_t nc = cap ? cap * 2 : 16;
			manifest *nv = emdb_realloc(v, nc * sizeof(*v));
			if (!nv) {
				rc = EMDB_ERR_NOMEM;
				break;
			}
			v = nv;
			cap = nc;
		}
		rc = manifest_decode((const uint8_t *)val, vlen, &v[cnt]);
		if (rc != EMDB_OK)
			break;
		if (v[cnt].info.id != store_key_ckpt_id((const uint8_t *)k, klen)) {
			manifest_free(&v[cnt]);
			rc = emdb__seterr(EMDB_ERR_CORRUPT, "manifest under key of checkpoint %llu names %llu",
					  (unsigned long long)store_key_ckpt_id((const uint8_t *)k, klen),
					  (unsigned long long)v[cnt].info.id);
			break;
		}
		cnt++;
	}
	char *err = NULL;
	rocksdb_iter_get_error(it, &err);
	if (rc == EMDB_OK)
		rc = store_rocks_err(err, "listing checkpoints");
	else if (err)
		rocksdb_free(err);
	rocksdb_iter_destroy(it);
	if (rc != EMDB_OK) {
		for (size_t i = 0; i < cnt; i++)
			manifest_free(&v[i]);
		emdb_free(v);
		return rc;
	}
	*out = v;
	*n = cnt;
	return EMDB_OK;
}

static void free_all(manifest *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		manifest_free(&v[i]);
	emdb_free(v);
}

int emdb_store_list(emdb_store *st, emdb_ckpt_info *out, size_t cap, size_t *n)
{
	if (!st || !n || (cap && !out))
		return emdb__seterr(EMDB_ERR_INVALID, "emdb_store_list: NULL argument");
	manifest *v;
	size_t cnt;
	int rc = load_all(st, &v, &cnt);
	if (rc != EMDB_OK)
		return rc;
	for (size_t i = 0; i < cnt && i < cap; i++)
		out[i] = v[i].info;
	*n = cnt;
	free_all(v, cnt);
	return EMDB_OK;
}

int store_manifest(emdb_store *st, uint64_t id, manifest *m)
{
	if (id == 0) {
		manifest *v;
		size_t cnt;
		int rc = load_all(st, &v, &cnt);
		if (rc != EMDB_OK)
			return rc;
		if (!cnt) {
			emdb_free(v);
			return emdb__seterr(EMDB_ERR_INVALID, "the store in %s holds no checkpoint", st->dir);
		}
		*m = v[cnt - 1];
		v[cnt - 1].tables = NULL;
		free_all(v, cnt);
		return EMDB_OK;
	}
	uint8_t key[META_KEY_CKPT_LEN];
	char *err = NULL;
	size_t len = 0;
	store_key_ckpt(key, id);
	char *val = rocksdb_get_cf(st->db, st->ropts, STORE_CF_META(st), (const char *)key, sizeof(key),
				   &len, &err);
	int rc = store_rocks_err(err, "reading a manifest");
	if (rc != EMDB_OK)
		return rc;
	if (!val)
		return emdb__seterr(EMDB_ERR_INVALID, "no checkpoint %llu in the store", (unsigned long long)id);
	rc = manifest_decode((const uint8_t *)val, len, m);
	rocksdb_free(val);
	if (rc == EMDB_OK && m->info.id != id) {
		manifest_free(m);
		rc = emdb__seterr(EMDB_ERR_CORRUPT, "manifest of checkpoint %llu names checkpoint %llu",
				  (unsigned long long)id, (unsigned long long)m->info.id);
	}
	return rc;
}

int emdb_store_get(emdb_store *st, uint64_t id, emdb_ckpt_info *out)
{
	if (!st || !out)
		return emdb__seterr(EMDB_ERR_INVALID, "emdb_store_get: NULL argument");
	manifest m;
	int rc = store_manifest(st, id, &m);
	if (rc == EMDB_OK) {
		*out = m.info;
		manifest_free(&m);
	}
	return rc;
}

int store_drop_rows(emdb_store *st, uint64_t id)
{
	uint8_t a[ROW_KEY_LEN], b[ROW_KEY_LEN];
	store_key_row(a, id, 0, 0);
	store_key_row(b, id + 1, 0, 0);
	rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
	rocksdb_writebatch_delete_range_cf(wb, STORE_CF_ROWS(st), (const char *)a, sizeof(a),
					   (const char *)b, sizeof(b));
	char *err = NULL;
	rocksdb_write(st->db, st->wsync, wb, &err);
	rocksdb_writebatch_destroy(wb);
	int rc = store_rocks_err(err, "deleting checkpoint rows");
	if (rc == EMDB_OK) /* give the space back now, not at some later compaction */
		rocksdb_compact_range_cf(st->db, STORE_CF_ROWS(st), (const char *)a, sizeof(a),
					 (const char *)b, sizeof(b));
	return rc;
}

static int delete_locked(emdb_store *st, uint64_t id)
{
	uint8_t key[META_KEY_CKPT_LEN];
	char *err = NULL;
	store_key_ckpt(key, id);
	rocksdb_delete_cf(st->db, st->wsync, STORE_CF_META(st), (const char *)key, sizeof(key), &err);
	int rc = store_rocks_err(err, "deleting a manifest");
	return rc == EMDB_OK ? store_drop_rows(st, id) : rc;
}

int emdb_store_delete(emdb_store *st, uint64_t id)
{
	if (!st)
		return emdb__seterr(EMDB_ERR_INVALID, "emdb_store_delete: store is NULL");
	manifest *v;
	size_t cnt;
	pthread_mutex_lock(&st->mu);
	int rc = load_all(st, &v, &cnt);
	if (rc != EMDB_OK) {
		pthread_mutex_unlock(&st->mu);
		return rc;
	}
	bool found = false;
	for (size_t i = 0; i < cnt && rc == EMDB_OK; i++) {
		if (v[i].info.id == id)
			found = true;
		if (v[i].info.parent == id)
			rc = emdb__seterr(EMDB_ERR_BUSY,
					  "checkpoint %llu is the parent of incremental checkpoint %llu: delete that one first",
					  (unsigned long long)id, (unsigned long long)v[i].info.id);
	}
	if (rc == EMDB_OK && !found)
		rc = emdb__seterr(EMDB_ERR_INVALID, "no checkpoint %llu in the store", (unsigned long long)id);
	if (rc == EMDB_OK)
		rc = delete_locked(st, id);
	pthread_mutex_unlock(&st->mu);
	free_all(v, cnt);
	return rc;
}

int emdb_store_retain(emdb_store *st, uint32_t keep, uint32_t *deleted)
{
	if (!st || keep == 0)
		return emdb__seterr(EMDB_ERR_INVALID, "emdb_store_retain: keep must be at least 1");
	manifest *v;
	size_t cnt;
	uint32_t gone = 0;
	pthread_mutex_lock(&st->mu);
	int rc = load_all(st, &v, &cnt);
	if (rc != EMDB_OK) {
		pthread_mutex_unlock(&st->mu);
		return rc;
	}
	bool *kept = emdb_calloc(cnt ? cnt : 1, sizeof(bool));
	if (!kept)
		rc = EMDB_ERR_NOMEM;
	/* Newest first: the newest `keep`, then the parents of anything kept
	 * (parents have smaller ids, so one pass downwards closes the chains). */
	for (size_t i = cnt; rc == EMDB_OK && i-- > 0;) {
		if (cnt - i <= keep)
			kept[i] = true;
		if (!kept[i] || !v[i].info.parent)
			continue;
		for (size_t j = 0; j < i; j++)
			if (v[j].info.id == v[i].info.parent)
				kept[j] = true;
	}
	for (size_t i = cnt; rc == EMDB_OK && i-- > 0;) {
		if (kept[i])
			continue;
		rc = delete_locked(st, v[i].info.id);
		if (rc == EMDB_OK)
			gone++;
	}
	pthread_mutex_unlock(&st->mu);
	emdb_free(kept);
	free_all(v, cnt);
	if (deleted)
		*deleted = gone;
	return rc;
}

int store_ingest(emdb_store *st, const char *const *paths, size_t n)
{
	rocksdb_ingestexternalfileoptions_t *io = rocksdb_ingestexternalfileoptions_create();
	rocksdb_ingestexternalfileoptions_set_move_files(io, 1);
	char *err = NULL;
	rocksdb_ingest_external_file_cf(st->db, STORE_CF_ROWS(st), (const char *const *)paths, n, io, &err);
	rocksdb_ingestexternalfileoptions_destroy(io);
	return store_rocks_err(err, "ingesting the checkpoint's SST files");
}

const char *emdb_ckpt_kind_name(emdb_ckpt_kind kind)
{
	switch (kind) {
	case EMDB_CKPT_FULL: return "full";
	case EMDB_CKPT_INCREMENTAL: return "incremental";
	}
	return NULL;
}
