/*
 * test_client_uri.c - the connection URIs of emdb/client.h: what is
 * accepted, what each part becomes, and that every malformed URI is
 * refused with INVALID and a message instead of being half-understood.
 */
#include <criterion/criterion.h>
#include <string.h>

#include <emdb/client.h>

#include "client/uri.h"

static cl_uri parse_ok(const char *s)
{
	cl_uri u;
	int rc = cl_uri_parse(s, &u);
	cr_assert_eq(rc, EMDB_OK, "%s: %s", s, emdb_client_last_error());
	return u;
}

Test(client_uri, tcp_forms)
{
	cl_uri u = parse_ok("tcp://127.0.0.1:7000");
	cr_assert_eq(u.kind, CL_URI_TCP);
	cr_assert_str_eq(u.host, "127.0.0.1");
	cr_assert_eq(u.port, 7000);
	cr_assert_null(u.token);
	cl_uri_free(&u);

	u = parse_ok("tcp://db.example.org");
	cr_assert_str_eq(u.host, "db.example.org");
	cr_assert_eq(u.port, EMDB_CLIENT_DEFAULT_PORT);
	cl_uri_free(&u);

	u = parse_ok("tcp://[::1]:9/");
	cr_assert_str_eq(u.host, "::1");
	cr_assert_eq(u.port, 9);
	cl_uri_free(&u);

	u = parse_ok("tcp://[fe80::1]");
	cr_assert_str_eq(u.host, "fe80::1");
	cr_assert_eq(u.port, EMDB_CLIENT_DEFAULT_PORT);
	cl_uri_free(&u);
}

Test(client_uri, query_keys_are_decoded)
{
	cl_uri u = parse_ok("tcp://h:1?token=a%2Fb%3d%25c+d&timeout=2500&name=my%20trainer");
	cr_assert_str_eq(u.token, "a/b=%c+d");
	cr_assert_str_eq(u.client_name, "my trainer");
	cr_assert(u.has_timeout);
	cr_assert_eq(u.timeout_ms, 2500);
	cl_uri_free(&u);

	u = parse_ok("tcp://h:1?token=");
	cr_assert_str_eq(u.token, "");
	cl_uri_free(&u);
}

Test(client_uri, tls_and_its_files)
{
	cl_uri u = parse_ok("tls://db1:7000?ca=%2Fetc%2Femdb%2Fca.pem&cert=/c.pem&key=/c.key&token=t");
	cr_assert_eq(u.kind, CL_URI_TLS);
	cr_assert_str_eq(u.host, "db1");
	cr_assert_eq(u.port, 7000);
	cr_assert_str_eq(u.tls_ca, "/etc/emdb/ca.pem");
	cr_assert_str_eq(u.tls_cert, "/c.pem");
	cr_assert_str_eq(u.tls_key, "/c.key");
	cr_assert_str_eq(u.token, "t");
	cl_uri_free(&u);
	cr_assert_null(u.tls_ca);

	u = parse_ok("tls://[::1]");
	cr_assert_eq(u.kind, CL_URI_TLS);
	cr_assert_str_eq(u.host, "::1");
	cr_assert_eq(u.port, EMDB_CLIENT_DEFAULT_PORT);
	cr_assert_null(u.tls_ca);
	cl_uri_free(&u);
}

Test(client_uri, unix_and_mem)
{
	cl_uri u = parse_ok("unix:///run/emdb/emdb.sock?token=t");
	cr_assert_eq(u.kind, CL_URI_UNIX);
	cr_assert_str_eq(u.path, "/run/emdb/emdb.sock");
	cr_assert_str_eq(u.token, "t");
	cl_uri_free(&u);

	u = parse_ok("mem://");
	cr_assert_eq(u.kind, CL_URI_MEM);
	cr_assert_str_eq(u.name, "");
	cl_uri_free(&u);

	u = parse_ok("mem://shared-db.1?timeout=0");
	cr_assert_str_eq(u.name, "shared-db.1");
	cr_assert(u.has_timeout);
	cr_assert_eq(u.timeout_ms, 0);
	cl_uri_free(&u);
}

Test(client_uri, malformed_uris_are_refused)
{
	static const char *bad[] = {
		"",
		"http://h:1",
		"tcp//h:1",
		"tcp://",
		"tcp://:7878",
		"tcp://h:",
		"tcp://h:0",
		"tcp://h:65536",
		"tcp://h:12x",
		"tcp://h:1/path",
		"tcp://[::1",
		"tcp://[::1]x",
		"tcp://h:1?tokn=x",       /* a typo is not ignored */
		"tcp://h:1?token",        /* no '=' */
		"tcp://h:1?token=%zz",
		"tcp://h:1?token=%4",
		"tcp://h:1?token=%00",    /* no NUL inside a token */
		"tcp://h:1?token=a&token=b",
		"tcp://h:1?timeout=-1",
		"tcp://h:1?timeout=99999999999",
		"tcp://h:1?ca=/ca.pem",   /* TLS files on a plain URI */
		"unix:///s?cert=/c.pem",
		"tls://",
		"tls://h:1?ca=/a&ca=/b",
		"tls://h:1?cafile=/a",
		"unix://relative/path",
		"unix://",
		"mem://bad/name",
		"mem://a b",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cl_uri u;
		int rc = cl_uri_parse(bad[i], &u);
		cr_assert_eq(rc, EMDB_ERR_INVALID, "'%s' was accepted", bad[i]);
		cr_assert_neq(emdb_client_last_error()[0], 0, "'%s': no message", bad[i]);
	}
	cl_uri u;
	cr_assert_eq(cl_uri_parse(NULL, &u), EMDB_ERR_INVALID);

	char longpath[300] = "unix:///";
	memset(longpath + 8, 'p', 200);
	cr_assert_eq(cl_uri_parse(longpath, &u), EMDB_ERR_INVALID);
}

Test(client_uri, connect_reports_uri_errors)
{
	emdb_client *c = (emdb_client *)1;
	cr_assert_eq(emdb_client_connect("tcp://h:1?bogus=1", NULL, &c), EMDB_ERR_INVALID);
	cr_assert_null(c);
	cr_assert(strstr(emdb_client_last_error(), "bogus"), "%s", emdb_client_last_error());
	cr_assert_eq(emdb_client_connect("mem://", NULL, NULL), EMDB_ERR_INVALID);

	emdb_client_options o = EMDB_CLIENT_OPTIONS_INIT;
	o.size = 0;
	cr_assert_eq(emdb_client_connect("mem://", &o, &c), EMDB_ERR_INVALID);
	o = (emdb_client_options)EMDB_CLIENT_OPTIONS_INIT;
	o.mem_threads = 65;
	cr_assert_eq(emdb_client_connect("mem://", &o, &c), EMDB_ERR_INVALID);
}

Test(client_uri, connect_refused_and_missing_socket)
{
	emdb_client *c;
	/* Port 1 on loopback: nothing listens there in a test sandbox. */
	int rc = emdb_client_connect("tcp://127.0.0.1:1", NULL, &c);
	cr_assert_eq(rc, EMDB_ERR_IO, "%s", emdb_client_last_error());
	rc = emdb_client_connect("unix:///nonexistent/emdb.sock", NULL, &c);
	cr_assert_eq(rc, EMDB_ERR_IO, "%s", emdb_client_last_error());
}
