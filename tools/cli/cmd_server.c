/*
 * cmd_server.c - the commands about the server itself: ping, info,
 * config get, config set, stats, shutdown.
 *
 * Invariants:
 *   1. A handler prints only after its last request succeeded, so a
 *      failing command prints its error and nothing else, and in JSON mode
 *      every command prints exactly one object.
 *   2. INFO's text is passed through unchanged in text mode; in JSON mode
 *      it becomes {"info": {"section": {"key": "value"}}}, values kept as
 *      the strings the server sent (their types are the server's to
 *      change, not the CLI's to guess; tools/cli/infojson.c).
 *
 * State changes: shutdown drops the session's connection.
 */
#include <stdio.h>
#include <string.h>

#include <emdb/alloc.h>

#include "tools/cli/cmd_int.h"
#include "tools/cli/infojson.h"

cli_status cmd_ping(cli_session *s, emdb_client *c, int argc, char **argv)
{
	double t0 = cmd_now_ms();
	int rc = emdb_client_ping(c);
	double ms = cmd_now_ms() - t0;
	if (rc != EMDB_OK)
		return session_fail(s, rc);
	if (s->json) {
		jw w;
		jw_open(&w, stdout);
		jw_bool(&w, "ok", true);
		jw_str(&w, "reply", "PONG");
		jw_double(&w, "latency_ms", (double)(int64_t)(ms * 1000) / 1000);
		jw_str(&w, "server", emdb_client_server(c));
		jw_close(&w);
	} else {
		printf("PONG (%.3f ms)\n", ms);
	}
	return CLI_OK;
}

cli_status cmd_info(cli_session *s, emdb_client *c, int argc, char **argv)
{
	char *text = NULL;
	int rc = emdb_client_info(c, argc ? argv[0] : NULL, &text);
	if (rc != EMDB_OK)
		return session_fail(s, rc);
	if (s->json) {
		jw w;
		jw_open(&w, stdout);
		jw_bool(&w, "ok", true);
		jw_obj(&w, "info");
		info_json(&w, text);
		jw_obj_end(&w);
		jw_close(&w);
	} else {
		size_t len = strlen(text);
		fputs(text, stdout);
		if (len && text[len - 1] != '\n')
			putchar('\n');
	}
	emdb_free(text);
	return CLI_OK;
}

cli_status cmd_config_get(cli_session *s, emdb_client *c, int argc, char **argv)
{
	emdb_client_kv *kv = NULL;
	size_t n = 0;
	int rc = emdb_client_config_get(c, argv[0], &kv, &n);
	if (rc != EMDB_OK)
		return session_fail(s, rc);
	if (s->json) {
		jw w;
		jw_open(&w, stdout);
		jw_bool(&w, "ok", true);
		jw_obj(&w, "config");
		for (size_t i = 0; i < n; i++)
			jw_str(&w, kv[i].key, kv[i].value);
		jw_obj_end(&w);
		jw_close(&w);
	} else if (n == 0) {
		printf("(no setting matches '%s')\n", argv[0]);
	} else {
		for (size_t i = 0; i < n; i++)
			printf("%s: %s\n", kv[i].key, kv[i].value);
	}
	emdb_free(kv);
	return CLI_OK;
}

cli_status cmd_config_set(cli_session *s, emdb_client *c, int argc, char **argv)
{
	if (argc % 2)
		return session_error(s, CLI_USAGE, "USAGE", "config set takes KEY VALUE pairs; '%s' has no value",
				     argv[argc - 1]);
	const char *keys[EMDB_CLIENT_CONFIG_SET_MAX], *vals[EMDB_CLIENT_CONFIG_SET_MAX];
	for (int i = 0; i < argc / 2; i++) {
		keys[i] = argv[2 * i];
		vals[i] = argv[2 * i + 1];
	}
	int rc = emdb_client_config_set_many(c, (size_t)argc / 2, keys, vals);
	if (rc != EMDB_OK)
		return session_fail(s, rc);
	return cmd_ok(s);
}

cli_status cmd_stats(cli_session *s, emdb_client *c, int argc, char **argv)
{
	emdb_db_stats st;
	int rc = emdb_client_stats(c, &st);
	if (rc != EMDB_OK)
		return session_fail(s, rc);
	jw w;
	if (s->json) {
		jw_open(&w, stdout);
		jw_bool(&w, "ok", true);
		jw_u64(&w, "tables", st.tables);
		jw_u64(&w, "alloc_bytes", st.alloc_bytes);
		jw_u64(&w, "alloc_peak", st.alloc_peak);
		jw_obj(&w, "total");
		cmd_put_table_stats(s, &w, &st.total);
		jw_obj_end(&w);
		jw_close(&w);
	} else {
		printf("tables: %llu\nalloc_bytes: %llu\nalloc_peak: %llu\n",
		       (unsigned long long)st.tables, (unsigned long long)st.alloc_bytes,
		       (unsigned long long)st.alloc_peak);
		cmd_put_table_stats(s, NULL, &st.total);
	}
	return CLI_OK;
}

cli_status cmd_shutdown(cli_session *s, emdb_client *c, int argc, char **argv)
{
	int rc = emdb_client_shutdown(c);
	if (rc != EMDB_OK)
		return session_fail(s, rc);
	/* The server closes the connection soon: drop it now rather than
	 * meet CLOSED on the next command. */
	session_disconnect(s);
	return cmd_ok(s);
}
