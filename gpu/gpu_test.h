/*
 * gpu_test.h - the parts of emdb-gpu-test (gpu/gpu_test.c) shared by its
 * files: one line per check, counted for "N passed, N failed".
 */
#ifndef EMDB_GPU_TEST_H
#define EMDB_GPU_TEST_H

/* Print PASS or FAIL and fmt with what and detail; count it. */
void check(int ok, const char *fmt, const char *what, const char *detail);

/* The serving paths through the CUDA tier (gpu/gpu_test_serve.c). */
void gpu_test_serve(void);

#endif
