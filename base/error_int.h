/*
 * error_int.h - setting the thread-local detail message behind
 * emdb_last_error().  Internal to emdb: the base layer and the layers above it.
 */
#ifndef EMDB_ERROR_INT_H
#define EMDB_ERROR_INT_H

#include <emdb/error.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Record "<strerror(err)>: <fmt...>" as this thread's last error; returns err. */
int emdb__seterr(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif

#endif
