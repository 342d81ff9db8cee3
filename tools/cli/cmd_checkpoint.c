/*
 * cmd_checkpoint.c - the commands about checkpoints: checkpoint [full|
 * incremental], restore, checkpoint list, checkpoint delete, and job.
 *
 * A checkpoint or a restore is a job on the server (client.h,
 * "Checkpoints and restore"): the command starts it, then, unless
 * --no-wait, polls it about ten times a second, drawing the progress bar
 * (progress.h) on stderr when that is a terminal, and prints the result.
 *
 * Invariants:
 *   1. As in cmd_server.c, a command prints once, after its last request:
 *      one result or one error (in JSON mode exactly one object).  The bar
 *      is on stderr and is erased before either, so it never shows in
 *      what a script reads, and a terminal is left without its remains.
 *   2. Waiting is only waiting: a command that stops waiting (an error of
 *      the connection, ^C) leaves the job running on the server, and
 *      `job` follows it from any connection.
 *   3. A checkpoint's figures are written by one function per output
 *      form (ckpt_json for every JSON object), so `checkpoint`, `restore`,
 *      `checkpoint list` and `job` name the same fields the same way.
 *
 * State changes: none in the session; restore replaces every table on
 * the server, so it flushes the table-name cache.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <emdb/alloc.h>

#include "tools/cli/cmd_int.h"
#include "tools/cli/progress.h"
#include "tools/cli/words.h"

#define POLL_MS 100 /* the bar's redraws: about 10 a second */

static const char *kind_name(emdb_ckpt_kind kind)
{
	const char *k = emdb_ckpt_kind_name(kind);
	return k ? k : "unknown";
}

static const char *phase_name(emdb_job_phase phase)
{
	const char *p = emdb_job_phase_name(phase);
	return p ? p : "unknown";
}

static const char *job_kind_name(emdb_job_kind kind)
{
	switch (kind) {
	case EMDB_JOB_NONE:
		return "none";
	case EMDB_JOB_CHECKPOINT_FULL:
		return "checkpoint_full";
	case EMDB_JOB_CHECKPOINT_INCREMENTAL:
		return "checkpoint_incremental";
	case EMDB_JOB_RESTORE:
		return "restore";
	}
	return "unknown";
}

static const char *job_state_name(emdb_job_state state)
{
	switch (state) {
	case EMDB_JOB_IDLE:
		return "idle";
	case EMDB_JOB_RUNNING:
		return "running";
	case EMDB_JOB_DONE:
		return "done";
	case EMDB_JOB_FAILED:
		return "failed";
	}
	return "unknown";
}

static double mb(uint64_t bytes)
{
	return (double)bytes / 1e6;
}

/* The job's seconds: its elapsed time when the server reported one, else
 * the checkpoint's switch-to-manifest time. */
static double job_seconds(const emdb_job_status *st)
{
	if (st->progress.elapsed_ns)
		return (double)st->progress.elapsed_ns / 1e9;
	return (double)st->result.duration_ms / 1e3;
}

static double rate_mbs(uint64_t bytes, double seconds)
{
	return seconds > 0 ? mb(bytes) / seconds : 0;
}

/* A checkpoint's figures as members of the open object (invariant 3). */
static void ckpt_json(jw *w, const emdb_ckpt_info *ck)
{
	jw_u64(w, "id", ck->id);
	jw_str(w, "kind", kind_name(ck->kind));
	jw_u64(w, "parent", ck->parent);
	jw_u64(w, "base", ck->base);
	jw_u64(w, "created_ms", ck->created_ms);
	jw_u64(w, "duration_ms", ck->duration_ms);
	jw_u64(w, "tables", ck->tables);
	jw_u64(w, "rows", ck->rows);
	jw_u64(w, "rows_total", ck->rows_total);
	jw_u64(w, "bytes", ck->bytes);
	jw_u64(w, "max_step", ck->max_step);
}

static void progress_json(jw *w, const emdb_progress *p)
{
	jw_obj(w, "progress");
	jw_str(w, "phase", phase_name(p->phase));
	jw_u64(w, "rows_done", p->rows_done);
	jw_u64(w, "rows_total", p->rows_total);
	jw_u64(w, "bytes_done", p->bytes_done);
	jw_u64(w, "bytes_total", p->bytes_total);
	jw_u64(w, "elapsed_ns", p->elapsed_ns);
	jw_u64(w, "switch_ns", p->switch_ns);
	jw_u64(w, "cow_rows", p->cow_rows);
	jw_u64(w, "checkpoint", p->ckpt_id);
	jw_obj_end(w);
}

/* A Unix time in milliseconds as local time: "2024-05-04 13:02:11". */
static void local_time(char *buf, size_t cap, uint64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	if (!localtime_r(&t, &tm) || !strftime(buf, cap, "%Y-%m-%d %H:%M:%S", &tm))
		snprintf(buf, cap, "?");
}

/* ---- waiting with the bar ------------------------------------------ */

static void on_progress(void *arg, const emdb_job_status *st)
{
	const emdb_progress *p = &st->progress;
	cli_progress cp = {
		.phase = phase_name(p->phase),
		.rows_done = p->rows_done,
		.rows_total = p->rows_total,
		.bytes_done = p->bytes_done,
		.bytes_total = p->bytes_total,
		.elapsed_ns = p->elapsed_ns,
	};
	if (st->state == EMDB_JOB_RUNNING)
		bar_draw(arg, &cp);
}

/* Wait for `job` to end, drawing the bar; *st gets its last status.
 * Returns the client's result (EMDB_OK when the job is DONE). */
static int wait_job(emdb_client *c, uint64_t job, emdb_job_status *st)
{
	cli_bar bar;
	bar_init(&bar, stderr);
	memset(st, 0, sizeof(*st));
	int rc = emdb_client_job_wait(c, job, -1, POLL_MS, on_progress, &bar, st);
	bar_clear(&bar); /* invariant 1 */
	return rc;
}

/* --no-wait: the job's number, for `job N`. */
static cli_status print_started(cli_session *s, uint64_t job, emdb_job_kind kind)
{
	if (s->json) {
		jw w;
		jw_open(&w, stdout);
		jw_bool(&w, "ok", true);
		jw_u64(&w, "job", job);
		jw_str(&w, "kind", job_kind_name(kind));
		jw_str(&w, "state", job_state_name(EMDB_JOB_RUNNING));
		jw_close(&w);
	} else {
		printf("started job %llu (%s); `job %llu` shows how it goes\n", (unsigned long long)job,
		       job_kind_name(kind), (unsigned long long)job);
	}
	return CLI_OK;
}

/* ---- checkpoint, restore ------------------------------------------- */

static void print_checkpoint(cli_session *s, uint64_t job, const emdb_job_status *st)
{
	const emdb_ckpt_info *ck = &st->result;
	double secs = job_seconds(st);
	double switch_ms = (double)st->progress.switch_ns / 1e6;
	if (s->json) {
		jw w;
		jw_open(&w, stdout);
		jw_bool(&w, "ok", true);
		jw_u64(&w, "job", job);
		jw_obj(&w, "checkpoint");
		ckpt_json(&w, ck);
		jw_obj_end(&w);
		jw_double(&w, "seconds", secs);
		jw_double(&w, "mb_per_s", rate_mbs(ck->bytes, secs));
		jw_double(&w, "switch_ms", switch_ms);
		jw_u64(&w, "cow_rows", st->progress.cow_rows);
		jw_close(&w);
		return;
	}
	char parent[48] = "";
	if (ck->kind == EMDB_CKPT_INCREMENTAL)
		snprintf(parent, sizeof(parent), ", parent %llu", (unsigned long long)ck->parent);
	printf("checkpoint %llu (%s%s): %u tables, %llu rows, %.2f MB in %.2f s, %.1f MB/s; "
	       "Updates paused %.3f ms\n",
	       (unsigned long long)ck->id, kind_name(ck->kind), parent, ck->tables,
	       (unsigned long long)ck->rows, mb(ck->bytes), secs, rate_mbs(ck->bytes, secs),
	       switch_ms);
}

static void print_restore(cli_session *s, uint64_t job, const emdb_job_status *st)
{
	const emdb_ckpt_info *ck = &st->result;
	double secs = job_seconds(st);
	if (s->json) {
		jw w;
		jw_open(&w, stdout);
		jw_bool(&w, "ok", true);
		jw_u64(&w, "job", job);
		jw_obj(&w, "restored");
		ckpt_json(&w, ck);
		jw_obj_end(&w);
		jw_double(&w, "seconds", secs);
		jw_close(&w);
		return;
	}
	char base[48] = "";
	if (ck->kind == EMDB_CKPT_INCREMENTAL)
		snprintf(base, sizeof(base), ", chain from %llu", (unsigned long long)ck->base);
	printf("restored checkpoint %llu (%s%s): %u tables, %llu rows in %.2f s\n",
	       (unsigned long long)ck->id, kind_name(ck->kind), base, ck->tables,
	       (unsigned long long)ck->rows_total, secs);
}

cli_status cmd_checkpoint(cli_session *s, emdb_client *c, int argc, char **argv)
{
	emdb_ckpt_kind kind = 0;
	bool no_wait = false;
	for (int i = 0; i < argc; i++) {
		emdb_ckpt_kind k = 0;
		if (!strcasecmp(argv[i], "full"))
			k = EMDB_CKPT_FULL;
		else if (!strcasecmp(argv[i], "incremental"))
			k = EMDB_CKPT_INCREMENTAL;
		if (k && !kind)
			kind = k;
		else if (!strcmp(argv[i], "--no-wait") && !no_wait)
			no_wait = true;
		else
			return cmd_usage(s, "unexpected '%s' (checkpoint takes full or incremental, and "
					    "--no-wait; see also checkpoint list, checkpoint delete)",
					 argv[i]);
	}
	if (!kind)
		kind = EMDB_CKPT_FULL;

	uint64_t job = 0;
	int rc = emdb_client_checkpoint_start(c, kind, &job);
	if (rc != EMDB_OK)
		return session_fail(s, rc);
	emdb_job_kind jk = kind == EMDB_CKPT_FULL ? EMDB_JOB_CHECKPOINT_FULL
						  : EMDB_JOB_CHECKPOINT_INCREMENTAL;
	if (no_wait)
		return print_started(s, job, jk);
	emdb_job_status st;
	rc = wait_job(c, job, &st);
	if (rc != EMDB_OK)
		return session_fail(s, rc);
	print_checkpoint(s, job, &st);
	return CLI_OK;
}

/* A checkpoint id: a number from 1; `latest` (0) only where allowed. */
static bool parse_ckpt_id(const char *arg, bool latest_ok, uint64_t *id)
{
	if (latest_ok && !strcasecmp(arg, "latest")) {
		*id = 0;
		return true;
	}
	return words_u64(arg, id) && *id > 0;
}

cli_status cmd_restore(cli_session *s, emdb_client *c, int argc, char **argv)
{
	const char *which = NULL;
	bool no_wait = false;
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--no-wait") && !no_wait)
			no_wait = true;
		else if (!which && strcmp(argv[i], "--no-wait"))
			which = argv[i];
		else
			return cmd_usage(s, "unexpected '%s'", argv[i]);
	}
	uint64_t id;
	if (!which)
		return cmd_usage(s, "which checkpoint? an ID of checkpoint list, or latest");
	if (!parse_ckpt_id(which, true, &id))
		return cmd_usage(s, "'%s' is not a checkpoint id (1, 2, ...) or latest", which);

	uint64_t job = 0;
	int rc = emdb_client_restore_start(c, id, &job);
	if (rc != EMDB_OK)
		return session_fail(s, rc);
	if (no_wait) {
		session_forget_tables(s);
		return print_started(s, job, EMDB_JOB_RESTORE);
	}
	emdb_job_status st;
	rc = wait_job(c, job, &st);
	session_forget_tables(s);
	if (rc != EMDB_OK)
		return session_fail(s, rc);
	print_restore(s, job, &st);
	return CLI_OK;
}

/* ---- checkpoint list, checkpoint delete ----------------------------- */

cli_status cmd_checkpoint_list(cli_session *s, emdb_client *c, int argc, char **argv)
{
	emdb_ckpt_info *ck = NULL;
	size_t n = 0;
	int rc = emdb_client_checkpoint_list(c, &ck, &n);
	if (rc != EMDB_OK)
		return session_fail(s, rc);
	if (s->json) {
		jw w;
		jw_open(&w, stdout);
		jw_bool(&w, "ok", true);
		jw_arr(&w, "checkpoints");
		for (size_t i = 0; i < n; i++) {
			jw_obj(&w, NULL);
			ckpt_json(&w, &ck[i]);
			jw_obj_end(&w);
		}
		jw_arr_end(&w);
		jw_close(&w);
	} else if (n == 0) {
		printf("(no checkpoints)\n");
	} else {
		printf("%6s  %-11s  %6s  %-19s  %6s  %12s  %10s  %10s\n", "ID", "KIND", "PARENT",
		       "CREATED", "TABLES", "ROWS", "MB", "MAX_STEP");
		for (size_t i = 0; i < n; i++) {
			char created[32], parent[24] = "-";
			local_time(created, sizeof(created), ck[i].created_ms);
			if (ck[i].kind == EMDB_CKPT_INCREMENTAL)
				snprintf(parent, sizeof(parent), "%llu",
					 (unsigned long long)ck[i].parent);
			printf("%6llu  %-11s  %6s  %-19s  %6u  %12llu  %10.2f  %10llu\n",
			       (unsigned long long)ck[i].id, kind_name(ck[i].kind), parent, created,
			       ck[i].tables, (unsigned long long)ck[i].rows, mb(ck[i].bytes),
			       (unsigned long long)ck[i].max_step);
		}
	}
	emdb_free(ck);
	return CLI_OK;
}

cli_status cmd_checkpoint_delete(cli_session *s, emdb_client *c, int argc, char **argv)
{
	uint64_t id;
	if (!parse_ckpt_id(argv[0], false, &id))
		return cmd_usage(s, "'%s' is not a checkpoint id (1, 2, ...)", argv[0]);
	int rc = emdb_client_checkpoint_delete(c, id);
	if (rc != EMDB_OK)
		return session_fail(s, rc);
	if (s->json) {
		jw w;
		jw_open(&w, stdout);
		jw_bool(&w, "ok", true);
		jw_u64(&w, "id", id);
		jw_close(&w);
	} else {
		printf("deleted checkpoint %llu\n", (unsigned long long)id);
	}
	return CLI_OK;
}

/* ---- job -------------------------------------------------------------- */

static void job_json(const emdb_job_status *st)
{
	jw w;
	jw_open(&w, stdout);
	jw_bool(&w, "ok", true);
	jw_u64(&w, "job", st->job);
	jw_str(&w, "kind", job_kind_name(st->kind));
	jw_str(&w, "state", job_state_name(st->state));
	progress_json(&w, &st->progress);
	if (st->state == EMDB_JOB_DONE) {
		jw_obj(&w, "result");
		ckpt_json(&w, &st->result);
		jw_obj_end(&w);
	} else if (st->state == EMDB_JOB_FAILED) {
		jw_obj(&w, "failure");
		jw_str(&w, "error", emdb_err_name(st->error));
		jw_str(&w, "message", st->message);
		jw_obj_end(&w);
	}
	jw_close(&w);
}

static void job_text(const emdb_job_status *st)
{
	const emdb_progress *p = &st->progress;
	if (st->state == EMDB_JOB_IDLE) {
		printf("(no job has run on this server)\n");
		return;
	}
	printf("job: %llu\nkind: %s\nstate: %s\nphase: %s\n", (unsigned long long)st->job,
	       job_kind_name(st->kind), job_state_name(st->state), phase_name(p->phase));
	printf("rows: %llu/%llu\nMB: %.2f/%.2f\nseconds: %.2f\n", (unsigned long long)p->rows_done,
	       (unsigned long long)p->rows_total, mb(p->bytes_done), mb(p->bytes_total),
	       (double)p->elapsed_ns / 1e9);
	if (st->kind != EMDB_JOB_RESTORE)
		printf("switch_ms: %.3f\ncow_rows: %llu\n", (double)p->switch_ns / 1e6,
		       (unsigned long long)p->cow_rows);
	if (p->ckpt_id)
		printf("checkpoint: %llu\n", (unsigned long long)p->ckpt_id);
	if (st->state == EMDB_JOB_DONE) {
		const emdb_ckpt_info *ck = &st->result;
		printf("result: checkpoint %llu (%s), %u tables, %llu rows, %.2f MB\n",
		       (unsigned long long)ck->id, kind_name(ck->kind), ck->tables,
		       (unsigned long long)(st->kind == EMDB_JOB_RESTORE ? ck->rows_total : ck->rows),
		       mb(ck->bytes));
	} else if (st->state == EMDB_JOB_FAILED) {
		printf("error: %s: %s\n", emdb_err_name(st->error), st->message);
	}
}

cli_status cmd_job(cli_session *s, emdb_client *c, int argc, char **argv)
{
	uint64_t job = 0;
	if (argc && !words_u64(argv[0], &job))
		return cmd_usage(s, "'%s' is not a job number", argv[0]);
	emdb_job_status st;
	memset(&st, 0, sizeof(st));
	int rc = emdb_client_job_status(c, job, &st);
	if (rc != EMDB_OK)
		return session_fail(s, rc);
	st.message[sizeof(st.message) - 1] = 0;
	if (s->json)
		job_json(&st);
	else
		job_text(&st);
	return CLI_OK;
}
