/*
 * protocol_spec.h - docs/protocol.md as the tests read it, to check that
 * the spec lists what the code has (opcode tables, status codes).
 */
#ifndef EMDB_TESTS_PROTOCOL_SPEC_H
#define EMDB_TESTS_PROTOCOL_SPEC_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

/* The text of docs/protocol.md, found from this header's own path
 * (.../tests/lib/protocol_spec.h); a static buffer, NUL-terminated. */
static inline const char *protocol_spec_text(void)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s", __FILE__);
	char *slash = strstr(path, "tests/lib/protocol_spec.h");
	cr_assert_not_null(slash, "cannot locate the source tree from %s", __FILE__);
	strcpy(slash, "docs/protocol.md");
	FILE *fp = fopen(path, "rb");
	cr_assert_not_null(fp, "cannot open %s", path);
	static char text[1 << 20];
	size_t n = fread(text, 1, sizeof(text) - 1, fp);
	fclose(fp);
	text[n] = 0;
	return text;
}

#endif
