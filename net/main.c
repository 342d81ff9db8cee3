/*
 * main.c - emdb-server's command line: defaults, then the config file,
 * then flags; then run the server until it is told to stop.
 *
 * Invariants:
 *   1. Flags always win over the file, whatever their order on the line:
 *      --config is found first, the file applied, then every other flag.
 *   2. The exit status is 0 after a clean shutdown, 1 when the server could
 *      not start, 2 for a usage error.
 *
 * State changes: none beyond the server's own.
 */
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/config.h"
#include "net/log.h"
#include "net/server.h"
#include "net/tls.h"

/* glibc gives the free memory at the top of a heap back to the kernel as
 * soon as more than M_TRIM_THRESHOLD of it is free, and maps allocations
 * above M_MMAP_THRESHOLD on their own.  A server whose requests each take
 * and free buffers of a MiB or more (a 4096-row batch of dim 64, and on a
 * cluster node the owners' parts and their replies) then faults those
 * pages in again on every request: emdb-bench --cluster measured a home
 * node spending 8 ms of CPU per 1 MiB Pull that way, against 0.7 ms when
 * the memory is kept.  So keep up to 256 MiB of freed heap for reuse and
 * serve allocations up to 32 MiB (glibc's largest threshold) from the heap.
 * The row store's chunks are mapped by the engine itself and not affected.
 * An operator's MALLOC_*_ environment variables win over these.
 *
 * The number of arenas is left to glibc (up to 8 per core, one per I/O
 * thread in practice): glibc applies M_TRIM_THRESHOLD to the threads'
 * heaps too, so freed request and reply buffers stay in whichever arena
 * holds them.  MALLOC_ARENA_MAX=1, once credited with a third less CPU
 * per request, changed neither the server's page faults nor its maps per
 * request (4096 and 100k-row Pulls, docs/benchmarks-history.md "Server
 * memory arenas"), and one arena would serialise every I/O thread's
 * allocations on one lock on a many-core server. */
static void malloc_keep_freed(void)
{
	if (!getenv("MALLOC_MMAP_THRESHOLD_"))
		mallopt(M_MMAP_THRESHOLD, 32 << 20);
	if (!getenv("MALLOC_TRIM_THRESHOLD_"))
		mallopt(M_TRIM_THRESHOLD, 256 << 20);
	if (!getenv("MALLOC_TOP_PAD_"))
		mallopt(M_TOP_PAD, 16 << 20);
}

static void usage(FILE *f)
{
	net_config d;
	config_defaults(&d);
	fprintf(f,
		"usage: emdb-server [--config FILE] [--KEY VALUE ...]\n"
		"\n"
		"Serves an in-memory emdb database over TCP and/or a Unix socket.\n"
		"Settings come from the defaults, then FILE (lines of `key value`),\n"
		"then flags; '--max-frame 64m' and '--max_frame=64m' are the same.\n"
		"\n"
		"keys (default; * = settable at run time with CONFIG SET):\n");
	for (size_t i = 0; i < config_key_count(); i++) {
		const char *k = config_key_name(i);
		char v[64];
		config_get(&d, k, v, sizeof(v));
		fprintf(f, "  %-20s %c %-12s %s\n", k, config_key_settable(k) ? '*' : ' ',
			v[0] ? v : "\"\"", config_key_help(i));
	}
	fprintf(f, "\n  -h, --help     this text\n  --version      print the version\n");
}

int main(int argc, char **argv)
{
	net_config cfg;
	char err[1024];
	malloc_keep_freed();
	/* Before any OpenSSL call: TLS buffers count in max_memory. */
	tls_use_emdb_alloc();
	config_defaults(&cfg);

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		}
		if (!strcmp(a, "--version")) {
			printf("%s\n", EMDB_SERVER_NAME);
			return 0;
		}
		const char *file = NULL;
		if (!strcmp(a, "--config") || !strcmp(a, "-c"))
			file = i + 1 < argc ? argv[++i] : NULL;
		else if (!strncmp(a, "--config=", 9))
			file = a + 9;
		else
			continue;
		if (!file) {
			fprintf(stderr, "emdb-server: --config needs a file\n");
			return 2;
		}
		if (config_load_file(&cfg, file, err, sizeof(err)) < 0) {
			fprintf(stderr, "emdb-server: %s\n", err);
			return 2;
		}
	}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--config") || !strcmp(a, "-c")) {
			i++;
			continue;
		}
		if (!strncmp(a, "--config=", 9))
			continue;
		if (strncmp(a, "--", 2) != 0) {
			fprintf(stderr, "emdb-server: unexpected argument '%s' (try --help)\n", a);
			return 2;
		}
		char key[64];
		const char *val;
		const char *eq = strchr(a + 2, '=');
		size_t klen = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
		if (klen >= sizeof(key)) {
			fprintf(stderr, "emdb-server: unknown option '%s'\n", a);
			return 2;
		}
		memcpy(key, a + 2, klen);
		key[klen] = '\0';
		if (eq) {
			val = eq + 1;
		} else if (i + 1 < argc) {
			val = argv[++i];
		} else {
			fprintf(stderr, "emdb-server: %s needs a value\n", a);
			return 2;
		}
		if (config_set(&cfg, key, val, false, err, sizeof(err)) < 0) {
			fprintf(stderr, "emdb-server: %s\n", err);
			return 2;
		}
	}

	if (log_open(cfg.log_file) < 0) {
		fprintf(stderr, "emdb-server: cannot open log file %s\n", cfg.log_file);
		return 1;
	}
	log_set_level((log_level)cfg.log_level);
	signal(SIGPIPE, SIG_IGN);

	server *s;
	if (server_create(&cfg, &s, err, sizeof(err)) < 0) {
		log_error("%s", err);
		return 1;
	}
	int status = 1;
	if (server_start(s) == 0)
		status = server_run(s);
	server_destroy(s);
	log_info("exit %d", status);
	log_close();
	return status;
}
