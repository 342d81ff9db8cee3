/*
 * infojson.c - INFO's text as JSON members (infojson.h).
 *
 * Design
 *   One pass over the lines: "# Name" opens an object named after the
 *   section (lower case, trimmed), "key: value" adds a string member, and
 *   anything else is skipped.  Keys are cut at 255 bytes; values pass
 *   through whole.  The JSON writer escapes whatever bytes come.
 *
 * Invariants
 *   1. Every object opened here is closed here: the output nests exactly
 *      one level below the caller's container, whatever the text.
 */
#include "tools/cli/infojson.h"

#include <ctype.h>
#include <stdbool.h>
#include <string.h>

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

void info_json(jw *w, const char *text)
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

