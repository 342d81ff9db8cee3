/*
 * out.c - the JSON writer and number formatting of emdb-cli (out.h).
 *
 * Invariants:
 *   1. Every byte written inside a JSON string has passed through
 *      json_put_string: quote, backslash and control characters escaped,
 *      invalid UTF-8 replaced by U+FFFD.  So whatever a server's message,
 *      INFO text or config value holds, the line is valid JSON.
 *   2. w->more[d] is true once the container at depth d has a member, and
 *      a member is preceded by a comma exactly when it is.
 *   3. Numbers round-trip: out_double/out_float try increasing precision
 *      until the text reads back as the same value; non-finite values,
 *      which JSON cannot hold, are written as null.
 *
 * State changes: only the jw passed in, and the stream.
 */
#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli/out.h"

/* The text is built in a local buffer: gcc's -fsanitize=undefined makes
 * -Wformat-truncation suspect a caller's buffer of being NULL. */
void out_double(char *buf, size_t cap, double v)
{
	char tmp[40];
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(tmp, sizeof(tmp), "%.*g", prec, v);
		if (strtod(tmp, NULL) == v)
			break;
	}
	if (cap > 0) {
		size_t n = strnlen(tmp, cap - 1);
		memcpy(buf, tmp, n);
		buf[n] = 0;
	}
}

void out_float(char *buf, size_t cap, float v)
{
	char tmp[40];
	for (int prec = 1; prec <= 9; prec++) {
		snprintf(tmp, sizeof(tmp), "%.*g", prec, (double)v);
		if (strtof(tmp, NULL) == v)
			break;
	}
	if (cap > 0) {
		size_t n = strnlen(tmp, cap - 1);
		memcpy(buf, tmp, n);
		buf[n] = 0;
	}
}

/* Length of the valid UTF-8 sequence at s (at most n bytes), or 0 when the
 * bytes there are not one: overlong forms, surrogates and code points past
 * U+10FFFF are invalid too. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	size_t len;
	uint32_t cp;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

void json_put_string(FILE *f, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	putc('"', f);
	for (size_t i = 0; i < n;) {
		unsigned c = p[i];
		if (c == '"' || c == '\\') {
			putc('\\', f);
			putc((int)c, f);
			i++;
		} else if (c == '\n') {
			fputs("\\n", f);
			i++;
		} else if (c == '\t') {
			fputs("\\t", f);
			i++;
		} else if (c == '\r') {
			fputs("\\r", f);
			i++;
		} else if (c < 0x20 || c == 0x7f) {
			fprintf(f, "\\u%04x", c);
			i++;
		} else {
			size_t len = utf8_len(p + i, n - i);
			if (len == 0) {
				fputs("\\ufffd", f);
				i++;
			} else {
				fwrite(p + i, 1, len, f);
				i += len;
			}
		}
	}
	putc('"', f);
}

/* The comma and key that precede every member (invariant 2). */
static void member(jw *w, const char *key)
{
	assert(w->depth > 0 && w->depth <= JW_DEPTH);
	if (w->more[w->depth - 1])
		putc(',', w->f);
	w->more[w->depth - 1] = true;
	if (key) {
		json_put_string(w->f, key, strlen(key));
		putc(':', w->f);
	}
}

static void push(jw *w, char open)
{
	assert(w->depth < JW_DEPTH);
	putc(open, w->f);
	w->more[w->depth++] = false;
}

void jw_open(jw *w, FILE *f)
{
	w->f = f;
	w->depth = 0;
	push(w, '{');
}

void jw_close(jw *w)
{
	assert(w->depth == 1);
	w->depth = 0;
	fputs("}\n", w->f);
	fflush(w->f);
}

void jw_obj(jw *w, const char *key)
{
	member(w, key);
	push(w, '{');
}

void jw_obj_end(jw *w)
{
	assert(w->depth > 1);
	w->depth--;
	putc('}', w->f);
}

void jw_arr(jw *w, const char *key)
{
	member(w, key);
	push(w, '[');
}

void jw_arr_end(jw *w)
{
	assert(w->depth > 1);
	w->depth--;
	putc(']', w->f);
}

void jw_strn(jw *w, const char *key, const char *v, size_t n)
{
	member(w, key);
	json_put_string(w->f, v, n);
}

void jw_str(jw *w, const char *key, const char *v)
{
	jw_strn(w, key, v ? v : "", v ? strlen(v) : 0);
}

void jw_u64(jw *w, const char *key, uint64_t v)
{
	member(w, key);
	fprintf(w->f, "%" PRIu64, v);
}

void jw_double(jw *w, const char *key, double v)
{
	char buf[40];
	member(w, key);
	if (!isfinite(v)) {
		fputs("null", w->f);
		return;
	}
	out_double(buf, sizeof(buf), v);
	fputs(buf, w->f);
}

void jw_float(jw *w, const char *key, float v)
{
	char buf[40];
	member(w, key);
	if (!isfinite(v)) {
		fputs("null", w->f);
		return;
	}
	out_float(buf, sizeof(buf), v);
	fputs(buf, w->f);
}

void jw_bool(jw *w, const char *key, bool v)
{
	member(w, key);
	fputs(v ? "true" : "false", w->f);
}
