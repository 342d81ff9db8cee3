/*
 * tests/fuzz/fuzz_text.c - libFuzzer target for emdb's text decoders: the
 * client library's connection URIs (client/uri.h), the server's
 * configuration (net/config.h: one `key value` setting as CONFIG SET and
 * the flags give it, and a whole configuration file), and emdb-cli's
 * input (tools/cli/words.h: the shell's word splitting;
 * tools/cli/tableopt.h: the options of `table create`; tools/cli/infojson.h:
 * INFO's text as JSON).
 *
 * The first byte of an input picks the decoder (modulo the number of
 * decoders) and, for config_set, whether the server is running; the rest
 * is the text.  Besides sanitizer findings, the target aborts when a
 * decoder breaks its contract:
 *   - cl_uri_parse: a success with an empty host (tcp, tls), a path that
 *     is not absolute (unix), TLS files on a URI that is not tls://, or a
 *     field without its NUL;
 *   - config_set: a refusal without a message, a refusal that changed the
 *     configuration (bad input changes nothing), or a success whose key
 *     config_get cannot read back;
 *   - config_load_file: a refusal whose message does not name the file;
 *   - words_split: a refusal that left words, or a word count that
 *     disagrees with the NULL after the last word; words_count (a row
 *     count with k, M or G) that reads a plain number otherwise than
 *     words_u64 does;
 *   - topt_parse: a refusal without a message, or a success that changed
 *     the table's name or dim; topt_alter (table alter's words): a
 *     refusal without a message, or a success that changed the
 *     optimizer's kind or initial_accumulator;
 *   - rowfile_hdr_decode (a row file's header, emdb-cli import): an
 *     accepted header that does not encode back to its bytes;
 *   - info_json (emdb-cli's reading of the server's INFO text): output
 *     that is not well-formed JSON (unbalanced, a raw control character
 *     in a string, invalid UTF-8).
 *
 * Built with clang -fsanitize=fuzzer,address,undefined when EMDB_FUZZ=ON
 * (tests/fuzz/CMakeLists.txt); built with the normal compiler into
 * fuzz_replay_text, which replays tests/fuzz/corpus_text in every test
 * run.
 */
#define _GNU_SOURCE /* memfd_create */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <emdb/alloc.h>
#include <emdb/db.h>

#include "client/uri.h"
#include "net/config.h"
#include "tests/fuzz/fuzz.h"
#include "tools/cli/infojson.h"
#include "tools/cli/rowfile.h"
#include "tools/cli/tableopt.h"
#include "tools/cli/words.h"

enum { D_URI, D_CONFIG_SET, D_CONFIG_FILE, D_WORDS, D_TABLEOPT, D_INFO, D_ROWFILE, N_DECODERS };

static void die(const char *what, const char *text)
{
	fprintf(stderr, "fuzz_text: %s (input \"%s\")\n", what, text);
	abort();
}

static bool terminated(const char *s, size_t cap)
{
	return memchr(s, 0, cap) != NULL;
}

static void uri(const char *s)
{
	cl_uri u;
	if (cl_uri_parse(s, &u) != 0)
		return;
	if (!terminated(u.host, sizeof(u.host)) || !terminated(u.path, sizeof(u.path)) ||
	    !terminated(u.name, sizeof(u.name)))
		die("uri: a field without its NUL", s);
	if ((u.kind == CL_URI_TCP || u.kind == CL_URI_TLS) && !u.host[0])
		die("uri: tcp or tls without a host", s);
	if (u.kind == CL_URI_UNIX && u.path[0] != '/')
		die("uri: unix path not absolute", s);
	if (u.kind != CL_URI_TCP && u.kind != CL_URI_TLS && u.kind != CL_URI_UNIX && u.kind != CL_URI_MEM)
		die("uri: unknown kind", s);
	if (u.kind != CL_URI_TLS && (u.tls_ca || u.tls_cert || u.tls_key))
		die("uri: TLS files on a URI without TLS", s);
	cl_uri_free(&u);
}

/* "key value": the key is the text up to the first blank or newline. */
static void config_one(const char *s, bool running)
{
	char key[256];
	size_t k = strcspn(s, " \t\n");
	if (k >= sizeof(key))
		k = sizeof(key) - 1;
	memcpy(key, s, k);
	key[k] = 0;
	const char *value = s[k] ? s + k + 1 : "";

	net_config before, c;
	config_defaults(&before);
	c = before;
	char err[512] = "";
	if (config_set(&c, key, value, running, err, sizeof(err)) != 0) {
		if (!err[0])
			die("config_set: refused without a message", s);
		if (memcmp(&c, &before, sizeof(c)))
			die("config_set: a refused setting changed the configuration", s);
		return;
	}
	char back[CONFIG_PATH_MAX + 64];
	if (config_get(&c, key, back, sizeof(back)) != 0)
		die("config_set: accepted a key config_get does not know", s);
	config_validate(&c, err, sizeof(err));
}

static void config_file(const char *s, size_t n)
{
	static int fd = -1;
	static char path[64];
	if (fd < 0) {
		fd = memfd_create("emdb-fuzz-config", 0);
		if (fd < 0) {
			perror("memfd_create");
			abort();
		}
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	}
	if (ftruncate(fd, 0) != 0 || pwrite(fd, s, n, 0) != (ssize_t)n) {
		perror("fuzz_text: config file");
		abort();
	}
	net_config c;
	config_defaults(&c);
	char err[1024] = "";
	if (config_load_file(&c, path, err, sizeof(err)) != 0 && strncmp(err, path, strlen(path)))
		die("config_load_file: the message does not name the file", s);
}

static void words(const char *s)
{
	cli_words w;
	const char *err = NULL;
	if (words_split(s, &w, &err) != 0) {
		if (!err || w.n || w.v)
			die("words_split: refused, but words are left or no message", s);
		return;
	}
	for (int i = 0; i < w.n; i++)
		if (!w.v[i])
			die("words_split: a NULL word before the count", s);
	if (w.v[w.n])
		die("words_split: no NULL after the last word", s);
	uint64_t x, y;
	for (int i = 0; i < w.n; i++)
		if (words_u64(w.v[i], &x) && (!words_count(w.v[i], &y) || y != x))
			die("words_count: a plain number read otherwise", s);
	words_free(&w);
}

static void tableopt(const char *s)
{
	cli_words w;
	const char *werr = NULL;
	if (words_split(s, &w, &werr) != 0)
		return;
	emdb_table_config cfg = EMDB_TABLE_CONFIG_INIT;
	snprintf(cfg.name, sizeof(cfg.name), "t");
	cfg.dim = 8;
	char err[512] = "";
	if (topt_parse(w.n, w.v, &cfg, err, sizeof(err)) != 0) {
		if (!err[0])
			die("topt_parse: refused without a message", s);
	} else if (strcmp(cfg.name, "t") || cfg.dim != 8) {
		die("topt_parse: changed the name or dim", s);
	} else {
		char text[128];
		topt_init_text(&cfg.init, text, sizeof(text));
	}
	/* `table alter`'s words, against an Adam table's optimizer. */
	emdb_optimizer o, before;
	emdb_optimizer_defaults(EMDB_OPT_ADAM, &o);
	before = o;
	err[0] = 0;
	if (topt_alter(w.n, w.v, &o, err, sizeof(err)) != 0) {
		if (!err[0])
			die("topt_alter: refused without a message", s);
	} else if (o.kind != before.kind || o.initial_accumulator != before.initial_accumulator) {
		die("topt_alter: changed a value fixed at creation", s);
	}
	words_free(&w);
}

/* A row file's header (export, import): a header it accepts encodes
 * back to the same 64 bytes, and its record size does not overflow. */
static void rowfile(const uint8_t *p, size_t n)
{
	uint8_t in[ROWFILE_HDR] = { 0 }, out[ROWFILE_HDR];
	memcpy(in, p, n < ROWFILE_HDR ? n : ROWFILE_HDR);
	rowfile_hdr h;
	if (rowfile_hdr_decode(in, &h))
		return;
	rowfile_hdr_encode(out, &h);
	if (memcmp(in, out, ROWFILE_HDR) != 0 || rowfile_record(&h) < 8)
		die("rowfile: an accepted header does not encode back", "(binary)");
}

/* Whether s[n] is one JSON object: containers balanced outside strings,
 * no raw control character inside them, and valid UTF-8 throughout. */
static bool json_well_formed(const char *s, size_t n)
{
	int depth = 0;
	bool in_str = false, esc = false;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch >= 0x80) {
			size_t k = ch >= 0xF0 ? 3 : ch >= 0xE0 ? 2 : ch >= 0xC2 ? 1 : 0;
			if (!k || ch > 0xF4 || i + k >= n)
				return false;
			for (size_t j = 1; j <= k; j++)
				if (((unsigned char)s[i + j] & 0xC0) != 0x80)
					return false;
			i += k;
			esc = false;
			continue;
		}
		if (in_str) {
			if (ch < 0x20)
				return false;
			if (esc)
				esc = false;
			else if (ch == '\\')
				esc = true;
			else if (ch == '"')
				in_str = false;
		} else if (ch == '"') {
			in_str = true;
		} else if (ch == '{' || ch == '[') {
			depth++;
		} else if (ch == '}' || ch == ']') {
			if (--depth < 0)
				return false;
		}
	}
	return depth == 0 && !in_str;
}

/* INFO text from a server, as emdb-cli --json info prints it. */
static void info(const char *s)
{
	char *out = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&out, &n);
	if (!f)
		abort();
	jw w;
	jw_open(&w, f);
	jw_obj(&w, "info");
	info_json(&w, s);
	jw_obj_end(&w);
	jw_close(&w);
	fclose(f);
	if (!json_well_formed(out, n))
		die("info_json: the output is not well-formed JSON", s);
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	/* The first byte picks the decoder: modulo 6 for the first six, as
	 * the corpus was made, and 0x70..0x7F (the running bit aside) for
	 * the row file's header, added after them. */
	unsigned which = (data[0] & 0x7f) >= 0x70 ? D_ROWFILE : data[0] % D_ROWFILE;
	bool running = data[0] & 0x80;
	size_t n = size - 1;
	char *s = malloc(n + 1);
	if (!s)
		return 0;
	memcpy(s, data + 1, n);
	s[n] = 0; /* the decoders take C strings: text stops at a NUL */

	switch (which) {
	case D_URI:
		uri(s);
		break;
	case D_CONFIG_SET:
		config_one(s, running);
		break;
	case D_CONFIG_FILE:
		config_file(s, n);
		break;
	case D_WORDS:
		words(s);
		break;
	case D_TABLEOPT:
		tableopt(s);
		break;
	case D_ROWFILE:
		rowfile(data + 1, n);
		break;
	case D_INFO:
		info(s);
		break;
	}
	free(s);
	return 0;
}
