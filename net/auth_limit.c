/*
 * auth_limit.c - failed AUTH per peer address, as token buckets in a
 * fixed table (see auth_limit.h).
 *
 * Why per address and not only per connection: a wrong token already
 * closes its connection (handle_conn.c), so a guesser pays a reconnect per
 * guess and nothing more; 3,000 guesses took 0.8 s.  What it cannot get
 * around is its address (or, on the Unix socket, the machine).
 *
 * Invariants:
 *   1. An entry's `spent` is brought up to date (decayed at burst per
 *      window_ms since at_ns) before it is read or changed, so the rules in
 *      force when it is read are the ones applied, even after CONFIG SET.
 *   2. An address is refused while burst - spent < 1: with every failure
 *      adding 1, at most `burst` wrong tokens are checked back to back, and
 *      then one per window_ms / burst.  A refused AUTH changes no entry, so
 *      hammering a throttled address does not push its release back, and
 *      a correct token changes none either.
 *   3. The table never grows: a new address takes a free entry, or one
 *      whose failures have all decayed (forgotten), or else the one whose
 *      last failure is oldest.
 *   4. `throttled` goes true on the failure that throttles the address and
 *      false once the entry is forgotten, so each episode is logged once.
 *
 * State changes: auth_limit_failed (entries, failures), auth_limit_admit
 * (the refusal count), both under mu.
 */
#include <stdio.h>
#include <string.h>

#include "net/auth_limit.h"

void auth_limit_init(auth_limit *a)
{
	memset(a, 0, sizeof(*a));
	pthread_mutex_init(&a->mu, NULL);
}

void auth_limit_destroy(auth_limit *a)
{
	pthread_mutex_destroy(&a->mu);
}

void auth_limit_key(const char *peer, char key[AUTH_LIMIT_KEY_MAX])
{
	/* An IPv6 peer is "[addr]:port" and a Unix one "unix:uid=U:pid=P",
	 * so what follows the last colon is the port (or the process) in
	 * every form. */
	const char *colon = strrchr(peer, ':');
	size_t n = colon ? (size_t)(colon - peer) : strlen(peer);
	if (n > AUTH_LIMIT_KEY_MAX - 1)
		n = AUTH_LIMIT_KEY_MAX - 1;
	memcpy(key, peer, n);
	key[n] = '\0';
}

static bool rules_on(const auth_rules *r)
{
	return r->burst && r->window_ms;
}

/* Failures refilled per ns. */
static double rate(const auth_rules *r)
{
	return (double)r->burst / ((double)r->window_ms * 1e6);
}

/* Invariant 1: decay e's failures up to now. */
static void catch_up(auth_addr *e, const auth_rules *r, uint64_t now_ns)
{
	if (now_ns > e->at_ns) {
		e->spent -= (double)(now_ns - e->at_ns) * rate(r);
		if (e->spent <= 0) {
			e->spent = 0;
			e->throttled = false;
		}
	}
	e->at_ns = now_ns;
}

static auth_addr *find_locked(auth_limit *a, const char *key)
{
	for (size_t i = 0; i < AUTH_LIMIT_ADDRS; i++)
		if (a->addr[i].key[0] && !strcmp(a->addr[i].key, key))
			return &a->addr[i];
	return NULL;
}

/* Invariant 3: the entry a new address takes. */
static auth_addr *claim_locked(auth_limit *a, const auth_rules *r, uint64_t now_ns)
{
	auth_addr *oldest = &a->addr[0];
	for (size_t i = 0; i < AUTH_LIMIT_ADDRS; i++) {
		auth_addr *e = &a->addr[i];
		if (!e->key[0])
			return e;
		catch_up(e, r, now_ns);
		if (e->spent == 0)
			return e;
		if (e->at_ns < oldest->at_ns)
			oldest = e;
	}
	return oldest;
}

static bool blocked(const auth_addr *e, const auth_rules *r)
{
	return (double)r->burst - e->spent < 1.0;
}

uint64_t auth_limit_admit(auth_limit *a, const char *key, const auth_rules *r, uint64_t now_ns)
{
	if (!rules_on(r))
		return 0;
	uint64_t wait_ms = 0;
	pthread_mutex_lock(&a->mu);
	auth_addr *e = find_locked(a, key);
	if (e) {
		catch_up(e, r, now_ns);
		if (blocked(e, r)) {
			double need = e->spent - ((double)r->burst - 1.0); /* failures to refill */
			wait_ms = (uint64_t)(need / rate(r) / 1e6) + 1;
			a->throttled++;
		}
	}
	pthread_mutex_unlock(&a->mu);
	return wait_ms;
}

bool auth_limit_failed(auth_limit *a, const char *key, const auth_rules *r, uint64_t now_ns)
{
	bool now_throttled = false;
	pthread_mutex_lock(&a->mu);
	a->failures++;
	if (rules_on(r)) {
		auth_addr *e = find_locked(a, key);
		if (!e) {
			e = claim_locked(a, r, now_ns);
			memset(e, 0, sizeof(*e));
			snprintf(e->key, sizeof(e->key), "%s", key);
		}
		catch_up(e, r, now_ns);
		e->spent += 1.0;
		if (blocked(e, r) && !e->throttled) {
			e->throttled = true;
			now_throttled = true;
		}
	}
	pthread_mutex_unlock(&a->mu);
	return now_throttled;
}

void auth_limit_counts(auth_limit *a, const auth_rules *r, uint64_t now_ns, uint64_t *failures,
		       uint64_t *throttled, uint64_t *addrs_throttled)
{
	uint64_t n = 0;
	pthread_mutex_lock(&a->mu);
	*failures = a->failures;
	*throttled = a->throttled;
	for (size_t i = 0; rules_on(r) && i < AUTH_LIMIT_ADDRS; i++) {
		auth_addr *e = &a->addr[i];
		if (!e->key[0])
			continue;
		catch_up(e, r, now_ns);
		n += blocked(e, r);
	}
	pthread_mutex_unlock(&a->mu);
	*addrs_throttled = n;
}
