/*
 * error.c - the error enum's strings and the thread-local detail message.
 *
 * Invariants:
 *   1. emdb_strerror and emdb_err_name are generated from EMDB_ERRNO_MAP, so
 *      every code has exactly one description and one name.
 *   2. The detail message belongs to the calling thread; emdb__seterr is the
 *      only writer, and it always returns the code it was given so that a
 *      failure reads `return emdb__seterr(EMDB_ERR_DIM, "...", ...)`.
 */
#include <stdarg.h>
#include <stdio.h>

#include <emdb/error.h>

#include "base/error_int.h"

static _Thread_local char last_error[512];

const char *emdb_strerror(int err)
{
	switch (err) {
#define EMDB_ERR_STR_(name, value, msg) \
	case (value):                   \
		return msg;
		EMDB_ERRNO_MAP(EMDB_ERR_STR_)
#undef EMDB_ERR_STR_
	}
	return "unknown error";
}

const char *emdb_err_name(int err)
{
	switch (err) {
#define EMDB_ERR_NAME_(name, value, msg) \
	case (value):                    \
		return #name;
		EMDB_ERRNO_MAP(EMDB_ERR_NAME_)
#undef EMDB_ERR_NAME_
	}
	return "UNKNOWN";
}

const char *emdb_last_error(void)
{
	return last_error;
}

int emdb__seterr(int err, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(last_error, sizeof(last_error), "%s: ", emdb_strerror(err));

	if (n < 0 || (size_t)n >= sizeof(last_error))
		return err;
	va_start(ap, fmt);
	vsnprintf(last_error + n, sizeof(last_error) - (size_t)n, fmt, ap);
	va_end(ap);
	return err;
}
