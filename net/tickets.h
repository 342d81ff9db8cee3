/*
 * net/tickets.h - a connection's Prefetch tickets, by wire handle.
 *
 * The engine's emdb_ticket pointers (or, on a node of a cluster, the
 * cluster layer's cluster_ticket pointers: see tickets_set_free) never
 * cross the wire: a connection maps opaque nonzero u64 handles to them.  A handle is (generation << 32 |
 * slot + 1), so a handle freed and its slot reused does not resolve to the
 * new ticket.  Closing the connection frees every ticket it holds.
 *
 * Thread safety: none; a table belongs to its connection's I/O thread.
 */
#ifndef EMDB_NET_TICKETS_H
#define EMDB_NET_TICKETS_H

#include <stddef.h>
#include <stdint.h>

#include <emdb/db.h>

typedef struct ticket_slot {
	void *t;            /* NULL when free */
	uint32_t gen;
	uint32_t next_free; /* slot index + 1 of the next free slot, 0 = none */
} ticket_slot;

typedef struct ticket_table {
	ticket_slot *slots;
	uint32_t cap;
	uint32_t live;
	uint32_t free_head; /* slot index + 1, 0 = none */
	void (*free_fn)(void *ctx, void *t); /* NULL: emdb_ticket_free */
	void *free_ctx;
} ticket_table;

/* A table of engine tickets (emdb_ticket_free frees them). */
void tickets_init(ticket_table *tt);
/* The table holds tickets that free_fn(ctx, t) frees instead. */
void tickets_set_free(ticket_table *tt, void (*free_fn)(void *ctx, void *t), void *ctx);
/* Free every live ticket and the table itself. */
void tickets_destroy(ticket_table *tt);

/* Take ownership of t and return its handle in *handle.  Errors: LIMIT
 * when `max` tickets are live, NOMEM.  On error t is NOT taken. */
int tickets_add(ticket_table *tt, void *t, uint32_t max, uint64_t *handle);
/* Make sure the next tickets_add finds a free slot (so that it cannot
 * fail for want of memory).  Errors: NOMEM. */
int tickets_reserve(ticket_table *tt);
/* The ticket of handle, or NULL. */
void *tickets_get(const ticket_table *tt, uint64_t handle);
/* Free the ticket of handle.  Errors: TICKET (unknown handle). */
int tickets_free(ticket_table *tt, uint64_t handle);

#endif
