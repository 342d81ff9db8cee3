/*
 * error.c - the client library's per-thread error message
 * (emdb_client_last_error), apart from everything else so that the
 * pieces that only parse (uri.c) can be built and fuzzed alone.
 *
 * Invariants:
 *   1. The thread's message is written only by cl_seterr / cl_setmsg, on
 *      the thread that returns the error, and read only by that thread.
 */
#include <stdarg.h>
#include <stdio.h>

#include <emdb/client.h>

#include "client/client_int.h"

static _Thread_local char cl_msg[CL_MSG_MAX];

const char *emdb_client_last_error(void)
{
	return cl_msg;
}

int cl_seterr(int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cl_msg, sizeof(cl_msg), fmt, ap);
	va_end(ap);
	return rc;
}

void cl_setmsg(const char *msg)
{
	if (msg != cl_msg)
		snprintf(cl_msg, sizeof(cl_msg), "%s", msg);
}
