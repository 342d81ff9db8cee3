/*
 * session.c - emdb-cli's connection, error reports and completion caches
 * (session.h).
 *
 * Invariants:
 *   1. s->c is either NULL or a handle that has not been seen to fail with
 *      a connection error: a command that gets CLOSED, IO or PROTOCOL
 *      drops it, so the next command connects afresh instead of failing
 *      on a broken handle forever (client.h: a broken handle stays
 *      broken).
 *   2. Connecting happens only in session_client, i.e. only when a command
 *      needs the server; completion never connects, so a Tab cannot hang
 *      on an unreachable server.
 *   3. Every error goes to stderr as "(error) NAME: message", and in JSON
 *      mode also to stdout as the command's one object, so a script reads
 *      exactly one object per command whatever happened.
 *   4. The message of a failed call is copied before anything else runs a
 *      client call, which would overwrite emdb_client_last_error().
 *
 * State changes: s->c (session_client, session_disconnect, session_fail),
 * the caches (session_table_names, session_config_keys, and their
 * flushing on connect and disconnect).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <emdb/alloc.h>

#include "tools/cli/out.h"
#include "tools/cli/session.h"

/* Table names older than this are fetched again on the next Tab. */
#define TABLES_TTL_MS 5000

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void names_clear(cli_names *nm)
{
	emdb_free(nm->v);
	memset(nm, 0, sizeof(*nm));
}

/* Replace *nm with copies of src[n], all in one block. */
static void names_set(cli_names *nm, const char *const *src, size_t n)
{
	size_t bytes = (n + 1) * sizeof(char *);
	for (size_t i = 0; i < n; i++)
		bytes += strlen(src[i]) + 1;
	char **v = emdb_malloc(bytes);
	if (!v)
		return;
	char *p = (char *)(v + n + 1);
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(src[i]) + 1;
		v[i] = memcpy(p, src[i], len);
		p += len;
	}
	v[n] = NULL;
	names_clear(nm);
	nm->v = v;
	nm->n = n;
	nm->at_ms = now_ms();
}

void session_init(cli_session *s, const char *uri, const char *token, uint32_t timeout_ms,
		  uint32_t connect_ms, bool json, bool interactive)
{
	emdb_client_options o = EMDB_CLIENT_OPTIONS_INIT;
	memset(s, 0, sizeof(*s));
	s->uri = uri ? uri : CLI_DEFAULT_URI;
	snprintf(s->shown_uri, sizeof(s->shown_uri), "%.*s", (int)strcspn(s->uri, "?"), s->uri);
	o.timeout_ms = timeout_ms;
	o.connect_timeout_ms = connect_ms;
	o.token = token;
	o.client_name = "emdb-cli";
	o.mem_threads = 0;
	s->opts = o;
	s->json = json;
	s->interactive = interactive;
}

void session_disconnect(cli_session *s)
{
	emdb_client_close(s->c);
	s->c = NULL;
	names_clear(&s->tables);
	names_clear(&s->config_keys);
}

void session_close(cli_session *s)
{
	session_disconnect(s);
}

emdb_client *session_client(cli_session *s)
{
	if (s->c)
		return s->c;
	int rc = emdb_client_connect(s->uri, &s->opts, &s->c);
	if (rc != EMDB_OK) {
		s->c = NULL;
		session_fail(s, rc);
		return NULL;
	}
	names_clear(&s->tables);
	names_clear(&s->config_keys);
	return s->c;
}

static void report(cli_session *s, const char *name, const char *msg)
{
	fflush(stdout);
	fprintf(stderr, "(error) %s: %s\n", name, msg);
	fflush(stderr);
	if (s->json) {
		jw w;
		jw_open(&w, stdout);
		jw_bool(&w, "ok", false);
		jw_str(&w, "error", name);
		jw_str(&w, "message", msg);
		jw_close(&w);
	}
}

cli_status session_fail(cli_session *s, int rc)
{
	char msg[1100];
	snprintf(msg, sizeof(msg), "%s", emdb_client_last_error()); /* invariant 4 */
	if (!msg[0])
		snprintf(msg, sizeof(msg), "%s", emdb_strerror(rc));
	bool lost = s->c && (rc == EMDB_ERR_CLOSED || rc == EMDB_ERR_IO || rc == EMDB_ERR_PROTOCOL);
	report(s, emdb_err_name(rc), msg);
	if (lost) {
		session_disconnect(s);
		if (s->interactive)
			fprintf(stderr, "connection to %s lost; the next command reconnects\n",
				s->shown_uri);
	}
	return CLI_FAIL;
}

cli_status session_error(cli_session *s, cli_status status, const char *name, const char *fmt, ...)
{
	char msg[1100];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	report(s, name, msg);
	return status;
}

/* A failed fetch over a connection that is gone drops it quietly
 * (invariant 1, without the note: a Tab must not print). */
static void fetch_failed(cli_session *s, int rc)
{
	if (rc == EMDB_ERR_CLOSED || rc == EMDB_ERR_IO || rc == EMDB_ERR_PROTOCOL)
		session_disconnect(s);
}

static void fetch_tables(cli_session *s)
{
	uint32_t *ids = NULL;
	size_t n = 0, cap = 0;
	char (*names)[EMDB_NAME_MAX] = NULL;
	const char **ptrs = NULL;
	int rc;
	for (;;) {
		rc = emdb_client_table_list(s->c, ids, cap, &n);
		if (rc != EMDB_OK)
			goto fail;
		if (n <= cap)
			break;
		emdb_free(ids);
		cap = n + 16;
		ids = emdb_malloc(cap * sizeof(*ids));
		if (!ids)
			goto done;
	}
	names = emdb_malloc((n ? n : 1) * sizeof(*names));
	ptrs = emdb_malloc((n ? n : 1) * sizeof(*ptrs));
	if (!names || !ptrs)
		goto done;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		emdb_table_info info;
		rc = emdb_client_table_describe(s->c, ids[i], &info);
		if (rc == EMDB_ERR_NO_TABLE) /* dropped meanwhile */
			continue;
		if (rc != EMDB_OK)
			goto fail;
		memcpy(names[k], info.config.name, EMDB_NAME_MAX);
		names[k][EMDB_NAME_MAX - 1] = 0;
		ptrs[k] = names[k];
		k++;
	}
	names_set(&s->tables, ptrs, k);
	goto done;
fail:
	fetch_failed(s, rc);
done:
	emdb_free(ptrs);
	emdb_free(names);
	emdb_free(ids);
}

void session_table_names(cli_session *s, char ***names, size_t *n)
{
	if (s->c && (s->tables.at_ms == 0 || now_ms() - s->tables.at_ms > TABLES_TTL_MS))
		fetch_tables(s);
	*names = s->tables.v;
	*n = s->tables.n;
}

void session_forget_tables(cli_session *s)
{
	names_clear(&s->tables);
}

void session_config_keys(cli_session *s, char ***names, size_t *n)
{
	if (s->c && s->config_keys.at_ms == 0 && emdb_client_role(s->c) >= EMDB_ROLE_TRAINER) {
		emdb_client_kv *kv = NULL;
		size_t k = 0;
		int rc = emdb_client_config_get(s->c, "*", &kv, &k);
		if (rc == EMDB_OK) {
			const char **ptrs = emdb_malloc((k ? k : 1) * sizeof(*ptrs));
			if (ptrs) {
				for (size_t i = 0; i < k; i++)
					ptrs[i] = kv[i].key;
				names_set(&s->config_keys, ptrs, k);
				emdb_free(ptrs);
			}
			emdb_free(kv);
		} else {
			fetch_failed(s, rc);
		}
	}
	*names = s->config_keys.v;
	*n = s->config_keys.n;
}

const char *session_prompt(cli_session *s)
{
	snprintf(s->prompt, sizeof(s->prompt), s->c ? "%s> " : "%s (not connected)> ", s->shown_uri);
	return s->prompt;
}
