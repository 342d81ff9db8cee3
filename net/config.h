/*
 * net/config.h - the server's configuration: every key, its default, how it
 * is parsed, and whether CONFIG SET may change it while the server runs.
 *
 * Sources, later ones winning: the built-in defaults, a file of `key value`
 * lines (--config FILE), then command-line flags (--key value, with '-' or
 * '_' between words).  The same key names serve CONFIG GET and CONFIG SET.
 * docs/server.md lists the keys; `emdb-server --help` prints them with
 * their defaults.
 *
 * Values: numbers are decimal; keys marked "size" also take a K, M, G or T
 * suffix (powers of 1024).  Booleans are yes/no, on/off, true/false, 1/0.
 *
 * Thread safety: a net_config is a plain value.  The server keeps one copy
 * behind a lock for CONFIG GET/SET and publishes the run-time settable
 * values to its I/O threads separately (net/server.h).
 */
#ifndef EMDB_NET_CONFIG_H
#define EMDB_NET_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CONFIG_PATH_MAX 1024
#define CONFIG_TOKEN_MAX 1025 /* PROTO_TOKEN_MAX bytes and the NUL */
#define CONFIG_DEFAULT_PORT 7878

typedef enum io_backend_kind {
	IO_BACKEND_LIBEVENT = 0,
	IO_BACKEND_URING = 1,
} io_backend_kind;

typedef struct net_config {
	/* listeners */
	char bind[256];                     /* TCP address; "" = no TCP     */
	uint32_t port;                      /* 0 = ephemeral                */
	char unix_socket[108];              /* path; "" = no Unix socket    */
	char port_file[CONFIG_PATH_MAX];    /* write the bound TCP port here */
	uint32_t backlog;
	char metrics_address[256];          /* /metrics (net/metrics.h)     */
	uint32_t metrics_port;              /* 0 = no /metrics endpoint     */
	/* threads and I/O */
	uint32_t io_threads;                /* 0 = one per online CPU       */
	io_backend_kind io_backend;
	uint32_t uring_entries;             /* submission queue depth       */
	uint32_t busy_poll_us;              /* poll this long before sleeping */
	/* limits */
	uint32_t max_connections;           /* TCP connections at once      */
	uint32_t max_unix_connections;      /* Unix-socket ones, apart      */
	uint64_t max_frame;                 /* largest frame body, bytes    */
	uint32_t max_batch;                 /* IDs per request              */
	uint64_t max_memory;                /* emdb_alloc_set_limit; 0 = none */
	int huge_pages;                     /* emdb_alloc_set_huge_pages    */
	uint64_t output_buffer_limit;       /* per connection: stop reading above */
	uint64_t unix_send_buffer;          /* SO_SNDBUF, Unix sockets; 0 = kernel's */
	uint32_t max_tickets;               /* per connection               */
	uint32_t drain_timeout_ms;          /* SIGTERM/SHUTDOWN grace       */
	uint32_t handshake_timeout_ms;      /* HELLO (and AUTH) due; 0 = never */
	uint32_t idle_timeout_s;            /* close silent clients; 0 = never */
	uint32_t update_barrier_timeout_ms; /* synchronous steps; 0 = never */
	uint32_t auth_fail_burst;           /* wrong tokens per address at once */
	uint32_t auth_fail_window_ms;       /* ... refilled over this; 0 = off */
	/* auth */
	char admin_token[CONFIG_TOKEN_MAX];
	char trainer_token[CONFIG_TOKEN_MAX];
	char reader_token[CONFIG_TOKEN_MAX];
	/* TLS on the TCP listener (net/tls.h); "" = plain TCP */
	char tls_cert_file[CONFIG_PATH_MAX]; /* PEM certificate (chain)     */
	char tls_key_file[CONFIG_PATH_MAX];  /* PEM private key             */
	char tls_ca_file[CONFIG_PATH_MAX];   /* PEM CAs: clients must present
						a certificate they signed;
						"" = no client certificates */
	/* logging */
	int log_level;                      /* log_level                    */
	char log_file[CONFIG_PATH_MAX];     /* "" = stderr                  */
	/* engine (emdb_db_config) */
	uint32_t shards;
	uint64_t chunk_bytes;
	uint32_t max_tables;
	uint64_t gpu_memory;                /* emdb_db_config.gpu_memory     */
	/* persistence (net/checkpoint.h) */
	char data_dir[CONFIG_PATH_MAX];     /* checkpoint store; "" = off    */
	char restore[32];                   /* at start: "", "latest" or an id */
	uint32_t accept_data_loss;          /* 1: open a damaged store anyway */
	uint32_t checkpoint_keep;           /* 0 = keep all                 */
	uint32_t checkpoint_every_steps;    /* UPDATEs, PUSH_UPDATEs; 0 = off */
	uint32_t checkpoint_every_seconds;  /* 0 = off                      */
	uint32_t checkpoint_full_every;     /* every Nth automatic one is full */
	/* cluster (net/node_link.h, docs/cluster.md); "" = a single node */
	char cluster_file[CONFIG_PATH_MAX]; /* membership, the same on every node */
	uint32_t cluster_rank;              /* this node; CONFIG_RANK_UNSET = not given */
	char cluster_secret_file[CONFIG_PATH_MAX]; /* the shared secret */
	uint32_t node_timeout_ms;           /* a node-to-node call's deadline */
	uint32_t cluster_start_timeout_ms;  /* forming at start */
	uint32_t cluster_busy_poll;         /* 1: the link polls UCX */
	uint32_t cluster_serve_threads;     /* owner side's pool; 0: the link's thread */
	char cluster_checkpoint_dir[CONFIG_PATH_MAX]; /* parts and manifests of
					       cluster checkpoints; every node reads it */
	uint32_t cluster_checkpoint_timeout_ms; /* a cluster checkpoint's hold and each part */
} net_config;

#define CONFIG_RANK_UNSET UINT32_MAX

/* Fill *c with the documented defaults. */
void config_defaults(net_config *c);

/* Set one key from its text form.  Returns 0, or -1 with a message in
 * err[errlen] (unknown key, bad value, out of range).  When `running` is
 * true only keys settable at run time are accepted. */
int config_set(net_config *c, const char *key, const char *value, bool running, char *err,
	       size_t errlen);

/* The text form of key's value into buf[len] (secrets read "<hidden>" when
 * set, "" when not).  Returns 0, or -1 for an unknown key. */
int config_get(const net_config *c, const char *key, char *buf, size_t len);

/* Keys in documentation order: i in 0..config_key_count()-1. */
size_t config_key_count(void);
const char *config_key_name(size_t i);
const char *config_key_help(size_t i);
bool config_key_settable(const char *key);
/* The key named by a command-line flag spelling ("max-frame" or
 * "max_frame"), or NULL. */
const char *config_key_lookup(const char *name);

/* Apply a file of `key value` lines: '#' starts a comment, blank lines are
 * skipped, the value is the rest of the line with surrounding blanks
 * removed (it may contain blanks; quotes are not interpreted).  Returns 0,
 * or -1 with "FILE:LINE: message" in err. */
int config_load_file(net_config *c, const char *path, char *err, size_t errlen);

/* Checks that involve several keys.  Returns 0 or -1 with a message. */
int config_validate(const net_config *c, char *err, size_t errlen);

#endif
