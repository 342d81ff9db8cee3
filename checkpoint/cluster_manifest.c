/*
 * checkpoint/cluster_manifest.c - the cluster manifest: its codec and its
 * files (checkpoint/cluster_ckpt.h, layout in docs/cluster.md).
 *
 * Invariants:
 *   1. The decoder checks the length, magic, version and the trailing
 *      XXH3-64 before it reads a field, then every count against the bytes
 *      left (overflow-safe) before it allocates, every rank below the node
 *      count, and that nothing trails: anything else is CORRUPT.
 *   2. The encoder refuses what the decoder would (same rules), so a
 *      written manifest always reads back.
 *   3. A manifest file appears by rename after its bytes and before its
 *      directory are synced: whole or absent.  Names that are not
 *      <digits>.ecm (a .tmp of a crash) are never read.
 *
 * State changes: files under <dir>/manifests only.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "base/error_int.h"
#include "checkpoint/cluster_ckpt.h"

#define HEAD 56 /* magic .. reserved, before the cluster id */
#define TABLE_REC 16
#define PART_REC 32
#define SEQ_REC 32

typedef struct wr {
	uint8_t *p;
	size_t off;
} wr;

static void w32(wr *w, uint32_t v)
{
	if (w->p)
		memcpy(w->p + w->off, &v, 4);
	w->off += 4;
}

static void w64(wr *w, uint64_t v)
{
	if (w->p)
		memcpy(w->p + w->off, &v, 8);
	w->off += 8;
}

static void wbytes(wr *w, const void *s, size_t n)
{
	if (w->p && n)
		memcpy(w->p + w->off, s, n);
	w->off += n;
}

uint64_t cman_part_sum(const emdb_ckpt_info *info)
{
	uint64_t v[8] = { info->id,	   (uint64_t)info->kind, info->parent, info->created_ms,
			  info->tables, info->max_step,	     info->rows_total, info->bytes };
	return XXH3_64bits(v, sizeof(v));
}

/* The rules the decoder checks on fields (invariant 2); NULL when m keeps
 * them, else what breaks one. */
static const char *wrong(const cman *m)
{
	static char why[160];
	size_t idl = strnlen(m->cluster_id, sizeof(m->cluster_id));
	if (!m->id)
		return "id 0";
	if (m->kind != 1 && m->kind != 2)
		return "kind (1 full, 2 incremental)";
	if (idl == 0 || idl > CMAN_ID_MAX)
		return "cluster id length (1..63)";
	if (!m->nodes || m->nodes > m->partitions || m->partitions > CMAN_PARTITIONS_MAX)
		return "node or partition count";
	if (!m->epoch)
		return "epoch 0";
	if (m->n_tables > CMAN_TABLES_MAX)
		return "table count";
	for (uint32_t i = 0; i < m->partitions; i++)
		if (m->rank_of[i] >= m->nodes) {
			snprintf(why, sizeof(why), "partition %u mapped to rank %u of %u nodes", i, m->rank_of[i],
				 m->nodes);
			return why;
		}
	for (uint32_t i = 0; i < m->n_tables; i++) {
		if (!m->tables[i].id)
			return "table id 0";
		for (uint32_t j = 0; j < i; j++)
			if (m->tables[j].id == m->tables[i].id) {
				snprintf(why, sizeof(why), "table %u twice", m->tables[i].id);
				return why;
			}
	}
	for (uint32_t r = 0; r < m->nodes; r++) {
		const cman_part *p = &m->parts[r];
		if (p->rank != r || !p->part) {
			snprintf(why, sizeof(why), "part %u: rank %u, checkpoint %llu", r, p->rank,
				 (unsigned long long)p->part);
			return why;
		}
		if (strnlen(p->addr, sizeof(p->addr)) > CMAN_ADDR_MAX)
			return "a node address longer than 255 bytes";
	}
	if (m->n_seqs > CMAN_SEQS_MAX)
		return "count of workers' steps";
	for (uint32_t i = 0; i < m->n_seqs; i++)
		if (!m->seqs[i].table || !m->seqs[i].seq || m->seqs[i].worker >= EMDB_WORKERS_MAX) {
			snprintf(why, sizeof(why), "worker step %u: table %u, worker %u, seq %llu", i, m->seqs[i].table,
				 m->seqs[i].worker, (unsigned long long)m->seqs[i].seq);
			return why;
		}
	return NULL;
}

static void encode_into(const cman *m, wr *w)
{
	size_t idl = strlen(m->cluster_id);
	w32(w, CMAN_MAGIC);
	w32(w, CMAN_VERSION);
	w64(w, m->id);
	w64(w, m->created_ms);
	w32(w, m->kind);
	w32(w, m->nodes);
	w32(w, m->partitions);
	w32(w, m->n_tables);
	w64(w, m->epoch);
	w32(w, (uint32_t)idl);
	w32(w, m->n_seqs);
	wbytes(w, m->cluster_id, idl);
	for (uint32_t i = 0; i < m->partitions; i++)
		w32(w, m->rank_of[i]);
	for (uint32_t i = 0; i < m->n_tables; i++) {
		w32(w, m->tables[i].id);
		w32(w, 0);
		w64(w, m->tables[i].step);
	}
	for (uint32_t r = 0; r < m->nodes; r++) {
		const cman_part *p = &m->parts[r];
		size_t al = strlen(p->addr);
		w32(w, p->rank);
		w32(w, (uint32_t)al);
		w64(w, p->part);
		w64(w, p->rows);
		w64(w, p->sum);
		wbytes(w, p->addr, al);
	}
	for (uint32_t i = 0; i < m->n_seqs; i++) {
		const cman_seq *q = &m->seqs[i];
		w32(w, q->table);
		w32(w, q->worker);
		w64(w, q->session);
		w64(w, q->seq);
		w64(w, q->rows);
	}
}

int cman_encode(const cman *m, uint8_t **buf, size_t *len)
{
	*buf = NULL;
	*len = 0;
	const char *bad = wrong(m);
	if (bad)
		return emdb__seterr(EMDB_ERR_INVALID, "cluster manifest: bad %s", bad);
	wr w = { NULL, 0 };
	encode_into(m, &w);
	size_t total = w.off + 8;
	uint8_t *p = emdb_malloc(total);
	if (!p)
		return emdb__seterr(EMDB_ERR_NOMEM, "cluster manifest of %zu bytes", total);
	w = (wr){ p, 0 };
	encode_into(m, &w);
	uint64_t sum = XXH3_64bits(p, w.off);
	memcpy(p + w.off, &sum, 8);
	*buf = p;
	*len = total;
	return EMDB_OK;
}

void cman_free(cman *m)
{
	if (!m)
		return;
	emdb_free(m->rank_of);
	emdb_free(m->tables);
	emdb_free(m->parts);
	emdb_free(m->seqs);
	memset(m, 0, sizeof(*m));
}

typedef struct rd {
	const uint8_t *p;
	size_t len, off;
	bool bad;
} rd;

static bool has(rd *r, uint64_t n)
{
	if (r->bad || n > r->len - r->off)
		r->bad = true;
	return !r->bad;
}

static uint32_t r32(rd *r)
{
	uint32_t v = 0;
	if (has(r, 4))
		memcpy(&v, r->p + r->off, 4), r->off += 4;
	return v;
}

static uint64_t r64(rd *r)
{
	uint64_t v = 0;
	if (has(r, 8))
		memcpy(&v, r->p + r->off, 8), r->off += 8;
	return v;
}

static bool rstr(rd *r, uint32_t n, char *out)
{
	if (!has(r, n))
		return false;
	memcpy(out, r->p + r->off, n);
	out[n] = 0;
	r->off += n;
	return memchr(out, 0, n) == NULL;
}

static int corrupt(cman *m, const char *what)
{
	cman_free(m);
	return emdb__seterr(EMDB_ERR_CORRUPT, "cluster manifest: %s", what);
}

int cman_decode(const uint8_t *p, size_t len, cman *m)
{
	memset(m, 0, sizeof(*m));
	if (!p || len < HEAD + 8)
		return corrupt(m, "shorter than its header");
	uint32_t magic, version;
	memcpy(&magic, p, 4);
	memcpy(&version, p + 4, 4);
	if (magic != CMAN_MAGIC)
		return corrupt(m, "bad magic (not \"EMCM\")");
	if (version != 1 && version != CMAN_VERSION)
		return emdb__seterr(EMDB_ERR_CORRUPT, "cluster manifest: version %u, this build reads 1 and %d",
				    version, CMAN_VERSION);
	uint64_t sum;
	memcpy(&sum, p + len - 8, 8);
	if (sum != XXH3_64bits(p, len - 8))
		return corrupt(m, "checksum mismatch");
	rd r = { p, len - 8, 8, false };
	m->id = r64(&r);
	m->created_ms = r64(&r);
	m->kind = r32(&r);
	m->nodes = r32(&r);
	m->partitions = r32(&r);
	m->n_tables = r32(&r);
	m->epoch = r64(&r);
	uint32_t idl = r32(&r);
	m->n_seqs = r32(&r); /* version 1: reserved, 0 */
	if (version == 1 && m->n_seqs)
		return corrupt(m, "reserved bytes not zero");
	if (m->n_seqs > CMAN_SEQS_MAX)
		return corrupt(m, "bad count of workers' steps");
	if (idl == 0 || idl > CMAN_ID_MAX || !rstr(&r, idl, m->cluster_id))
		return corrupt(m, "bad cluster id");
	if (!m->nodes || m->nodes > m->partitions || m->partitions > CMAN_PARTITIONS_MAX ||
	    m->n_tables > CMAN_TABLES_MAX)
		return corrupt(m, "bad node, partition or table count");
	/* Counts against the bytes left before allocating (invariant 1). */
	uint64_t need = (uint64_t)m->partitions * 4 + (uint64_t)m->n_tables * TABLE_REC + (uint64_t)m->nodes * PART_REC +
			(uint64_t)m->n_seqs * SEQ_REC;
	if (!has(&r, need))
		return corrupt(m, "truncated");
	m->rank_of = emdb_malloc((size_t)m->partitions * 4);
	m->tables = emdb_calloc(m->n_tables ? m->n_tables : 1, sizeof(*m->tables));
	m->parts = emdb_calloc(m->nodes, sizeof(*m->parts));
	m->seqs = m->n_seqs ? emdb_calloc(m->n_seqs, sizeof(*m->seqs)) : NULL;
	if (!m->rank_of || !m->tables || !m->parts || (m->n_seqs && !m->seqs)) {
		cman_free(m);
		return emdb__seterr(EMDB_ERR_NOMEM, "cluster manifest");
	}
	for (uint32_t i = 0; i < m->partitions; i++)
		m->rank_of[i] = r32(&r);
	for (uint32_t i = 0; i < m->n_tables; i++) {
		m->tables[i].id = r32(&r);
		if (r32(&r))
			return corrupt(m, "reserved bytes not zero");
		m->tables[i].step = r64(&r);
	}
	for (uint32_t i = 0; i < m->nodes && !r.bad; i++) {
		cman_part *pt = &m->parts[i];
		pt->rank = r32(&r);
		uint32_t al = r32(&r);
		pt->part = r64(&r);
		pt->rows = r64(&r);
		pt->sum = r64(&r);
		if (al > CMAN_ADDR_MAX || !rstr(&r, al, pt->addr))
			return corrupt(m, r.bad ? "truncated" : "bad node address");
	}
	for (uint32_t i = 0; i < m->n_seqs && !r.bad; i++) {
		cman_seq *q = &m->seqs[i];
		q->table = r32(&r);
		q->worker = r32(&r);
		q->session = r64(&r);
		q->seq = r64(&r);
		q->rows = r64(&r);
	}
	if (r.bad)
		return corrupt(m, "truncated");
	if (r.off != r.len)
		return corrupt(m, "bytes after the last part");
	const char *bad = wrong(m);
	if (bad) {
		char why[200];
		snprintf(why, sizeof(why), "bad %s", bad);
		return corrupt(m, why);
	}
	return EMDB_OK;
}

/* ---- files ---------------------------------------------------------------- */

char *cman_part_dir(const char *dir, uint32_t rank)
{
	size_t n = strlen(dir) + 32;
	char *p = emdb_malloc(n);
	if (p)
		snprintf(p, n, "%s/rank-%u", dir, rank);
	return p;
}

static int io_err(const char *what, const char *path)
{
	int e = errno;
	return emdb__seterr(e == ENOSPC || e == EDQUOT ? EMDB_ERR_NOSPACE : EMDB_ERR_IO, "%s %s: %s", what, path,
			    strerror(e));
}

static int sync_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return io_err("opening", path);
	int rc = fsync(fd) ? io_err("syncing", path) : EMDB_OK;
	close(fd);
	return rc;
}

int cman_write(const char *dir, const cman *m)
{
	char mdir[4096], path[4200], tmp[4210];
	snprintf(mdir, sizeof(mdir), "%s/manifests", dir);
	snprintf(path, sizeof(path), "%s/%020llu.ecm", mdir, (unsigned long long)m->id);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	uint8_t *buf;
	size_t len;
	int rc = cman_encode(m, &buf, &len);
	if (rc)
		return rc;
	if ((mkdir(dir, 0755) && errno != EEXIST) || (mkdir(mdir, 0755) && errno != EEXIST)) {
		emdb_free(buf);
		return io_err("creating", mdir);
	}
	if (access(path, F_OK) == 0) {
		emdb_free(buf);
		return emdb__seterr(EMDB_ERR_EXISTS, "cluster checkpoint %llu exists already in %s",
				    (unsigned long long)m->id, mdir);
	}
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		emdb_free(buf);
		return io_err("creating", tmp);
	}
	size_t done = 0;
	while (done < len) {
		ssize_t k = write(fd, buf + done, len - done);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		done += (size_t)k;
	}
	emdb_free(buf);
	rc = done < len ? io_err("writing", tmp) : fsync(fd) ? io_err("syncing", tmp) : EMDB_OK;
	close(fd);
	if (rc == EMDB_OK && rename(tmp, path))
		rc = io_err("renaming to", path);
	if (rc) {
		unlink(tmp);
		return rc;
	}
	return sync_dir(mdir);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int cman_list(const char *dir, uint64_t **ids, size_t *n)
{
	char mdir[4096];
	snprintf(mdir, sizeof(mdir), "%s/manifests", dir);
	*ids = NULL;
	*n = 0;
	DIR *d = opendir(mdir);
	if (!d)
		return errno == ENOENT ? EMDB_OK : io_err("reading", mdir);
	size_t cap = 0;
	int rc = EMDB_OK;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name), digits = strspn(e->d_name, "0123456789");
		if (l != 24 || digits != 20 || strcmp(e->d_name + 20, ".ecm"))
			continue; /* invariant 3 */
		if (*n == cap) {
			cap = cap ? cap * 2 : 16;
			uint64_t *v = emdb_realloc(*ids, cap * sizeof(uint64_t));
			if (!v) {
				rc = emdb__seterr(EMDB_ERR_NOMEM, "listing %s", mdir);
				break;
			}
			*ids = v;
		}
		(*ids)[(*n)++] = strtoull(e->d_name, NULL, 10);
	}
	closedir(d);
	if (rc) {
		emdb_free(*ids);
		*ids = NULL;
		*n = 0;
		return rc;
	}
	if (*n)
		qsort(*ids, *n, sizeof(uint64_t), cmp_u64);
	return EMDB_OK;
}

int cman_read(const char *dir, uint64_t id, cman *m)
{
	memset(m, 0, sizeof(*m));
	if (id == 0) {
		uint64_t *ids;
		size_t n;
		int rc = cman_list(dir, &ids, &n);
		if (rc)
			return rc;
		if (!n)
			return emdb__seterr(EMDB_ERR_INVALID, "%s/manifests holds no cluster checkpoint", dir);
		id = ids[n - 1];
		emdb_free(ids);
	}
	char path[4200];
	snprintf(path, sizeof(path), "%s/manifests/%020llu.ecm", dir, (unsigned long long)id);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return errno == ENOENT ? emdb__seterr(EMDB_ERR_INVALID, "no cluster checkpoint %llu in %s/manifests",
						      (unsigned long long)id, dir)
				       : io_err("opening", path);
	struct stat sb;
	if (fstat(fd, &sb) || sb.st_size > (off_t)(64u << 20)) {
		close(fd);
		return emdb__seterr(EMDB_ERR_CORRUPT, "%s: not a cluster manifest (size)", path);
	}
	size_t len = (size_t)sb.st_size;
	uint8_t *buf = emdb_malloc(len ? len : 1);
	if (!buf) {
		close(fd);
		return emdb__seterr(EMDB_ERR_NOMEM, "reading %s", path);
	}
	size_t got = 0;
	while (got < len) {
		ssize_t k = read(fd, buf + got, len - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	close(fd);
	int rc = got < len ? io_err("reading", path) : cman_decode(buf, len, m);
	emdb_free(buf);
	if (rc == EMDB_ERR_CORRUPT)
		emdb__seterr(rc, "%s: %s", path, emdb_last_error());
	else if (rc == EMDB_OK && m->id != id) {
		cman_free(m);
		rc = emdb__seterr(EMDB_ERR_CORRUPT, "%s names cluster checkpoint %llu", path,
				  (unsigned long long)m->id);
	}
	return rc;
}

int cman_retain(const char *dir, uint32_t keep, uint32_t *deleted)
{
	uint64_t *ids;
	size_t n;
	if (deleted)
		*deleted = 0;
	if (keep == 0)
		return emdb__seterr(EMDB_ERR_INVALID, "keep 0 cluster checkpoints");
	int rc = cman_list(dir, &ids, &n);
	for (size_t i = 0; rc == EMDB_OK && i + keep < n; i++) {
		char path[4200];
		snprintf(path, sizeof(path), "%s/manifests/%020llu.ecm", dir, (unsigned long long)ids[i]);
		if (unlink(path) && errno != ENOENT)
			rc = io_err("deleting", path);
		else if (deleted)
			(*deleted)++;
	}
	emdb_free(ids);
	if (rc == EMDB_OK) {
		char mdir[4096];
		snprintf(mdir, sizeof(mdir), "%s/manifests", dir);
		if (n > keep)
			rc = sync_dir(mdir);
	}
	return rc;
}
