/*
 * test_server_load.c - emdb-server under load and at its limits: 64
 * clients pipelining mixed operations at once (on both I/O backends), a
 * client that never reads its replies while another on the same I/O
 * thread is served, a burst of big replies on one Unix socket (on both
 * backends), frames of tens of MiB, max_connections and max_memory
 * refusals that change nothing.
 */
#include <pthread.h>

#include "tests/lib/server_util.h"

static srv S;

static void stop_server(void)
{
	srv_stop(&S);
}

TestSuite(load, .fini = stop_server, .timeout = 600);

enum { CLIENTS = 64, ROUNDS = 20, NIDS = 16, DIM = 16 };

typedef struct worker {
	int k;
	uint32_t table;
	bool use_unix;
	int failures;
	char why[256];
} worker;

#define W_CHECK(w, cond, ...)                                              \
	do {                                                               \
		if (!(cond)) {                                             \
			(w)->failures++;                                   \
			snprintf((w)->why, sizeof((w)->why), __VA_ARGS__); \
			goto out;                                          \
		}                                                          \
	} while (0)

/* Room for `need` more bytes at the end of *buf; returns where they go. */
static uint8_t *enc_append(uint8_t **buf, size_t *len, size_t *cap, size_t need)
{
	if (*len + need > *cap) {
		*cap = (*len + need) * 2;
		*buf = realloc(*buf, *cap);
	}
	uint8_t *at = *buf + *len;
	*len += need;
	return at;
}

/* Each worker: ROUNDS rounds of PREFETCH, PULL(ticket), PUSH(ticket),
 * LOOKUP, PING, PULL(ids), TICKET_FREE, all sent before any reply is read;
 * replies must come back in order with their ids. */
static void *worker_main(void *p)
{
	worker *w = p;
	cli c;
	c.fd = -1;
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0, n;
	int rc;
	if (w->use_unix) {
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct sockaddr_un a = { .sun_family = AF_UNIX };
		strcpy(a.sun_path, S.sock);
		rc = connect(fd, (struct sockaddr *)&a, sizeof(a));
		if (rc == 0)
			cli_init_fd(&c, fd);
		else
			close(fd);
	} else {
		rc = cli_try_tcp(&c, S.port);
	}
	W_CHECK(w, rc == 0, "connect: %d", rc);

	uint64_t ids[NIDS];
	float g[NIDS * DIM];
	for (int i = 0; i < NIDS; i++)
		ids[i] = (uint64_t)w->k * 1000 + (uint64_t)i;
	for (int i = 0; i < NIDS * DIM; i++)
		g[i] = 1.0f;

	proto_hello_req h = { 1, 1, proto_cstr("load") };
	proto_hello_req_encode(NULL, 0, 0, &h, &n);
	proto_hello_req_encode(enc_append(&buf, &len, &cap, n), n, 1, &h, &n);
	W_CHECK(w, cli_send_raw(&c, buf, len) == 0, "send hello");
	proto_frame *f = NULL;
	W_CHECK(w, cli_recv(&c, &f, 10000) == 1 && f->hdr.status == 0, "hello reply");
	proto_frame_free(f);

	for (int r = 0; r < ROUNDS; r++) {
		/* PREFETCH first, alone: its ticket is needed below */
		len = 0;
		uint64_t base = (uint64_t)r * 100 + 10;
		proto_prefetch_req pf = { w->table, NIDS, ids };
		proto_prefetch_req_encode(NULL, 0, 0, &pf, &n);
		proto_prefetch_req_encode(enc_append(&buf, &len, &cap, n), n, base, &pf, &n);
		W_CHECK(w, cli_send_raw(&c, buf, len) == 0, "send prefetch");
		W_CHECK(w, cli_recv(&c, &f, 10000) == 1, "prefetch reply");
		proto_prefetch_resp pr;
		W_CHECK(w, f->hdr.id == base && proto_prefetch_resp_decode(&f->hdr, f->body, &pr) == 0,
			"prefetch reply %llu", (unsigned long long)f->hdr.id);
		proto_frame_free(f);

		len = 0;
		proto_pull_req pt = { .table = w->table, .dim = DIM, .ticket = pr.ticket };
		proto_push_req ps = { .table = w->table, .dim = DIM, .ticket = pr.ticket,
				      .n_rows = NIDS, .grads = g };
		proto_lookup_req lk = { .table = w->table, .dim = DIM, .n = NIDS, .ids = ids };
		proto_ping pg = { proto_cstr("load") };
		proto_pull_req pi = { .table = w->table, .dim = DIM, .n_ids = NIDS, .ids = ids };
		proto_ticket_free_req tf = { pr.ticket };
#define APPEND(encoder, m, id)                                                           \
	do {                                                                             \
		encoder(NULL, 0, 0, (m), &n);                                            \
		encoder(enc_append(&buf, &len, &cap, n), n, (id), (m), &n);              \
	} while (0)
		APPEND(proto_pull_req_encode, &pt, base + 1);
		APPEND(proto_push_req_encode, &ps, base + 2);
		APPEND(proto_lookup_req_encode, &lk, base + 3);
		APPEND(proto_ping_req_encode, &pg, base + 4);
		APPEND(proto_pull_req_encode, &pi, base + 5);
		APPEND(proto_ticket_free_req_encode, &tf, base + 6);
#undef APPEND
		W_CHECK(w, cli_send_raw(&c, buf, len) == 0, "send round");
		for (uint64_t id = base + 1; id <= base + 6; id++) {
			W_CHECK(w, cli_recv(&c, &f, 10000) == 1, "round %d: no reply %llu", r,
				(unsigned long long)id);
			uint64_t got = f->hdr.id;
			int st = f->hdr.status;
			if (id == base + 1 || id == base + 5) {
				proto_pull_resp pv;
				int d = proto_pull_resp_decode(&f->hdr, f->body, &pv);
				if (d == 0)
					for (int i = 0; i < NIDS * DIM; i++)
						if (pv.vecs[i] != 0.0f)
							d = -1; /* no Update yet: initial zeros */
				proto_frame_free(f);
				W_CHECK(w, got == id && st == 0 && d == 0, "pull %llu: got %llu status %d",
					(unsigned long long)id, (unsigned long long)got, st);
			} else {
				proto_frame_free(f);
				W_CHECK(w, got == id && st == 0, "reply %llu: got %llu status %d",
					(unsigned long long)id, (unsigned long long)got, st);
			}
		}
	}
out:
	free(buf);
	if (c.fd >= 0)
		cli_close(&c);
	return NULL;
}

static void many_clients(const char *backend)
{
	const char *extra[] = { "--io-backend", backend, "--io-threads", "4", NULL };
	srv_start(&S, extra);
	cli adm;
	cli_ready(&adm, &S);
	uint32_t t = cli_create_table(&adm, "load", DIM);

	pthread_t th[CLIENTS];
	static worker w[CLIENTS];
	for (int k = 0; k < CLIENTS; k++) {
		w[k] = (worker){ .k = k, .table = t, .use_unix = k % 4 == 3 };
		pthread_create(&th[k], NULL, worker_main, &w[k]);
	}
	for (int k = 0; k < CLIENTS; k++) {
		pthread_join(th[k], NULL);
		cr_expect_eq(w[k].failures, 0, "client %d: %s", k, w[k].why);
	}
	cr_assert(srv_alive(&S));

	/* Every client pushed each of its rows ROUNDS times: one Update, SGD
	 * lr 0.5, gradient 1 each time. */
	proto_update_req up = { t, 0, 0, 0 };
	uint64_t id = CLI_SEND(&adm, proto_update_req_encode, &up);
	proto_frame *f = cli_ok(&adm, id);
	proto_update_resp ur;
	cr_assert_eq(proto_update_resp_decode(&f->hdr, f->body, &ur), 0);
	cr_assert_eq(ur.rows, CLIENTS * NIDS);
	proto_frame_free(f);
	static uint64_t all[CLIENTS * NIDS];
	for (int k = 0; k < CLIENTS; k++)
		for (int i = 0; i < NIDS; i++)
			all[k * NIDS + i] = (uint64_t)k * 1000 + (uint64_t)i;
	proto_lookup_req lk = { .table = t, .dim = DIM, .n = CLIENTS * NIDS, .ids = all };
	id = CLI_SEND(&adm, proto_lookup_req_encode, &lk);
	f = cli_ok(&adm, id);
	proto_lookup_resp lr;
	cr_assert_eq(proto_lookup_resp_decode(&f->hdr, f->body, &lr), 0);
	for (int i = 0; i < CLIENTS * NIDS * DIM; i++)
		cr_assert_float_eq(lr.vecs[i], -0.5f * ROUNDS, 1e-4, "element %d: %f", i, lr.vecs[i]);
	proto_frame_free(f);

	char *info = cli_info(&adm, "all");
	cr_assert_eq(info_num(info, "connections_total"), CLIENTS + 1, "%s", info);
	char want[64];
	snprintf(want, sizeof(want), "op_push: calls=%d errors=0", CLIENTS * ROUNDS);
	cr_assert(strstr(info, want), "%s", info);
	snprintf(want, sizeof(want), "op_pull: calls=%d errors=0", 2 * CLIENTS * ROUNDS);
	cr_assert(strstr(info, want), "%s", info);
	cr_assert_eq(info_num(info, "tickets"), 0, "every ticket was freed");
	if (!strcmp(backend, "uring") && !strstr(info, "io_backend: uring"))
		cr_assert(strstr(srv_log(&S), "using libevent"), "no fallback line");
	free(info);
	srv_shutdown_clean(&S, &adm);
	cli_close(&adm);
}

Test(load, many_clients_pipelined_libevent)
{
	many_clients("libevent");
}

Test(load, many_clients_pipelined_uring)
{
	many_clients("uring");
}

/* A burst of Pulls with 512 KiB replies, sent in one write on a Unix
 * socket: the server hands each reply to the socket as soon as it is
 * built (net/conn.c invariant 6), while later ones are appended behind
 * it.  Every reply arrives whole, in order, holding the rows asked for. */
static void big_replies(const char *backend)
{
	const char *extra[] = { "--io-backend", backend, NULL };
	srv_start(&S, extra);
	cli adm, c;
	cli_ready(&adm, &S);
	enum { DIMB = 64, NB = 8192, PER = 2048, BURST = 24 };
	uint32_t t = cli_create_table(&adm, "big", DIMB);
	static uint64_t ids[NB], req_ids[BURST][PER];
	static float grads[NB * DIMB];
	for (int i = 0; i < NB; i++) {
		ids[i] = (uint64_t)i * 7919 + 1;
		for (int j = 0; j < DIMB; j++)
			grads[i * DIMB + j] = (float)(i % 1009) + (float)j / 64.0f;
	}
	proto_push_req ps = { .table = t, .dim = DIMB, .n_ids = NB, .ids = ids,
			      .n_rows = NB, .grads = grads };
	proto_frame_free(cli_ok(&adm, CLI_SEND(&adm, proto_push_req_encode, &ps)));
	proto_update_req up = { t, 0, 0, 0 };
	proto_frame_free(cli_ok(&adm, CLI_SEND(&adm, proto_update_req_encode, &up)));
	proto_lookup_req lk = { .table = t, .dim = DIMB, .n = NB, .ids = ids };
	proto_frame *ref = cli_ok(&adm, CLI_SEND(&adm, proto_lookup_req_encode, &lk));
	proto_lookup_resp lr;
	cr_assert_eq(proto_lookup_resp_decode(&ref->hdr, ref->body, &lr), 0);

	/* the burst: request k asks for rows k*97, k*97+1, ... (mod NB) */
	size_t cap = 0, len = 0, one;
	proto_pull_req pl = { .table = t, .dim = DIMB, .n_ids = PER };
	for (int k = 0; k < BURST; k++) {
		for (int i = 0; i < PER; i++)
			req_ids[k][i] = ids[(k * 97 + i) % NB];
		pl.ids = req_ids[k];
		proto_pull_req_encode(NULL, 0, 0, &pl, &one);
		cap += one;
	}
	uint8_t *buf = malloc(cap);
	cr_assert_not_null(buf);
	cli_unix(&c, &S);
	cli_hello(&c, NULL);
	uint64_t first = c.next_id;
	for (int k = 0; k < BURST; k++) {
		pl.ids = req_ids[k];
		cr_assert_eq(proto_pull_req_encode(buf + len, cap - len, c.next_id++, &pl, &one), 0);
		len += one;
	}
	cr_assert_eq(cli_send_raw(&c, buf, len), 0);
	free(buf);
	for (int k = 0; k < BURST; k++) {
		proto_frame *f = cli_ok(&c, first + (uint64_t)k);
		proto_pull_resp pv;
		cr_assert_eq(proto_pull_resp_decode(&f->hdr, f->body, &pv), 0);
		cr_assert_eq(pv.n_rows, PER);
		for (int i = 0; i < PER; i++) {
			const float *want = lr.vecs + (size_t)((k * 97 + i) % NB) * DIMB;
			cr_assert(memcmp(pv.vecs + (size_t)i * DIMB, want, DIMB * sizeof(float)) == 0,
				  "reply %d, row %d differs", k, i);
		}
		proto_frame_free(f);
	}
	proto_frame_free(ref);
	cli_close(&c);
	srv_shutdown_clean(&S, &adm);
	cli_close(&adm);
}

Test(load, burst_of_big_replies_libevent)
{
	big_replies("libevent");
}

Test(load, burst_of_big_replies_uring)
{
	big_replies("uring");
}

/* A client that sends big requests and never reads stops being read from;
 * the server's memory for it stays near output_buffer_limit, and another
 * client on the very same I/O thread is served all along. */
static void never_reads(const char *backend)
{
	const char *extra[] = { "--io-threads", "1", "--io-backend", backend,
				"--output-buffer-limit", "8m", NULL };
	srv_start(&S, extra);
	cli adm, hog;
	cli_ready(&adm, &S);
	enum { DIMH = 64, NH = 16384 };
	uint32_t t = cli_create_table(&adm, "hog", DIMH);
	cli_ready(&hog, &S);
	static uint64_t ids[NH];
	for (int i = 0; i < NH; i++)
		ids[i] = (uint64_t)i;
	proto_prefetch_req pf = { t, NH, ids };
	uint64_t id = CLI_SEND(&hog, proto_prefetch_req_encode, &pf);
	proto_frame *f = cli_ok(&hog, id);
	proto_prefetch_resp pr;
	cr_assert_eq(proto_prefetch_resp_decode(&f->hdr, f->body, &pr), 0);
	proto_frame_free(f);
	long long base = cli_info_num(&adm, "memory", "connection_buffers_bytes");

	/* 256 pulls of 4 MiB: 1 GiB of replies that are never read. */
	proto_pull_req pl = { .table = t, .dim = DIMH, .ticket = pr.ticket };
	int fl = fcntl(hog.fd, F_GETFL);
	fcntl(hog.fd, F_SETFL, fl | O_NONBLOCK);
	size_t one;
	proto_pull_req_encode(NULL, 0, 0, &pl, &one);
	uint8_t req[256];
	int sent = 0;
	for (int i = 0; i < 256; i++) {
		proto_pull_req_encode(req, sizeof(req), 1000 + (uint64_t)i, &pl, &one);
		ssize_t w = send(hog.fd, req, one, MSG_NOSIGNAL);
		if (w != (ssize_t)one)
			break; /* the server stopped reading: our send buffer is full */
		sent++;
	}
	cr_assert_gt(sent, 10);

	/* the other client on the same thread: 200 round trips all answered
	 * while the hog sits on its unread replies (a stalled loop would fail
	 * cli_ping's receive timeout; no tighter time bound, since sanitizer
	 * builds on a shared machine are slow) */
	for (int i = 0; i < 200; i++)
		cli_ping(&adm);

	char *info = cli_info(&adm, "all");
	long long paused = info_num(info, "connections_paused");
	long long bufs = info_num(info, "connection_buffers_bytes");
	free(info);
	cr_assert_eq(paused, 1, "the hog is paused");
	/* limit (8 MiB) + the reply that crossed it (4 MiB) + input + slack */
	cr_assert_lt(bufs - base, 14ll << 20, "buffers grew by %lld bytes", bufs - base);

	/* once it goes, so does its memory */
	cli_close(&hog);
	long long now = bufs;
	for (int i = 0; i < 300 && now > base; i++) {
		t_sleep_ms(10);
		now = cli_info_num(&adm, "memory", "connection_buffers_bytes");
	}
	cr_assert_leq(now, base, "buffers %lld, %lld before", now, base);
	cr_assert_eq(cli_info_num(&adm, "clients", "connections_paused"), 0);
	srv_shutdown_clean(&S, &adm);
	cli_close(&adm);
}

Test(load, client_that_never_reads_libevent)
{
	never_reads("libevent");
}

Test(load, client_that_never_reads_uring)
{
	never_reads("uring");
}

/* Frames of tens of MiB both ways; buffers shrink back afterwards. */
Test(load, big_frames)
{
	srv_start(&S, NULL);
	cli c;
	cli_ready(&c, &S);
	enum { N = 1 << 20, D = 16 };
	uint32_t t = cli_create_table(&c, "big", D);
	long long base = cli_info_num(&c, "memory", "connection_buffers_bytes");
	uint64_t *ids = malloc(N * sizeof(*ids));
	float *g = malloc((size_t)N * D * sizeof(*g));
	for (int i = 0; i < N; i++)
		ids[i] = (uint64_t)i * 3;
	for (size_t i = 0; i < (size_t)N * D; i++)
		g[i] = (float)(i % 7);
	/* 72 MiB request */
	proto_push_req ps = { .table = t, .dim = D, .n_ids = N, .ids = ids, .n_rows = N, .grads = g };
	uint64_t id = CLI_SEND(&c, proto_push_req_encode, &ps);
	proto_frame_free(cli_ok(&c, id));
	proto_update_req up = { t, 0, 0, 0 };
	id = CLI_SEND(&c, proto_update_req_encode, &up);
	proto_frame_free(cli_ok(&c, id));
	/* 64 MiB reply */
	proto_pull_req pl = { .table = t, .dim = D, .n_ids = N, .ids = ids };
	id = CLI_SEND(&c, proto_pull_req_encode, &pl);
	proto_frame *f = cli_ok(&c, id);
	proto_pull_resp pv;
	cr_assert_eq(proto_pull_resp_decode(&f->hdr, f->body, &pv), 0);
	cr_assert_eq(pv.n_rows, N);
	for (size_t i = 0; i < (size_t)N * D; i += 4099)
		cr_assert_float_eq(pv.vecs[i], -0.5f * (float)(i % 7), 1e-5);
	proto_frame_free(f);
	free(ids);
	free(g);
	cli_ping(&c);
	long long now = cli_info_num(&c, "memory", "connection_buffers_bytes");
	cr_assert_leq(now, base + (64 << 10), "buffers %lld, %lld before", now, base);
	cli_close(&c);
}

Test(load, max_connections)
{
	const char *extra[] = { "--max-connections", "4", NULL };
	srv_start(&S, extra);
	cli c[4];
	for (int i = 0; i < 4; i++)
		cli_ready(&c[i], &S);
	cli x;
	cli_tcp(&x, &S);
	char msg[256];
	cli_err(&x, 0, EMDB_ERR_LIMIT, msg, sizeof(msg));
	cr_assert(strstr(msg, "max_connections"), "%s", msg);
	cli_expect_closed(&x);
	cli_close(&x);
	for (int i = 0; i < 4; i++)
		cli_ping(&c[i]);
	cr_assert_eq(cli_info_num(&c[0], "clients", "connections_rejected"), 1);

	/* a slot freed is a slot taken */
	cli_close(&c[3]);
	bool in = false;
	for (int i = 0; i < 200 && !in; i++) {
		t_sleep_ms(10);
		cli_tcp(&x, &S);
		proto_hello_req h = { 1, 1, proto_cstr("late") };
		CLI_SEND(&x, proto_hello_req_encode, &h);
		proto_frame *f = NULL;
		if (cli_recv(&x, &f, 5000) == 1) {
			in = f->hdr.status == 0;
			proto_frame_free(f);
		}
		cli_close(&x);
	}
	cr_assert(in, "a fifth client got in once one left");
	for (int i = 0; i < 3; i++)
		cli_close(&c[i]);
}

/* Over max_memory a request fails with NOMEM and changes nothing: neither
 * a request too big to be buffered nor one whose rows do not fit. */
Test(load, max_memory)
{
	srv_start(&S, NULL);
	cli c;
	cli_ready(&c, &S);
	uint32_t t = cli_create_table(&c, "mm", 64);
	long long used = cli_info_num(&c, "memory", "used_bytes");
	char lim[32];
	snprintf(lim, sizeof(lim), "%lld", used + (2ll << 20));
	cli_config_set(&c, "max_memory", lim);
	cr_assert_eq(cli_info_num(&c, "memory", "max_memory"), used + (2ll << 20));

	/* a 16 MiB Push cannot even be buffered: NOMEM, skipped, still open */
	enum { NB = 1 << 16 };
	uint64_t *ids = malloc(NB * sizeof(*ids));
	float *g = calloc((size_t)NB * 64, sizeof(*g));
	for (int i = 0; i < NB; i++)
		ids[i] = (uint64_t)i;
	proto_push_req ps = { .table = t, .dim = 64, .n_ids = NB, .ids = ids, .n_rows = NB, .grads = g };
	uint64_t id = CLI_SEND(&c, proto_push_req_encode, &ps);
	char msg[256];
	cli_err(&c, id, EMDB_ERR_NOMEM, msg, sizeof(msg));
	cr_assert(strstr(msg, "max_memory"), "%s", msg);
	cli_ping(&c);

	/* a 480 KiB Prefetch fits, its 15 MiB of rows do not */
	proto_prefetch_req pf = { t, 60000, ids };
	id = CLI_SEND(&c, proto_prefetch_req_encode, &pf);
	cli_err(&c, id, EMDB_ERR_NOMEM, NULL, 0);
	emdb_table_info ti = cli_describe(&c, t);
	cr_assert_eq(ti.stats.rows, 0, "nothing half-applied");
	cr_assert_eq(ti.stats.pending_rows, 0);
	cli_ping(&c);

	/* lifted: the same Push goes through */
	cli_config_set(&c, "max_memory", "0");
	id = CLI_SEND(&c, proto_push_req_encode, &ps);
	proto_frame_free(cli_ok(&c, id));
	ti = cli_describe(&c, t);
	cr_assert_eq(ti.stats.rows, NB);
	free(ids);
	free(g);
	srv_shutdown_clean(&S, &c);
	cli_close(&c);
}
