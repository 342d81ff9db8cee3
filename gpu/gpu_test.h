/*
 * gpu_test.h - the parts of emdb-gpu-test (gpu/gpu_test.c) shared by its
 * files: one line per check, counted for "N passed, N failed".
 */
#ifndef EMDB_GPU_TEST_H
#define EMDB_GPU_TEST_H

#include <stddef.h>

/* Print PASS or FAIL and fmt with what and detail; count it. */
void check(int ok, const char *fmt, const char *what, const char *detail);

/* cudaMemcpy from host memory to the device, then a synchronisation: a
 * copy from pageable memory may still be in flight when cudaMemcpy
 * returns, and the tier's non-blocking streams do not wait for it.
 * Returns whether both succeeded. */
int to_device(void *dst, const void *src, size_t bytes);

/* The serving paths through the CUDA tier (gpu/gpu_test_serve.c). */
void gpu_test_serve(void);

#endif
