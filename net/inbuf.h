/*
 * net/inbuf.h - a connection's input: one contiguous buffer that frames are
 * received into and decoded from in place.
 *
 * A request frame is handled where the socket put it: the buffer is
 * 16-aligned and every frame length is a multiple of 8, so every body, and
 * every u64 and float array in it, is 8-aligned where it lies.  Once a
 * frame's header is in, inbuf_space grows the buffer toward the whole
 * frame, at most INBUF_AHEAD (or the bytes received so far, whichever is
 * more) beyond what has arrived, so a header announcing a huge body costs
 * memory only as the body really comes.  Growth goes through realloc, which
 * moves large blocks by remapping pages rather than copying them; the body
 * is otherwise received in its final place.
 *
 * Layout changes (moving bytes to the front, growing, shrinking back) only
 * happen in inbuf_space, which a backend calls right before it reads; an
 * io_uring receive in flight therefore never sees its buffer move.
 *
 * Memory comes from emdb_malloc and counts toward max_memory.
 * Thread safety: none; an inbuf belongs to its connection's I/O thread.
 */
#ifndef EMDB_NET_INBUF_H
#define EMDB_NET_INBUF_H

#include <stddef.h>
#include <stdint.h>

#define INBUF_MIN (16u << 10)       /* idle size, and the least offered */
#define INBUF_READAHEAD 4096u        /* room past a pending frame */
#define INBUF_AHEAD ((size_t)1 << 20) /* most room beyond received bytes */

typedef struct inbuf {
	uint8_t *buf;
	size_t cap;
	size_t head; /* unprocessed bytes: buf[head .. tail) */
	size_t tail;
} inbuf;

void inbuf_init(inbuf *b);
void inbuf_destroy(inbuf *b);

/* Where to receive the next bytes: *p, at most *n (> 0) of them.  `frame`
 * is the size of the frame that starts at head when its header is in (0
 * otherwise): the buffer is arranged to hold it whole.  Returns 0, or
 * EMDB_ERR_NOMEM when that much memory is refused (the buffer is
 * unchanged and still usable). */
int inbuf_space(inbuf *b, size_t frame, uint8_t **p, size_t *n);
/* n bytes were received at the space given. */
static inline void inbuf_commit(inbuf *b, size_t n)
{
	b->tail += n;
}
static inline const uint8_t *inbuf_data(const inbuf *b)
{
	return b->buf + b->head;
}
static inline size_t inbuf_len(const inbuf *b)
{
	return b->tail - b->head;
}
/* Drop n processed bytes from the front. */
static inline void inbuf_consume(inbuf *b, size_t n)
{
	b->head += n;
}

#endif
