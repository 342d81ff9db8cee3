/*
 * words.c - the command-line tokenizer of emdb-cli (words.h).
 *
 * Invariants:
 *   1. A word's text is never longer than its source, so one buffer the
 *      size of the line holds every word, and at most len/2 + 1 words fit
 *      in a line of len bytes.
 *   2. A quote opens or closes only outside the other kind of quote; an
 *      empty pair of quotes is a word of its own ("" is an empty value
 *      for config set).
 *
 * State changes: none beyond the cli_words it fills.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <emdb/alloc.h>

#include "tools/cli/words.h"

static bool blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* The character a backslash in double quotes stands for. */
static char dq_escape(char c)
{
	switch (c) {
	case 'n':
		return '\n';
	case 't':
		return '\t';
	default:
		return c;
	}
}

int words_split(const char *line, cli_words *w, const char **err)
{
	size_t len = strlen(line);
	memset(w, 0, sizeof(*w));
	w->buf = emdb_malloc(len + 1);
	w->v = emdb_malloc((len / 2 + 2) * sizeof(char *));
	if (!w->buf || !w->v) {
		words_free(w);
		*err = "out of memory";
		return -1;
	}
	char *o = w->buf;
	const char *p = line;
	w->trailing = true;
	for (;;) {
		while (blank(*p))
			p++;
		if (!*p)
			break;
		w->v[w->n++] = o;
		while (*p && !blank(*p)) {
			if (*p == '\'') {
				const char *end = strchr(p + 1, '\'');
				if (!end)
					goto unterminated;
				memcpy(o, p + 1, (size_t)(end - p - 1));
				o += end - p - 1;
				p = end + 1;
			} else if (*p == '"') {
				for (p++; *p && *p != '"'; p++) {
					if (*p == '\\' && p[1])
						*o++ = dq_escape(*++p);
					else
						*o++ = *p;
				}
				if (!*p)
					goto unterminated;
				p++;
			} else if (*p == '\\' && p[1]) {
				*o++ = p[1];
				p += 2;
			} else {
				*o++ = *p++;
			}
		}
		*o++ = 0;
		w->trailing = *p != 0;
	}
	w->v[w->n] = NULL;
	return 0;

unterminated:
	words_free(w);
	*err = "unterminated quote";
	return -1;
}

void words_free(cli_words *w)
{
	emdb_free(w->v);
	emdb_free(w->buf);
	memset(w, 0, sizeof(*w));
}

bool words_u64(const char *word, uint64_t *out)
{
	char *end;
	bool hex = word[0] == '0' && (word[1] == 'x' || word[1] == 'X');
	const char *digits = hex ? word + 2 : word;
	/* strtoull would take a sign, blanks, or "0x" alone. */
	if (hex ? !isxdigit((unsigned char)*digits) : !isdigit((unsigned char)*digits))
		return false;
	errno = 0;
	unsigned long long v = strtoull(digits, &end, hex ? 16 : 10);
	if (*end || errno == ERANGE)
		return false;
	*out = v;
	return true;
}

bool words_count(const char *word, uint64_t *out)
{
	size_t len = strlen(word);
	uint64_t mul = 1, v;
	char digits[32];
	switch (len ? word[len - 1] : 0) {
	case 'k':
	case 'K':
		mul = 1000;
		break;
	case 'M':
		mul = 1000000;
		break;
	case 'G':
		mul = 1000000000;
		break;
	}
	if (mul == 1)
		return words_u64(word, out);
	/* A suffix goes with decimal digits only: "0x1G" is not a count. */
	if (len - 1 >= sizeof(digits) || (word[0] == '0' && (word[1] == 'x' || word[1] == 'X')))
		return false;
	memcpy(digits, word, len - 1);
	digits[len - 1] = 0;
	if (!words_u64(digits, &v) || v > UINT64_MAX / mul)
		return false;
	*out = v * mul;
	return true;
}
