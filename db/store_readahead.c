/*
 * store_readahead.c - reading restore's files ahead (see
 * store_readahead.h for why the consumed byte count tracks the position).
 *
 * One thread, started by store_ra_open and joined by store_ra_close, reads
 * each file in windows ahead of the restore's position, so the disk fills
 * the page cache while the restoring thread decodes and loads rows.
 * posix_fadvise(WILLNEED) from the restoring thread was tried first: it
 * blocks while it submits the reads, so it gave no overlap.
 *
 * Invariants:
 *   1. Only files holding the rows of exactly one checkpoint of the chain
 *      are read (smallest and largest key name the same checkpoint).
 *   2. The thread stays at most WINDOWS windows ahead of the position, so
 *      the page cache is not flooded with a whole multi-GB file at once.
 *
 * State changes: positions (restoring thread) and read cursors (reader
 * thread), all under mu.
 */
#include <fcntl.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <emdb/alloc.h>

#include "db/store_int.h"
#include "db/store_readahead.h"

#define WINDOW (32ull << 20)
#define WINDOWS 3

typedef struct ra_file {
	uint64_t ckpt;
	int fd;
	uint64_t size, pos, hinted;
} ra_file;

struct store_ra {
	ra_file *f;
	uint32_t n;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t th;
	int stop;
	uint8_t *buf;
};

#define READ_BYTES (4u << 20)

/* The next file with a window to read, or NULL.  Caller holds mu. */
static ra_file *next_locked(store_ra *ra)
{
	for (uint32_t i = 0; i < ra->n; i++) {
		ra_file *f = &ra->f[i];
		if (f->hinted < f->size && f->hinted < f->pos + WINDOW * WINDOWS)
			return f;
	}
	return NULL;
}

static void *reader(void *arg)
{
	store_ra *ra = arg;
	pthread_mutex_lock(&ra->mu);
	for (;;) {
		ra_file *f;
		while (!ra->stop && !(f = next_locked(ra)))
			pthread_cond_wait(&ra->cv, &ra->mu);
		if (ra->stop)
			break;
		uint64_t off = f->hinted, end = off + WINDOW < f->size ? off + WINDOW : f->size;
		f->hinted = end;
		pthread_mutex_unlock(&ra->mu);
		while (off < end) {
			size_t len = end - off < READ_BYTES ? (size_t)(end - off) : READ_BYTES;
			ssize_t got = pread(f->fd, ra->buf, len, (off_t)off);
			if (got <= 0)
				break;
			off += (uint64_t)got;
		}
		pthread_mutex_lock(&ra->mu);
	}
	pthread_mutex_unlock(&ra->mu);
	return NULL;
}

store_ra *store_ra_open(emdb_store *st, const uint64_t *ids, uint32_t n)
{
	const rocksdb_livefiles_t *lf = rocksdb_livefiles(st->db);
	if (!lf)
		return NULL;
	store_ra *ra = emdb_calloc(1, sizeof(*ra));
	int cnt = rocksdb_livefiles_count(lf);
	if (ra)
		ra->f = emdb_calloc(n ? n : 1, sizeof(*ra->f));
	for (int i = 0; ra && ra->f && i < cnt; i++) {
		size_t ls, gs;
		const char *lo = rocksdb_livefiles_smallestkey(lf, i, &ls);
		const char *hi = rocksdb_livefiles_largestkey(lf, i, &gs);
		uint64_t c1, c2, b;
		uint32_t t;
		if (strcmp(rocksdb_livefiles_column_family_name(lf, i), CF_ROWS) != 0 ||
		    store_key_row_decode((const uint8_t *)lo, ls, &c1, &t, &b) != EMDB_OK ||
		    store_key_row_decode((const uint8_t *)hi, gs, &c2, &t, &b) != EMDB_OK || c1 != c2)
			continue;
		uint32_t k = 0;
		while (k < n && ids[k] != c1)
			k++;
		if (k == n || ra->n == n)
			continue;
		char path[4096];
		snprintf(path, sizeof(path), "%s%s", st->db_dir, rocksdb_livefiles_name(lf, i));
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		struct stat sb;
		if (fd < 0)
			continue;
		if (fstat(fd, &sb) != 0) {
			close(fd);
			continue;
		}
		ra_file *f = &ra->f[ra->n++];
		f->ckpt = c1;
		f->fd = fd;
		f->size = (uint64_t)sb.st_size;
	}
	rocksdb_livefiles_destroy(lf);
	if (ra && ra->f && ra->n)
		ra->buf = emdb_malloc(READ_BYTES);
	if (ra && (!ra->buf || !ra->n)) {
		for (uint32_t i = 0; ra->f && i < ra->n; i++)
			close(ra->f[i].fd);
		emdb_free(ra->f);
		emdb_free(ra->buf);
		emdb_free(ra);
		return NULL;
	}
	pthread_mutex_init(&ra->mu, NULL);
	pthread_cond_init(&ra->cv, NULL);
	if (pthread_create(&ra->th, NULL, reader, ra) != 0) {
		ra->stop = -1; /* no thread to join */
		store_ra_close(ra);
		return NULL;
	}
	return ra;
}

void store_ra_consumed(store_ra *ra, uint64_t ckpt, uint64_t bytes)
{
	if (!ra)
		return;
	pthread_mutex_lock(&ra->mu);
	for (uint32_t i = 0; i < ra->n; i++) {
		if (ra->f[i].ckpt == ckpt) {
			ra->f[i].pos += bytes;
			pthread_cond_signal(&ra->cv);
			break;
		}
	}
	pthread_mutex_unlock(&ra->mu);
}

void store_ra_close(store_ra *ra)
{
	if (!ra)
		return;
	pthread_mutex_lock(&ra->mu);
	bool started = ra->stop == 0;
	ra->stop = 1;
	pthread_cond_signal(&ra->cv);
	pthread_mutex_unlock(&ra->mu);
	if (started)
		pthread_join(ra->th, NULL);
	pthread_cond_destroy(&ra->cv);
	pthread_mutex_destroy(&ra->mu);
	for (uint32_t i = 0; i < ra->n; i++)
		close(ra->f[i].fd);
	emdb_free(ra->f);
	emdb_free(ra->buf);
	emdb_free(ra);
}
