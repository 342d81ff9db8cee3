/*
 * test_cli.c - emdb-cli as a script uses it: one-shot mode for every
 * command (output, exit status 0 / 1 / 2, --json parsed back and its
 * fields checked), errors as "(error) NAME: message", roles and tokens,
 * a server that is gone, commands piped on stdin, a server on TLS, and
 * checkpoints (checkpoint, list, restore, job, delete) against a server
 * with a store.
 *
 * Each test starts its own emdb-server on loopback with an ephemeral port
 * (tests/test_client_server.h) and kills it in .fini, which Criterion runs
 * after a failed assertion too.  emdb-cli runs as a child process with
 * its stdout and stderr captured; a run that takes longer than 30 s is
 * killed and fails the test.
 */
#define _GNU_SOURCE /* tests/tmpdir.h: nftw */
#include <criterion/criterion.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <emdb/alloc.h>
#include <emdb/client.h>

#include "tests/test_client_server.h"
#include "tests/tls_pki.h"
#include "tests/tmpdir.h"

static test_server srv;

static void srv_up(void)
{
	test_server_start(&srv, NULL);
}

static void srv_up_auth(void)
{
	static const char *const flags[] = { "--admin-token", "adm1n", "--reader-token", "r34d",
					     NULL };
	test_server_start(&srv, flags);
}

static void srv_down(void)
{
	test_server_stop(&srv);
}

/* ---- running emdb-cli ------------------------------------------------- */

typedef struct cli_run {
	int code;  /* exit status; 128 + signal when killed */
	char *out; /* stdout, NUL-terminated; freed by run_free */
	char *err; /* stderr */
} cli_run;

static void run_free(cli_run *r)
{
	free(r->out);
	free(r->err);
	r->out = r->err = NULL;
}

static void append(char **buf, size_t *len, const char *p, size_t n)
{
	*buf = realloc(*buf, *len + n + 1);
	cr_assert_not_null(*buf);
	memcpy(*buf + *len, p, n);
	*len += n;
	(*buf)[*len] = 0;
}

/* Run emdb-cli with args (NULL-terminated), `input` on its stdin (NULL:
 * /dev/null) and the extra environment assignments env (NULL-terminated,
 * may be NULL). */
static cli_run run_cli_env(const char *input, const char *const *env, const char *const *args)
{
	const char *argv[64] = { EMDB_CLI_BIN };
	int argc = 1;
	for (int i = 0; args[i]; i++) {
		cr_assert_lt(argc, 63);
		argv[argc++] = args[i];
	}
	argv[argc] = NULL;

	int in[2], out[2], err[2];
	cr_assert_eq(pipe(in), 0);
	cr_assert_eq(pipe(out), 0);
	cr_assert_eq(pipe(err), 0);
	pid_t parent = getpid();
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		dup2(in[0], 0);
		dup2(out[1], 1);
		dup2(err[1], 2);
		for (int fd = 3; fd < 64; fd++)
			close(fd);
		unsetenv("EMDB_CLI_TOKEN");
		for (int i = 0; env && env[i]; i++)
			putenv((char *)env[i]);
		execv(EMDB_CLI_BIN, (char *const *)argv);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	close(err[1]);
	if (input) {
		size_t len = strlen(input), off = 0;
		cr_assert_lt(len, 60000, "input larger than a pipe buffer");
		while (off < len) {
			ssize_t w = write(in[1], input + off, len - off);
			cr_assert_gt(w, 0);
			off += (size_t)w;
		}
	}
	close(in[1]);

	cli_run r = { 0 };
	size_t olen = 0, elen = 0;
	append(&r.out, &olen, "", 0);
	append(&r.err, &elen, "", 0);
	struct pollfd p[2] = { { .fd = out[0], .events = POLLIN }, { .fd = err[0], .events = POLLIN } };
	int open_fds = 2;
	for (int waited = 0; open_fds > 0;) {
		int k = poll(p, 2, 100);
		if (k < 0 && errno == EINTR)
			continue;
		if (k == 0 && (waited += 100) > 30000) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			cr_assert_fail("emdb-cli ran over 30 s; stdout:\n%s\nstderr:\n%s", r.out, r.err);
		}
		for (int i = 0; i < 2; i++) {
			if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			char buf[4096];
			ssize_t n = read(p[i].fd, buf, sizeof(buf));
			if (n <= 0) {
				close(p[i].fd);
				p[i].fd = -1;
				open_fds--;
			} else if (i == 0) {
				append(&r.out, &olen, buf, (size_t)n);
			} else {
				append(&r.err, &elen, buf, (size_t)n);
			}
		}
	}
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	cr_assert_null(strstr(r.err, "Sanitizer"), "emdb-cli: %s", r.err);
	return r;
}

#define ARGS(...) ((const char *const[]){ __VA_ARGS__, NULL })
/* emdb-cli -u <the test server> ARGS... */
#define CLI(...) run_srv(false, ARGS(__VA_ARGS__))
#define CLI_JSON(...) run_srv(true, ARGS(__VA_ARGS__))

#define EXPECT(r, want_code, ...)                                                                 \
	cr_assert_eq((r).code, (want_code), "exit %d, expected %d; stdout:\n%s\nstderr:\n%s",     \
		     (r).code, (want_code), (r).out, (r).err)

static void expect_has(const char *text, const char *needle)
{
	cr_assert_not_null(strstr(text, needle), "expected \"%s\" in:\n%s", needle, text);
}

/* emdb-cli -u <the test server> [--json] args... */
static cli_run run_srv(bool json, const char *const *args)
{
	const char *argv[64] = { "-u", srv.tcp_uri };
	int n = 2;
	if (json)
		argv[n++] = "--json";
	for (int i = 0; args[i]; i++) {
		cr_assert_lt(n, 63);
		argv[n++] = args[i];
	}
	argv[n] = NULL;
	return run_cli_env(NULL, NULL, argv);
}

/* Run, expect success, free. */
static void cli_ok(const char *const *args)
{
	cli_run r = run_srv(false, args);
	EXPECT(r, 0);
	run_free(&r);
}

/* ---- a small strict JSON parser, to read --json back ------------------ */

typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jtype;

typedef struct jv {
	jtype t;
	bool b;
	double num;
	char *str;
	size_t n;           /* members of an array or object */
	struct jv **items;
	char **keys;        /* object only */
} jv;

/* Nodes live in one static arena per test process: nothing to free. */
static char arena[4 << 20];
static size_t arena_used;

static void *jalloc(size_t n)
{
	n = (n + 15) & ~(size_t)15;
	cr_assert_leq(arena_used + n, sizeof(arena), "JSON arena full");
	void *p = arena + arena_used;
	arena_used += n;
	memset(p, 0, n);
	return p;
}

typedef struct jp {
	const char *p;
	const char *err;
} jp;

static void ws(jp *j)
{
	while (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')
		j->p++;
}

static jv *jvalue(jp *j);

static char *jstring(jp *j)
{
	if (*j->p != '"') {
		j->err = "expected a string";
		return NULL;
	}
	j->p++;
	char *out = jalloc(strlen(j->p) + 1), *o = out;
	for (;;) {
		unsigned char c = (unsigned char)*j->p++;
		if (c == '"')
			break;
		if (c < 0x20) {
			j->err = "raw control character (or end) in a string";
			return NULL;
		}
		if (c != '\\') {
			*o++ = (char)c;
			continue;
		}
		c = (unsigned char)*j->p++;
		switch (c) {
		case '"': case '\\': case '/':
			*o++ = (char)c;
			break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 't': *o++ = '\t'; break;
		case 'u': {
			unsigned cp = 0;
			for (int i = 0; i < 4; i++) {
				char h = *j->p++;
				if (!isxdigit((unsigned char)h)) {
					j->err = "bad \\u escape";
					return NULL;
				}
				cp = cp * 16 + (unsigned)(isdigit((unsigned char)h) ? h - '0' : (tolower(h) - 'a' + 10));
			}
			if (cp < 0x80) {
				*o++ = (char)cp;
			} else if (cp < 0x800) {
				*o++ = (char)(0xc0 | (cp >> 6));
				*o++ = (char)(0x80 | (cp & 0x3f));
			} else {
				*o++ = (char)(0xe0 | (cp >> 12));
				*o++ = (char)(0x80 | ((cp >> 6) & 0x3f));
				*o++ = (char)(0x80 | (cp & 0x3f));
			}
			break;
		}
		default:
			j->err = "bad escape";
			return NULL;
		}
	}
	*o = 0;
	return out;
}

static jv *jnumber(jp *j)
{
	const char *s = j->p;
	if (*j->p == '-')
		j->p++;
	if (*j->p == '0') {
		j->p++;
	} else if (*j->p >= '1' && *j->p <= '9') {
		while (isdigit((unsigned char)*j->p))
			j->p++;
	} else {
		j->err = "bad number";
		return NULL;
	}
	if (*j->p == '.') {
		j->p++;
		if (!isdigit((unsigned char)*j->p)) {
			j->err = "bad fraction";
			return NULL;
		}
		while (isdigit((unsigned char)*j->p))
			j->p++;
	}
	if (*j->p == 'e' || *j->p == 'E') {
		j->p++;
		if (*j->p == '+' || *j->p == '-')
			j->p++;
		if (!isdigit((unsigned char)*j->p)) {
			j->err = "bad exponent";
			return NULL;
		}
		while (isdigit((unsigned char)*j->p))
			j->p++;
	}
	jv *v = jalloc(sizeof(*v));
	v->t = J_NUM;
	v->num = strtod(s, NULL);
	return v;
}

static jv *jcontainer(jp *j, bool obj)
{
	jv *v = jalloc(sizeof(*v));
	v->t = obj ? J_OBJ : J_ARR;
	size_t cap = 8;
	v->items = jalloc(cap * sizeof(*v->items));
	v->keys = jalloc(cap * sizeof(*v->keys));
	j->p++;
	ws(j);
	if (*j->p == (obj ? '}' : ']')) {
		j->p++;
		return v;
	}
	for (;;) {
		if (v->n == cap) {
			jv **items = jalloc(2 * cap * sizeof(*items));
			char **keys = jalloc(2 * cap * sizeof(*keys));
			memcpy(items, v->items, cap * sizeof(*items));
			memcpy(keys, v->keys, cap * sizeof(*keys));
			v->items = items;
			v->keys = keys;
			cap *= 2;
		}
		ws(j);
		if (obj) {
			v->keys[v->n] = jstring(j);
			if (!v->keys[v->n])
				return NULL;
			ws(j);
			if (*j->p++ != ':') {
				j->err = "expected ':'";
				return NULL;
			}
		}
		v->items[v->n] = jvalue(j);
		if (!v->items[v->n])
			return NULL;
		v->n++;
		ws(j);
		if (*j->p == ',') {
			j->p++;
			continue;
		}
		if (*j->p++ != (obj ? '}' : ']')) {
			j->err = "expected ',' or the end of a container";
			return NULL;
		}
		return v;
	}
}

static jv *jvalue(jp *j)
{
	ws(j);
	jv *v;
	switch (*j->p) {
	case '{':
		return jcontainer(j, true);
	case '[':
		return jcontainer(j, false);
	case '"': {
		char *s = jstring(j);
		if (!s)
			return NULL;
		v = jalloc(sizeof(*v));
		v->t = J_STR;
		v->str = s;
		return v;
	}
	case 't': case 'f': case 'n': {
		v = jalloc(sizeof(*v));
		if (!strncmp(j->p, "true", 4)) {
			v->t = J_BOOL;
			v->b = true;
			j->p += 4;
		} else if (!strncmp(j->p, "false", 5)) {
			v->t = J_BOOL;
			j->p += 5;
		} else if (!strncmp(j->p, "null", 4)) {
			v->t = J_NULL;
			j->p += 4;
		} else {
			j->err = "bad literal";
			return NULL;
		}
		return v;
	}
	default:
		return jnumber(j);
	}
}

/* Parse one line of text that must hold exactly one JSON object. */
static jv *json_line(const char *line, size_t len)
{
	char *copy = jalloc(len + 1);
	memcpy(copy, line, len);
	jp j = { copy, NULL };
	ws(&j);
	cr_assert_eq(*j.p, '{', "not a JSON object: %s", copy);
	jv *v = jvalue(&j);
	cr_assert_not_null(v, "invalid JSON (%s at offset %td): %s", j.err, j.p - copy, copy);
	ws(&j);
	cr_assert_eq(*j.p, 0, "trailing text after the object: %s", copy);
	return v;
}

/* The whole stdout of a one-shot --json run: exactly one line, one object. */
static jv *json_out(const cli_run *r)
{
	size_t len = strlen(r->out);
	cr_assert(len > 0 && r->out[len - 1] == '\n' && !memchr(r->out, '\n', len - 1),
		  "expected one line of JSON, got:\n%s", r->out);
	return json_line(r->out, len - 1);
}

/* The member at a path of keys and array indexes: "optimizer.lr",
 * "tables.0.name".  Fails the test when it is missing. */
static const jv *jget(const jv *v, const char *path)
{
	char key[128];
	const char *p = path;
	while (*p) {
		size_t len = strcspn(p, ".");
		snprintf(key, sizeof(key), "%.*s", (int)len, p);
		const jv *next = NULL;
		if (v->t == J_OBJ) {
			for (size_t i = 0; i < v->n; i++) {
				if (!strcmp(v->keys[i], key))
					next = v->items[i];
			}
		} else if (v->t == J_ARR && isdigit((unsigned char)key[0])) {
			size_t i = (size_t)atol(key);
			next = i < v->n ? v->items[i] : NULL;
		}
		cr_assert_not_null(next, "JSON has no '%s' (at '%s')", path, key);
		v = next;
		p += len;
		p += *p == '.';
	}
	return v;
}

static const char *jstr(const jv *v, const char *path)
{
	const jv *x = jget(v, path);
	cr_assert_eq(x->t, J_STR, "'%s' is not a string", path);
	return x->str;
}

static double jnum(const jv *v, const char *path)
{
	const jv *x = jget(v, path);
	cr_assert_eq(x->t, J_NUM, "'%s' is not a number", path);
	return x->num;
}

static bool jbool(const jv *v, const char *path)
{
	const jv *x = jget(v, path);
	cr_assert_eq(x->t, J_BOOL, "'%s' is not a boolean", path);
	return x->b;
}

/* A failed --json run: exit code, one error object, and the same error
 * on stderr. */
static void expect_json_error(const cli_run *r, int code, const char *name)
{
	EXPECT(*r, code);
	jv *v = json_out(r);
	cr_assert_eq(jbool(v, "ok"), false);
	cr_assert_str_eq(jstr(v, "error"), name, "%s", r->out);
	cr_assert_gt(strlen(jstr(v, "message")), 0);
	char want[64];
	snprintf(want, sizeof(want), "(error) %s: ", name);
	expect_has(r->err, want);
}

/* ---- flags, help, usage ---------------------------------------------- */

Test(cli, flags_help_version_without_a_server)
{
	/* A dead port: none of these may need a connection. */
	const char *dead = "tcp://127.0.0.1:1";
	cli_run r = run_cli_env(NULL, NULL, ARGS("--version"));
	EXPECT(r, 0);
	expect_has(r.out, "emdb-cli 0.");
	run_free(&r);

	r = run_cli_env(NULL, NULL, ARGS("--help"));
	EXPECT(r, 0);
	expect_has(r.out, "usage: emdb-cli");
	expect_has(r.out, "table create NAME DIM");
	run_free(&r);

	r = run_cli_env(NULL, NULL, ARGS("-u", dead, "help"));
	EXPECT(r, 0);
	expect_has(r.out, "lookup TABLE ID...");
	expect_has(r.out, "config set KEY VALUE [KEY VALUE...]");
	run_free(&r);

	r = run_cli_env(NULL, NULL, ARGS("--uri", dead, "help", "table"));
	EXPECT(r, 0);
	expect_has(r.out, "table create NAME DIM [KEY=VALUE...]");
	expect_has(r.out, "table drop NAME|ID");
	expect_has(r.out, "optimizer=sgd|adagrad|rowwise_adagrad|adam|ftrl");
	cr_assert_null(strstr(r.out, "lookup TABLE"), "help table shows only table commands");
	run_free(&r);

	r = run_cli_env(NULL, NULL, ARGS("--uri=tcp://127.0.0.1:1", "--json", "help", "lookup"));
	EXPECT(r, 0);
	jv *v = json_out(&r);
	cr_assert(jbool(v, "ok"));
	cr_assert_str_eq(jstr(v, "commands.0.name"), "lookup");
	cr_assert_str_eq(jstr(v, "commands.0.role"), "reader");
	cr_assert_eq(jget(v, "commands")->n, 1);
	run_free(&r);

	r = run_cli_env(NULL, NULL, ARGS("-u", dead, "--json", "help"));
	EXPECT(r, 0);
	v = json_out(&r);
	cr_assert_geq(jget(v, "commands")->n, 12);
	run_free(&r);

	r = run_cli_env(NULL, NULL, ARGS("-u", dead, "quit"));
	EXPECT(r, 0);
	run_free(&r);
}

Test(cli, usage_errors_exit_2)
{
	const char *dead = "tcp://127.0.0.1:1";
	const char *const *cases[] = {
		ARGS("--frobnicate"),
		ARGS("--timeout", "soon", "ping"),
		ARGS("-u"),
		ARGS("-u", "tcp://127.0.0.1:1", "frob"),
		ARGS("-u", "tcp://127.0.0.1:1", "table"),
		ARGS("-u", "tcp://127.0.0.1:1", "table", "frob"),
		ARGS("-u", "tcp://127.0.0.1:1", "help", "frob"),
		ARGS("-u", "tcp://127.0.0.1:1", "ping", "extra"),
	};
	(void)dead;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cli_run r = run_cli_env(NULL, NULL, cases[i]);
		EXPECT(r, 2);
		cr_assert_gt(strlen(r.err), 0);
		cr_assert_eq(strlen(r.out), 0, "case %zu: %s", i, r.out);
		run_free(&r);
	}
	cli_run r = run_cli_env(NULL, NULL, ARGS("-u", dead, "table", "frob"));
	expect_has(r.err, "(error) USAGE: unknown command 'table frob'");
	expect_has(r.err, "create, describe, list, drop");
	run_free(&r);
}

Test(cli, usage_errors_of_commands, .init = srv_up, .fini = srv_down)
{
	const char *const *cases[] = {
		ARGS("lookup", "t"),
		ARGS("lookup", "t", "12x"),
		ARGS("lookup", "t", "-1"),
		ARGS("table", "create", "t"),
		ARGS("table", "create", "t", "four"),
		ARGS("table", "create", "t", "4", "colour=red"),
		ARGS("table", "create", "t", "4", "lr"),
		ARGS("table", "create", "t", "4", "optimizer=lion"),
		ARGS("table", "create", "t", "4", "beta1=0.5"), /* sgd has no beta1 */
		ARGS("table", "create", "t", "4", "lr=0.1", "lr=0.2"),
		ARGS("table", "create", "t", "4", "init=uniform:1"),
		ARGS("table", "create", "t", "4", "seed=-3"),
		ARGS("table", "create", "t", "4", "default=ones"),
		ARGS("table", "create", "a_name_that_is_much_longer_than_sixty_three_bytes_which_is_the_limit", "4"),
		ARGS("config", "set", "log_level"),
		ARGS("config", "get"),
		ARGS("table", "describe"),
		ARGS("info", "server", "memory"),
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cli_run r = run_srv(true, cases[i]);
		expect_json_error(&r, 2, "USAGE");
		run_free(&r);
	}
	cli_run r = CLI("table", "create", "t", "4", "beta1=0.5");
	expect_has(r.err, "beta1 is not a parameter of sgd");
	expect_has(r.err, "usage: table create NAME DIM [KEY=VALUE...]");
	run_free(&r);
	/* Nothing was created by any of them. */
	r = CLI_JSON("table", "list");
	EXPECT(r, 0);
	cr_assert_eq(jget(json_out(&r), "tables")->n, 0);
	run_free(&r);
}

/* ---- the server's commands --------------------------------------------- */

Test(cli, ping, .init = srv_up, .fini = srv_down)
{
	cli_run r = CLI("ping");
	EXPECT(r, 0);
	expect_has(r.out, "PONG");
	cr_assert_eq(strlen(r.err), 0);
	run_free(&r);

	r = CLI_JSON("ping");
	EXPECT(r, 0);
	jv *v = json_out(&r);
	cr_assert(jbool(v, "ok"));
	cr_assert_str_eq(jstr(v, "reply"), "PONG");
	cr_assert_geq(jnum(v, "latency_ms"), 0);
	cr_assert_eq(strncmp(jstr(v, "server"), "emdb ", 5), 0);
	run_free(&r);

	/* Over the Unix socket too. */
	r = run_cli_env(NULL, NULL, ARGS("-u", srv.unix_uri, "ping"));
	EXPECT(r, 0);
	expect_has(r.out, "PONG");
	run_free(&r);
}

static char pki[64];

static void srv_up_tls(void)
{
	tls_pki_make(pki);
	const char *const flags[] = { "--tls-cert-file", tls_pki_path(pki, "srv.pem"), "--tls-key-file",
				      tls_pki_path(pki, "srv.key"), NULL };
	test_server_start(&srv, flags);
}

static void srv_down_tls(void)
{
	test_server_stop(&srv);
	tls_pki_remove(pki);
}

/* A server on TLS: the operator names the CA in the URI; without it the
 * certificate is not trusted, and the shell says so and exits 1. */
Test(cli, over_tls, .init = srv_up_tls, .fini = srv_down_tls)
{
	char uri[256];
	snprintf(uri, sizeof(uri), "tls://127.0.0.1:%u?ca=%s", srv.port, tls_pki_path(pki, "ca.pem"));
	cli_run r = run_cli_env(NULL, NULL, ARGS("-u", uri, "table", "create", "t", "4"));
	EXPECT(r, 0);
	run_free(&r);
	r = run_cli_env(NULL, NULL, ARGS("-u", uri, "--json", "lookup", "t", "1"));
	EXPECT(r, 0);
	run_free(&r);

	snprintf(uri, sizeof(uri), "tls://127.0.0.1:%u", srv.port);
	r = run_cli_env(NULL, NULL, ARGS("-u", uri, "ping"));
	EXPECT(r, 1);
	expect_has(r.err, "AUTH");
	expect_has(r.err, "certificate verify failed");
	run_free(&r);
}

Test(cli, info, .init = srv_up, .fini = srv_down)
{
	cli_run r = CLI("info");
	EXPECT(r, 0);
	expect_has(r.out, "# Server");
	expect_has(r.out, "version: emdb ");
	run_free(&r);

	r = CLI("info", "memory");
	EXPECT(r, 0);
	expect_has(r.out, "used_bytes: ");
	cr_assert_null(strstr(r.out, "# Server"));
	run_free(&r);

	r = CLI_JSON("info", "all");
	EXPECT(r, 0);
	jv *v = json_out(&r);
	cr_assert_eq(strncmp(jstr(v, "info.server.version"), "emdb ", 5), 0);
	char port[16];
	snprintf(port, sizeof(port), "%u", srv.port);
	cr_assert_str_eq(jstr(v, "info.server.tcp_port"), port);
	cr_assert_gt(atoll(jstr(v, "info.memory.used_bytes")), 0);
	cr_assert_str_eq(jstr(v, "info.tables.tables"), "0");
	run_free(&r);

	r = CLI_JSON("info", "nonsense");
	expect_json_error(&r, 1, "INVALID");
	run_free(&r);
}

Test(cli, config_get_and_set, .init = srv_up, .fini = srv_down)
{
	cli_run r = CLI("config", "get", "max_*");
	EXPECT(r, 0);
	expect_has(r.out, "max_connections: 10000\n");
	expect_has(r.out, "max_tickets: 65536\n");
	cr_assert_null(strstr(r.out, "log_level"));
	run_free(&r);

	r = CLI("config", "set", "max_tickets", "1000");
	EXPECT(r, 0);
	cr_assert_str_eq(r.out, "OK\n");
	run_free(&r);

	r = CLI_JSON("config", "get", "*");
	EXPECT(r, 0);
	jv *v = json_out(&r);
	cr_assert_str_eq(jstr(v, "config.max_tickets"), "1000");
	cr_assert_str_eq(jstr(v, "config.log_level"), "info");
	cr_assert_str_eq(jstr(v, "config.bind"), "127.0.0.1");
	run_free(&r);

	r = CLI_JSON("config", "set", "log_level", "debug");
	EXPECT(r, 0);
	cr_assert(jbool(json_out(&r), "ok"));
	run_free(&r);

	r = CLI("config", "get", "nothing_like_this*");
	EXPECT(r, 0);
	expect_has(r.out, "(no setting matches");
	run_free(&r);

	r = CLI_JSON("config", "get", "nothing_like_this*");
	EXPECT(r, 0);
	cr_assert_eq(jget(json_out(&r), "config")->n, 0);
	run_free(&r);

	r = CLI("config", "set", "no_such_key", "1");
	EXPECT(r, 1);
	expect_has(r.err, "(error) INVALID: ");
	run_free(&r);

	r = CLI_JSON("config", "set", "port", "1234"); /* fixed at start */
	EXPECT(r, 1);
	cr_assert_eq(jbool(json_out(&r), "ok"), false);
	run_free(&r);

	/* Several pairs: together, or none of them. */
	r = CLI("config", "set", "max_tickets", "77", "log_level", "warn");
	EXPECT(r, 0);
	cr_assert_str_eq(r.out, "OK\n");
	run_free(&r);
	r = CLI("config", "set", "max_tickets", "5", "no_such_key", "1");
	EXPECT(r, 1);
	expect_has(r.err, "no_such_key");
	run_free(&r);
	r = CLI("config", "get", "max_tickets");
	EXPECT(r, 0);
	expect_has(r.out, "max_tickets: 77\n");
	run_free(&r);
	r = CLI("config", "set", "max_tickets", "5", "log_level");
	EXPECT(r, 2);
	expect_has(r.err, "(error) USAGE: config set takes KEY VALUE pairs");
	run_free(&r);
}

Test(cli, stats, .init = srv_up, .fini = srv_down)
{
	cli_ok(ARGS("table", "create", "s", "4"));
	emdb_client *c;
	cr_assert_eq(emdb_client_connect(srv.tcp_uri, NULL, &c), 0);
	uint32_t t;
	cr_assert_eq(emdb_client_table_find(c, "s", &t), 0);
	uint64_t ids[5] = { 1, 2, 3, 4, 5 };
	float out[20];
	cr_assert_eq(emdb_client_pull(c, t, ids, 5, 4, out), 0);
	emdb_client_close(c);

	cli_run r = CLI("stats");
	EXPECT(r, 0);
	expect_has(r.out, "tables: 1\n");
	expect_has(r.out, "rows: 5\n");
	expect_has(r.out, "calls_pull: 1\n");
	run_free(&r);

	r = CLI_JSON("stats");
	EXPECT(r, 0);
	jv *v = json_out(&r);
	cr_assert_eq(jnum(v, "tables"), 1);
	cr_assert_eq(jnum(v, "total.rows"), 5);
	cr_assert_eq(jnum(v, "total.ids_pull"), 5);
	cr_assert_gt(jnum(v, "alloc_bytes"), 0);
	cr_assert_geq(jnum(v, "alloc_peak"), jnum(v, "alloc_bytes"));
	run_free(&r);
}

Test(cli, shutdown_then_unreachable, .init = srv_up, .fini = srv_down)
{
	cli_run r = CLI("shutdown");
	EXPECT(r, 0);
	cr_assert_str_eq(r.out, "OK\n");
	run_free(&r);
	int exited = 0;
	for (int i = 0; i < 2000 && !exited; i++) {
		exited = !test_server_alive(&srv);
		if (!exited)
			test_sleep_ms(10);
	}
	cr_assert(exited, "the server still runs after shutdown");

	r = CLI("ping");
	EXPECT(r, 1);
	expect_has(r.err, "(error) IO: ");
	cr_assert_eq(strlen(r.out), 0);
	run_free(&r);

	r = CLI_JSON("table", "list");
	expect_json_error(&r, 1, "IO");
	run_free(&r);
}

Test(cli, stalled_server_times_out, .init = srv_up, .fini = srv_down)
{
	cli_ok(ARGS("ping"));
	test_server_pause(&srv);
	cli_run r = CLI("--timeout", "300", "ping");
	test_server_resume(&srv);
	EXPECT(r, 1);
	expect_has(r.err, "(error) TIMEOUT: ");
	run_free(&r);
}

/* ---- tables ------------------------------------------------------------ */

Test(cli, table_create_every_option, .init = srv_up, .fini = srv_down)
{
	cli_run r = CLI("table", "create", "ads", "8", "optimizer=adam", "lr=0.002", "eps=1e-6",
			"beta1=0.8", "beta2=0.99", "init=uniform:-0.1,0.1", "seed=42", "default=init");
	EXPECT(r, 0);
	expect_has(r.out, "created table ads (id 1)");
	run_free(&r);

	r = CLI_JSON("table", "describe", "ads");
	EXPECT(r, 0);
	jv *v = json_out(&r);
	cr_assert_eq(jnum(v, "id"), 1);
	cr_assert_str_eq(jstr(v, "name"), "ads");
	cr_assert_eq(jnum(v, "dim"), 8);
	cr_assert_str_eq(jstr(v, "optimizer.kind"), "adam");
	cr_assert_eq(jnum(v, "optimizer.lr"), 0.002);
	cr_assert_eq(jnum(v, "optimizer.eps"), 1e-6);
	cr_assert_eq(jnum(v, "optimizer.beta1"), 0.8);
	cr_assert_eq(jnum(v, "optimizer.beta2"), 0.99);
	cr_assert_str_eq(jstr(v, "init.kind"), "uniform");
	cr_assert_eq(jnum(v, "init.low"), -0.1);
	cr_assert_eq(jnum(v, "init.high"), 0.1);
	cr_assert_eq(jnum(v, "seed"), 42);
	cr_assert_str_eq(jstr(v, "default"), "init");
	cr_assert_eq(jnum(v, "stats.rows"), 0);
	run_free(&r);

	/* FTRL, with alpha for lr, and a normal initializer; hex seed. */
	cli_ok(ARGS("table", "create", "ctr", "3", "l2=0.02", "optimizer=ftrl", "alpha=0.1",
		    "beta=0.5", "l1=0.01", "initial_accumulator=0.2", "init=normal:0,0.01",
		    "seed=0x10"));
	r = CLI_JSON("table", "describe", "ctr");
	EXPECT(r, 0);
	v = json_out(&r);
	cr_assert_str_eq(jstr(v, "optimizer.kind"), "ftrl");
	cr_assert_eq(jnum(v, "optimizer.lr"), 0.1);
	cr_assert_eq(jnum(v, "optimizer.beta"), 0.5);
	cr_assert_eq(jnum(v, "optimizer.l1"), 0.01);
	cr_assert_eq(jnum(v, "optimizer.l2"), 0.02);
	cr_assert_eq(jnum(v, "optimizer.initial_accumulator"), 0.2);
	cr_assert_str_eq(jstr(v, "init.kind"), "normal");
	cr_assert_eq(jnum(v, "init.std"), 0.01);
	cr_assert_eq(jnum(v, "seed"), 16);
	cr_assert_str_eq(jstr(v, "default"), "zeros");
	run_free(&r);

	/* Adagrad and row-wise Adagrad: their own keys, their defaults. */
	cli_ok(ARGS("table", "create", "ag", "2", "optimizer=adagrad", "lr_decay=0.1",
		    "initial_accumulator=0.5", "eps=1e-9"));
	r = CLI("table", "describe", "ag");
	EXPECT(r, 0);
	expect_has(r.out, "optimizer: adagrad\nlr: 0.01\neps: 1e-09\nlr_decay: 0.1\n"
			  "initial_accumulator: 0.5\ninit: zeros\nseed: 0\ndefault: zeros\n");
	run_free(&r);
	cli_ok(ARGS("table", "create", "rw", "2", "optimizer=rowwise_adagrad"));
	r = CLI_JSON("table", "describe", "4");
	EXPECT(r, 0);
	v = json_out(&r);
	cr_assert_str_eq(jstr(v, "name"), "rw", "a number that names no table is an id");
	cr_assert_eq(jnum(v, "optimizer.eps"), 1e-8);
	run_free(&r);

	/* Text describe of the first. */
	r = CLI("table", "describe", "1");
	EXPECT(r, 0);
	expect_has(r.out, "name: ads\ndim: 8\noptimizer: adam\nlr: 0.002\n");
	expect_has(r.out, "init: uniform:-0.1,0.1\nseed: 42\ndefault: init\nrows: 0\n");
	run_free(&r);

	/* The list. */
	r = CLI("table", "list");
	EXPECT(r, 0);
	expect_has(r.out, "NAME");
	expect_has(r.out, "ads");
	expect_has(r.out, "ftrl");
	run_free(&r);
	r = CLI_JSON("table", "list");
	EXPECT(r, 0);
	v = json_out(&r);
	cr_assert_eq(jget(v, "tables")->n, 4);
	cr_assert_str_eq(jstr(v, "tables.0.name"), "ads");
	cr_assert_eq(jnum(v, "tables.1.dim"), 3);
	cr_assert_str_eq(jstr(v, "tables.2.optimizer"), "adagrad");
	cr_assert_eq(jnum(v, "tables.3.id"), 4);
	run_free(&r);
}

Test(cli, table_errors_from_the_server, .init = srv_up, .fini = srv_down)
{
	cli_ok(ARGS("table", "create", "ads", "4"));
	cli_run r = CLI("table", "create", "ads", "4");
	EXPECT(r, 1);
	expect_has(r.err, "(error) EXISTS: ");
	cr_assert_eq(strlen(r.out), 0);
	run_free(&r);

	r = CLI_JSON("table", "create", "ads", "4");
	expect_json_error(&r, 1, "EXISTS");
	run_free(&r);

	r = CLI_JSON("table", "create", "zero", "0");
	expect_json_error(&r, 1, "INVALID");
	run_free(&r);

	r = CLI_JSON("table", "create", "neg", "4", "lr=-1");
	expect_json_error(&r, 1, "INVALID");
	expect_has(r.err, "lr");
	run_free(&r);

	r = CLI_JSON("table", "create", "bad name", "4");
	expect_json_error(&r, 1, "INVALID");
	run_free(&r);

	r = CLI_JSON("table", "describe", "nope");
	expect_json_error(&r, 1, "NO_TABLE");
	run_free(&r);

	r = CLI("table", "describe", "99");
	EXPECT(r, 1);
	expect_has(r.err, "(error) NO_TABLE: no table named '99' and no table with id 99");
	run_free(&r);

	r = CLI_JSON("table", "drop", "nope");
	expect_json_error(&r, 1, "NO_TABLE");
	run_free(&r);

	/* A message with quotes and backslashes stays valid JSON. */
	r = CLI_JSON("table", "describe", "we\"ird\\name\t");
	EXPECT(r, 1);
	jv *v = json_out(&r);
	cr_assert_eq(jbool(v, "ok"), false);
	run_free(&r);
}

Test(cli, table_drop, .init = srv_up, .fini = srv_down)
{
	cli_ok(ARGS("table", "create", "a", "4"));
	cli_ok(ARGS("table", "create", "b", "4"));
	cli_ok(ARGS("table", "create", "c", "4"));
	cli_run r = CLI("table", "drop", "a");
	EXPECT(r, 0);
	expect_has(r.out, "dropped table a (id 1)");
	run_free(&r);

	r = CLI_JSON("table", "drop", "2");
	EXPECT(r, 0);
	jv *v = json_out(&r);
	cr_assert_str_eq(jstr(v, "name"), "b");
	cr_assert_eq(jnum(v, "id"), 2);
	run_free(&r);

	r = CLI_JSON("table", "list");
	EXPECT(r, 0);
	v = json_out(&r);
	cr_assert_eq(jget(v, "tables")->n, 1);
	cr_assert_str_eq(jstr(v, "tables.0.name"), "c");
	run_free(&r);

	r = CLI("table", "describe", "a");
	EXPECT(r, 1);
	expect_has(r.err, "(error) NO_TABLE");
	run_free(&r);

	cli_ok(ARGS("table", "drop", "c"));
	r = CLI("table", "list");
	EXPECT(r, 0);
	cr_assert_str_eq(r.out, "(no tables)\n");
	run_free(&r);
}

Test(cli, lookup_prints_vectors_and_found, .init = srv_up, .fini = srv_down)
{
	cli_ok(ARGS("table", "create", "emb", "3", "init=uniform:-1,1", "seed=9", "default=init"));
	cli_ok(ARGS("table", "create", "z", "2"));
	emdb_client *c;
	cr_assert_eq(emdb_client_connect(srv.tcp_uri, NULL, &c), 0);
	uint32_t t;
	cr_assert_eq(emdb_client_table_find(c, "emb", &t), 0);
	uint64_t held[2] = { 7, 18446744073709551615ull };
	float pulled[6];
	cr_assert_eq(emdb_client_pull(c, t, held, 2, 3, pulled), 0);
	uint64_t ids[3] = { 7, 8, 18446744073709551615ull };
	float want[9];
	uint8_t found[3];
	cr_assert_eq(emdb_client_lookup(c, t, ids, 3, 3, want, found), 0);
	emdb_client_close(c);
	cr_assert(found[0] && !found[1] && found[2]);

	cli_run r = CLI_JSON("lookup", "emb", "7", "0x8", "18446744073709551615");
	EXPECT(r, 0);
	jv *v = json_out(&r);
	cr_assert_str_eq(jstr(v, "table"), "emb");
	cr_assert_eq(jnum(v, "dim"), 3);
	cr_assert_eq(jget(v, "rows")->n, 3);
	cr_assert_eq(jnum(v, "rows.0.id"), 7);
	cr_assert_eq(jbool(v, "rows.0.found"), true);
	cr_assert_eq(jbool(v, "rows.1.found"), false);
	cr_assert_eq(jbool(v, "rows.2.found"), true);
	for (int i = 0; i < 3; i++) {
		const jv *vec = jget(v, i == 0 ? "rows.0.vector" : i == 1 ? "rows.1.vector" : "rows.2.vector");
		cr_assert_eq(vec->n, 3);
		for (int j = 0; j < 3; j++) {
			cr_assert_eq(vec->items[j]->t, J_NUM);
			/* Printed exactly: the float reads back bit for bit. */
			cr_assert_eq((float)vec->items[j]->num, want[i * 3 + j], "row %d col %d: %.9g vs %.9g",
				     i, j, vec->items[j]->num, (double)want[i * 3 + j]);
		}
	}
	cr_assert_neq(want[3], 0.0f, "default=init gives the initial value to a missing ID");
	run_free(&r);

	r = CLI("lookup", "emb", "7", "8");
	EXPECT(r, 0);
	expect_has(r.out, "7: found [");
	expect_has(r.out, "8: not found (default) [");
	run_free(&r);

	r = CLI("lookup", "z", "1");
	EXPECT(r, 0);
	cr_assert_str_eq(r.out, "1: not found (default) [0, 0]\n");
	run_free(&r);

	/* Lookup never inserts. */
	r = CLI_JSON("table", "describe", "z");
	EXPECT(r, 0);
	cr_assert_eq(jnum(json_out(&r), "stats.rows"), 0);
	run_free(&r);

	r = CLI_JSON("lookup", "nope", "1");
	expect_json_error(&r, 1, "NO_TABLE");
	run_free(&r);
}

/* ---- roles and tokens ----------------------------------------------------- */

Test(cli, roles_and_tokens, .init = srv_up_auth, .fini = srv_down)
{
	/* No token: the server requires one. */
	cli_run r = CLI("ping");
	EXPECT(r, 1);
	expect_has(r.err, "(error) AUTH: ");
	run_free(&r);

	r = CLI("--token", "wrong", "ping");
	EXPECT(r, 1);
	expect_has(r.err, "(error) AUTH: ");
	run_free(&r);

	/* A reader may look but not create; the CLI names the role needed. */
	r = CLI("--token", "r34d", "ping");
	EXPECT(r, 0);
	run_free(&r);
	r = CLI("--token", "r34d", "table", "create", "t", "4");
	EXPECT(r, 1);
	expect_has(r.err, "(error) AUTH: 'table create' needs the admin role; this connection has the reader role");
	run_free(&r);
	r = CLI_JSON("--token=r34d", "config", "get", "*");
	expect_json_error(&r, 1, "AUTH");
	run_free(&r);

	/* The admin token, by flag, in the URI, and from the environment. */
	r = CLI("--token", "adm1n", "table", "create", "t", "4");
	EXPECT(r, 0);
	run_free(&r);
	char uri[300];
	snprintf(uri, sizeof(uri), "%s?token=adm1n", srv.tcp_uri);
	r = run_cli_env(NULL, NULL, ARGS("-u", uri, "config", "get", "admin_token"));
	EXPECT(r, 0);
	cr_assert_str_eq(r.out, "admin_token: <hidden>\n");
	run_free(&r);
	r = run_cli_env(NULL, ARGS("EMDB_CLI_TOKEN=adm1n"), ARGS("-u", srv.tcp_uri, "table", "drop", "t"));
	EXPECT(r, 0);
	run_free(&r);
}

/* ---- mem:// ----------------------------------------------------------------- */

Test(cli, mem_uri_needs_no_server)
{
	cli_run r = run_cli_env(NULL, NULL, ARGS("-u", "mem://", "table", "create", "m", "2"));
	EXPECT(r, 0);
	run_free(&r);
	r = run_cli_env(NULL, NULL, ARGS("-u", "mem://", "--json", "shutdown"));
	expect_json_error(&r, 1, "UNSUPPORTED");
	run_free(&r);
	r = run_cli_env("table create m 2\ntable list\nlookup m 5\n", NULL, ARGS("-u", "mem://"));
	EXPECT(r, 0);
	expect_has(r.out, "5: not found (default) [0, 0]");
	run_free(&r);
}

/* ---- piped stdin ------------------------------------------------------------ */

Test(cli, piped_commands, .init = srv_up, .fini = srv_down)
{
	cli_run r = run_cli_env("ping\n"
				"# a comment, then a blank line\n"
				"\n"
				"table create p 2 init=uniform:-1,1\n"
				"  TABLE   LIST  \n"
				"config set log_level \"warn\"\n"
				"config get log_level\n"
				"lookup p 1 2\n",
				NULL, ARGS("-u", srv.tcp_uri));
	EXPECT(r, 0);
	expect_has(r.out, "PONG");
	expect_has(r.out, "created table p (id 1)\n");
	expect_has(r.out, "OPTIMIZER");
	expect_has(r.out, "log_level: warn\n");
	expect_has(r.out, "1: not found (default) [0, 0]\n");
	cr_assert_eq(strlen(r.err), 0, "%s", r.err);
	run_free(&r);

	/* Every line runs; the status is the worst; quit stops; the last
	 * line needs no newline. */
	r = run_cli_env("lookup nope 1\nping\nquit\nping", NULL, ARGS("-u", srv.tcp_uri));
	EXPECT(r, 1);
	expect_has(r.err, "(error) NO_TABLE: ");
	cr_assert_eq(strstr(r.out, "PONG") - r.out, 0);
	cr_assert_null(strstr(strstr(r.out, "PONG") + 4, "PONG"), "quit did not stop: %s", r.out);
	run_free(&r);

	r = run_cli_env("frob\nlookup nope 1\nping\n", NULL, ARGS("-u", srv.tcp_uri));
	EXPECT(r, 2);
	run_free(&r);

	r = run_cli_env("config set log_level \"unterminated\n", NULL, ARGS("-u", srv.tcp_uri));
	EXPECT(r, 2);
	expect_has(r.err, "(error) USAGE: unterminated quote");
	run_free(&r);

	r = run_cli_env("ping\ntable create j 2\nlookup j 3\nlookup nope 3\nfrob\n", NULL,
			ARGS("-u", srv.tcp_uri, "--json"));
	EXPECT(r, 2);
	/* One object per command, one per line. */
	const char *lines[5];
	int n = 0;
	for (const char *p = r.out; *p && n < 5; n++) {
		lines[n] = p;
		p = strchr(p, '\n');
		cr_assert_not_null(p);
		json_line(lines[n], (size_t)(p - lines[n]));
		p++;
	}
	cr_assert_eq(n, 5, "%s", r.out);
	cr_assert_null(strchr(strchr(lines[4], '\n') + 1, '\n'));
	jv *v = json_line(lines[2], (size_t)(strchr(lines[2], '\n') - lines[2]));
	cr_assert_eq(jnum(v, "rows.0.id"), 3);
	v = json_line(lines[3], (size_t)(strchr(lines[3], '\n') - lines[3]));
	cr_assert_str_eq(jstr(v, "error"), "NO_TABLE");
	v = json_line(lines[4], (size_t)(strchr(lines[4], '\n') - lines[4]));
	cr_assert_str_eq(jstr(v, "error"), "USAGE");
	run_free(&r);
}

/* ---- checkpoints ------------------------------------------------------------ */

/* Run (text mode), expect exit status `code` and "(error) NAME: " on
 * stderr, free. */
static void cli_fails(const char *const *args, int code, const char *name)
{
	char want[64];
	cli_run r = run_srv(false, args);
	EXPECT(r, code);
	snprintf(want, sizeof(want), "(error) %s: ", name);
	expect_has(r.err, want);
	run_free(&r);
}

/* A server with a store in a fresh directory of its own.  The directory
 * is removed by srv_down_persist (.fini, which runs after a failed
 * assertion too) and, should the start itself fail, at exit. */
static char data_dir[64];

static void data_dir_remove(void)
{
	tmpdir_remove(data_dir);
	data_dir[0] = 0;
}

static void srv_up_persist(void)
{
	strcpy(data_dir, "/tmp/emdb-cli-ckpt-XXXXXX");
	cr_assert_not_null(mkdtemp(data_dir), "mkdtemp: %s", strerror(errno));
	atexit(data_dir_remove);
	const char *const flags[] = { "--data-dir", data_dir, NULL };
	test_server_start(&srv, flags);
}

static void srv_down_persist(void)
{
	test_server_stop(&srv);
	data_dir_remove();
}

/* Insert the rows first..first+n-1 of table `name` (a Prefetch inserts). */
static void insert_rows(const char *name, uint64_t first, size_t n)
{
	emdb_client *c;
	cr_assert_eq(emdb_client_connect(srv.tcp_uri, NULL, &c), 0, "%s", emdb_client_last_error());
	uint32_t t;
	cr_assert_eq(emdb_client_table_find(c, name, &t), 0);
	uint64_t *ids = emdb_malloc(n * sizeof(*ids));
	cr_assert_not_null(ids);
	for (size_t i = 0; i < n; i++)
		ids[i] = first + i;
	emdb_client_ticket *tk = NULL;
	int rc = emdb_client_prefetch(c, t, ids, n, &tk);
	cr_assert_eq(rc, 0, "prefetch: %s", emdb_client_last_error());
	emdb_client_ticket_free(tk);
	emdb_free(ids);
	emdb_client_close(c);
}

/* Run `job N` until the job is no longer running; its last JSON. */
static jv *job_until_done(const char *n)
{
	for (int tries = 0; tries < 600; tries++) {
		cli_run r = CLI_JSON("job", n);
		EXPECT(r, 0);
		jv *v = json_out(&r);
		run_free(&r);
		if (strcmp(jstr(v, "state"), "running"))
			return v;
		test_sleep_ms(50);
	}
	cr_assert_fail("job %s still running after 30 s", n);
	return NULL;
}

Test(cli, checkpoint_list_restore_job_delete, .init = srv_up_persist, .fini = srv_down_persist)
{
	cli_ok(ARGS("table", "create", "ads", "8", "init=uniform:-1,1", "seed=3"));
	cli_ok(ARGS("table", "create", "ctr", "4"));
	insert_rows("ads", 1, 1000);
	insert_rows("ctr", 1, 200);

	/* Nothing yet: an empty list, and an incremental has no parent. */
	cli_run r = CLI("checkpoint", "list");
	EXPECT(r, 0);
	cr_assert_str_eq(r.out, "(no checkpoints)\n");
	run_free(&r);
	cli_fails(ARGS("checkpoint", "incremental"), 1, "INVALID");

	/* A full checkpoint (the default kind); no bar on a stderr that is
	 * not a terminal. */
	r = CLI("checkpoint");
	EXPECT(r, 0);
	expect_has(r.out, "checkpoint 1 (full): 2 tables, 1200 rows, ");
	expect_has(r.out, " MB/s; Updates paused ");
	cr_assert_str_eq(r.err, "", "stderr: %s", r.err);
	run_free(&r);

	/* 50 new rows, then an incremental of them alone. */
	insert_rows("ads", 5001, 50);
	r = CLI_JSON("checkpoint", "incremental");
	EXPECT(r, 0);
	jv *v = json_out(&r);
	cr_assert(jbool(v, "ok"));
	cr_assert_eq(jnum(v, "checkpoint.id"), 2);
	cr_assert_str_eq(jstr(v, "checkpoint.kind"), "incremental");
	cr_assert_eq(jnum(v, "checkpoint.parent"), 1);
	cr_assert_eq(jnum(v, "checkpoint.base"), 1);
	cr_assert_eq(jnum(v, "checkpoint.tables"), 2);
	cr_assert_eq(jnum(v, "checkpoint.rows"), 50);
	cr_assert_eq(jnum(v, "checkpoint.rows_total"), 1250);
	cr_assert_gt(jnum(v, "checkpoint.bytes"), 0);
	cr_assert_geq(jnum(v, "seconds"), 0);
	cr_assert_geq(jnum(v, "switch_ms"), 0);
	jget(v, "mb_per_s");
	double job_incr = jnum(v, "job");
	run_free(&r);

	r = CLI("checkpoint", "list");
	EXPECT(r, 0);
	expect_has(r.out, "ID  KIND");
	expect_has(r.out, "CREATED");
	expect_has(r.out, "MAX_STEP");
	cr_assert_not_null(strstr(r.out, "     1  full         "), "%s", r.out);
	cr_assert_not_null(strstr(r.out, "     2  incremental       1  "), "%s", r.out);
	run_free(&r);
	r = CLI_JSON("checkpoint", "list");
	EXPECT(r, 0);
	v = json_out(&r);
	cr_assert_eq(jget(v, "checkpoints")->n, 2);
	cr_assert_eq(jnum(v, "checkpoints.0.id"), 1);
	cr_assert_str_eq(jstr(v, "checkpoints.0.kind"), "full");
	cr_assert_eq(jnum(v, "checkpoints.0.rows"), 1200);
	cr_assert_eq(jnum(v, "checkpoints.1.parent"), 1);
	cr_assert_gt(jnum(v, "checkpoints.1.created_ms"), 1.6e12, "Unix milliseconds");
	run_free(&r);

	/* Changes after the checkpoint, which restore latest undoes. */
	insert_rows("ads", 9001, 7);
	cli_ok(ARGS("table", "create", "scratch", "2"));
	r = CLI("restore", "latest");
	EXPECT(r, 0);
	expect_has(r.out, "restored checkpoint 2 (incremental, chain from 1): 2 tables, 1250 rows");
	run_free(&r);
	r = CLI_JSON("table", "list");
	EXPECT(r, 0);
	v = json_out(&r);
	cr_assert_eq(jget(v, "tables")->n, 2, "scratch is gone: %s", r.out);
	cr_assert_str_eq(jstr(v, "tables.0.name"), "ads");
	cr_assert_eq(jnum(v, "tables.0.rows"), 1050);
	cr_assert_eq(jnum(v, "tables.1.rows"), 200);
	run_free(&r);

	/* Back to the full one, by id. */
	r = CLI_JSON("restore", "1");
	EXPECT(r, 0);
	v = json_out(&r);
	cr_assert_eq(jnum(v, "restored.id"), 1);
	cr_assert_str_eq(jstr(v, "restored.kind"), "full");
	cr_assert_eq(jnum(v, "restored.tables"), 2);
	cr_assert_eq(jnum(v, "restored.rows_total"), 1200);
	double job_restore = jnum(v, "job");
	cr_assert_gt(job_restore, job_incr);
	run_free(&r);

	/* job: the newest by default, or one by number. */
	r = CLI("job");
	EXPECT(r, 0);
	expect_has(r.out, "kind: restore\nstate: done\nphase: done\n");
	expect_has(r.out, "result: checkpoint 1 (full), 2 tables, 1200 rows");
	run_free(&r);
	char num[32];
	snprintf(num, sizeof(num), "%.0f", job_incr);
	r = CLI_JSON("job", num);
	EXPECT(r, 0);
	v = json_out(&r);
	cr_assert_eq(jnum(v, "job"), job_incr);
	cr_assert_str_eq(jstr(v, "kind"), "checkpoint_incremental");
	cr_assert_str_eq(jstr(v, "state"), "done");
	cr_assert_str_eq(jstr(v, "progress.phase"), "done");
	cr_assert_eq(jnum(v, "result.id"), 2);
	cr_assert_eq(jnum(v, "result.rows"), 50);
	run_free(&r);
	r = CLI_JSON("job", "999");
	expect_json_error(&r, 1, "INVALID");
	run_free(&r);

	/* --no-wait: the job's number at once, then `job N` follows it. */
	r = CLI("checkpoint", "full", "--no-wait");
	EXPECT(r, 0);
	unsigned long long nw = 0;
	cr_assert_eq(sscanf(r.out, "started job %llu (checkpoint_full)", &nw), 1, "%s", r.out);
	run_free(&r);
	snprintf(num, sizeof(num), "%llu", nw);
	v = job_until_done(num);
	cr_assert_str_eq(jstr(v, "state"), "done");
	cr_assert_eq(jnum(v, "result.id"), 3);
	cr_assert_eq(jnum(v, "result.rows"), 1200);

	/* Deleting: the full one is needed by its incremental. */
	cli_fails(ARGS("checkpoint", "delete", "1"), 1, "BUSY");
	r = CLI("checkpoint", "delete", "2");
	EXPECT(r, 0);
	cr_assert_str_eq(r.out, "deleted checkpoint 2\n");
	run_free(&r);
	r = CLI_JSON("checkpoint", "delete", "1");
	EXPECT(r, 0);
	cr_assert_eq(jnum(json_out(&r), "id"), 1);
	run_free(&r);
	r = CLI_JSON("checkpoint", "delete", "1");
	expect_json_error(&r, 1, "INVALID");
	run_free(&r);
	r = CLI_JSON("checkpoint", "list");
	EXPECT(r, 0);
	v = json_out(&r);
	cr_assert_eq(jget(v, "checkpoints")->n, 1);
	cr_assert_eq(jnum(v, "checkpoints.0.id"), 3);
	run_free(&r);
	cli_fails(ARGS("restore", "2"), 1, "INVALID");

	/* restore --no-wait. */
	r = CLI_JSON("restore", "latest", "--no-wait");
	EXPECT(r, 0);
	v = json_out(&r);
	cr_assert_str_eq(jstr(v, "kind"), "restore");
	snprintf(num, sizeof(num), "%.0f", jnum(v, "job"));
	run_free(&r);
	v = job_until_done(num);
	cr_assert_str_eq(jstr(v, "state"), "done");
	cr_assert_eq(jnum(v, "result.id"), 3);
}

Test(cli, checkpoint_usage_errors, .init = srv_up_persist, .fini = srv_down_persist)
{
	const char *const *bad[] = {
		ARGS("checkpoint", "frob"),
		ARGS("checkpoint", "full", "incremental"),
		ARGS("checkpoint", "--no-wait", "--no-wait"),
		ARGS("checkpoint", "full", "--no-wait", "x"),
		ARGS("checkpoint", "delete"),
		ARGS("checkpoint", "delete", "x"),
		ARGS("checkpoint", "delete", "0"),
		ARGS("restore"),
		ARGS("restore", "--no-wait"),
		ARGS("restore", "newest"),
		ARGS("restore", "1", "2"),
		ARGS("job", "first"),
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cli_fails(bad[i], 2, "USAGE");
	cli_run r = CLI("checkpoint", "frob");
	expect_has(r.err, "unexpected 'frob'");
	run_free(&r);

	/* A fresh server has run no job. */
	r = CLI("job");
	EXPECT(r, 0);
	cr_assert_str_eq(r.out, "(no job has run on this server)\n");
	run_free(&r);
	r = CLI_JSON("job");
	EXPECT(r, 0);
	cr_assert_str_eq(jstr(json_out(&r), "state"), "idle");
	run_free(&r);

	r = CLI("help", "checkpoint");
	EXPECT(r, 0);
	expect_has(r.out, "checkpoint [full|incremental] [--no-wait]");
	expect_has(r.out, "checkpoint list\n");
	expect_has(r.out, "checkpoint delete ID");
	run_free(&r);
}

Test(cli, checkpoint_without_a_data_dir, .init = srv_up, .fini = srv_down)
{
	cli_run r = CLI("checkpoint");
	EXPECT(r, 1);
	expect_has(r.err, "(error) UNSUPPORTED: ");
	cr_assert_str_eq(r.out, "");
	run_free(&r);
	r = CLI_JSON("checkpoint", "incremental", "--no-wait");
	expect_json_error(&r, 1, "UNSUPPORTED");
	run_free(&r);
	r = CLI_JSON("checkpoint", "list");
	expect_json_error(&r, 1, "UNSUPPORTED");
	run_free(&r);
	cli_fails(ARGS("restore", "latest"), 1, "UNSUPPORTED");
	cli_fails(ARGS("checkpoint", "delete", "1"), 1, "UNSUPPORTED");

	/* Over mem:// there is no store either. */
	r = run_cli_env(NULL, NULL, ARGS("-u", "mem://", "checkpoint"));
	EXPECT(r, 1);
	expect_has(r.err, "(error) UNSUPPORTED: ");
	run_free(&r);
}
