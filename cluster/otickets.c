/*
 * cluster/otickets.c - the tickets an owner node holds for its peers'
 * PREFETCHes (cluster_int.h), so that their Pulls and Pushes by ticket
 * resolve nothing here either.
 *
 * Invariants:
 *   1. A handle is (generation << 32 | slot + 1) and names the peer it
 *      was made for: a peer can neither use nor free another's ticket, and
 *      a freed handle whose slot was reused does not resolve.
 *   2. Every access is under `mu`, a reader-writer lock: otickets_use
 *      runs its function under it held shared (several serve threads use
 *      tickets at once, strand.c), add, free and drop hold it exclusive,
 *      so no ticket is freed while the engine reads it.  Writers are
 *      preferred, so a stream of uses cannot starve a free.
 *   3. At most OTICKETS_MAX live tickets (LIMIT beyond): a peer that never
 *      frees cannot take the owner's memory.
 *
 * State changes: slots, live, free_head, under mu.
 */
#define _GNU_SOURCE /* pthread_rwlockattr_setkind_np */
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "base/error_int.h"
#include "cluster/cluster_int.h"

int otickets_init(otickets *o)
{
	memset(o, 0, sizeof(*o));
	pthread_rwlockattr_t a;
	pthread_rwlockattr_init(&a);
	pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&o->mu, &a);
	pthread_rwlockattr_destroy(&a);
	return EMDB_OK;
}

void otickets_destroy(otickets *o)
{
	otickets_drop_peer(o, UINT32_MAX);
	emdb_free(o->slots);
	pthread_rwlock_destroy(&o->mu);
}

static int grow_locked(otickets *o)
{
	uint32_t cap = o->cap ? o->cap * 2 : 64;
	if (cap > OTICKETS_MAX)
		cap = OTICKETS_MAX;
	if (cap <= o->cap)
		return emdb__seterr(EMDB_ERR_LIMIT, "%u owner tickets are held for peers: free some first", o->live);
	oticket_slot *s = emdb_realloc(o->slots, (size_t)cap * sizeof(*s));
	if (!s)
		return emdb__seterr(EMDB_ERR_NOMEM, "owner tickets: %u slots", cap);
	memset(s + o->cap, 0, (size_t)(cap - o->cap) * sizeof(*s));
	for (uint32_t i = cap; i > o->cap; i--) {
		s[i - 1].next_free = o->free_head;
		o->free_head = i;
	}
	o->slots = s;
	o->cap = cap;
	return EMDB_OK;
}

int otickets_add(otickets *o, uint32_t from, emdb_ticket *t, uint64_t *handle)
{
	int rc = EMDB_OK;
	pthread_rwlock_wrlock(&o->mu);
	if (!o->free_head)
		rc = grow_locked(o);
	if (rc == EMDB_OK) {
		uint32_t i = o->free_head - 1;
		oticket_slot *s = &o->slots[i];
		o->free_head = s->next_free;
		s->t = t;
		s->from = from;
		s->gen++;
		o->live++;
		*handle = (uint64_t)s->gen << 32 | (i + 1);
	}
	pthread_rwlock_unlock(&o->mu);
	return rc;
}

static oticket_slot *find_locked(otickets *o, uint32_t from, uint64_t handle)
{
	uint32_t i = (uint32_t)handle;
	if (!i || i > o->cap)
		return NULL;
	oticket_slot *s = &o->slots[i - 1];
	return s->t && s->gen == (uint32_t)(handle >> 32) && s->from == from ? s : NULL;
}

static void release_locked(otickets *o, oticket_slot *s)
{
	emdb_ticket_free(s->t);
	s->t = NULL;
	s->next_free = o->free_head;
	o->free_head = (uint32_t)(s - o->slots) + 1;
	o->live--;
}

int otickets_use(otickets *o, uint32_t from, uint64_t handle, int (*fn)(const emdb_ticket *t, void *arg),
		 void *arg)
{
	pthread_rwlock_rdlock(&o->mu);
	oticket_slot *s = find_locked(o, from, handle);
	int rc = s ? fn(s->t, arg)
		   : emdb__seterr(EMDB_ERR_TICKET, "ticket 0x%llx is not one this node holds for node %u",
				  (unsigned long long)handle, from);
	pthread_rwlock_unlock(&o->mu);
	return rc;
}

int otickets_free(otickets *o, uint32_t from, uint64_t handle)
{
	pthread_rwlock_wrlock(&o->mu);
	oticket_slot *s = find_locked(o, from, handle);
	if (s)
		release_locked(o, s);
	pthread_rwlock_unlock(&o->mu);
	return s ? EMDB_OK
		 : emdb__seterr(EMDB_ERR_TICKET, "ticket 0x%llx is not one this node holds for node %u",
				(unsigned long long)handle, from);
}

void otickets_drop_peer(otickets *o, uint32_t from)
{
	pthread_rwlock_wrlock(&o->mu);
	for (uint32_t i = 0; i < o->cap; i++)
		if (o->slots[i].t && (from == UINT32_MAX || o->slots[i].from == from))
			release_locked(o, &o->slots[i]);
	pthread_rwlock_unlock(&o->mu);
}
