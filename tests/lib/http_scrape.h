/*
 * http_scrape.h - a Prometheus scraper for the tests: a plain HTTP/1.1
 * GET of /metrics over loopback, the answer read to its end, and the
 * value of one sample found in the body.  Criterion assertions end the
 * test on any failure; every wait is bounded by HTTP_WAIT_MS.
 */
#ifndef EMDB_TESTS_HTTP_SCRAPE_H
#define EMDB_TESTS_HTTP_SCRAPE_H

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef HTTP_WAIT_MS
#define HTTP_WAIT_MS 20000       /* a scrape's answer, sanitizer builds included */
#endif
#ifndef HTTP_MAX
#define HTTP_MAX (16u << 20)     /* the most of an answer read */
#endif

/* ---- HTTP, as a scraper speaks it ----------------------------------- */

typedef struct http_resp {
	int status;
	char content_type[128];
	char allow[64];
	long content_length; /* -1: none given */
	char *body;          /* malloc'd, NUL-terminated */
	size_t len;
} http_resp;

static inline void http_free(http_resp *r)
{
	free(r->body);
	memset(r, 0, sizeof(*r));
}

/* The value of header `name` in the header block [p, end), into out. */
static inline void http_header(const char *p, const char *end, const char *name, char *out, size_t cap)
{
	size_t nl = strlen(name);
	out[0] = '\0';
	while (p < end) {
		const char *eol = memmem(p, (size_t)(end - p), "\r\n", 2);
		if (!eol)
			eol = end;
		if ((size_t)(eol - p) > nl && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
			const char *v = p + nl + 1;
			while (v < eol && *v == ' ')
				v++;
			snprintf(out, cap, "%.*s", (int)(eol - v), v);
			return;
		}
		p = eol + 2;
	}
}

static inline uint64_t http_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* `method path` over HTTP/1.1 to 127.0.0.1:port, read to the end (the
 * request asks the server to close).  The test fails when no whole
 * answer comes within HTTP_WAIT_MS. */
static inline http_resp http_do(uint16_t port, const char *method, const char *path)
{
	http_resp r = { .content_length = -1 };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	cr_assert_geq(fd, 0);
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0, "connect to the metrics port %u: %s",
		     port, strerror(errno));
	char req[512];
	int n = snprintf(req, sizeof(req),
			 "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nUser-Agent: emdb-test\r\n"
			 "Accept: text/plain;version=0.0.4\r\nConnection: close\r\n\r\n",
			 method, path, port);
	cr_assert_eq(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);

	size_t cap = 65536, len = 0;
	char *buf = malloc(cap + 1);
	cr_assert_not_null(buf);
	uint64_t deadline = http_now_ms() + HTTP_WAIT_MS;
	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		int k = poll(&p, 1, 100);
		cr_assert_lt(http_now_ms(), deadline, "no complete answer to %s %s within %d ms (%zu bytes)", method,
			     path, HTTP_WAIT_MS, len);
		if (k <= 0)
			continue;
		if (len == cap) {
			cr_assert_lt(cap, HTTP_MAX, "answer over %u bytes", HTTP_MAX);
			cap *= 2;
			buf = realloc(buf, cap + 1);
			cr_assert_not_null(buf);
		}
		ssize_t got = recv(fd, buf + len, cap - len, 0);
		if (got < 0 && errno == EINTR)
			continue;
		cr_assert_geq(got, 0, "recv: %s", strerror(errno));
		if (got == 0)
			break;
		len += (size_t)got;
	}
	close(fd);
	buf[len] = '\0';

	const char *hdr_end = memmem(buf, len, "\r\n\r\n", 4);
	cr_assert_not_null(hdr_end, "no header block in: %.200s", buf);
	cr_assert_eq(sscanf(buf, "HTTP/1.%*d %d", &r.status), 1, "status line: %.80s", buf);
	http_header(buf, hdr_end + 2, "Content-Type", r.content_type, sizeof(r.content_type));
	http_header(buf, hdr_end + 2, "Allow", r.allow, sizeof(r.allow));
	char cl_text[32];
	http_header(buf, hdr_end + 2, "Content-Length", cl_text, sizeof(cl_text));
	if (cl_text[0])
		r.content_length = atol(cl_text);
	r.len = len - (size_t)(hdr_end + 4 - buf);
	r.body = malloc(r.len + 1);
	memcpy(r.body, hdr_end + 4, r.len);
	r.body[r.len] = '\0';
	free(buf);
	return r;
}

/* GET /metrics, which must answer 200 with the exposition format. */
static inline http_resp scrape(uint16_t port)
{
	http_resp r = http_do(port, "GET", "/metrics");
	cr_assert_eq(r.status, 200, "GET /metrics: %d %s", r.status, r.body);
	cr_assert(strncmp(r.content_type, "text/plain; version=0.0.4", 25) == 0, "Content-Type '%s'",
		  r.content_type);
	cr_assert_eq(r.content_length, (long)r.len, "Content-Length %ld, body %zu bytes", r.content_length,
		     r.len);
	return r;
}

/* The value of the sample `series` (name and labels exactly as written,
 * e.g. emdb_requests_total{op="ping"}); -1 when it is absent. */
static inline double value_of(const char *body, const char *series)
{
	size_t n = strlen(series);
	for (const char *p = body; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, series, n) == 0 && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	return -1;
}

#define EXPECT_SAMPLE(body, series, want)                                                             \
	do {                                                                                   \
		double v_ = value_of((body), (series));                                        \
		cr_assert_eq(v_, (double)(want), "%s is %g, expected %g", (series), v_, (double)(want)); \
	} while (0)

#endif
