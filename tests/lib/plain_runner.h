/*
 * plain_runner.h - runs Criterion-style tests without Criterion.
 *
 * Criterion's runner maps its "inheritable arena" at a fixed address that
 * ThreadSanitizer's memory layout forbids, so under TSan every Criterion
 * binary dies before the first test (Snaipe/Criterion issue #274).  The
 * concurrency tests are therefore written against the small subset of
 * Criterion used below, and the TSan build compiles them with this header
 * instead (EMDB_PLAIN_RUNNER): each Test() registers itself at start-up,
 * main() runs them in order, and a failed assertion prints its message and
 * aborts, which fails the ctest.
 */
#ifndef EMDB_PLAIN_RUNNER_H
#define EMDB_PLAIN_RUNNER_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cr_assert(cond) without a message expands to an empty format string. */
#pragma GCC diagnostic ignored "-Wformat-zero-length"

typedef struct plain_test {
	const char *suite, *name;
	void (*fn)(void);
} plain_test;

static plain_test plain_tests[64];
static int plain_n;

#define Test(suite, name)                                                         \
	static void suite##_##name(void);                                         \
	__attribute__((constructor)) static void suite##_##name##_reg(void)       \
	{                                                                         \
		plain_tests[plain_n++] = (plain_test){ #suite, #name, suite##_##name }; \
	}                                                                         \
	static void suite##_##name(void)

#define PLAIN_FAIL_(...)                                                          \
	do {                                                                      \
		fprintf(stderr, "%s:%d: assertion failed: ", __FILE__, __LINE__); \
		fprintf(stderr, "" __VA_ARGS__);                                  \
		fputc('\n', stderr);                                              \
		abort();                                                          \
	} while (0)

#define cr_assert(cond, ...) do { if (!(cond)) PLAIN_FAIL_(__VA_ARGS__); } while (0)
#define cr_assert_eq(a, b, ...) cr_assert((a) == (b), __VA_ARGS__)
#define cr_assert_neq(a, b, ...) cr_assert((a) != (b), __VA_ARGS__)
#define cr_assert_gt(a, b, ...) cr_assert((a) > (b), __VA_ARGS__)
#define cr_assert_geq(a, b, ...) cr_assert((a) >= (b), __VA_ARGS__)
#define cr_assert_lt(a, b, ...) cr_assert((a) < (b), __VA_ARGS__)
#define cr_assert_leq(a, b, ...) cr_assert((a) <= (b), __VA_ARGS__)
#define cr_assert_not_null(p, ...) cr_assert((p) != NULL, __VA_ARGS__)
#define cr_assert_fail(...) PLAIN_FAIL_(__VA_ARGS__)

int main(void)
{
	for (int i = 0; i < plain_n; i++) {
		fprintf(stderr, "[RUN ] %s::%s\n", plain_tests[i].suite, plain_tests[i].name);
		plain_tests[i].fn();
		fprintf(stderr, "[ OK ] %s::%s\n", plain_tests[i].suite, plain_tests[i].name);
	}
	fprintf(stderr, "%d tests passed\n", plain_n);
	return 0;
}

#endif
