/*
 * test_ucx_group.c - the bare UCX exchange between processes that
 * emdb-bench --cluster holds the nodes against (tools/linkbench/
 * ucx_group.h): a home and two owner processes on loopback TCP exchange
 * rounds of eager and rendezvous messages to both owners, every message
 * answered with the size asked; bad arguments are refused and leave the
 * group usable; an owner killed makes the next exchange fail with a
 * message instead of hanging; close leaves no process behind.  No figure
 * of speed is asserted.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/linkbench/ucx_group.h"

static void tcp_only(void)
{
	setenv("UCX_TLS", "tcp", 1);
	setenv("UCX_NET_DEVICES", "lo", 1);
}

TestSuite(ucx_group, .init = tcp_only, .timeout = 120);

static ucx_group *open_two(pid_t pids[3])
{
	ucx_group *g;
	char err[256] = "";
	cr_assert_eq(ucx_group_open(&g, 2, 0, err, sizeof(err)), 0, "%s", err);
	for (unsigned i = 0; i < 3; i++) {
		pids[i] = ucx_group_pid(g, i);
		cr_assert_gt(pids[i], 0, "process %u", i);
	}
	cr_assert_eq(ucx_group_pid(g, 3), 0, "two owners and a home only");
	return g;
}

/* Closed and reaped: no process of the group is left, zombies included. */
static void close_and_check(ucx_group *g, const pid_t pids[3])
{
	ucx_group_close(g);
	for (unsigned i = 0; i < 3; i++) {
		errno = 0;
		cr_assert_eq(kill(pids[i], 0), -1, "process %d still there", (int)pids[i]);
		cr_assert_eq(errno, ESRCH);
	}
}

Test(ucx_group, every_message_reaches_its_owner_and_is_answered)
{
	pid_t pids[3];
	ucx_group *g = open_two(pids);
	/* Eager and rendezvous both ways, both owners. */
	unsigned to[3] = { 0, 1, 1 };
	size_t req[3] = { 100, 300000, 64 }, rep[3] = { 200000, 8, 64 };
	size_t round = 100 + 300000 + 64 + 200000 + 8 + 64;
	ucx_am_result r;
	char err[256] = "";

	cr_assert_eq(ucx_group_exchange(g, to, req, rep, 3, 4, 50, 0, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.rounds, 50);
	cr_assert_eq(r.bytes, 50 * round);
	cr_assert_gt(r.ns, 0);

	/* Bounded by time instead: some rounds, all of them complete. */
	cr_assert_eq(ucx_group_exchange(g, to, req, rep, 3, 2, UINT64_MAX, 50000000, &r, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_gt(r.rounds, 0);
	cr_assert_eq(r.bytes, r.rounds * round);

	/* Larger requests than before: the owners' buffers grow. */
	size_t big[1] = { 2u << 20 }, small[1] = { 16 };
	unsigned one[1] = { 1 };
	cr_assert_eq(ucx_group_exchange(g, one, big, small, 1, 1, 5, 0, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.rounds, 5);
	close_and_check(g, pids);
}

Test(ucx_group, bad_arguments_are_refused_and_change_nothing)
{
	pid_t pids[3];
	ucx_group *g = open_two(pids);
	unsigned to[1] = { 2 }, ok[1] = { 0 };
	size_t req[1] = { 64 }, rep[1] = { 64 };
	ucx_am_result r;
	char err[256] = "";

	cr_assert_eq(ucx_group_exchange(g, to, req, rep, 1, 1, 1, 0, &r, err, sizeof(err)), -1);
	cr_assert_not_null(strstr(err, "no owner 2"), "%s", err);
	cr_assert_eq(ucx_group_exchange(g, ok, req, rep, 0, 1, 1, 0, &r, err, sizeof(err)), -1);
	cr_assert_eq(ucx_group_exchange(g, ok, req, rep, 1, 0, 1, 0, &r, err, sizeof(err)), -1);
	cr_assert_eq(ucx_group_exchange(g, ok, req, rep, 1, 1, 3, 0, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.rounds, 3);
	close_and_check(g, pids);

	cr_assert_eq(ucx_group_open(&g, 0, 0, err, sizeof(err)), -1);
	cr_assert_eq(ucx_group_open(&g, UCX_GROUP_MAX_OWNERS + 1, 0, err, sizeof(err)), -1);
	cr_assert_null(g);
}

Test(ucx_group, a_dead_owner_fails_the_exchange_instead_of_hanging)
{
	pid_t pids[3];
	ucx_group *g = open_two(pids);
	unsigned to[2] = { 0, 1 };
	size_t req[2] = { 64, 64 }, rep[2] = { 64, 64 };
	ucx_am_result r;
	char err[256] = "";

	cr_assert_eq(ucx_group_exchange(g, to, req, rep, 2, 1, 10, 0, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(kill(pids[2], SIGKILL), 0);
	cr_assert_eq(ucx_group_exchange(g, to, req, rep, 2, 1, 1000, 0, &r, err, sizeof(err)), -1);
	cr_assert_neq(err[0], 0, "a message says why");
	/* Broken: refused from now on, and still closable. */
	cr_assert_eq(ucx_group_exchange(g, to, req, rep, 2, 1, 1, 0, &r, err, sizeof(err)), -1);
	close_and_check(g, pids);
}
