/*
 * proto_util.h - what the wire protocol's tests share (test_proto.c,
 * test_proto_reader.c): the sample messages of every opcode
 * (tests/fuzz/samples.h), a buffer to encode them into, and a
 * deterministic random stream.
 */
#ifndef EMDB_TESTS_PROTO_UTIL_H
#define EMDB_TESTS_PROTO_UTIL_H

#include <criterion/criterion.h>
#include <string.h>

#include "protocol/proto.h"
#include "tests/fuzz/samples.h"

#define BUF_WORDS (1u << 16)
static uint64_t bufmem[BUF_WORDS]; /* 512 KiB, 8-aligned */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static inline uint64_t rnd(void)
{
	uint64_t x = (rng_state += 0x9e3779b97f4a7c15ull);
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Encode a sample into buf; returns the frame length. */
static inline size_t enc(const proto_sample *s, uint8_t *buf, size_t cap)
{
	size_t len = 0;
	int rc = proto_msg_encode(buf, cap, &s->h, &s->m, &len);
	cr_assert_eq(rc, EMDB_OK, "%s: encode: %s", s->name, emdb_last_error());
	cr_assert(len >= PROTO_HDR_SIZE && len % 8 == 0, "%s: len %zu", s->name, len);
	return len;
}

static inline const proto_sample *find_sample(proto_sample *all, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(all[i].name, name))
			return &all[i];
	cr_assert_fail("no sample %s", name);
	return NULL;
}

#define SAMPLES()                                             \
	proto_sample all[PROTO_SAMPLES_MAX];                  \
	size_t n_all = proto_samples(all, PROTO_SAMPLES_MAX); \
	cr_assert(n_all <= PROTO_SAMPLES_MAX);                \
	uint8_t *buf = (uint8_t *)bufmem;                     \
	(void)buf

/* Encode sample `name` into buf and return its length. */
#define ENC(name) enc(find_sample(all, n_all, name), buf, sizeof(bufmem))

#endif
