/*
 * obuf.c - the output block queue.
 *
 * Invariants:
 *   1. Blocks form a singly linked list head..tail; a block's committed
 *      bytes are data[0 .. used), and only the tail has room to grow.
 *   2. pending == (sum of used over the list) - sent; sent < head->used
 *      unless the list is empty or pending is 0.
 *   3. Every frame starts at an 8-aligned offset of its block (block data
 *      is 16-aligned and commits are multiples of 8), so floats written in
 *      place by the engine are aligned.
 *   4. Bytes once committed never move: a block is freed only after all of
 *      its bytes were consumed.
 *   5. A block made for a reservation (fresh) is linked only by
 *      obuf_commit; obuf_cancel, or the next obuf_reserve, releases it.
 *      So every linked block holds committed bytes, a refused request
 *      costs nothing once cancelled, and allocated is at most the queued
 *      blocks, one spare and the open reservation's block.
 *
 * State changes: obuf_commit (used, pending, fresh linked), obuf_consume
 * (sent, pending, blocks released), obuf_reserve (fresh made), obuf_cancel
 * (fresh released).
 */
#include <assert.h>
#include <string.h>

#include <emdb/alloc.h>

#include "net/obuf.h"

struct obuf_block {
	obuf_block *next;
	size_t cap;
	size_t used;
	size_t pad_; /* keeps data 16-aligned after the 24-byte fields */
	uint8_t data[];
};

_Static_assert(offsetof(obuf_block, data) % 16 == 0, "block data must stay 16-aligned");

static obuf_block *block_new(obuf *b, size_t cap)
{
	obuf_block *k;
	if (cap <= OBUF_BLOCK && b->spare) {
		k = b->spare;
		b->spare = NULL;
	} else {
		if (cap < OBUF_BLOCK)
			cap = OBUF_BLOCK;
		k = emdb_malloc(sizeof(*k) + cap);
		if (!k)
			return NULL;
		k->cap = cap;
		b->allocated += sizeof(*k) + cap;
	}
	k->next = NULL;
	k->used = 0;
	return k;
}

static void block_release(obuf *b, obuf_block *k)
{
	if (!b->spare && k->cap == OBUF_BLOCK) {
		k->used = 0;
		b->spare = k;
		return;
	}
	b->allocated -= sizeof(*k) + k->cap;
	emdb_free(k);
}

void obuf_init(obuf *b)
{
	memset(b, 0, sizeof(*b));
}

void obuf_destroy(obuf *b)
{
	obuf_block *k = b->head;
	while (k) {
		obuf_block *next = k->next;
		emdb_free(k);
		k = next;
	}
	emdb_free(b->spare);
	emdb_free(b->fresh);
	memset(b, 0, sizeof(*b));
}

size_t obuf_queued(const obuf *b)
{
	size_t q = b->allocated;
	if (b->spare)
		q -= sizeof(*b->spare) + b->spare->cap;
	if (b->fresh)
		q -= sizeof(*b->fresh) + b->fresh->cap;
	return q;
}

void obuf_cancel(obuf *b)
{
	if (b->fresh) {
		block_release(b, b->fresh);
		b->fresh = NULL;
	}
	b->reserved = 0;
}

void *obuf_reserve(obuf *b, size_t n)
{
	n = (n + 7) & ~(size_t)7;
	obuf_cancel(b);
	if (b->tail && b->tail->cap - b->tail->used >= n) {
		b->reserved = n;
		return b->tail->data + b->tail->used;
	}
	obuf_block *k = block_new(b, n);
	if (!k)
		return NULL;
	b->fresh = k;
	b->reserved = n;
	return k->data;
}

void obuf_commit(obuf *b, size_t n)
{
	assert(n <= b->reserved && n % 8 == 0);
	if (n == 0) {
		obuf_cancel(b);
		return;
	}
	if (b->fresh) {
		if (b->tail)
			b->tail->next = b->fresh;
		else
			b->head = b->fresh;
		b->tail = b->fresh;
		b->fresh = NULL;
	}
	b->tail->used += n;
	b->pending += n;
	b->reserved = 0;
}

static obuf_block *block_of(void *data)
{
	return (obuf_block *)((uint8_t *)data - offsetof(obuf_block, data));
}

void *obuf_detached_new(size_t n)
{
	obuf_block *k = emdb_malloc(sizeof(*k) + n);
	if (!k)
		return NULL;
	k->next = NULL;
	k->cap = n;
	k->used = 0;
	return k->data;
}

void obuf_detached_free(void *data)
{
	if (data)
		emdb_free(block_of(data));
}

void obuf_adopt(obuf *b, void *data, size_t len)
{
	obuf_block *k = block_of(data);
	assert(len <= k->cap && len % 8 == 0);
	if (len == 0) {
		emdb_free(k);
		return;
	}
	assert(b->reserved == 0); /* a commit after this would add to k */
	k->used = len;
	b->allocated += sizeof(*k) + k->cap;
	if (b->tail)
		b->tail->next = k;
	else
		b->head = k;
	b->tail = k;
	b->pending += len;
}

int obuf_iov(const obuf *b, struct iovec *iov, int max)
{
	int n = 0;
	size_t off = b->sent;
	for (const obuf_block *k = b->head; k && n < max; k = k->next) {
		if (k->used > off) {
			iov[n].iov_base = (void *)(k->data + off);
			iov[n].iov_len = k->used - off;
			n++;
		}
		off = 0;
	}
	return n;
}

void obuf_consume(obuf *b, size_t n)
{
	assert(n <= b->pending);
	b->pending -= n;
	while (n > 0 || (b->head && b->head != b->tail && b->sent == b->head->used)) {
		obuf_block *k = b->head;
		size_t left = k->used - b->sent;
		if (n < left) {
			b->sent += n;
			return;
		}
		n -= left;
		if (k == b->tail) {
			/* Everything is sent: a standard block becomes the
			 * spare for the next replies, a big one goes. */
			assert(n == 0);
			b->sent = 0;
			b->head = b->tail = NULL;
			block_release(b, k);
			return;
		}
		b->head = k->next;
		b->sent = 0;
		block_release(b, k);
	}
}
