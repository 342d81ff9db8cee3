/*
 * store.c - the checkpoint store: one embedded RocksDB database holding
 * manifests (column family emdb_meta) and row blocks (emdb_rows), and the
 * catalog beside it (catalog.c); opening it, listing, deleting and
 * retaining checkpoints, and getting RocksDB back after a write failure.
 *
 * Invariants:
 *   1. A checkpoint is visible exactly when the catalog lists it as done;
 *      its manifest is then in emdb_meta and flushed out of the WAL into
 *      an SST file.  Publishing writes the manifest (synced), flushes it,
 *      then records it in the catalog; deleting marks it pending in the
 *      catalog first, then removes manifest and rows.  A crash at any
 *      point leaves only whole checkpoints visible, and the pieces of
 *      unfinished ones pending, for the next open to drop.
 *   2. Nothing is deleted on the mere absence of metadata: RocksDB is
 *      opened with kAbsoluteConsistency (a damaged WAL record fails the
 *      open instead of silently ending the log), and check.c refuses
 *      a store whose catalog, manifests and rows disagree.
 *   3. Checkpoint ids come from the catalog's next_id, persisted (synced)
 *      before the id is used, so an id is never given twice in one store.
 *   4. An incremental checkpoint's parent is never deleted while it is
 *      there (emdb_store_delete refuses, emdb_store_retain keeps chains).
 *   5. After a failed RocksDB write (a full disk) RocksDB refuses every
 *      further write until reopened: st->failed is set, and the next
 *      caller that finds space on the file system reopens it
 *      (store_recover) with no other caller inside (db_lock held for
 *      writing), then drops the rows deletions left behind (st->redo).
 *
 * State changes: the header, catalog, manifests and deletions under mu;
 * st->db only in store_recover, under db_lock held for writing; row blocks
 * arrive by ingestion (write.c).
 */
#define _GNU_SOURCE /* O_DIRECT */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <emdb/alloc.h>

#include "base/error_int.h"
#include "checkpoint/store_int.h"

int store_rocks_err(char *err, const char *what)
{
	if (!err)
		return EMDB_OK;
	int code = strncmp(err, "Corruption", 10) == 0	 ? EMDB_ERR_CORRUPT
		   : strstr(err, "No space left on device") ? EMDB_ERR_NOSPACE
							    : EMDB_ERR_IO;
	emdb__seterr(code, "%s: %s", what, err);
	rocksdb_free(err);
	return code;
}

int store_iter_end(rocksdb_iterator_t *it, int rc, const char *what)
{
	char *err = NULL;
	rocksdb_iter_get_error(it, &err);
	rocksdb_iter_destroy(it);
	if (rc == EMDB_OK)
		return store_rocks_err(err, what);
	rocksdb_free(err);
	return rc;
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
	int rc = store_rocks_err(err, "writing the store header");
	return rc == EMDB_OK ? store_flush_meta(st) : store_failed(st, rc);
}

/* The header, or a new one (not yet written: *missing) in a new store. */
static int load_header(emdb_store *st, bool *missing)
{
	char *err = NULL;
	size_t len = 0;
	char *v = rocksdb_get_cf(st->db, st->ropts, STORE_CF_META(st), META_KEY_STORE,
				 strlen(META_KEY_STORE), &len, &err);
	int rc = store_rocks_err(err, "reading the store header");
	*missing = rc == EMDB_OK && !v;
	if (rc != EMDB_OK)
		return rc;
	if (!v) {
		st->hdr.version = STORE_VERSION;
		st->hdr.next_id = 1;
		new_uuid(st->hdr.uuid);
		return EMDB_OK;
	}
	rc = store_hdr_decode((const uint8_t *)v, len, &st->hdr);
	rocksdb_free(v);
	return rc;
}

int store_failed(emdb_store *st, int rc)
{
	if (rc == EMDB_ERR_IO || rc == EMDB_ERR_NOSPACE)
		__atomic_store_n(&st->failed, rc, __ATOMIC_RELEASE);
	return rc;
}

/* RocksDB's count of background errors: a compaction that failed (the C
 * API's compact_range returns no error) shows here. */
static uint64_t bg_errors(emdb_store *st)
{
	char *v = rocksdb_property_value(st->db, "rocksdb.background-errors");
	uint64_t n = v ? strtoull(v, NULL, 10) : 0;
	rocksdb_free(v);
	return n;
}

int store_flush_meta(emdb_store *st)
{
	char *err = NULL;
	rocksdb_flush_cf(st->db, st->fwait, STORE_CF_META(st), &err);
	return store_failed(st, store_rocks_err(err, "flushing the checkpoint store's metadata"));
}

static void close_rocks(emdb_store *st)
{
	for (int i = 0; i < 3; i++)
		if (st->cf[i])
			rocksdb_column_family_handle_destroy(st->cf[i]);
	memset(st->cf, 0, sizeof(st->cf));
	if (st->db)
		rocksdb_close(st->db);
	st->db = NULL;
}

static void store_free(emdb_store *st)
{
	close_rocks(st);
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
	if (st->fwait)
		rocksdb_flushoptions_destroy(st->fwait);
	catalog_free(&st->cat);
	pthread_mutex_destroy(&st->mu);
	pthread_rwlock_destroy(&st->db_lock);
	emdb_free(st->dir);
	emdb_free(st->db_dir);
	emdb_free(st->tmp_dir);
	emdb_free(st->cat_path);
	emdb_free(st->cat_tmp);
	emdb_free(st->damage);
	emdb_free(st->redo);
	emdb_free(st);
}

static int make_options(emdb_store *st, bool accept_loss)
{
	st->opts = rocksdb_options_create();
	rocksdb_options_set_create_if_missing(st->opts, 1);
	rocksdb_options_set_create_missing_column_families(st->opts, 1);
	rocksdb_options_set_keep_log_file_num(st->opts, 4);
	rocksdb_options_set_max_log_file_size(st->opts, 8u << 20);
	/* RocksDB's default recovery (point in time) ends the WAL at its first
	 * damaged record without an error: what followed, manifests included,
	 * would be gone unnoticed.  Absolute consistency fails the open
	 * instead; accept_loss is the operator's explicit choice of the old
	 * behaviour, followed by check.c's account of what is lost. */
	rocksdb_options_set_wal_recovery_mode(st->opts, accept_loss ? 2 : 1);
	rocksdb_options_set_paranoid_checks(st->opts, 1);
	/* RocksDB 7.8's info log (<dir>/rocksdb/LOG) aborts the process
	 * (assertion in WritableFileWriter) on its next write after one failed
	 * on a full disk, and its C API can set no other logger: only the few
	 * header lines written at open go there.  emdb reports every RocksDB
	 * error itself. */
	rocksdb_options_set_info_log_level(st->opts, 5 /* HEADER_LEVEL */);
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
	if (err)
		return store_rocks_err(err, "setting the options of the rows column family");
	st->wsync = rocksdb_writeoptions_create();
	rocksdb_writeoptions_set_sync(st->wsync, 1);
	st->ropts = rocksdb_readoptions_create();
	st->fwait = rocksdb_flushoptions_create();
	rocksdb_flushoptions_set_wait(st->fwait, 1);
	return EMDB_OK;
}

int store_refuse(const emdb_store *st, const char *kept, const char *what, const char *detail)
{
	/* The advice before the details: a message holds 512 bytes. */
	return emdb__seterr(EMDB_ERR_CORRUPT,
			    "the checkpoint store in %s is damaged, nothing was changed; restore it from a copy, "
			    "or accept the loss (emdb-server --accept-data-loss 1, emdb_store_options.accept_loss) "
			    "to keep %s. %s%s",
			    st->dir, kept, what, detail);
}

int store_refuse_read_only(const emdb_store *st, const char *what)
{
	if (!st->read_only)
		return EMDB_OK;
	return emdb__seterr(EMDB_ERR_INVALID, "%s: the store in %s was opened read-only", what, st->dir);
}

static int open_rocks(emdb_store *st)
{
	const char *names[3] = { "default", CF_META, CF_ROWS };
	const rocksdb_options_t *cfo[3] = { st->opts, st->meta_opts, st->rows_opts };
	char *err = NULL;
	if (st->read_only)
		st->db = rocksdb_open_for_read_only_column_families(st->opts, st->db_dir, 3, names, cfo, st->cf, 0,
								    &err);
	else
		st->db = rocksdb_open_column_families(st->opts, st->db_dir, 3, names, cfo, st->cf, &err);
	if (!err)
		return EMDB_OK;
	st->db = NULL;
	memset(st->cf, 0, sizeof(st->cf));
	char why[1024];
	int rc = store_rocks_err(err, "opening the checkpoint store");
	snprintf(why, sizeof(why), "%s", emdb_last_error());
	if (rc == EMDB_ERR_CORRUPT)
		rc = store_refuse(st, "what can be read", "RocksDB cannot replay it: ", why);
	return rc;
}

int emdb_store_open(const char *dir, emdb_store **out)
{
	return emdb_store_open_ex(dir, NULL, out);
}

int emdb_store_open_ex(const char *dir, const emdb_store_options *opt, emdb_store **out)
{
	if (!out || !dir || !dir[0])
		return emdb__seterr(EMDB_ERR_INVALID, "emdb_store_open: no directory given");
	*out = NULL;
	if (opt && opt->size < sizeof(uint32_t) * 2)
		return emdb__seterr(EMDB_ERR_INVALID, "emdb_store_open: options of size %u: use EMDB_STORE_OPTIONS_INIT",
				    opt->size);
	bool accept_loss = opt && opt->accept_loss;
	bool read_only = opt && opt->size >= offsetof(emdb_store_options, read_only) + sizeof(uint32_t) &&
			 opt->read_only;
	emdb_store *st = emdb_calloc(1, sizeof(*st));
	if (!st)
		return EMDB_ERR_NOMEM;
	st->read_only = read_only;
	pthread_mutex_init(&st->mu, NULL);
	pthread_rwlock_init(&st->db_lock, NULL);
	size_t dl = strlen(dir) + 1;
	st->dir = emdb_malloc(dl);
	if (st->dir)
		memcpy(st->dir, dir, dl);
	st->db_dir = path_join(dir, "rocksdb");
	st->tmp_dir = path_join(dir, "tmp");
	st->cat_path = path_join(dir, "CATALOG");
	st->cat_tmp = path_join(dir, "CATALOG.tmp");
	int rc = EMDB_ERR_NOMEM;
	if (!st->dir || !st->db_dir || !st->tmp_dir || !st->cat_path || !st->cat_tmp)
		goto fail;
	if (read_only) {
		if (access(st->cat_path, F_OK) != 0) {
			rc = emdb__seterr(EMDB_ERR_INVALID, "%s holds no checkpoint store (no %s)", dir, st->cat_path);
			goto fail;
		}
	} else if ((rc = make_dir(dir)) != EMDB_OK || (rc = make_dir(st->tmp_dir)) != EMDB_OK) {
		goto fail;
	} else {
		clear_tmp(st->tmp_dir);
	}
	if ((rc = make_options(st, accept_loss)) != EMDB_OK || (rc = open_rocks(st)) != EMDB_OK)
		goto fail;
	bool hdr_missing;
	if ((rc = load_header(st, &hdr_missing)) != EMDB_OK)
		goto fail;
	if (read_only) { /* what the catalog says is complete, nothing repaired */
		bool absent = false;
		if (hdr_missing)
			rc = emdb__seterr(EMDB_ERR_INVALID, "%s holds no checkpoint store (no store header)", dir);
		else
			rc = catalog_load(st->cat_path, &st->cat, &absent);
		if (rc == EMDB_OK && absent)
			rc = emdb__seterr(EMDB_ERR_INVALID, "%s holds no checkpoint store (no %s)", dir, st->cat_path);
		if (rc != EMDB_OK)
			goto fail;
		*out = st;
		return EMDB_OK;
	}
	/* A new store: the header first, so that a crash before its first
	 * catalog leaves a store that is new again, not a catalog without a
	 * header (which the check reports as damage). */
	if (hdr_missing && access(st->cat_path, F_OK) != 0 && errno == ENOENT) {
		if ((rc = write_header_locked(st)) != EMDB_OK)
			goto fail;
		hdr_missing = false;
	}
	if ((rc = store_check_open(st, accept_loss, hdr_missing)) != EMDB_OK)
		goto fail;
	if (hdr_missing && (rc = write_header_locked(st)) != EMDB_OK)
		goto fail;
	*out = st;
	return EMDB_OK;
fail:
	store_free(st);
	return rc;
}

const char *emdb_store_damage(const emdb_store *st)
{
	return st && st->damage ? st->damage : "";
}

void emdb_store_close(emdb_store *st)
{
	if (st)
		store_free(st);
}

int emdb_store_state(const emdb_store *st)
{
	return __atomic_load_n(&st->failed, __ATOMIC_ACQUIRE);
}

const char *emdb_store_dir(const emdb_store *st)
{
	return st->dir;
}

/* Space below which reopening RocksDB is not tried: the open itself
 * writes a new MANIFEST, OPTIONS file and WAL (tens of KiB), and a failed
 * open leaves the store closed (no reads either) until one succeeds. */
#define RECOVER_MIN_FREE (1u << 20)

/* Drop the rows that deletions left behind (st->redo), under mu. */
static void redo_locked(emdb_store *st)
{
	while (st->n_redo && store_drop_rows(st, st->redo[st->n_redo - 1]) == EMDB_OK) {
		cat_edit_locked(st, st->redo[st->n_redo - 1], CAT_NONE, 0);
		st->n_redo--;
	}
}

static void redo_add_locked(emdb_store *st, uint64_t id)
{
	for (size_t i = 0; i < st->n_redo; i++)
		if (st->redo[i] == id)
			return;
	uint64_t *nv = emdb_realloc(st->redo, (st->n_redo + 1) * sizeof(*nv));
	if (!nv)
		return; /* still pending in the catalog: the next open drops it */
	st->redo = nv;
	st->redo[st->n_redo++] = id;
}

/* Invariant 5: reopen RocksDB after a write failure, once there is room
 * and nobody is inside. */
static void store_recover(emdb_store *st)
{
	struct statvfs vs;
	if (statvfs(st->dir, &vs) != 0 || (uint64_t)vs.f_bavail * vs.f_frsize < RECOVER_MIN_FREE)
		return;
	if (pthread_rwlock_trywrlock(&st->db_lock) != 0)
		return;
	if (__atomic_load_n(&st->failed, __ATOMIC_ACQUIRE)) {
		close_rocks(st);
		if (open_rocks(st) == EMDB_OK) {
			__atomic_store_n(&st->failed, 0, __ATOMIC_RELEASE);
			pthread_mutex_lock(&st->mu);
			redo_locked(st);
			pthread_mutex_unlock(&st->mu);
		}
	}
	pthread_rwlock_unlock(&st->db_lock);
}

int store_enter(emdb_store *st)
{
	if (__atomic_load_n(&st->failed, __ATOMIC_ACQUIRE))
		store_recover(st);
	pthread_rwlock_rdlock(&st->db_lock);
	if (st->db)
		return EMDB_OK;
	int rc = __atomic_load_n(&st->failed, __ATOMIC_ACQUIRE);
	pthread_rwlock_unlock(&st->db_lock);
	return emdb__seterr(rc ? rc : EMDB_ERR_IO,
			    "the checkpoint store in %s could not be reopened after a write failure%s: free "
			    "space on its file system; the next call retries",
			    st->dir, rc == EMDB_ERR_NOSPACE ? " (no space left on the device)" : "");
}

void store_leave(emdb_store *st)
{
	pthread_rwlock_unlock(&st->db_lock);
}

int store_take_id(emdb_store *st, uint64_t *id)
{
	pthread_mutex_lock(&st->mu);
	redo_locked(st);
	*id = st->cat.next_id;
	int rc = cat_edit_locked(st, *id, CAT_PENDING, 0);
	pthread_mutex_unlock(&st->mu);
	if (rc != EMDB_OK)
		*id = 0;
	return rc;
}

int store_drop_manifest(emdb_store *st, uint64_t id)
{
	uint8_t key[META_KEY_CKPT_LEN];
	char *err = NULL;
	store_key_ckpt(key, id);
	rocksdb_delete_cf(st->db, st->wsync, STORE_CF_META(st), (const char *)key, sizeof(key), &err);
	int rc = store_failed(st, store_rocks_err(err, "deleting a manifest"));
	return rc == EMDB_OK ? store_flush_meta(st) : rc;
}

int store_publish(emdb_store *st, const manifest *m)
{
	size_t len = manifest_size(m->info.tables);
	uint8_t *buf = emdb_malloc(len);
	if (!buf)
		return EMDB_ERR_NOMEM;
	manifest_encode(buf, m);
	uint64_t sum = manifest_sum(buf, len);
	uint8_t key[META_KEY_CKPT_LEN];
	store_key_ckpt(key, m->info.id);
	char *err = NULL;
	pthread_mutex_lock(&st->mu);
	/* The header's next_id goes along: should the catalog ever be lost,
	 * the one rebuilt from RocksDB still gives no id twice. */
	uint8_t hb[STORE_HDR_LEN];
	st->hdr.next_id = st->cat.next_id;
	store_hdr_encode(hb, &st->hdr);
	rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
	rocksdb_writebatch_put_cf(wb, STORE_CF_META(st), (const char *)key, sizeof(key), (const char *)buf, len);
	rocksdb_writebatch_put_cf(wb, STORE_CF_META(st), META_KEY_STORE, strlen(META_KEY_STORE),
				  (const char *)hb, sizeof(hb));
	rocksdb_write(st->db, st->wsync, wb, &err);
	rocksdb_writebatch_destroy(wb);
	emdb_free(buf);
	int rc = store_failed(st, store_rocks_err(err, "writing the manifest"));
	/* Out of the WAL before it counts: a damaged WAL record can then no
	 * longer take a complete checkpoint's manifest with it. */
	if (rc == EMDB_OK)
		rc = store_flush_meta(st);
	if (rc == EMDB_OK)
		rc = cat_edit_locked(st, m->info.id, CAT_DONE, sum);
	if (rc != EMDB_OK) {
		/* Best effort; the id stays pending, so the next open removes
		 * what is left of it. */
		int keep = rc;
		store_drop_manifest(st, m->info.id);
		rc = keep;
	}
	pthread_mutex_unlock(&st->mu);
	return rc;
}

void store_abandon(emdb_store *st, uint64_t id, bool ingested)
{
	pthread_mutex_lock(&st->mu);
	if (!ingested || store_drop_rows(st, id) == EMDB_OK)
		cat_edit_locked(st, id, CAT_NONE, 0);
	else
		redo_add_locked(st, id);
	pthread_mutex_unlock(&st->mu);
}

/* Every complete checkpoint's manifest, oldest first: *out emdb_malloc'd
 * array of *n (each manifest's tables freed with manifest_free).  A
 * manifest the catalog does not list as done is a publication or a
 * deletion in progress: not visible.  The caller holds mu. */
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
		uint64_t kid = store_key_ckpt_id((const uint8_t *)k, klen);
		bool pending = false;
		if (!kid)
			break;
		if (!catalog_has(&st->cat, kid, NULL, &pending) || pending)
			continue;
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
	rc = store_iter_end(it, rc, "listing checkpoints");
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
	int rc = store_enter(st);
	if (rc != EMDB_OK)
		return rc;
	pthread_mutex_lock(&st->mu);
	rc = load_all(st, &v, &cnt);
	pthread_mutex_unlock(&st->mu);
	store_leave(st);
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
	pthread_mutex_lock(&st->mu);
	bool pending = false, done = catalog_has(&st->cat, id, NULL, &pending) && !pending;
	if (id == 0) {
		manifest *v;
		size_t cnt;
		int rc = load_all(st, &v, &cnt);
		pthread_mutex_unlock(&st->mu);
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
	pthread_mutex_unlock(&st->mu);
	if (!done)
		return emdb__seterr(EMDB_ERR_INVALID, "no checkpoint %llu in the store", (unsigned long long)id);
	uint8_t key[META_KEY_CKPT_LEN];
	char *err = NULL;
	size_t len = 0;
	store_key_ckpt(key, id);
	char *val = rocksdb_get_cf(st->db, st->ropts, STORE_CF_META(st), (const char *)key, sizeof(key),
				   &len, &err);
	int rc = store_rocks_err(err, "reading a manifest");
	if (rc != EMDB_OK)
		return rc;
	if (!val) /* the catalog lists it: RocksDB lost it since the open */
		return emdb__seterr(EMDB_ERR_CORRUPT,
				    "checkpoint %llu: the catalog %s lists it, but its manifest is missing from RocksDB",
				    (unsigned long long)id, st->cat_path);
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
	int rc = store_enter(st);
	if (rc != EMDB_OK)
		return rc;
	rc = store_manifest(st, id, &m);
	store_leave(st);
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
	int rc = store_failed(st, store_rocks_err(err, "deleting checkpoint rows"));
	if (rc != EMDB_OK)
		return rc;
	/* Give the space back now, not at some later compaction.  The C API's
	 * compaction returns no error: RocksDB's count of background errors
	 * tells whether it failed (then RocksDB refuses writes: invariant 5). */
	uint64_t errs = bg_errors(st);
	rocksdb_compact_range_cf(st->db, STORE_CF_ROWS(st), (const char *)a, sizeof(a), (const char *)b,
				 sizeof(b));
	if (bg_errors(st) != errs)
		return store_failed(st, emdb__seterr(EMDB_ERR_NOSPACE,
						     "compacting the rows of checkpoint %llu failed in RocksDB",
						     (unsigned long long)id));
	return EMDB_OK;
}

/* Whether manifest id is still readable (true when that cannot be told). */
static bool manifest_there(emdb_store *st, uint64_t id)
{
	uint8_t key[META_KEY_CKPT_LEN];
	char *err = NULL;
	size_t len = 0;
	store_key_ckpt(key, id);
	char *v = rocksdb_get_cf(st->db, st->ropts, STORE_CF_META(st), (const char *)key, sizeof(key), &len,
				 &err);
	bool there = v != NULL;
	rocksdb_free(v);
	if (err) {
		rocksdb_free(err);
		return true;
	}
	return there;
}

/* Invariant 1: pending in the catalog, then the manifest, then the rows.
 * Once the manifest is gone the checkpoint is deleted; rows that could not
 * be dropped yet (a full disk) are dropped when the store recovers. */
static int delete_locked(emdb_store *st, uint64_t id)
{
	uint64_t sum = 0;
	catalog_has(&st->cat, id, &sum, NULL);
	int rc = cat_edit_locked(st, id, CAT_PENDING, 0);
	if (rc != EMDB_OK)
		return rc;
	rc = store_drop_manifest(st, id);
	if (rc != EMDB_OK && manifest_there(st, id)) {
		char why[1024];
		snprintf(why, sizeof(why), "%s", emdb_last_error());
		if (cat_edit_locked(st, id, CAT_DONE, sum) != EMDB_OK)
			redo_add_locked(st, id); /* stays pending: gone at the next open */
		return emdb__seterr(rc, "checkpoint %llu was not deleted: %s", (unsigned long long)id, why);
	}
	/* Gone, even where only its flush failed: the deletion is in the
	 * (synced) WAL, and the catalog must not list it as complete. */
	if (store_drop_rows(st, id) == EMDB_OK)
		cat_edit_locked(st, id, CAT_NONE, 0);
	else
		redo_add_locked(st, id);
	return EMDB_OK;
}

/* The start of a deletion or a retention: enter the store, take mu,
 * finish the row drops earlier deletions left, and load every manifest.
 * On EMDB_OK the caller holds mu and the store and frees v; on failure
 * nothing is held. */
static int enter_to_change(emdb_store *st, manifest **v, size_t *cnt)
{
	int rc = store_enter(st);
	if (rc != EMDB_OK)
		return rc;
	pthread_mutex_lock(&st->mu);
	redo_locked(st);
	rc = load_all(st, v, cnt);
	if (rc != EMDB_OK) {
		pthread_mutex_unlock(&st->mu);
		store_leave(st);
	}
	return rc;
}

int emdb_store_delete(emdb_store *st, uint64_t id)
{
	if (st && store_refuse_read_only(st, "delete"))
		return EMDB_ERR_INVALID;
	if (!st)
		return emdb__seterr(EMDB_ERR_INVALID, "emdb_store_delete: store is NULL");
	manifest *v;
	size_t cnt;
	int rc = enter_to_change(st, &v, &cnt);
	if (rc != EMDB_OK)
		return rc;
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
	store_leave(st);
	free_all(v, cnt);
	return rc;
}

int emdb_store_retain(emdb_store *st, uint32_t keep, uint32_t *deleted)
{
	if (st && store_refuse_read_only(st, "retention"))
		return EMDB_ERR_INVALID;
	if (!st || keep == 0)
		return emdb__seterr(EMDB_ERR_INVALID, "emdb_store_retain: keep must be at least 1");
	manifest *v;
	size_t cnt;
	uint32_t gone = 0;
	int rc = enter_to_change(st, &v, &cnt);
	if (rc != EMDB_OK)
		return rc;
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
	store_leave(st);
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
	return store_failed(st, store_rocks_err(err, "ingesting the checkpoint's SST files"));
}

const char *emdb_ckpt_kind_name(emdb_ckpt_kind kind)
{
	switch (kind) {
	case EMDB_CKPT_FULL: return "full";
	case EMDB_CKPT_INCREMENTAL: return "incremental";
	}
	return NULL;
}
