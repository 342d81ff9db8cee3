/*
 * net/auth_limit.h - throttling of failed AUTH per peer address.
 *
 * Every address (the peer without its port; a Unix-socket peer is its
 * user, "unix:uid=U", whatever its process) has a bucket of `burst` failures that refills at
 * `burst` per `window_ms`.  A wrong token takes one; while the bucket
 * holds less than one, AUTH from that address is refused without its
 * token being checked, with the time until the next one is allowed.  A
 * correct token takes nothing, so a well-behaved address is never held
 * back, and an address that stops guessing is forgotten after window_ms.
 *
 * The table of addresses is fixed (AUTH_LIMIT_ADDRS entries, no
 * allocation), so no number of attacking addresses can grow it: when it is
 * full, the address whose last failure is oldest gives way.
 *
 * Thread safety: every function may be called from any thread (one mutex;
 * AUTH is rare next to the data plane).
 */
#ifndef EMDB_NET_AUTH_LIMIT_H
#define EMDB_NET_AUTH_LIMIT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define AUTH_LIMIT_ADDRS 1024
#define AUTH_LIMIT_KEY_MAX 64

typedef struct auth_addr {
	char key[AUTH_LIMIT_KEY_MAX]; /* "" when the entry is free */
	double spent;                 /* failures not yet refilled, 0..burst+ */
	uint64_t at_ns;               /* when spent was last brought up to date */
	bool throttled;               /* logged as throttled, not yet forgotten */
} auth_addr;

typedef struct auth_limit {
	pthread_mutex_t mu;
	auth_addr addr[AUTH_LIMIT_ADDRS];
	uint64_t failures;  /* wrong tokens checked (under mu) */
	uint64_t throttled; /* AUTH refused unchecked (under mu) */
} auth_limit;

/* The rules in force (the server's auth_fail_burst and auth_fail_window_ms);
 * burst 0 or window_ms 0 turns throttling off. */
typedef struct auth_rules {
	uint32_t burst;
	uint32_t window_ms;
} auth_rules;

void auth_limit_init(auth_limit *a);
void auth_limit_destroy(auth_limit *a);

/* The address key of a peer as the listener names it ("1.2.3.4:port",
 * "[::1]:port", "unix:uid=U:pid=P"): the part before the last colon. */
void auth_limit_key(const char *peer, char key[AUTH_LIMIT_KEY_MAX]);

/* Before checking a token from `key`: 0 when it may be checked, else the
 * milliseconds until it may (at least 1), the refusal counted. */
uint64_t auth_limit_admit(auth_limit *a, const char *key, const auth_rules *r, uint64_t now_ns);

/* A wrong token from `key`, counted.  Returns true when this failure made
 * the address throttled (the caller logs that, once per episode). */
bool auth_limit_failed(auth_limit *a, const char *key, const auth_rules *r, uint64_t now_ns);

/* For INFO: failures and refusals since start, and addresses throttled
 * now. */
void auth_limit_counts(auth_limit *a, const auth_rules *r, uint64_t now_ns, uint64_t *failures,
		       uint64_t *throttled, uint64_t *addrs_throttled);

#endif
