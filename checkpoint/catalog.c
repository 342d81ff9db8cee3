/*
 * catalog.c - the catalog file beside the store's RocksDB database
 * (<dir>/CATALOG, format in docs/checkpoint.md): which checkpoints are
 * complete, with each one's manifest checksum, and which ids are
 * unfinished.  It is the store's memory of its own checkpoints that does
 * not depend on RocksDB's write-ahead log, so that a manifest RocksDB
 * silently lost (a damaged WAL record skipped at recovery) shows up as
 * missing instead of as "never written".
 *
 * Invariants:
 *   1. The file on disk is replaced whole: written to CATALOG.tmp, synced,
 *      renamed over CATALOG, and the directory synced.  A crash leaves the
 *      old or the new catalog, never a mix.
 *   2. An edit goes to disk before memory: cat_edit_locked builds the next
 *      catalog, writes it, and only when that succeeded replaces st->cat.
 *      A failed write (a full disk) leaves both as they were.
 *   3. An id is in at most one of the two lists: done (reported complete)
 *      or pending (a checkpoint writing it, or a deletion removing it).
 *      Only pending ids may have their rows dropped at open.
 *
 * State changes: cat_edit_locked and catalog_load, with st->mu held (or
 * before the store is shared, at open).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <emdb/alloc.h>

#include "base/error_int.h"
#include "checkpoint/store_int.h"

/* An I/O failure of the catalog file, with NOSPACE for a full disk so
 * that callers can tell "free space and retry" from a broken disk. */
static int file_err(int e, const char *what, const char *path)
{
	return emdb__seterr(e == ENOSPC || e == EDQUOT ? EMDB_ERR_NOSPACE : EMDB_ERR_IO, "%s %s: %s", what,
			    path, strerror(e));
}

int catalog_load(const char *path, store_catalog *c, bool *absent)
{
	*absent = false;
	memset(c, 0, sizeof(*c));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT) {
			*absent = true;
			return EMDB_OK;
		}
		return file_err(errno, "cannot open the catalog", path);
	}
	struct stat sb;
	int rc = EMDB_OK;
	uint8_t *buf = NULL;
	if (fstat(fd, &sb) != 0) {
		rc = file_err(errno, "cannot stat the catalog", path);
		goto out;
	}
	if ((size_t)sb.st_size > catalog_size(CATALOG_MAX, CATALOG_MAX)) {
		rc = emdb__seterr(EMDB_ERR_CORRUPT, "catalog %s: %lld bytes, more than any catalog", path,
				  (long long)sb.st_size);
		goto out;
	}
	size_t len = (size_t)sb.st_size;
	buf = emdb_malloc(len ? len : 1);
	if (!buf) {
		rc = EMDB_ERR_NOMEM;
		goto out;
	}
	size_t got = 0;
	while (got < len) {
		ssize_t r = read(fd, buf + got, len - got);
		if (r <= 0) {
			if (r < 0 && errno == EINTR)
				continue;
			rc = r < 0 ? file_err(errno, "cannot read the catalog", path)
				   : emdb__seterr(EMDB_ERR_CORRUPT, "catalog %s: shorter than its size", path);
			goto out;
		}
		got += (size_t)r;
	}
	rc = catalog_decode(buf, len, c);
	if (rc == EMDB_ERR_CORRUPT) {
		char why[256];
		snprintf(why, sizeof(why), "%s", emdb_last_error());
		rc = emdb__seterr(rc, "the catalog file %s is damaged (%s)", path, why);
	}
out:
	emdb_free(buf);
	close(fd);
	return rc;
}

static int write_all(int fd, const uint8_t *p, size_t len)
{
	while (len) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? errno : EIO;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

int catalog_store(const emdb_store *st, const store_catalog *c)
{
	size_t len = catalog_size(c->n_done, c->n_pending);
	uint8_t *buf = emdb_malloc(len);
	if (!buf)
		return EMDB_ERR_NOMEM;
	catalog_encode(buf, c);
	int rc = EMDB_OK;
	int fd = open(st->cat_tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = file_err(errno, "cannot create", st->cat_tmp);
		goto out;
	}
	int e = write_all(fd, buf, len);
	if (!e && fsync(fd) != 0)
		e = errno;
	close(fd);
	if (e) {
		unlink(st->cat_tmp); /* give back what it took of a full disk */
		rc = file_err(e, "cannot write", st->cat_tmp);
		goto out;
	}
	if (rename(st->cat_tmp, st->cat_path) != 0) {
		rc = file_err(errno, "cannot rename the catalog to", st->cat_path);
		unlink(st->cat_tmp);
		goto out;
	}
	int dfd = open(st->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fsync(dfd) != 0)
		rc = file_err(errno, "cannot sync the directory", st->dir);
	if (dfd >= 0)
		close(dfd);
out:
	emdb_free(buf);
	return rc;
}

bool catalog_has(const store_catalog *c, uint64_t id, uint64_t *sum, bool *pending)
{
	for (uint32_t i = 0; i < c->n_done; i++)
		if (c->done[i].id == id) {
			if (sum)
				*sum = c->done[i].sum;
			if (pending)
				*pending = false;
			return true;
		}
	for (uint32_t i = 0; i < c->n_pending; i++)
		if (c->pending[i] == id) {
			if (pending)
				*pending = true;
			return true;
		}
	return false;
}

/* Copy `src` into `dst` without id, then with id where `to` says. */
static int edited(const store_catalog *src, store_catalog *dst, uint64_t id, cat_list to, uint64_t sum)
{
	memcpy(dst->uuid, src->uuid, 16);
	dst->next_id = src->next_id > id ? src->next_id : id + 1;
	dst->done = emdb_malloc(((size_t)src->n_done + 1) * sizeof(*dst->done));
	dst->pending = emdb_malloc(((size_t)src->n_pending + 1) * sizeof(*dst->pending));
	dst->n_done = dst->n_pending = 0;
	if (!dst->done || !dst->pending) {
		catalog_free(dst);
		return EMDB_ERR_NOMEM;
	}
	bool placed = to == CAT_NONE;
	for (uint32_t i = 0; i < src->n_done; i++) {
		if (!placed && to == CAT_DONE && src->done[i].id > id) {
			dst->done[dst->n_done++] = (catalog_entry){ id, sum };
			placed = true;
		}
		if (src->done[i].id != id)
			dst->done[dst->n_done++] = src->done[i];
	}
	if (!placed && to == CAT_DONE) {
		dst->done[dst->n_done++] = (catalog_entry){ id, sum };
		placed = true;
	}
	for (uint32_t i = 0; i < src->n_pending; i++) {
		if (!placed && src->pending[i] > id) {
			dst->pending[dst->n_pending++] = id;
			placed = true;
		}
		if (src->pending[i] != id)
			dst->pending[dst->n_pending++] = src->pending[i];
	}
	if (!placed)
		dst->pending[dst->n_pending++] = id;
	return EMDB_OK;
}

int cat_edit_locked(emdb_store *st, uint64_t id, cat_list to, uint64_t sum)
{
	store_catalog next;
	int rc = edited(&st->cat, &next, id, to, sum);
	if (rc != EMDB_OK)
		return rc;
	rc = catalog_store(st, &next);
	if (rc != EMDB_OK) {
		catalog_free(&next);
		return rc;
	}
	catalog_free(&st->cat);
	st->cat = next;
	return EMDB_OK;
}
