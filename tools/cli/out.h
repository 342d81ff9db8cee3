/*
 * out.h - emdb-cli's output: a JSON writer that emits one compact object
 * per line, and numbers written as the shortest text that reads back
 * exactly.
 *
 * The writer keeps only the comma state of the open containers, so an
 * object is written front to back with no tree in memory.  Strings are
 * escaped (quote, backslash, control characters) and bytes that are not
 * UTF-8 become U+FFFD, so the output is valid JSON whatever a server
 * sends.  Numbers that are not finite are written as null.
 */
#ifndef EMDB_CLI_OUT_H
#define EMDB_CLI_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define JW_DEPTH 16 /* containers open at once; deeper is a bug */

typedef struct jw {
	FILE *f;
	int depth;            /* containers open, the outermost object included */
	bool more[JW_DEPTH];  /* the container at this depth has a member */
} jw;

/* Start the object of one command on f ('{'); jw_close ends it with '}',
 * a newline and a flush. */
void jw_open(jw *w, FILE *f);
void jw_close(jw *w);

/* Members.  key names the member inside an object; it is NULL for an
 * element of an array.  key and string values are borrowed for the call. */
void jw_obj(jw *w, const char *key);
void jw_obj_end(jw *w);
void jw_arr(jw *w, const char *key);
void jw_arr_end(jw *w);
void jw_str(jw *w, const char *key, const char *v);
void jw_strn(jw *w, const char *key, const char *v, size_t n);
void jw_u64(jw *w, const char *key, uint64_t v);
void jw_double(jw *w, const char *key, double v);
void jw_float(jw *w, const char *key, float v);
void jw_bool(jw *w, const char *key, bool v);

/* Write s[n] to f as a JSON string, quotes included. */
void json_put_string(FILE *f, const char *s, size_t n);

/* The shortest decimal text of v that strtod (strtof) reads back as v:
 * "0.001", not "0.0010000000000000000208".  buf of at least 32 bytes. */
void out_double(char *buf, size_t cap, double v);
void out_float(char *buf, size_t cap, float v);

#endif
