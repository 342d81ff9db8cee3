/*
 * net/tickets.h - a connection's Prefetch tickets, by wire handle.
 *
 * The engine's emdb_ticket pointers never cross the wire: a connection maps
 * opaque nonzero u64 handles to them.  A handle is (generation << 32 |
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
	emdb_ticket *t;     /* NULL when free */
	uint32_t gen;
	uint32_t next_free; /* slot index + 1 of the next free slot, 0 = none */
} ticket_slot;

typedef struct ticket_table {
	ticket_slot *slots;
	uint32_t cap;
	uint32_t live;
	uint32_t free_head; /* slot index + 1, 0 = none */
} ticket_table;

void tickets_init(ticket_table *tt);
/* Free every live ticket (emdb_ticket_free) and the table itself. */
void tickets_destroy(ticket_table *tt);

/* Take ownership of t and return its handle in *handle.  Errors: LIMIT
 * when `max` tickets are live, NOMEM.  On error t is NOT taken. */
int tickets_add(ticket_table *tt, emdb_ticket *t, uint32_t max, uint64_t *handle);
/* Make sure the next tickets_add finds a free slot (so that it cannot
 * fail for want of memory).  Errors: NOMEM. */
int tickets_reserve(ticket_table *tt);
/* The ticket of handle, or NULL. */
emdb_ticket *tickets_get(const ticket_table *tt, uint64_t handle);
/* Free the ticket of handle.  Errors: TICKET (unknown handle). */
int tickets_free(ticket_table *tt, uint64_t handle);

#endif
