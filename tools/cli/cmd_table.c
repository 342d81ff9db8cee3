/*
 * cmd_table.c - the commands about tables and their rows: table create,
 * describe, list, drop, reserve, alter, and lookup.
 *
 * Invariants:
 *   1. A table argument is a name first and an id only when no table has
 *      that name (names may be all digits, ids are what `table list`
 *      shows): resolve() is the one place that decides.
 *   2. As in cmd_server.c, nothing is printed before the last request
 *      succeeded: one error, or one result (one JSON object).
 *   3. lookup never inserts: it uses the read-only Lookup, so looking at a
 *      production table changes nothing but its counters.
 *
 * State changes: create and drop flush the session's table-name cache.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <emdb/alloc.h>

#include "tools/cli/cmd_int.h"
#include "tools/cli/tableopt.h"
#include "tools/cli/words.h"

/* Table statistics, in the order of emdb_table_stats. */
static const struct {
	const char *name;
	size_t off;
} stat_fields[] = {
#define F(f) { #f, offsetof(emdb_table_stats, f) }
	F(rows), F(step), F(pending_rows), F(bytes_vectors), F(bytes_optimizer), F(bytes_index),
	F(bytes_grads), F(bytes_overhead), F(calls_prefetch), F(calls_pull), F(calls_push),
	F(calls_update), F(calls_lookup), F(ids_prefetch), F(ids_pull), F(ids_push), F(ids_lookup),
	F(lookup_misses), F(rows_updated), F(index_resizes),
#undef F
};

void cmd_put_table_stats(cli_session *s, jw *w, const emdb_table_stats *st)
{
	for (size_t i = 0; i < sizeof(stat_fields) / sizeof(stat_fields[0]); i++) {
		uint64_t v = *(const uint64_t *)((const char *)st + stat_fields[i].off);
		if (s->json)
			jw_u64(w, stat_fields[i].name, v);
		else
			printf("%s: %llu\n", stat_fields[i].name, (unsigned long long)v);
	}
}

cli_status cmd_resolve_table(cli_session *s, emdb_client *c, const char *arg, emdb_table_info *info)
{
	uint32_t id;
	uint64_t num;
	bool by_id = false;
	int rc = emdb_client_table_find(c, arg, &id);
	if ((rc == EMDB_ERR_NO_TABLE || rc == EMDB_ERR_INVALID) && words_u64(arg, &num) &&
	    num <= UINT32_MAX) {
		id = (uint32_t)num;
		by_id = true;
		rc = EMDB_OK;
	}
	if (rc == EMDB_OK)
		rc = emdb_client_table_describe(c, id, info);
	if (rc == EMDB_ERR_NO_TABLE && by_id)
		return session_error(s, CLI_FAIL, "NO_TABLE", "no table named '%s' and no table with id %s",
				     arg, arg);
	if (rc != EMDB_OK)
		return session_fail(s, rc);
	info->config.name[EMDB_NAME_MAX - 1] = 0;
	return CLI_OK;
}

cli_status cmd_table_create(cli_session *s, emdb_client *c, int argc, char **argv)
{
	emdb_table_config cfg = EMDB_TABLE_CONFIG_INIT;
	uint64_t dim;
	char err[512];
	if (strlen(argv[0]) >= EMDB_NAME_MAX)
		return cmd_usage(s, "table name longer than %d bytes", EMDB_NAME_MAX - 1);
	snprintf(cfg.name, sizeof(cfg.name), "%s", argv[0]);
	if (!words_u64(argv[1], &dim) || dim > UINT32_MAX)
		return cmd_usage(s, "DIM '%s' is not a number", argv[1]);
	cfg.dim = (uint32_t)dim;
	if (topt_parse(argc - 2, argv + 2, &cfg, err, sizeof(err)) < 0)
		return cmd_usage(s, "%s", err);

	uint32_t id;
	int rc = emdb_client_table_create(c, &cfg, &id);
	if (rc != EMDB_OK)
		return session_fail(s, rc);
	session_forget_tables(s);
	if (s->json) {
		jw w;
		jw_open(&w, stdout);
		jw_bool(&w, "ok", true);
		jw_u64(&w, "id", id);
		jw_str(&w, "name", cfg.name);
		jw_close(&w);
	} else {
		printf("created table %s (id %u)\n", cfg.name, id);
	}
	return CLI_OK;
}

static void describe_json(cli_session *s, const emdb_table_info *info)
{
	const emdb_table_config *cfg = &info->config;
	const char *names[16];
	double values[16];
	size_t np = topt_params(&cfg->optimizer, names, values, 16);
	jw w;
	jw_open(&w, stdout);
	jw_bool(&w, "ok", true);
	jw_u64(&w, "id", info->id);
	jw_str(&w, "name", cfg->name);
	jw_u64(&w, "dim", cfg->dim);
	jw_obj(&w, "optimizer");
	jw_str(&w, "kind", emdb_optimizer_name(cfg->optimizer.kind));
	for (size_t i = 0; i < np; i++)
		jw_double(&w, names[i], values[i]);
	jw_obj_end(&w);
	jw_obj(&w, "init");
	jw_str(&w, "kind", topt_init_name(cfg->init.kind));
	if (cfg->init.kind == EMDB_INIT_UNIFORM) {
		jw_double(&w, "low", cfg->init.a);
		jw_double(&w, "high", cfg->init.b);
	} else if (cfg->init.kind == EMDB_INIT_NORMAL) {
		jw_double(&w, "mean", cfg->init.a);
		jw_double(&w, "std", cfg->init.b);
	}
	jw_obj_end(&w);
	jw_u64(&w, "seed", cfg->seed);
	jw_str(&w, "default", topt_default_name(cfg->lookup_default));
	jw_obj(&w, "stats");
	cmd_put_table_stats(s, &w, &info->stats);
	jw_obj_end(&w);
	jw_close(&w);
}

static void describe_text(cli_session *s, const emdb_table_info *info)
{
	const emdb_table_config *cfg = &info->config;
	const char *names[16];
	double values[16];
	char buf[128];
	size_t np = topt_params(&cfg->optimizer, names, values, 16);
	const char *opt = emdb_optimizer_name(cfg->optimizer.kind);
	printf("id: %u\nname: %s\ndim: %u\noptimizer: %s\n", info->id, cfg->name, cfg->dim,
	       opt ? opt : "unknown");
	for (size_t i = 0; i < np; i++) {
		out_double(buf, sizeof(buf), values[i]);
		printf("%s: %s\n", names[i], buf);
	}
	topt_init_text(&cfg->init, buf, sizeof(buf));
	printf("init: %s\nseed: %llu\ndefault: %s\n", buf, (unsigned long long)cfg->seed,
	       topt_default_name(cfg->lookup_default));
	cmd_put_table_stats(s, NULL, &info->stats);
}

cli_status cmd_table_describe(cli_session *s, emdb_client *c, int argc, char **argv)
{
	emdb_table_info info;
	if (cmd_resolve_table(s, c, argv[0], &info) != CLI_OK)
		return CLI_FAIL;
	if (s->json)
		describe_json(s, &info);
	else
		describe_text(s, &info);
	return CLI_OK;
}

/* Every live table, described; *out is emdb_malloc'd (free it). */
static int list_tables(emdb_client *c, emdb_table_info **out, size_t *n_out)
{
	uint32_t *ids = NULL;
	emdb_table_info *infos = NULL;
	size_t n = 0, cap = 0, k = 0;
	int rc;
	for (;;) {
		rc = emdb_client_table_list(c, ids, cap, &n);
		if (rc != EMDB_OK)
			goto done;
		if (n <= cap)
			break;
		emdb_free(ids);
		cap = n + 16;
		ids = emdb_malloc(cap * sizeof(*ids));
		if (!ids) {
			rc = EMDB_ERR_NOMEM;
			goto done;
		}
	}
	infos = emdb_malloc((n ? n : 1) * sizeof(*infos));
	if (!infos) {
		rc = EMDB_ERR_NOMEM;
		goto done;
	}
	for (size_t i = 0; i < n; i++) {
		rc = emdb_client_table_describe(c, ids[i], &infos[k]);
		if (rc == EMDB_ERR_NO_TABLE) /* dropped since the list */
			continue;
		if (rc != EMDB_OK)
			goto done;
		infos[k].config.name[EMDB_NAME_MAX - 1] = 0;
		k++;
	}
	rc = EMDB_OK;
done:
	emdb_free(ids);
	if (rc != EMDB_OK) {
		emdb_free(infos);
		infos = NULL;
		k = 0;
	}
	*out = infos;
	*n_out = k;
	return rc;
}

cli_status cmd_table_list(cli_session *s, emdb_client *c, int argc, char **argv)
{
	emdb_table_info *t;
	size_t n;
	int rc = list_tables(c, &t, &n);
	if (rc != EMDB_OK)
		return session_fail(s, rc);
	if (s->json) {
		jw w;
		jw_open(&w, stdout);
		jw_bool(&w, "ok", true);
		jw_arr(&w, "tables");
		for (size_t i = 0; i < n; i++) {
			jw_obj(&w, NULL);
			jw_u64(&w, "id", t[i].id);
			jw_str(&w, "name", t[i].config.name);
			jw_u64(&w, "dim", t[i].config.dim);
			jw_str(&w, "optimizer", emdb_optimizer_name(t[i].config.optimizer.kind));
			jw_u64(&w, "rows", t[i].stats.rows);
			jw_u64(&w, "step", t[i].stats.step);
			jw_obj_end(&w);
		}
		jw_arr_end(&w);
		jw_close(&w);
	} else if (n == 0) {
		printf("(no tables)\n");
	} else {
		int wname = 4;
		for (size_t i = 0; i < n; i++) {
			int len = (int)strlen(t[i].config.name);
			wname = len > wname ? len : wname;
		}
		printf("%6s  %-*s  %6s  %-15s  %12s  %10s\n", "ID", wname, "NAME", "DIM", "OPTIMIZER",
		       "ROWS", "STEP");
		for (size_t i = 0; i < n; i++) {
			const char *opt = emdb_optimizer_name(t[i].config.optimizer.kind);
			printf("%6u  %-*s  %6u  %-15s  %12llu  %10llu\n", t[i].id, wname,
			       t[i].config.name, t[i].config.dim, opt ? opt : "unknown",
			       (unsigned long long)t[i].stats.rows, (unsigned long long)t[i].stats.step);
		}
	}
	emdb_free(t);
	return CLI_OK;
}

cli_status cmd_table_drop(cli_session *s, emdb_client *c, int argc, char **argv)
{
	emdb_table_info info;
	if (cmd_resolve_table(s, c, argv[0], &info) != CLI_OK)
		return CLI_FAIL;
	int rc = emdb_client_table_drop(c, info.id);
	if (rc != EMDB_OK)
		return session_fail(s, rc);
	session_forget_tables(s);
	if (s->json) {
		jw w;
		jw_open(&w, stdout);
		jw_bool(&w, "ok", true);
		jw_u64(&w, "id", info.id);
		jw_str(&w, "name", info.config.name);
		jw_close(&w);
	} else {
		printf("dropped table %s (id %u)\n", info.config.name, info.id);
	}
	return CLI_OK;
}

cli_status cmd_table_reserve(cli_session *s, emdb_client *c, int argc, char **argv)
{
	emdb_table_info info;
	uint64_t rows;
	if (!words_count(argv[1], &rows))
		return cmd_usage(s, "ROWS '%s' is not a whole number (with k, M or G)", argv[1]);
	if (cmd_resolve_table(s, c, argv[0], &info) != CLI_OK)
		return CLI_FAIL;
	/* Backing gigabytes takes seconds to minutes, and the server goes on
	 * whether or not we wait: wait for it, whatever --timeout says. */
	double t0 = cmd_now_ms();
	uint32_t timeout = emdb_client_timeout(c);
	emdb_client_set_timeout(c, 0);
	int rc = emdb_client_table_reserve(c, info.id, rows);
	emdb_client_set_timeout(c, timeout);
	double secs = (cmd_now_ms() - t0) / 1e3;
	if (rc != EMDB_OK)
		return session_fail(s, rc);
	if (s->json) {
		jw w;
		jw_open(&w, stdout);
		jw_bool(&w, "ok", true);
		jw_u64(&w, "id", info.id);
		jw_str(&w, "name", info.config.name);
		jw_u64(&w, "rows", rows);
		jw_double(&w, "seconds", (double)(int64_t)(secs * 1000) / 1000);
		jw_close(&w);
	} else {
		printf("reserved room for %llu rows in table '%s' (%.1f s)\n", (unsigned long long)rows,
		       info.config.name, secs);
	}
	return CLI_OK;
}

cli_status cmd_table_alter(cli_session *s, emdb_client *c, int argc, char **argv)
{
	emdb_table_info info;
	char err[512];
	if (cmd_resolve_table(s, c, argv[0], &info) != CLI_OK)
		return CLI_FAIL;
	emdb_optimizer o = info.config.optimizer;
	if (topt_alter(argc - 1, argv + 1, &o, err, sizeof(err)) < 0)
		return cmd_usage(s, "%s", err);
	int rc = emdb_client_table_alter(c, info.id, &o);
	if (rc != EMDB_OK)
		return session_fail(s, rc);
	const char *names[16];
	double values[16];
	char buf[64];
	size_t np = topt_params(&o, names, values, 16);
	if (s->json) {
		jw w;
		jw_open(&w, stdout);
		jw_bool(&w, "ok", true);
		jw_u64(&w, "id", info.id);
		jw_str(&w, "name", info.config.name);
		jw_obj(&w, "optimizer");
		jw_str(&w, "kind", emdb_optimizer_name(o.kind));
		for (size_t i = 0; i < np; i++)
			jw_double(&w, names[i], values[i]);
		jw_obj_end(&w);
		jw_close(&w);
	} else {
		printf("altered table %s (id %u):", info.config.name, info.id);
		for (size_t i = 0; i < np; i++) {
			out_double(buf, sizeof(buf), values[i]);
			printf(" %s=%s", names[i], buf);
		}
		printf("\n");
	}
	return CLI_OK;
}

static void lookup_print(cli_session *s, const emdb_table_info *info, const uint64_t *ids, size_t n,
			 const float *vec, const uint8_t *found)
{
	uint32_t dim = info->config.dim;
	char buf[40];
	if (s->json) {
		jw w;
		jw_open(&w, stdout);
		jw_bool(&w, "ok", true);
		jw_str(&w, "table", info->config.name);
		jw_u64(&w, "table_id", info->id);
		jw_u64(&w, "dim", dim);
		jw_arr(&w, "rows");
		for (size_t i = 0; i < n; i++) {
			jw_obj(&w, NULL);
			jw_u64(&w, "id", ids[i]);
			jw_bool(&w, "found", found[i]);
			jw_arr(&w, "vector");
			for (uint32_t j = 0; j < dim; j++)
				jw_float(&w, NULL, vec[i * dim + j]);
			jw_arr_end(&w);
			jw_obj_end(&w);
		}
		jw_arr_end(&w);
		jw_close(&w);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		printf("%llu: %s [", (unsigned long long)ids[i], found[i] ? "found" : "not found (default)");
		for (uint32_t j = 0; j < dim; j++) {
			out_float(buf, sizeof(buf), vec[i * dim + j]);
			printf("%s%s", j ? ", " : "", buf);
		}
		printf("]\n");
	}
}

cli_status cmd_lookup(cli_session *s, emdb_client *c, int argc, char **argv)
{
	size_t n = (size_t)argc - 1;
	uint64_t *ids = emdb_malloc(n * sizeof(*ids));
	uint8_t *found = emdb_malloc(n);
	float *vec = NULL;
	emdb_table_info info;
	cli_status st = CLI_FAIL;
	if (!ids || !found) {
		st = session_error(s, CLI_FAIL, "NOMEM", "no memory for %zu IDs", n);
		goto done;
	}
	for (size_t i = 0; i < n; i++) {
		if (!words_u64(argv[i + 1], &ids[i])) {
			st = cmd_usage(s, "ID '%s' is not an unsigned 64-bit integer", argv[i + 1]);
			goto done;
		}
	}
	if (cmd_resolve_table(s, c, argv[0], &info) != CLI_OK)
		goto done;
	vec = emdb_malloc(n * info.config.dim * sizeof(float));
	if (!vec) {
		st = session_error(s, CLI_FAIL, "NOMEM", "no memory for %zu vectors of %u floats", n,
				   info.config.dim);
		goto done;
	}
	int rc = emdb_client_lookup(c, info.id, ids, n, info.config.dim, vec, found);
	if (rc != EMDB_OK) {
		st = session_fail(s, rc);
		goto done;
	}
	lookup_print(s, &info, ids, n, vec, found);
	st = CLI_OK;
done:
	emdb_free(vec);
	emdb_free(found);
	emdb_free(ids);
	return st;
}
