/*
 * net/cluster_ckpt.c - emdb-server's side of cluster checkpoints
 * (net/cluster_ckpt.h): the cluster layer's cluster_ckpt_ops over the
 * server's checkpoint store, the manifests, and the restore at start.
 *
 * Where things live (decision, docs/cluster.md): cluster_checkpoint_dir is
 * a directory every node reads and writes (a shared file system in
 * production, one directory in tests).  Node r's checkpoint store is
 * <dir>/rank-<r> (in place of data_dir): its parts, full or incremental,
 * written by the server's ordinary checkpoint job.  The manifests are
 * <dir>/manifests/<id>.ecm, written by the coordinator (rank 0) only.
 * Any node of any later cluster opens the old stores read-only to restore.
 *
 * Invariants:
 *   1. The manifest is written after every part's WRITE answered, and the
 *      coordinator first opens every part (read-only, as a restoring node
 *      will) and records its identity checksum: a manifest never names a
 *      part that cannot be read from the shared directory.
 *   2. Table steps in the manifest are read on the coordinator while its
 *      Updates are held (cluster/ckpt.c), so they are the parts' steps;
 *      each part's table count and largest step are checked against them
 *      before the manifest is written.
 *   3. A restore at start happens before the link exists, so no peer and
 *      no client sees this node half restored.
 *
 * State changes: the server's store (parts, through net/checkpoint.h),
 * the manifests, the engine (restore at start), s->cckpt.
 */
#include <errno.h>
#include <pthread.h>
#include <inttypes.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "base/error_int.h"
#include "checkpoint/cluster_ckpt.h"
#include "cluster/cluster.h"
#include "cluster/owner.h"
#include "db/step.h"
#include "net/checkpoint.h"
#include "net/cluster_ckpt.h"
#include "net/log.h"
#include "net/server.h"
#include "net/stats.h"
#include "protocol/proto.h"

struct server_cckpt {
	server *s;
	char dir[CONFIG_PATH_MAX];
	char cluster_id[CLUSTER_ID_MAX];
	uint32_t nodes, rank;
	char (*addr)[CLUSTER_HOST_MAX + 16]; /* [nodes] */
	/* a running cluster's restore (CKPT_LOAD, CKPT_SWAP) */
	pthread_t loader;                    /* reads the parts off the link's thread */
	bool have_loader;                    /* loader to join */
	uint64_t load_id;
	void *load_token;
	pthread_mutex_t stage_mu;
	cman_staged *staged;                 /* under stage_mu */
	step_seq_rec *staged_seqs;           /* the staged manifest's, under stage_mu */
	size_t n_staged_seqs;
};

/* The cluster checkpoint cckpt_restore_at_start restored (0: none), whose
 * workers' steps cckpt_attach hands the cluster (one server per
 * process). */
static uint64_t restored_at_start;

/* Orders a part's end (on the checkpoint job's thread) against
 * cckpt_detach at shutdown (one server per process).  Nothing called
 * under it may take it again: cluster_ckpt_part_done may run a whole
 * phase of the coordinator's (swap and discard take stage_mu only). */
static pthread_mutex_t glue_mu = PTHREAD_MUTEX_INITIALIZER;

bool cckpt_store_dir(const net_config *c, char *buf, size_t len)
{
	if (!c->cluster_file[0] || !c->cluster_checkpoint_dir[0])
		return false;
	snprintf(buf, len, "%s/rank-%u", c->cluster_checkpoint_dir, c->cluster_rank);
	return true;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- restore at start ------------------------------------------------------ */

typedef struct keep_arg {
	owner_map map;
	uint32_t rank;
} keep_arg;

static bool keep_mine(void *arg, uint64_t id)
{
	keep_arg *k = arg;
	return owner_of(&k->map, id) == k->rank;
}

int cckpt_restore_at_start(server *s, const cluster_conf *conf, char *err, size_t errlen)
{
	const net_config *c = &s->cfg;
	if (!c->restore[0] || !c->cluster_checkpoint_dir[0])
		return EMDB_OK;
	uint64_t want = 0;
	if (strcmp(c->restore, "latest"))
		want = strtoull(c->restore, NULL, 10);
	const char *dir = c->cluster_checkpoint_dir;
	uint64_t *ids = NULL;
	size_t n = 0;
	int rc = cman_list(dir, &ids, &n);
	emdb_free(ids);
	if (rc == EMDB_OK && !n && !want) {
		log_info("restore latest: %s holds no cluster checkpoint yet, starting empty", dir);
		return EMDB_OK;
	}
	cman m;
	if (rc == EMDB_OK)
		rc = cman_read(dir, want, &m);
	if (rc) {
		snprintf(err, errlen, "restore %s from %s: %s", c->restore, dir, emdb_last_error());
		return rc;
	}
	if (strcmp(m.cluster_id, conf->id))
		log_warn("restoring cluster checkpoint %" PRIu64 " of cluster '%s' into cluster '%s'", m.id,
			 m.cluster_id, conf->id);
	keep_arg k = { .rank = c->cluster_rank };
	uint64_t t0 = stats_now_ns(), rows = 0;
	rc = owner_map_init(&k.map, conf->nodes, conf->partitions);
	if (rc == EMDB_OK)
		rc = cman_restore(s->db, dir, &m, keep_mine, &k, &rows);
	owner_map_destroy(&k.map);
	if (rc) {
		snprintf(err, errlen, "restore of cluster checkpoint %" PRIu64 " (%u nodes) from %s: %s", m.id, m.nodes,
			 dir, emdb_last_error());
	} else {
		log_info("restored cluster checkpoint %" PRIu64 " of %u nodes onto rank %u of %u: %u tables, %" PRIu64
			 " rows kept of %s in %.3f s",
			 m.id, m.nodes, c->cluster_rank, conf->nodes, m.n_tables, rows, dir,
			 (double)(stats_now_ns() - t0) / 1e9);
	}
	if (rc == EMDB_OK)
		restored_at_start = m.id;
	cman_free(&m);
	return rc;
}

/* The workers' steps of manifest m as the cluster layer takes them
 * (emdb_malloc'd into *out; NULL and 0 for none).  Errors: NOMEM. */
static int seqs_of(const cman *m, step_seq_rec **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	if (!m->n_seqs)
		return EMDB_OK;
	step_seq_rec *v = emdb_malloc((size_t)m->n_seqs * sizeof(*v));
	if (!v)
		return emdb__seterr(EMDB_ERR_NOMEM, "%u workers' steps", m->n_seqs);
	for (uint32_t i = 0; i < m->n_seqs; i++)
		v[i] = (step_seq_rec){ m->seqs[i].table, m->seqs[i].worker, m->seqs[i].session, m->seqs[i].seq,
				       m->seqs[i].rows };
	*out = v;
	*n = m->n_seqs;
	return EMDB_OK;
}

/* ---- the operations (cluster_ckpt_ops) --------------------------------------- */

typedef struct part_job {
	server *s;
	void *token;
} part_job;

static void part_ended(void *arg, int rc, const emdb_ckpt_info *info, const char *msg)
{
	part_job *pj = arg;
	pthread_mutex_lock(&glue_mu);
	if (pj->s->cckpt)
		cluster_ckpt_part_done(pj->s->cluster, pj->token, rc, rc ? 0 : info->id, rc ? 0 : info->rows_total,
				       msg);
	pthread_mutex_unlock(&glue_mu);
	emdb_free(pj);
}

static int op_write_part(void *ctx, uint32_t kind, uint64_t id, void *token)
{
	struct server_cckpt *g = ctx;
	part_job *pj = emdb_calloc(1, sizeof(*pj));
	if (!pj)
		return emdb__seterr(EMDB_ERR_NOMEM, "a checkpoint part");
	pj->s = g->s;
	pj->token = token;
	char err[CKPTS_MSG_MAX];
	uint64_t job;
	int rc = ckpts_checkpoint_then(g->s->ckpts, (emdb_ckpt_kind)kind, part_ended, pj, &job, err, sizeof(err));
	if (rc) {
		emdb_free(pj);
		return emdb__seterr(rc, "%s", err);
	}
	log_info("cluster checkpoint %" PRIu64 ": this node's part is job %" PRIu64, id, job);
	return EMDB_OK;
}

static void op_drop_part(void *ctx, uint64_t part)
{
	struct server_cckpt *g = ctx;
	char err[CKPTS_MSG_MAX];
	if (ckpts_delete(g->s->ckpts, part, err, sizeof(err)) != EMDB_OK)
		log_warn("the part (checkpoint %" PRIu64 ") of an aborted cluster checkpoint stays until retention: %s",
			 part, err);
}

static int op_next_id(void *ctx, uint64_t *id)
{
	struct server_cckpt *g = ctx;
	uint64_t *ids;
	size_t n;
	int rc = cman_list(g->dir, &ids, &n);
	if (rc)
		return rc;
	*id = n ? ids[n - 1] + 1 : 1;
	emdb_free(ids);
	return EMDB_OK;
}

/* The tables and their steps, on the coordinator while Updates are held
 * (invariant 2). */
static int own_tables(server *s, cman *m)
{
	uint32_t ids[4096];
	size_t n;
	int rc = emdb_table_list(s->db, ids, 4096, &n);
	if (rc)
		return rc;
	if (n > 4096)
		return emdb__seterr(EMDB_ERR_LIMIT, "%zu tables: a cluster checkpoint takes 4096", n);
	m->tables = emdb_calloc(n ? n : 1, sizeof(*m->tables));
	if (!m->tables)
		return emdb__seterr(EMDB_ERR_NOMEM, "a cluster manifest");
	for (size_t i = 0; i < n; i++) {
		emdb_table_info ti;
		if ((rc = emdb_table_describe(s->db, ids[i], &ti)))
			return rc;
		m->tables[m->n_tables++] = (cman_table){ ids[i], ti.stats.step };
	}
	return EMDB_OK;
}

/* Part r as a restoring node will read it (invariant 1). */
static int check_part(struct server_cckpt *g, cman_part *p, uint32_t tables, uint64_t max_step, char *why,
		      size_t len)
{
	char *pdir = cman_part_dir(g->dir, p->rank);
	emdb_store_options so = EMDB_STORE_OPTIONS_INIT;
	so.read_only = 1;
	emdb_store *st = NULL;
	emdb_ckpt_info info;
	int rc = pdir ? emdb_store_open_ex(pdir, &so, &st) : EMDB_ERR_NOMEM;
	if (rc == EMDB_OK)
		rc = emdb_store_get(st, p->part, &info);
	if (rc == EMDB_OK && info.rows_total != p->rows)
		rc = emdb__seterr(EMDB_ERR_CORRUPT, "it holds %" PRIu64 " rows, the node said %" PRIu64,
				      info.rows_total, p->rows);
	if (rc == EMDB_OK && (info.max_step != max_step || info.tables != tables))
		rc = emdb__seterr(EMDB_ERR_INTERNAL,
				  "it holds %u tables up to step %" PRIu64 ", the coordinator %u up to step %" PRIu64
				  ": not one step boundary",
				  info.tables, info.max_step, tables, max_step);
	if (rc == EMDB_OK)
		p->sum = cman_part_sum(&info);
	else
		snprintf(why, len, "node %u's part (checkpoint %" PRIu64 " in %s) is refused: %s", p->rank, p->part,
			 pdir ? pdir : "?", emdb_last_error());
	emdb_store_close(st);
	emdb_free(pdir);
	return rc;
}

static int op_publish(void *ctx, uint64_t id, uint32_t kind, const cluster_ckpt_part *parts, uint32_t n,
		      const step_seq_rec *seqs, size_t nseqs, char *why, size_t whylen)
{
	struct server_cckpt *g = ctx;
	server *s = g->s;
	const owner_map *map = cluster_map(s->cluster);
	cman m;
	memset(&m, 0, sizeof(m));
	m.id = id;
	m.kind = kind;
	m.created_ms = now_ms();
	snprintf(m.cluster_id, sizeof(m.cluster_id), "%s", g->cluster_id);
	m.nodes = n;
	m.partitions = map->partitions;
	m.epoch = map->epoch;
	m.rank_of = map->rank_of; /* borrowed: not freed below */
	m.parts = emdb_calloc(n, sizeof(*m.parts));
	m.n_seqs = (uint32_t)nseqs;
	m.seqs = nseqs ? emdb_calloc(nseqs, sizeof(*m.seqs)) : NULL;
	int rc = m.parts && (!nseqs || m.seqs) ? own_tables(s, &m) : emdb__seterr(EMDB_ERR_NOMEM, "a cluster manifest");
	for (size_t i = 0; rc == EMDB_OK && i < nseqs; i++)
		m.seqs[i] = (cman_seq){ seqs[i].table, seqs[i].worker, seqs[i].session, seqs[i].applied, seqs[i].rows };
	if (rc)
		snprintf(why, whylen, "%s", emdb_last_error());
	uint64_t max_step = 0;
	for (uint32_t i = 0; rc == EMDB_OK && i < m.n_tables; i++)
		max_step = m.tables[i].step > max_step ? m.tables[i].step : max_step;
	for (uint32_t r = 0; rc == EMDB_OK && r < n; r++) {
		m.parts[r] = (cman_part){ .rank = r, .part = parts[r].part, .rows = parts[r].rows };
		snprintf(m.parts[r].addr, sizeof(m.parts[r].addr), "%s", g->addr[r]);
		rc = check_part(g, &m.parts[r], m.n_tables, max_step, why, whylen);
	}
	if (rc == EMDB_OK && (rc = cman_write(g->dir, &m)))
		snprintf(why, whylen, "writing its manifest: %s", emdb_last_error());
	uint64_t rows = 0;
	for (uint32_t r = 0; r < n; r++)
		rows += parts[r].rows;
	if (rc == EMDB_OK) {
		log_info("cluster checkpoint %" PRIu64 " complete: %u nodes, %u tables, %" PRIu64 " rows, manifest in %s/manifests",
			 id, n, m.n_tables, rows, g->dir);
		pthread_mutex_lock(&s->cfg_lock);
		uint32_t keep = s->cfg.checkpoint_keep;
		pthread_mutex_unlock(&s->cfg_lock);
		uint32_t gone = 0;
		if (keep && cman_retain(g->dir, keep, &gone) != EMDB_OK)
			log_warn("cluster checkpoint retention: %s", emdb_last_error());
		else if (gone)
			log_info("cluster checkpoint retention: %u manifests deleted (checkpoint_keep %u)", gone, keep);
	}
	m.rank_of = NULL;
	cman_free(&m);
	return rc;
}

static int op_resolve(void *ctx, uint64_t id, uint64_t *out)
{
	struct server_cckpt *g = ctx;
	cman m;
	int rc = cman_read(g->dir, id, &m);
	if (rc == EMDB_OK)
		*out = m.id;
	cman_free(&m);
	return rc;
}

typedef struct map_keep {
	const owner_map *map;
	uint32_t rank;
} map_keep;

static bool keep_owned(void *arg, uint64_t id)
{
	map_keep *k = arg;
	return owner_of(k->map, id) == k->rank;
}

static void *load_main(void *arg)
{
	struct server_cckpt *g = arg;
	server *s = g->s;
	cman m;
	cman_staged *st = NULL;
	uint64_t rows = 0, t0 = stats_now_ns();
	map_keep k = { cluster_map(s->cluster), g->rank };
	step_seq_rec *seqs = NULL;
	size_t nseqs = 0;
	int rc = cman_read(g->dir, g->load_id, &m);
	if (rc == EMDB_OK) {
		rc = cman_stage(s->db, g->dir, &m, keep_owned, &k, &st, &rows);
		if (rc == EMDB_OK && (rc = seqs_of(&m, &seqs, &nseqs)))
			cman_discard(st), st = NULL;
		cman_free(&m);
	}
	char msg[512] = "";
	if (rc)
		snprintf(msg, sizeof(msg), "restore of cluster checkpoint %" PRIu64 ": %s", g->load_id,
			 emdb_last_error());
	else
		log_info("cluster checkpoint %" PRIu64 " staged for the restore: %" PRIu64 " rows kept in %.3f s",
			 g->load_id, rows, (double)(stats_now_ns() - t0) / 1e9);
	pthread_mutex_lock(&g->stage_mu);
	cman_discard(g->staged);
	emdb_free(g->staged_seqs);
	g->staged = st;
	g->staged_seqs = seqs;
	g->n_staged_seqs = nseqs;
	pthread_mutex_unlock(&g->stage_mu);
	/* No lock: cckpt_detach joins this thread before the cluster goes,
	 * and this may run the coordinator's next phase (SWAP) itself. */
	cluster_ckpt_part_done(s->cluster, g->load_token, rc, 1, rows, msg);
	return NULL;
}

static int op_load(void *ctx, uint64_t id, void *token)
{
	struct server_cckpt *g = ctx;
	if (g->have_loader) /* the previous load ended: it answered */
		pthread_join(g->loader, NULL);
	g->have_loader = false;
	g->load_id = id;
	g->load_token = token;
	if (pthread_create(&g->loader, NULL, load_main, g))
		return emdb__seterr(EMDB_ERR_NOMEM, "no thread for the restore");
	g->have_loader = true;
	return EMDB_OK;
}

static int op_swap(void *ctx, step_seq_rec **seqs, size_t *nseqs)
{
	struct server_cckpt *g = ctx;
	pthread_mutex_lock(&g->stage_mu);
	int rc = g->staged ? cman_swap(g->s->db, g->staged)
			   : emdb__seterr(EMDB_ERR_INVALID, "node %u staged nothing to swap in", g->rank);
	if (rc == EMDB_OK) {
		g->staged = NULL;
		*seqs = g->staged_seqs;
		*nseqs = g->n_staged_seqs;
		g->staged_seqs = NULL;
		g->n_staged_seqs = 0;
	}
	pthread_mutex_unlock(&g->stage_mu);
	if (rc == EMDB_OK) {
		ckpts_forget_base(g->s->ckpts); /* the next part is full */
		log_info("cluster checkpoint restored: every table replaced");
	}
	return rc;
}

static void op_discard(void *ctx)
{
	struct server_cckpt *g = ctx;
	pthread_mutex_lock(&g->stage_mu);
	cman_discard(g->staged);
	g->staged = NULL;
	emdb_free(g->staged_seqs);
	g->staged_seqs = NULL;
	g->n_staged_seqs = 0;
	pthread_mutex_unlock(&g->stage_mu);
}

static const cluster_ckpt_ops ops = { op_write_part, op_drop_part, op_next_id, op_publish,
				      op_resolve,    op_load,	   op_swap,    op_discard };

/* ---- CHECKPOINT on a cluster node ------------------------------------------- */

typedef struct asked {
	server *s;
	uint64_t job;
	uint32_t kind;
	bool automatic;
	bool restore;
} asked;

static int info_of(struct server_cckpt *g, uint64_t id, emdb_ckpt_info *out)
{
	cman m;
	int rc = cman_read(g->dir, id, &m);
	if (rc)
		return rc;
	memset(out, 0, sizeof(*out));
	out->id = m.id;
	out->kind = (emdb_ckpt_kind)m.kind;
	out->tables = m.n_tables;
	out->base = m.id;
	out->created_ms = m.created_ms;
	for (uint32_t i = 0; i < m.n_tables; i++)
		if (m.tables[i].step > out->max_step)
			out->max_step = m.tables[i].step;
	for (uint32_t r = 0; r < m.nodes; r++)
		out->rows_total += m.parts[r].rows;
	out->rows = out->rows_total;
	cman_free(&m);
	return EMDB_OK;
}

static void asked_done(void *arg, int status, uint64_t id, const char *msg)
{
	asked *a = arg;
	emdb_ckpt_info info;
	memset(&info, 0, sizeof(info));
	if (status == EMDB_OK && a->s->cckpt && info_of(a->s->cckpt, id, &info) != EMDB_OK)
		info.id = id;
	const char *what = a->restore ? "restore of a cluster checkpoint" : "cluster checkpoint";
	if (status == EMDB_OK)
		log_info("job %" PRIu64 ": %s %" PRIu64 " done", a->job, what, id);
	else
		log_error("job %" PRIu64 ": %s failed: %s: %s", a->job, what, emdb_err_name(status), msg);
	if (a->job)
		ckpts_job_end(a->s->ckpts, a->job, status, &info, msg);
	emdb_free(a);
}

static int ask(server *s, emdb_ckpt_kind kind, bool restore, uint64_t id, bool automatic, uint64_t *job, char *err,
	       size_t errlen)
{
	asked *a = emdb_calloc(1, sizeof(*a));
	if (!a) {
		snprintf(err, errlen, "no memory for a cluster checkpoint");
		return EMDB_ERR_NOMEM;
	}
	a->s = s;
	a->kind = kind;
	a->automatic = automatic;
	a->restore = restore;
	int rc = ckpts_job_begin(s->ckpts, restore ? PROTO_JOB_RESTORE : (uint32_t)kind, &a->job, err, errlen);
	if (rc) {
		emdb_free(a);
		return rc;
	}
	uint64_t no = a->job;
	rc = restore ? cluster_ckpt_restore(s->cluster, id, asked_done, a)
		     : cluster_ckpt_start(s->cluster, kind, asked_done, a);
	if (rc) {
		snprintf(err, errlen, "%s", emdb_last_error());
		ckpts_job_end(s->ckpts, no, rc, NULL, err);
		emdb_free(a);
		return rc;
	}
	if (job)
		*job = no;
	if (restore)
		log_info("job %" PRIu64 ": restore of cluster checkpoint %" PRIu64 " started", no, id);
	else
		log_info("job %" PRIu64 ": cluster checkpoint (%s) started%s", no, emdb_ckpt_kind_name(kind),
			 automatic ? " (automatic)" : "");
	return EMDB_OK;
}

int cckpt_checkpoint(server *s, emdb_ckpt_kind kind, uint64_t *job, char *err, size_t errlen)
{
	if (kind != EMDB_CKPT_FULL && kind != EMDB_CKPT_INCREMENTAL) {
		snprintf(err, errlen, "unknown checkpoint kind %u: 1 is full, 2 incremental", (unsigned)kind);
		return EMDB_ERR_INVALID;
	}
	return ask(s, kind, false, 0, false, job, err, errlen);
}

int cckpt_restore(server *s, uint64_t id, uint64_t *job, char *err, size_t errlen)
{
	return ask(s, EMDB_CKPT_FULL, true, id, false, job, err, errlen);
}

static void auto_ask(void *arg, emdb_ckpt_kind kind)
{
	server *s = arg;
	char err[CKPTS_MSG_MAX];
	int rc = ask(s, kind, false, 0, true, NULL, err, sizeof(err));
	if (rc == EMDB_ERR_BUSY)
		log_info("automatic cluster checkpoint: one is running already");
	else if (rc)
		log_error("automatic cluster checkpoint could not start: %s: %s", emdb_err_name(rc), err);
}

int cckpt_list(server *s, emdb_ckpt_info **out, size_t *n, char *err, size_t errlen)
{
	struct server_cckpt *g = s->cckpt;
	uint64_t *ids;
	size_t cnt;
	*out = NULL;
	*n = 0;
	int rc = cman_list(g->dir, &ids, &cnt);
	emdb_ckpt_info *v = rc == EMDB_OK && cnt ? emdb_calloc(cnt, sizeof(*v)) : NULL;
	if (rc == EMDB_OK && cnt && !v)
		rc = emdb__seterr(EMDB_ERR_NOMEM, "listing cluster checkpoints");
	size_t k = 0;
	for (size_t i = 0; rc == EMDB_OK && i < cnt; i++) {
		int r = info_of(g, ids[i], &v[k]);
		if (r == EMDB_OK)
			k++;
		else if (r != EMDB_ERR_INVALID) /* deleted meanwhile: not listed */
			rc = r;
	}
	emdb_free(ids);
	if (rc) {
		snprintf(err, errlen, "%s", emdb_last_error());
		emdb_free(v);
		return rc;
	}
	*out = v;
	*n = k;
	return EMDB_OK;
}

void cckpt_report_get(server *s, cckpt_report *r)
{
	emdb_ckpt_info *v;
	memset(r, 0, sizeof(*r));
	snprintf(r->dir, sizeof(r->dir), "%s", s->cckpt->dir);
	r->error = cckpt_list(s, &v, &r->count, r->err, sizeof(r->err));
	if (r->error == EMDB_OK && r->count)
		r->last = v[r->count - 1];
	if (r->error == EMDB_OK)
		emdb_free(v);
}

int cckpt_delete(server *s, uint64_t id, char *err, size_t errlen)
{
	struct server_cckpt *g = s->cckpt;
	cman m;
	int rc = cman_read(g->dir, id, &m);
	if (rc) {
		snprintf(err, errlen, "%s", emdb_last_error());
		return rc;
	}
	cman_free(&m);
	char path[CONFIG_PATH_MAX + 64];
	snprintf(path, sizeof(path), "%s/manifests/%020" PRIu64 ".ecm", g->dir, id);
	if (unlink(path)) {
		snprintf(err, errlen, "deleting %s: %s", path, strerror(errno));
		return EMDB_ERR_IO;
	}
	log_info("cluster checkpoint %" PRIu64 " deleted (its parts go with retention)", id);
	return EMDB_OK;
}

/* ---- life ----------------------------------------------------------------- */

int cckpt_attach(server *s, const cluster_conf *conf, char *err, size_t errlen)
{
	if (!s->cfg.cluster_checkpoint_dir[0])
		return EMDB_OK;
	struct server_cckpt *g = emdb_calloc(1, sizeof(*g));
	if (g)
		g->addr = emdb_calloc(conf->nodes, sizeof(*g->addr));
	if (!g || !g->addr) {
		emdb_free(g);
		snprintf(err, errlen, "no memory for cluster checkpoints");
		return EMDB_ERR_NOMEM;
	}
	g->s = s;
	pthread_mutex_init(&g->stage_mu, NULL);
	snprintf(g->dir, sizeof(g->dir), "%s", s->cfg.cluster_checkpoint_dir);
	snprintf(g->cluster_id, sizeof(g->cluster_id), "%s", conf->id);
	g->nodes = conf->nodes;
	g->rank = s->cfg.cluster_rank;
	for (uint32_t r = 0; r < conf->nodes; r++)
		snprintf(g->addr[r], sizeof(g->addr[r]), strchr(conf->node[r].host, ':') ? "[%s]:%u" : "%s:%u",
			 conf->node[r].host, (unsigned)conf->node[r].port);
	if (restored_at_start && g->rank == 0) { /* the steps' coordinator: the workers' steps restored */
		cman m;
		step_seq_rec *seqs = NULL;
		size_t n = 0;
		int rc = cman_read(g->dir, restored_at_start, &m);
		if (rc == EMDB_OK) {
			if ((rc = seqs_of(&m, &seqs, &n)) == EMDB_OK)
				rc = cluster_ckpt_steps_restored(s->cluster, seqs, n);
			cman_free(&m);
		}
		emdb_free(seqs);
		if (rc) {
			snprintf(err, errlen, "the workers' steps of cluster checkpoint %" PRIu64 ": %s", restored_at_start,
				 emdb_last_error());
			pthread_mutex_destroy(&g->stage_mu);
			emdb_free(g->addr);
			emdb_free(g);
			return rc;
		}
		log_info("cluster checkpoint %" PRIu64 ": %zu ranked workers' last steps restored", restored_at_start, n);
	}
	s->cckpt = g;
	cluster_ckpt_set_ops(s->cluster, &ops, g, s->cfg.cluster_checkpoint_timeout_ms);
	ckpts_set_auto(s->ckpts, auto_ask, s);
	return EMDB_OK;
}

void cckpt_detach(server *s)
{
	struct server_cckpt *g = s->cckpt;
	if (!g)
		return;
	ckpts_set_auto(s->ckpts, NULL, NULL);
	pthread_mutex_lock(&glue_mu);
	s->cckpt = NULL;
	pthread_mutex_unlock(&glue_mu);
	if (g->have_loader) /* it answers no one now (cckpt is NULL) */
		pthread_join(g->loader, NULL);
	cman_discard(g->staged);
	emdb_free(g->staged_seqs);
	pthread_mutex_destroy(&g->stage_mu);
	emdb_free(g->addr);
	emdb_free(g);
}
