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
 *      change, not the CLI's to guess).
 *
 * State changes: shutdown drops the session's connection.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <emdb/alloc.h>

#include "tools/cli/cmd_int.h"

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

cli_status cmd_ping(cli_session *s, emdb_client *c, int argc, char **argv)
{
	double t0 = now_ms();
	int rc = emdb_client_ping(c);
	double ms = now_ms() - t0;
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

/* Copy at most cap-1 bytes of s[n] into buf, trimmed of blanks. */
static void trim_copy(char *buf, size_t cap, const char *s, size_t n)
{
	while (n && isspace((unsigned char)*s)) {
		s++;
		n--;
	}
	while (n && isspace((unsigned char)s[n - 1]))
		n--;
	if (n >= cap)
		n = cap - 1;
	memcpy(buf, s, n);
	buf[n] = 0;
}

/* INFO's "# Section" / "key: value" text as JSON members (invariant 2). */
static void info_json(jw *w, const char *text)
{
	bool in_section = false;
	char key[256];
	for (const char *p = text; *p;) {
		size_t len = strcspn(p, "\n");
		const char *line = p;
		p += len;
		p += *p == '\n';
		if (len && line[len - 1] == '\r')
			len--;
		if (len == 0)
			continue;
		if (line[0] == '#') {
			if (in_section)
				jw_obj_end(w);
			trim_copy(key, sizeof(key), line + 1, len - 1);
			for (char *k = key; *k; k++)
				*k = (char)tolower((unsigned char)*k);
			jw_obj(w, key);
			in_section = true;
			continue;
		}
		const char *colon = memchr(line, ':', len);
		if (!colon)
			continue;
		trim_copy(key, sizeof(key), line, (size_t)(colon - line));
		const char *v = colon + 1;
		size_t vlen = len - (size_t)(v - line);
		while (vlen && (*v == ' ' || *v == '\t')) {
			v++;
			vlen--;
		}
		jw_strn(w, key, v, vlen);
	}
	if (in_section)
		jw_obj_end(w);
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
	int rc = emdb_client_config_set(c, argv[0], argv[1]);
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
