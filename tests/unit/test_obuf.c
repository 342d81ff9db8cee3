/*
 * test_obuf.c - a connection's output queue (net/obuf.h), for the part a
 * cluster node's routed replies use: a block made apart from the queue
 * (obuf_detached_new), filled while other replies are committed, then
 * adopted (obuf_adopt) without a copy.
 *
 * What is checked: an adopted block's bytes come out after everything
 * committed before it and before what is committed after it, exactly as
 * written; it counts in obuf_pending and obuf_queued until sent and is
 * released when consumed, partly or whole; a block dropped without being
 * adopted (obuf_detached_free, NULL included) leaves the queue as it was;
 * adopting 0 bytes frees the block and queues nothing.
 */
#include <criterion/criterion.h>
#include <string.h>

#include <emdb/alloc.h>

#include "net/obuf.h"

/* Commit n bytes of value v through a reservation. */
static void put(obuf *b, size_t n, uint8_t v)
{
	uint8_t *p = obuf_reserve(b, n);
	cr_assert_not_null(p);
	memset(p, v, n);
	obuf_commit(b, n);
}

/* Every pending byte, in order, into out[cap]; returns how many. */
static size_t drain_copy(const obuf *b, uint8_t *out, size_t cap)
{
	struct iovec iov[16];
	int n = obuf_iov(b, iov, 16);
	size_t at = 0;
	for (int i = 0; i < n; i++) {
		cr_assert_leq(at + iov[i].iov_len, cap);
		memcpy(out + at, iov[i].iov_base, iov[i].iov_len);
		at += iov[i].iov_len;
	}
	return at;
}

Test(obuf, adopted_block_keeps_its_place_and_bytes)
{
	obuf b;
	obuf_init(&b);
	put(&b, 64, 0x11);
	size_t big = 40u << 10; /* a routed Pull's reply is bigger than a block */
	uint8_t *d = obuf_detached_new(big);
	cr_assert_not_null(d);
	cr_assert_eq((uintptr_t)d % 8, 0);
	put(&b, 32, 0x22); /* another reply committed while d fills */
	for (size_t i = 0; i < big; i++)
		d[i] = (uint8_t)(i * 7);
	obuf_adopt(&b, d, big);
	put(&b, 16, 0x33);
	cr_assert_eq(obuf_pending(&b), 64 + 32 + big + 16);
	cr_assert_geq(obuf_queued(&b), big);

	static uint8_t out[(40u << 10) + 256];
	size_t n = drain_copy(&b, out, sizeof(out));
	cr_assert_eq(n, 64 + 32 + big + 16);
	for (size_t i = 0; i < 64; i++)
		cr_assert_eq(out[i], 0x11);
	for (size_t i = 64; i < 96; i++)
		cr_assert_eq(out[i], 0x22);
	for (size_t i = 0; i < big; i++)
		cr_assert_eq(out[96 + i], (uint8_t)(i * 7), "byte %zu of the adopted block", i);
	for (size_t i = 96 + big; i < n; i++)
		cr_assert_eq(out[i], 0x33);

	/* Sent in two steps, the second ending inside the adopted block. */
	obuf_consume(&b, 100);
	cr_assert_eq(obuf_pending(&b), n - 100);
	struct iovec iov[4];
	cr_assert_eq(obuf_iov(&b, iov, 4), 2);
	cr_assert_eq(((uint8_t *)iov[0].iov_base)[0], (uint8_t)(4 * 7)); /* byte 4 of d */
	obuf_consume(&b, n - 100);
	cr_assert_eq(obuf_pending(&b), 0);
	cr_assert_eq(obuf_queued(&b), 0);
	obuf_destroy(&b);
}

Test(obuf, adopted_into_an_empty_queue_then_destroyed_unsent)
{
	size_t before = emdb_alloc_bytes();
	obuf b;
	obuf_init(&b);
	uint8_t *d = obuf_detached_new(24);
	cr_assert_not_null(d);
	memset(d, 0x5a, 24);
	obuf_adopt(&b, d, 24);
	uint8_t out[32];
	cr_assert_eq(drain_copy(&b, out, sizeof(out)), 24);
	cr_assert_eq(out[23], 0x5a);
	obuf_destroy(&b); /* unsent: freed with the queue */
	cr_assert_eq(emdb_alloc_bytes(), before);
}

Test(obuf, dropped_or_empty_blocks_leave_the_queue_alone)
{
	size_t before = emdb_alloc_bytes();
	obuf b;
	obuf_init(&b);
	put(&b, 8, 0x44);
	obuf_detached_free(obuf_detached_new(1u << 20));
	obuf_detached_free(NULL);
	obuf_adopt(&b, obuf_detached_new(64), 0);
	cr_assert_eq(obuf_pending(&b), 8);
	uint8_t out[16];
	cr_assert_eq(drain_copy(&b, out, sizeof(out)), 8);
	obuf_consume(&b, 8);
	obuf_destroy(&b);
	cr_assert_eq(emdb_alloc_bytes(), before);
}
