/*
 * test_proto_spec.c - docs/protocol.md lists what the code has: every
 * opcode of PROTO_OP_MAP and every status code of EMDB_ERRNO_MAP has its
 * row, and each opcode's row says what the table says of it (least role,
 * empty bodies, the version that added it).
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <emdb/error.h>

#include "protocol/proto.h"
#include "tests/lib/protocol_spec.h"

Test(proto, spec_lists_every_opcode_and_status_code)
{
	const char *spec = protocol_spec_text();
	char row[128];
#define OP_ROW_(NAME, name, value, ver, role, rq, rs)                                  \
	snprintf(row, sizeof(row), "| 0x%04X | %s |", value, #NAME);                  \
	cr_assert_not_null(strstr(spec, row), "docs/protocol.md lacks the row '%s'", row);
	PROTO_OP_MAP(OP_ROW_)
#undef OP_ROW_
#define ERR_ROW_(name, value, msg)                                                     \
	snprintf(row, sizeof(row), "| %d | %s | %s |", value, #name, msg);            \
	cr_assert_not_null(strstr(spec, row), "docs/protocol.md lacks the row '%s'", row);
	EMDB_ERRNO_MAP(ERR_ROW_)
#undef ERR_ROW_
}

/* One opcode's row of the spec's opcode table, cut into its five cells. */
static void spec_op_row(const char *spec, uint16_t value, char cells[5][160])
{
	char key[16];
	snprintf(key, sizeof(key), "| 0x%04X |", value);
	const char *p = strstr(spec, key);
	cr_assert_not_null(p, "docs/protocol.md has no row for opcode 0x%04X", value);
	const char *end = strchr(p, '\n');
	cr_assert_not_null(end);
	p++; /* past the leading '|' */
	for (int i = 0; i < 5; i++) {
		const char *bar = memchr(p, '|', (size_t)(end - p));
		cr_assert_not_null(bar, "opcode 0x%04X: the spec's row has fewer than 5 cells", value);
		while (*p == ' ')
			p++;
		size_t n = (size_t)(bar - p);
		while (n && p[n - 1] == ' ')
			n--;
		cr_assert_lt(n, sizeof(cells[i]));
		memcpy(cells[i], p, n);
		cells[i][n] = 0;
		p = bar + 1;
	}
}

/* PROTO_OP_MAP is the one table the protocol, the server and the client
 * expand: each row says what the spec says of its opcode (least role,
 * which bodies are empty, the version that added it), and the functions
 * expanded from it answer accordingly. */
Test(proto, opcode_table_agrees_with_the_spec)
{
	const char *spec = protocol_spec_text();
	char cells[5][160];
	size_t len;
#define IS_EMPTY_BODY false
#define IS_EMPTY_EMPTY true
#define OP_SPEC_(NAME, name, value, ver, role, rq, rs)                                                 \
	spec_op_row(spec, value, cells);                                                               \
	cr_assert_str_eq(cells[2], proto_role_name(role), #NAME ": least role");                      \
	cr_assert_eq(!strcmp(cells[3], "empty"), IS_EMPTY_##rq, #NAME ": request body");              \
	cr_assert_eq(!strcmp(cells[4], "empty"), IS_EMPTY_##rs, #NAME ": response body");             \
	cr_assert_eq(strstr(cells[3], "version 2") != NULL, (ver) == 2, #NAME ": version");           \
	cr_assert_eq(strstr(cells[3], "version 3") != NULL, (ver) == 3, #NAME ": version");           \
	cr_assert_eq(strstr(cells[3], "version 4") != NULL, (ver) == 4, #NAME ": version");           \
	cr_assert_eq(strstr(cells[3], "version 5") != NULL, (ver) == 5, #NAME ": version");           \
	cr_assert_eq(proto_op_version(value), (ver), #NAME);                                           \
	cr_assert_eq(proto_empty_encode(NULL, 0, 1, value, false, &len),                               \
		     IS_EMPTY_##rq ? EMDB_ERR_LIMIT : EMDB_ERR_INVALID, #NAME ": empty request");     \
	cr_assert_eq(proto_empty_encode(NULL, 0, 1, value, true, &len),                                \
		     IS_EMPTY_##rs ? EMDB_ERR_LIMIT : EMDB_ERR_INVALID, #NAME ": empty response");
	PROTO_OP_MAP(OP_SPEC_)
#undef OP_SPEC_
#undef IS_EMPTY_EMPTY
#undef IS_EMPTY_BODY
}

