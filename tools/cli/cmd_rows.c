/*
 * cmd_rows.c - a table's rows to a file and back: export TABLE FILE and
 * import TABLE FILE, over emdb_client_table_scan and
 * emdb_client_table_load, in the file format of docs/cli.md ("Row
 * files"): a 64-byte header, then one record per row (ID, vector, and the
 * optimizer state unless --no-state), little-endian, which numpy reads
 * with one structured dtype.
 *
 * Invariants:
 *   1. export writes the header last, once the rows are out, with the
 *      number written: a file cut short by a failure says 0 rows in a
 *      placeholder header, and import refuses a file whose length is not
 *      the header's count of records.
 *   2. import checks the whole header against the table (dim; with state,
 *      the optimizer and its width) and the file's length before the
 *      first row is written, then loads page by page: a failure midway
 *      leaves the pages before it loaded, which the error says.
 *   3. As in every command, one result or one error is printed, after the
 *      last request.
 *
 * State changes: import writes rows on the server.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <emdb/alloc.h>

#include "tools/cli/cmd_int.h"

#define ROWS_MAGIC "EMDBROWS"
#define ROWS_VERSION 1u
#define ROWS_HDR 64
#define PAGE_BYTES (4u << 20) /* rows per request: about 4 MiB of them */
#define PAGE_ROWS_MAX 4096u

typedef struct rows_hdr {
	uint32_t dim, per_row, kind;
	uint64_t first_step, last_step, rows;
} rows_hdr;

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static void put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

static void hdr_encode(uint8_t out[ROWS_HDR], const rows_hdr *h)
{
	memset(out, 0, ROWS_HDR);
	memcpy(out, ROWS_MAGIC, 8);
	put32(out + 8, ROWS_VERSION);
	put32(out + 12, h->dim);
	put32(out + 16, h->per_row);
	put32(out + 20, h->kind);
	put64(out + 24, h->first_step);
	put64(out + 32, h->last_step);
	put64(out + 40, h->rows);
}

/* NULL, or what is wrong with the header. */
static const char *hdr_decode(const uint8_t in[ROWS_HDR], rows_hdr *h)
{
	if (memcmp(in, ROWS_MAGIC, 8) != 0)
		return "not an emdb row file (no EMDBROWS magic)";
	if (get32(in + 8) != ROWS_VERSION)
		return "a row file of another format version";
	for (int i = 48; i < ROWS_HDR; i++)
		if (in[i])
			return "reserved header bytes are not zero";
	h->dim = get32(in + 12);
	h->per_row = get32(in + 16);
	h->kind = get32(in + 20);
	h->first_step = get64(in + 24);
	h->last_step = get64(in + 32);
	h->rows = get64(in + 40);
	if (h->dim == 0 || h->dim > EMDB_DIM_MAX)
		return "dim out of range";
	if (h->per_row && h->per_row != emdb_optimizer_state_floats((emdb_opt_kind)h->kind, h->dim))
		return "the state width is not its optimizer's";
	return NULL;
}

static size_t page_rows(size_t record)
{
	size_t p = PAGE_BYTES / record;
	return p < 1 ? 1 : p > PAGE_ROWS_MAX ? PAGE_ROWS_MAX : p;
}

/* Parse [--no-state] after TABLE FILE; returns false on a stray word. */
static bool no_state_flag(cli_session *s, int argc, char **argv, bool *no_state)
{
	*no_state = false;
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--no-state") != 0) {
			cmd_usage(s, "unknown option '%s' (--no-state)", argv[i]);
			return false;
		}
		*no_state = true;
	}
	return true;
}

typedef struct page {
	uint64_t *ids;
	float *vecs, *state;
	uint8_t *rec;
} page;

static bool page_alloc(page *p, size_t rows, uint32_t dim, uint32_t per_row)
{
	size_t record = 8 + 4 * (size_t)dim + 4 * (size_t)per_row;
	p->ids = emdb_malloc(rows * 8);
	p->vecs = emdb_malloc(rows * dim * 4);
	p->state = per_row ? emdb_malloc(rows * per_row * 4) : NULL;
	p->rec = emdb_malloc(rows * record);
	return p->ids && p->vecs && p->rec && (!per_row || p->state);
}

static void page_free(page *p)
{
	emdb_free(p->ids);
	emdb_free(p->vecs);
	emdb_free(p->state);
	emdb_free(p->rec);
}

cli_status cmd_export(cli_session *s, emdb_client *c, int argc, char **argv)
{
	bool no_state;
	if (!no_state_flag(s, argc, argv, &no_state))
		return CLI_USAGE;
	emdb_table_info info;
	if (cmd_resolve_table(s, c, argv[0], &info) != CLI_OK)
		return CLI_FAIL;
	const emdb_table_config *cfg = &info.config;
	rows_hdr h = { .dim = cfg->dim, .kind = (uint32_t)cfg->optimizer.kind };
	h.per_row = no_state ? 0 : emdb_optimizer_state_floats(cfg->optimizer.kind, cfg->dim);
	size_t record = 8 + 4 * (size_t)h.dim + 4 * (size_t)h.per_row;
	size_t cap = page_rows(record);
	page p;
	if (!page_alloc(&p, cap, h.dim, h.per_row)) {
		page_free(&p);
		return session_error(s, CLI_FAIL, "NOMEM", "no memory for a page of %zu rows", cap);
	}
	FILE *f = fopen(argv[1], "wb");
	if (!f) {
		page_free(&p);
		return session_error(s, CLI_FAIL, "IO", "%s: %s", argv[1], strerror(errno));
	}
	uint8_t hb[ROWS_HDR];
	hdr_encode(hb, &h); /* invariant 1: 0 rows until the end */
	bool io_ok = fwrite(hb, 1, ROWS_HDR, f) == ROWS_HDR;
	double t0 = cmd_now_ms();
	uint64_t cursor = 0;
	int rc = EMDB_OK;
	bool first = true;
	do {
		size_t n = 0;
		uint64_t step = 0;
		rc = emdb_client_table_scan(c, info.id, cursor, cap, h.dim, h.per_row, p.ids, p.vecs, p.state, &n,
					    &cursor, &step);
		if (rc != EMDB_OK)
			break;
		if (first)
			h.first_step = step;
		first = false;
		h.last_step = step;
		for (size_t i = 0; i < n; i++) {
			uint8_t *r = p.rec + i * record;
			put64(r, p.ids[i]);
			memcpy(r + 8, p.vecs + i * h.dim, 4 * (size_t)h.dim);
			if (h.per_row)
				memcpy(r + 8 + 4 * (size_t)h.dim, p.state + i * h.per_row, 4 * (size_t)h.per_row);
		}
		io_ok = io_ok && fwrite(p.rec, record, n, f) == n;
		h.rows += n;
	} while (cursor && io_ok);
	page_free(&p);
	if (rc == EMDB_OK && io_ok) {
		hdr_encode(hb, &h);
		io_ok = fseek(f, 0, SEEK_SET) == 0 && fwrite(hb, 1, ROWS_HDR, f) == ROWS_HDR;
	}
	int saved = errno;
	if (fclose(f) != 0 && io_ok) {
		io_ok = false;
		saved = errno;
	}
	if (rc != EMDB_OK)
		return session_fail(s, rc);
	if (!io_ok)
		return session_error(s, CLI_FAIL, "IO", "%s: %s", argv[1], strerror(saved));
	double secs = (cmd_now_ms() - t0) / 1e3;
	if (s->json) {
		jw w;
		jw_open(&w, stdout);
		jw_bool(&w, "ok", true);
		jw_str(&w, "table", cfg->name);
		jw_str(&w, "file", argv[1]);
		jw_u64(&w, "rows", h.rows);
		jw_u64(&w, "dim", h.dim);
		jw_bool(&w, "state", h.per_row > 0);
		jw_u64(&w, "first_step", h.first_step);
		jw_u64(&w, "last_step", h.last_step);
		jw_close(&w);
	} else {
		printf("exported %llu rows of table %s to %s (%s, step %llu", (unsigned long long)h.rows,
		       cfg->name, argv[1], h.per_row ? "with optimizer state" : "vectors only",
		       (unsigned long long)h.first_step);
		if (h.last_step != h.first_step)
			printf("..%llu: Updates ran during the export", (unsigned long long)h.last_step);
		printf(", %.1f s)\n", secs);
	}
	return CLI_OK;
}

cli_status cmd_import(cli_session *s, emdb_client *c, int argc, char **argv)
{
	bool no_state;
	if (!no_state_flag(s, argc, argv, &no_state))
		return CLI_USAGE;
	emdb_table_info info;
	if (cmd_resolve_table(s, c, argv[0], &info) != CLI_OK)
		return CLI_FAIL;
	const emdb_table_config *cfg = &info.config;
	FILE *f = fopen(argv[1], "rb");
	if (!f)
		return session_error(s, CLI_FAIL, "IO", "%s: %s", argv[1], strerror(errno));
	uint8_t hb[ROWS_HDR];
	rows_hdr h = { 0 };
	const char *bad = fread(hb, 1, ROWS_HDR, f) == ROWS_HDR ? hdr_decode(hb, &h) : "shorter than its header";
	struct stat st;
	size_t record = bad ? 0 : 8 + 4 * (size_t)h.dim + 4 * (size_t)h.per_row;
	if (!bad && (fstat(fileno(f), &st) != 0 || (uint64_t)st.st_size != ROWS_HDR + h.rows * record))
		bad = "its length is not its header's count of rows (cut short?)";
	if (bad) {
		fclose(f);
		return session_error(s, CLI_FAIL, "INVALID", "%s: %s", argv[1], bad);
	}
	/* Invariant 2: the file against the table, before any row. */
	uint32_t table_sf = emdb_optimizer_state_floats(cfg->optimizer.kind, cfg->dim);
	uint32_t per_row = no_state ? 0 : h.per_row;
	const char *why = NULL;
	if (h.dim != cfg->dim)
		why = "dim";
	else if (per_row && (h.kind != (uint32_t)cfg->optimizer.kind || h.per_row != table_sf))
		why = "optimizer";
	if (why) {
		fclose(f);
		const char *fk = emdb_optimizer_name((emdb_opt_kind)h.kind);
		return session_error(s, CLI_FAIL, "DIM",
				     "%s holds rows of dim %u with %s state; table %s has dim %u and %s%s", argv[1],
				     h.dim, h.per_row ? (fk ? fk : "unknown") : "no", cfg->name, cfg->dim,
				     emdb_optimizer_name(cfg->optimizer.kind),
				     !strcmp(why, "optimizer") ? ": import with --no-state for the vectors alone" : "");
	}
	size_t cap = page_rows(record);
	page p;
	if (!page_alloc(&p, cap, h.dim, h.per_row)) {
		page_free(&p);
		fclose(f);
		return session_error(s, CLI_FAIL, "NOMEM", "no memory for a page of %zu rows", cap);
	}
	uint64_t done = 0;
	int rc = EMDB_OK;
	bool io_ok = true;
	while (done < h.rows) {
		size_t n = h.rows - done < cap ? (size_t)(h.rows - done) : cap;
		if (fread(p.rec, record, n, f) != n) {
			io_ok = false;
			break;
		}
		for (size_t i = 0; i < n; i++) {
			const uint8_t *r = p.rec + i * record;
			p.ids[i] = get64(r);
			memcpy(p.vecs + i * h.dim, r + 8, 4 * (size_t)h.dim);
			if (h.per_row)
				memcpy(p.state + i * h.per_row, r + 8 + 4 * (size_t)h.dim, 4 * (size_t)h.per_row);
		}
		rc = emdb_client_table_load(c, info.id, p.ids, n, h.dim, p.vecs, per_row, p.state);
		if (rc != EMDB_OK)
			break;
		done += n;
	}
	page_free(&p);
	fclose(f);
	if (rc != EMDB_OK) {
		char msg[700];
		snprintf(msg, sizeof(msg), "%s (after %llu of %llu rows loaded)", emdb_client_last_error(),
			 (unsigned long long)done, (unsigned long long)h.rows);
		return session_error(s, CLI_FAIL, emdb_err_name(rc), "%s", msg);
	}
	if (!io_ok)
		return session_error(s, CLI_FAIL, "IO", "%s: read failed after %llu rows", argv[1],
				     (unsigned long long)done);
	if (s->json) {
		jw w;
		jw_open(&w, stdout);
		jw_bool(&w, "ok", true);
		jw_str(&w, "table", cfg->name);
		jw_str(&w, "file", argv[1]);
		jw_u64(&w, "rows", done);
		jw_bool(&w, "state", per_row > 0);
		jw_close(&w);
	} else {
		printf("imported %llu rows into table %s from %s (%s)\n", (unsigned long long)done, cfg->name,
		       argv[1], per_row ? "with optimizer state" : "vectors only");
	}
	return CLI_OK;
}
