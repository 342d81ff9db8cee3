/*
 * test_server_memory.c - the non-reading-client memory test: what clients
 * that send requests the server refuses, and never read the answers, can
 * make the server hold.
 *
 * Issue 23 item 1: a LOOKUP with a huge wrong dim made the server set aside
 * its reply (up to max_frame) before the engine refused the dim, and the
 * empty block stayed queued behind the error reply; the output limit
 * counted only the error replies.  A few kB of requests held gigabytes,
 * and under max_memory a trainer's Prefetch then failed with NOMEM.
 *
 * Here readers send thousands of such LOOKUPs and never read; the server's
 * counted memory (INFO used_bytes), its connection buffers and its resident
 * set must stay within what the configured limits allow (output_buffer_limit
 * and an input buffer per connection), and a trainer on another connection
 * must still Prefetch and Pull.  A second test has the engine refuse a
 * request only after its reply was reserved (bad bag offsets), which must
 * give the room back.
 *
 * No timing is asserted: sends are bounded in count and stop when the
 * server stops reading; every wait is bounded.
 */
#include "tests/lib/server_util.h"

static srv S;

static void stop_server(void)
{
	srv_stop(&S);
}

TestSuite(memory, .fini = stop_server, .timeout = 120);

#define READERS 4
#define LIMIT (1ll << 20)      /* output_buffer_limit */
#define MAX_MEMORY (256ll << 20)
#define BAD_DIM (4u << 20)     /* a 16 MiB reply for one ID */
#define SENDS 20000

static long long vm_rss_bytes(pid_t pid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	long long kb = -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %lld kB", &kb) == 1)
			break;
	fclose(f);
	cr_assert_geq(kb, 0, "no VmRSS in %s", path);
	return kb << 10;
}

/* Connect over TCP and AUTH with token; the role must be `role`. */
static void login(cli *c, const char *token, proto_role role)
{
	cli_tcp(c, &S);
	cli_hello(c, NULL);
	cr_assert_eq(cli_auth(c, token), role);
}

/* Send encoded request req (len bytes) up to `max` times without reading,
 * until the socket would block (the server stopped reading us).  Returns
 * how many went out whole. */
static int flood(cli *c, const uint8_t *req, size_t len, int max)
{
	int fl = fcntl(c->fd, F_GETFL);
	fcntl(c->fd, F_SETFL, fl | O_NONBLOCK);
	int sent = 0;
	size_t off = 0;
	while (sent < max) {
		ssize_t w = send(c->fd, req + off, len - off, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		off += (size_t)w;
		if (off == len) {
			off = 0;
			sent++;
		}
	}
	/* a request cut in half would leave the server waiting for its end:
	 * finish it blocking (the server reads again once it has room) */
	fcntl(c->fd, F_SETFL, fl);
	if (off)
		cr_assert_eq(cli_send_raw(c, req + off, len - off), 0);
	return sent;
}

/* A trainer's Prefetch of 1000 IDs and the Pull of its ticket succeed. */
static void trainer_works(cli *trn, uint32_t table, uint32_t dim)
{
	static uint64_t ids[1000];
	for (int i = 0; i < 1000; i++)
		ids[i] = 5000 + (uint64_t)i;
	proto_prefetch_req pf = { table, 1000, ids };
	uint64_t id = CLI_SEND(trn, proto_prefetch_req_encode, &pf);
	proto_frame *f = cli_ok(trn, id);
	proto_prefetch_resp pr;
	cr_assert_eq(proto_prefetch_resp_decode(&f->hdr, f->body, &pr), 0);
	proto_frame_free(f);
	cr_assert_eq(pr.count, 1000);
	proto_pull_req pl = { .table = table, .dim = dim, .ticket = pr.ticket };
	id = CLI_SEND(trn, proto_pull_req_encode, &pl);
	f = cli_ok(trn, id);
	proto_pull_resp r;
	cr_assert_eq(proto_pull_resp_decode(&f->hdr, f->body, &r), 0);
	cr_assert_eq(r.n_rows, 1000);
	cr_assert_eq(r.dim, dim);
	proto_frame_free(f);
}

static void readers_that_never_read(const char *backend)
{
	char maxmem[32], limit[32];
	snprintf(maxmem, sizeof(maxmem), "%lld", MAX_MEMORY);
	snprintf(limit, sizeof(limit), "%lld", LIMIT);
	const char *extra[] = { "--io-threads", "1", "--io-backend", backend, "--max-memory", maxmem,
				"--output-buffer-limit", limit, "--admin-token", "adm",
				"--trainer-token", "trn", "--reader-token", "rdr", NULL };
	srv_start(&S, extra);
	cli adm, trn, rdr[READERS];
	login(&adm, "adm", PROTO_ROLE_ADMIN);
	login(&trn, "trn", PROTO_ROLE_TRAINER);
	enum { DIM = 8 };
	uint32_t t = cli_create_table(&adm, "emb", DIM);
	trainer_works(&trn, t, DIM);

	char *info = cli_info(&adm, "memory");
	long long used0 = info_num(info, "used_bytes");
	long long bufs0 = info_num(info, "connection_buffers_bytes");
	free(info);
	long long rss0 = vm_rss_bytes(S.pid);

	/* One ID, a dim the table does not have: DIM refused, every time. */
	uint64_t one_id = 1;
	proto_lookup_req lk = { .table = t, .dim = BAD_DIM, .n = 1, .ids = &one_id };
	uint8_t req[128];
	size_t len;
	cr_assert_eq(proto_lookup_req_encode(NULL, 0, 1, &lk, &len), EMDB_ERR_LIMIT);
	cr_assert_leq(len, sizeof(req));
	cr_assert_eq(proto_lookup_req_encode(req, sizeof(req), 1, &lk, &len), 0);

	/* The first reader reads its answer: the refusal a user sees. */
	for (int i = 0; i < READERS; i++)
		login(&rdr[i], "rdr", PROTO_ROLE_READER);
	cr_assert_eq(cli_send_raw(&rdr[0], req, len), 0);
	char msg[256];
	cli_err(&rdr[0], 1, EMDB_ERR_DIM, msg, sizeof(msg));
	cr_assert(strstr(msg, "dim"), "%s", msg);

	long long total = 0;
	for (int i = 0; i < READERS; i++)
		total += flood(&rdr[i], req, len, SENDS);
	cr_assert_gt(total, READERS * 100, "only %lld requests went out", total);

	/* The trainer is served while the readers sit on their replies. */
	trainer_works(&trn, t, DIM);
	cli_ping(&adm);

	info = cli_info(&adm, "all");
	long long used = info_num(info, "used_bytes");
	long long bufs = info_num(info, "connection_buffers_bytes");
	free(info);
	long long rss = vm_rss_bytes(S.pid);
	/* Per reader at most the output limit, the block that crossed it and
	 * an input buffer; 16 MiB of slack covers the trainer's rows and
	 * whatever else the server touched meanwhile.  Before the fix every
	 * refused LOOKUP kept 16 MiB: used_bytes hit max_memory. */
	long long bound = READERS * (2 * LIMIT + (1ll << 20)) + (16ll << 20);
	cr_assert_lt(used - used0, bound, "used_bytes grew by %lld bytes (bound %lld) after %lld refused LOOKUPs",
		     used - used0, bound, total);
	cr_assert_lt(bufs - bufs0, bound, "connection buffers grew by %lld bytes", bufs - bufs0);
	cr_assert_lt(rss - rss0, bound + (32ll << 20), "VmRSS grew by %lld bytes", rss - rss0);

	for (int i = 0; i < READERS; i++)
		cli_close(&rdr[i]);
	trainer_works(&trn, t, DIM);
	cli_close(&trn);
	srv_shutdown_clean(&S, &adm);
	cli_close(&adm);
}

Test(memory, readers_that_never_read_libevent)
{
	readers_that_never_read("libevent");
}

Test(memory, readers_that_never_read_uring)
{
	readers_that_never_read("uring");
}

/* A Pull of bags whose offsets the engine refuses is refused only after
 * its reply (bags x dim floats) was reserved: the reservation must be
 * given back, or each such request would keep its 16 MiB. */
Test(memory, refused_after_reserve_gives_room_back)
{
	char maxmem[32];
	snprintf(maxmem, sizeof(maxmem), "%lld", MAX_MEMORY);
	const char *extra[] = { "--io-threads", "1", "--max-memory", maxmem, NULL };
	srv_start(&S, extra);
	cli c;
	cli_ready(&c, &S);
	enum { WIDE = 65536, BAGS = 64, SMALL = 8, PULLS = 40 };
	uint32_t wide = cli_create_table(&c, "wide", WIDE);
	uint32_t small = cli_create_table(&c, "small", SMALL);
	long long used0 = cli_info_num(&c, "memory", "used_bytes");

	/* 64 bags of one ID, the last offset past the batch: INVALID.  Sent
	 * without reading the answers, so nothing the server queued for them
	 * is let go by sending it. */
	uint64_t id1 = 1, offsets[BAGS + 1] = { 0 };
	offsets[BAGS] = 7;
	proto_pull_req pl = { .table = wide, .dim = WIDE, .n_ids = 1, .ids = &id1, .n_bags = BAGS,
			      .pool = EMDB_POOL_SUM, .offsets = offsets };
	uint64_t first = 0;
	for (int i = 0; i < PULLS; i++) {
		uint64_t id = CLI_SEND(&c, proto_pull_req_encode, &pl);
		first = first ? first : id;
	}
	/* Watch from another connection until all of them have run. */
	cli o;
	cli_ready(&o, &S);
	long long calls = 0, used = 0;
	for (int i = 0; i < 1000 && calls < PULLS; i++) {
		char *info = cli_info(&o, "all");
		const char *p = strstr(info, "op_pull: calls=");
		calls = p ? atoll(p + strlen("op_pull: calls=")) : 0;
		used = info_num(info, "used_bytes");
		free(info);
		if (calls < PULLS)
			t_sleep_ms(10);
	}
	cli_close(&o);
	cr_assert_eq(calls, PULLS, "the server ran %lld of %d Pulls", calls, PULLS);
	cr_assert_lt(used - used0, 4ll << 20, "used_bytes grew by %lld bytes after %d refused Pulls",
		     used - used0, PULLS);
	for (int i = 0; i < PULLS; i++)
		cli_err(&c, first + (uint64_t)i, EMDB_ERR_INVALID, NULL, 0);
	trainer_works(&c, small, SMALL);
	srv_shutdown_clean(&S, &c);
	cli_close(&c);
}
