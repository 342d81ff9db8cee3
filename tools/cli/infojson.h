/*
 * infojson.h - emdb-cli's reading of INFO's text ("# Section" headings,
 * "key: value" lines) as JSON: {"section": {"key": "value"}}, values kept
 * as the strings the server sent.  The text comes from the server, so it
 * is untrusted input: tests/fuzz/fuzz_text.c fuzzes this decoder.
 */
#ifndef EMDB_CLI_INFOJSON_H
#define EMDB_CLI_INFOJSON_H

#include "tools/cli/out.h"

/* Add text's sections to w's current container, one object member per
 * section.  text is NUL-terminated. */
void info_json(jw *w, const char *text);

#endif
