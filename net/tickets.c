/*
 * tickets.c - handle table for a connection's engine tickets.
 *
 * Invariants:
 *   1. A slot is live iff its t is non-NULL; live counts them.
 *   2. Free slots form a list through next_free starting at free_head.
 *   3. A slot's gen changes every time it is freed, and a handle resolves
 *      only when its generation matches, so stale handles fail with
 *      EMDB_ERR_TICKET instead of reaching another ticket.
 *
 * State changes: tickets_add, tickets_free, tickets_destroy.
 */
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "net/tickets.h"

void tickets_init(ticket_table *tt)
{
	memset(tt, 0, sizeof(*tt));
}

void tickets_set_free(ticket_table *tt, void (*free_fn)(void *ctx, void *t), void *ctx)
{
	tt->free_fn = free_fn;
	tt->free_ctx = ctx;
}

static void release(const ticket_table *tt, void *t)
{
	if (!t)
		return;
	if (tt->free_fn)
		tt->free_fn(tt->free_ctx, t);
	else
		emdb_ticket_free(t);
}

void tickets_destroy(ticket_table *tt)
{
	for (uint32_t i = 0; i < tt->cap; i++)
		release(tt, tt->slots[i].t);
	emdb_free(tt->slots);
	memset(tt, 0, sizeof(*tt));
}

int tickets_reserve(ticket_table *tt)
{
	if (tt->free_head)
		return EMDB_OK;
	uint32_t cap = tt->cap ? tt->cap * 2 : 16;
	ticket_slot *s = emdb_realloc(tt->slots, (size_t)cap * sizeof(*s));
	if (!s)
		return EMDB_ERR_NOMEM;
	for (uint32_t i = tt->cap; i < cap; i++) {
		s[i].t = NULL;
		s[i].gen = 1;
		s[i].next_free = i + 1 < cap ? i + 2 : 0;
	}
	tt->free_head = tt->cap + 1;
	tt->slots = s;
	tt->cap = cap;
	return EMDB_OK;
}

int tickets_add(ticket_table *tt, void *t, uint32_t max, uint64_t *handle)
{
	if (tt->live >= max)
		return EMDB_ERR_LIMIT;
	int rc = tickets_reserve(tt);
	if (rc)
		return rc;
	uint32_t i = tt->free_head - 1;
	ticket_slot *s = &tt->slots[i];
	tt->free_head = s->next_free;
	s->t = t;
	s->next_free = 0;
	tt->live++;
	*handle = ((uint64_t)s->gen << 32) | (uint64_t)(i + 1);
	return EMDB_OK;
}

static ticket_slot *slot_of(const ticket_table *tt, uint64_t handle)
{
	uint32_t i = (uint32_t)handle;
	if (i == 0 || i > tt->cap)
		return NULL;
	ticket_slot *s = &tt->slots[i - 1];
	if (!s->t || s->gen != (uint32_t)(handle >> 32))
		return NULL;
	return s;
}

void *tickets_get(const ticket_table *tt, uint64_t handle)
{
	ticket_slot *s = slot_of(tt, handle);
	return s ? s->t : NULL;
}

int tickets_free(ticket_table *tt, uint64_t handle)
{
	ticket_slot *s = slot_of(tt, handle);
	if (!s)
		return EMDB_ERR_TICKET;
	release(tt, s->t);
	s->t = NULL;
	s->gen = s->gen + 1 ? s->gen + 1 : 1;
	s->next_free = tt->free_head;
	tt->free_head = (uint32_t)(s - tt->slots) + 1;
	tt->live--;
	return EMDB_OK;
}
