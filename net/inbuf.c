/*
 * inbuf.c - arranging the input buffer before each receive.
 *
 * Invariants:
 *   1. 0 <= head <= tail <= cap; buf (when not NULL) is 16-aligned; and
 *      an offset in the buffer is congruent mod 8 to the stream offset of
 *      the byte it holds.  Frames start at stream offsets that are
 *      multiples of 8, so every frame, even one after a skipped body,
 *      starts 8-aligned in memory.
 *   2. Bytes are moved or the buffer reallocated only inside inbuf_space,
 *      and only bytes not yet processed (head .. tail) are kept.
 *   3. Capacity never runs more than max(INBUF_AHEAD, received bytes)
 *      ahead of the bytes received, whatever a header announces.
 *   4. An idle buffer (nothing unprocessed) larger than INBUF_MIN goes back
 *      to INBUF_MIN at the next receive, so one big request does not pin
 *      its memory for the connection's lifetime.
 *
 * State changes: buf, cap, head and tail in inbuf_space; tail in
 * inbuf_commit; head in inbuf_consume.
 */
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "net/inbuf.h"

void inbuf_init(inbuf *b)
{
	memset(b, 0, sizeof(*b));
}

void inbuf_destroy(inbuf *b)
{
	emdb_free(b->buf);
	memset(b, 0, sizeof(*b));
}

int inbuf_space(inbuf *b, size_t frame, uint8_t **p, size_t *n)
{
	size_t len = b->tail - b->head;
	/* Invariant 1: offsets in the buffer keep their stream offset's
	 * residue mod 8, so moving data moves it by multiples of 8. */
	size_t phase = b->head & 7;

	if (len == 0) {
		phase = b->tail & 7;
		b->head = b->tail = phase;
		if (b->cap > INBUF_MIN) {
			emdb_free(b->buf);
			b->buf = NULL;
			b->cap = 0;
		}
	}
	/* What should fit from the front: the whole pending frame plus a
	 * little read-ahead, but never more than INBUF_AHEAD (or twice) past
	 * what has actually arrived, so a header that announces a huge body
	 * costs memory only as the body comes. */
	size_t want = frame ? frame + INBUF_READAHEAD : INBUF_MIN;
	size_t ahead = len + INBUF_AHEAD > 2 * len ? len + INBUF_AHEAD : 2 * len;
	if (want > ahead)
		want = ahead;
	want += phase;
	if (want < INBUF_MIN)
		want = INBUF_MIN;
	want = (want + 4095) & ~(size_t)4095;

	if (b->cap - b->head + phase < want || b->tail == b->cap) {
		if (b->head > phase) {
			memmove(b->buf + phase, b->buf + b->head, len);
			b->head = phase;
			b->tail = phase + len;
		}
		if (b->cap < want) {
			/* realloc: large blocks move by remapping, not copying */
			uint8_t *nb = emdb_realloc(b->buf, want);
			if (!nb)
				return EMDB_ERR_NOMEM;
			b->buf = nb;
			b->cap = want;
		}
	}
	*p = b->buf + b->tail;
	*n = b->cap - b->tail;
	return 0;
}
