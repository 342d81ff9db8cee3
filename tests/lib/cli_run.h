/*
 * tests/lib/cli_run.h - what the emdb-cli tests share: a server of this build
 * per test (srv, started in .init and stopped in .fini), emdb-cli run as
 * a child process with its output captured (run_cli_env, CLI, CLI_JSON,
 * EXPECT), and a small strict JSON parser to read --json output back.
 *
 * emdb-cli runs with its stdout and stderr captured; a run that takes
 * longer than 30 s is killed and fails the test.  Include it once per
 * test file, after defining _GNU_SOURCE (tests/lib/tmpdir.h uses nftw).
 */
#ifndef EMDB_TESTS_CLI_RUN_H
#define EMDB_TESTS_CLI_RUN_H

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

#include "tests/lib/client_server.h"
#include "tests/lib/tmpdir.h"

static test_server srv;

static inline void srv_up(void)
{
	test_server_start(&srv, NULL);
}

static inline void srv_up_auth(void)
{
	static const char *const flags[] = { "--admin-token", "adm1n", "--reader-token", "r34d",
					     NULL };
	test_server_start(&srv, flags);
}

static inline void srv_down(void)
{
	test_server_stop(&srv);
}

/* ---- running emdb-cli ------------------------------------------------- */

typedef struct cli_run {
	int code;  /* exit status; 128 + signal when killed */
	char *out; /* stdout, NUL-terminated; freed by run_free */
	char *err; /* stderr */
} cli_run;

static inline void run_free(cli_run *r)
{
	free(r->out);
	free(r->err);
	r->out = r->err = NULL;
}

static inline void append(char **buf, size_t *len, const char *p, size_t n)
{
	*buf = realloc(*buf, *len + n + 1);
	cr_assert_not_null(*buf);
	memcpy(*buf + *len, p, n);
	*len += n;
	(*buf)[*len] = 0;
}

/* A program of this build started with pipes on its stdin, stdout and
 * stderr; it dies with the test (PR_SET_PDEATHSIG). */
typedef struct prog_proc {
	pid_t pid;
	int in, out, err; /* our ends; -1 once closed */
	cli_run r;        /* what it wrote so far; r.code once it ended */
	size_t olen, elen;
} prog_proc;

/* Start bin with args (NULL-terminated) and the extra environment
 * assignments env (NULL-terminated, may be NULL). */
static inline void prog_start(prog_proc *p, const char *bin, const char *const *env, const char *const *args)
{
	const char *argv[64] = { bin };
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
	memset(p, 0, sizeof(*p));
	p->pid = fork();
	cr_assert_geq(p->pid, 0);
	if (p->pid == 0) {
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
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	close(err[1]);
	p->in = in[1];
	p->out = out[0];
	p->err = err[0];
	append(&p->r.out, &p->olen, "", 0);
	append(&p->r.err, &p->elen, "", 0);
}

/* Read what it wrote, waiting up to ms: 1 once both pipes closed, 0
 * after some output (or a signal), -1 when nothing came for ms. */
static inline int prog_read(prog_proc *p, int ms)
{
	struct pollfd f[2] = { { .fd = p->out, .events = POLLIN }, { .fd = p->err, .events = POLLIN } };
	int k = poll(f, 2, ms);
	cr_assert(k >= 0 || errno == EINTR, "poll: %s", strerror(errno));
	for (int i = 0; k > 0 && i < 2; i++) {
		if (f[i].fd < 0 || !(f[i].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		char buf[4096];
		ssize_t n = read(f[i].fd, buf, sizeof(buf));
		if (n <= 0) {
			close(f[i].fd);
			*(i ? &p->err : &p->out) = -1;
		} else if (i == 0) {
			append(&p->r.out, &p->olen, buf, (size_t)n);
		} else {
			append(&p->r.err, &p->elen, buf, (size_t)n);
		}
	}
	if (p->out < 0 && p->err < 0)
		return 1;
	return k == 0 ? -1 : 0;
}

/* Read until it closes its output, failing the test (after a SIGKILL) once
 * it was silent for limit_ms in all, and reap it: r.code is its exit
 * status, 128 + signal. */
static inline void prog_wait(prog_proc *p, const char *what, long limit_ms)
{
	for (long waited = 0;;) {
		int rc = prog_read(p, 100);
		if (rc == 1)
			break;
		if (rc < 0 && (waited += 100) > limit_ms) {
			kill(p->pid, SIGKILL);
			waitpid(p->pid, NULL, 0);
			p->pid = 0;
			cr_assert_fail("%s ran over %ld ms; stdout:\n%s\nstderr:\n%s", what, limit_ms, p->r.out,
				       p->r.err);
		}
	}
	int st;
	while (waitpid(p->pid, &st, 0) < 0 && errno == EINTR)
		;
	p->pid = 0;
	p->r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Run emdb-cli with args (NULL-terminated), `input` on its stdin (NULL:
 * /dev/null) and the extra environment assignments env (NULL-terminated,
 * may be NULL). */
static inline cli_run run_cli_env(const char *input, const char *const *env, const char *const *args)
{
	prog_proc p;
	prog_start(&p, EMDB_CLI_BIN, env, args);
	if (input) {
		size_t len = strlen(input), off = 0;
		cr_assert_lt(len, 60000, "input larger than a pipe buffer");
		while (off < len) {
			ssize_t w = write(p.in, input + off, len - off);
			cr_assert_gt(w, 0);
			off += (size_t)w;
		}
	}
	close(p.in);
	prog_wait(&p, "emdb-cli", 30000);
	cr_assert_null(strstr(p.r.err, "Sanitizer"), "emdb-cli: %s", p.r.err);
	return p.r;
}

#define ARGS(...) ((const char *const[]){ __VA_ARGS__, NULL })
/* emdb-cli -u <the test server> ARGS... */
#define CLI(...) run_srv(false, ARGS(__VA_ARGS__))
#define CLI_JSON(...) run_srv(true, ARGS(__VA_ARGS__))

#define EXPECT(r, want_code, ...)                                                                 \
	cr_assert_eq((r).code, (want_code), "exit %d, expected %d; stdout:\n%s\nstderr:\n%s",     \
		     (r).code, (want_code), (r).out, (r).err)

static inline void expect_has(const char *text, const char *needle)
{
	cr_assert_not_null(strstr(text, needle), "expected \"%s\" in:\n%s", needle, text);
}

/* emdb-cli -u <the test server> [--json] args... */
static inline cli_run run_srv(bool json, const char *const *args)
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
static inline void cli_ok(const char *const *args)
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

static inline void *jalloc(size_t n)
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

static inline void ws(jp *j)
{
	while (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')
		j->p++;
}

static inline jv *jvalue(jp *j);

static inline char *jstring(jp *j)
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

static inline jv *jnumber(jp *j)
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

static inline jv *jcontainer(jp *j, bool obj)
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

static inline jv *jvalue(jp *j)
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
static inline jv *json_line(const char *line, size_t len)
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
static inline jv *json_out(const cli_run *r)
{
	size_t len = strlen(r->out);
	cr_assert(len > 0 && r->out[len - 1] == '\n' && !memchr(r->out, '\n', len - 1),
		  "expected one line of JSON, got:\n%s", r->out);
	return json_line(r->out, len - 1);
}

/* The member at a path of keys and array indexes: "optimizer.lr",
 * "tables.0.name".  Fails the test when it is missing. */
static inline const jv *jget(const jv *v, const char *path)
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

static inline const char *jstr(const jv *v, const char *path)
{
	const jv *x = jget(v, path);
	cr_assert_eq(x->t, J_STR, "'%s' is not a string", path);
	return x->str;
}

static inline double jnum(const jv *v, const char *path)
{
	const jv *x = jget(v, path);
	cr_assert_eq(x->t, J_NUM, "'%s' is not a number", path);
	return x->num;
}

static inline bool jbool(const jv *v, const char *path)
{
	const jv *x = jget(v, path);
	cr_assert_eq(x->t, J_BOOL, "'%s' is not a boolean", path);
	return x->b;
}

/* A failed --json run: exit code, one error object, and the same error
 * on stderr. */
static inline void expect_json_error(const cli_run *r, int code, const char *name)
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

/* Run (text mode), expect exit status `code` and "(error) NAME: " on
 * stderr, free. */
static inline void cli_fails(const char *const *args, int code, const char *name)
{
	char want[64];
	cli_run r = run_srv(false, args);
	EXPECT(r, code);
	snprintf(want, sizeof(want), "(error) %s: ", name);
	expect_has(r.err, want);
	run_free(&r);
}

#endif
