/*
 * net/obuf.h - a connection's output: a queue of blocks holding reply
 * frames waiting for the socket.
 *
 * Replies are built in place: obuf_reserve hands out contiguous, 8-aligned
 * space at the tail, the encoder (and, for Pull and Lookup, the engine)
 * writes the frame there, and obuf_commit makes it part of the stream.  A
 * block never moves once allocated, so the bytes handed to the kernel
 * (writev, or an io_uring send still in flight) stay put while more
 * replies are appended behind them.
 *
 * Memory comes from emdb_malloc, so it counts toward max_memory.  Sizes:
 * small replies share OBUF_BLOCK-byte blocks; a reply bigger than that
 * gets a block of its own, exactly its size.  A block made for a
 * reservation joins the queue only when the reservation is committed: a
 * cancelled one is freed at once (or kept as the one spare), so a refused
 * request leaves nothing behind however much it asked for.
 *
 * Thread safety: none; an obuf belongs to its connection's I/O thread.
 */
#ifndef EMDB_NET_OBUF_H
#define EMDB_NET_OBUF_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define OBUF_BLOCK (16u << 10)

typedef struct obuf_block obuf_block;

typedef struct obuf {
	obuf_block *head;  /* oldest: sending starts at head->data + sent */
	obuf_block *tail;  /* newest: reservations come from here */
	obuf_block *spare; /* one empty OBUF_BLOCK block kept for reuse */
	obuf_block *fresh; /* block of the open reservation, not yet queued */
	size_t sent;       /* bytes of head already sent */
	size_t pending;    /* committed bytes not yet sent, all blocks */
	size_t allocated;  /* bytes of blocks held, spare and fresh included */
	size_t reserved;   /* size of the open reservation, 0 if none */
} obuf;

void obuf_init(obuf *b);
/* Free every block.  Unsent bytes are dropped. */
void obuf_destroy(obuf *b);

/* Contiguous space for n bytes at the tail, 8-aligned, valid until the
 * next obuf call.  At most one reservation is open at a time; a second
 * reserve replaces the first.  Returns NULL when memory is refused
 * (emdb_last_error says why). */
void *obuf_reserve(obuf *b, size_t n);
/* Append the first n bytes (n <= the reserved size, a multiple of 8 so the
 * next frame stays aligned) of the open reservation to the stream. */
void obuf_commit(obuf *b, size_t n);
/* Forget the open reservation; a block made for it is given back. */
void obuf_cancel(obuf *b);

/* A block made apart from the queue, for a reply that is built over time
 * by other threads (a cluster node's routed Pull: the owners' rows land in
 * it as they arrive) and joins the stream when it is complete, without
 * being copied.  obuf_detached_new gives n bytes (8-aligned data, NULL
 * when memory is refused); obuf_adopt appends its first len bytes (a
 * multiple of 8) to the stream, after everything committed before, and
 * the obuf owns it from then (no reservation may be open: replies are
 * adopted between frames); obuf_detached_free drops one never adopted
 * (NULL is fine). */
void *obuf_detached_new(size_t n);
void obuf_adopt(obuf *b, void *data, size_t len);
void obuf_detached_free(void *data);

/* Describe up to max iovecs of unsent bytes, oldest first; returns how
 * many were filled (0 when nothing is pending). */
int obuf_iov(const obuf *b, struct iovec *iov, int max);
/* n bytes from the front were sent: release blocks that are done. */
void obuf_consume(obuf *b, size_t n);

static inline size_t obuf_pending(const obuf *b)
{
	return b->pending;
}

/* Bytes of the blocks that hold unsent replies: what the queue really
 * costs (partly filled blocks count whole), spare and open reservation
 * left out.  0 exactly when nothing is pending. */
size_t obuf_queued(const obuf *b);

#endif
