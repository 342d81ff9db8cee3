/*
 * handle_reserve.c - TABLE_RESERVE: emdb_table_reserve on a thread of its
 * own, answered through the I/O thread of the connection that asked.
 *
 * Making room means having the kernel back the memory of every row to
 * come, which takes as long as writing it once: seconds for gigabytes
 * (3 s for 10M rows of 64 floats, 2.8 GB, on this 2-vCPU VM, whose host
 * backs memory on first touch).  Run on the I/O
 * thread, it would hold every other connection of that thread as long, an
 * inference client's single-ID lookups included.  So the handler starts a
 * detached thread for the call and answers nothing yet; the thread posts
 * the job, result inside, to the connection's I/O thread as an
 * io_completion (net/loop.h), whose done (reserve_done) answers it there
 * between the thread's other work.  Requests the
 * connection sends meanwhile are served as usual: responses carry request
 * ids, so this one may come after them.
 *
 * Invariants:
 *   1. c->answers_owed counts the connection's reserves owed an answer: it
 *      is not closed for idleness or by a drain (before the drain's
 *      deadline) while they run.  A connection closed meanwhile never gets
 *      its answer; the room is made all the same.
 *   2. s->bg_running counts the threads.  stop_threads waits for it to
 *      reach 0 (handle_reserve_wait_all) before it frees the I/O threads
 *      whose mailboxes the threads post to; the engine is closed after.
 *   3. The engine's error and message go back unchanged, as for every
 *      other table command.
 *
 * State changes: a table's index and chunks (the engine's), c->answers_owed,
 * s->bg_running.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/db.h>
#include <emdb/error.h>

#include "net/conn.h"
#include "net/handle.h"
#include "net/handle_int.h"
#include "net/log.h"
#include "net/loop.h"
#include "net/server.h"
#include "net/stats.h"

typedef struct reserve_job {
	io_completion done; /* first: the record's address is its own */
	server *srv;
	io_thread *t;
	uint64_t conn_id, req_id;
	uint32_t table;
	uint64_t rows;
	char peer[64];
	int status;         /* the result, for reserve_done */
	char msg[240];
} reserve_job;

static void bg_end(server *s)
{
	pthread_mutex_lock(&s->bg_lock);
	if (--s->bg_running == 0)
		pthread_cond_broadcast(&s->bg_idle);
	pthread_mutex_unlock(&s->bg_lock);
}

/* On the connection's I/O thread: an empty response or the error reply;
 * c NULL: the connection has gone, the room is made all the same. */
static void reserve_done(conn *c, io_completion *w)
{
	reserve_job *j = (reserve_job *)w;
	uint8_t *p = NULL;
	if (c && j->status < 0)
		conn_reply_err(c, j->req_id, PROTO_OP_TABLE_RESERVE, j->status, j->msg);
	else if (c && !(p = conn_reply_reserve(c, PROTO_HDR_SIZE)))
		conn_reply_err(c, j->req_id, PROTO_OP_TABLE_RESERVE, EMDB_ERR_NOMEM,
			       "the room was made, but there was no memory for the reply");
	if (p) {
		size_t len;
		proto_empty_encode(p, PROTO_HDR_SIZE, j->req_id, PROTO_OP_TABLE_RESERVE, true, &len);
		obuf_commit(&c->out, len);
	}
	emdb_free(j);
}

static void *reserve_main(void *arg)
{
	reserve_job *j = arg;
	server *s = j->srv;
	uint64_t t0 = stats_now_ns();
	j->status = emdb_table_reserve(s->db, j->table, j->rows);
	double secs = (double)(stats_now_ns() - t0) / 1e9;
	if (j->status < 0) {
		snprintf(j->msg, sizeof(j->msg), "%s", emdb_last_error());
		log_info("conn %llu (%s): table %u: no room for %llu rows after %.3f s: %s",
			 (unsigned long long)j->conn_id, j->peer, j->table, (unsigned long long)j->rows,
			 secs, j->msg);
	} else {
		log_info("conn %llu (%s): table %u reserved room for %llu rows in %.3f s",
			 (unsigned long long)j->conn_id, j->peer, j->table, (unsigned long long)j->rows,
			 secs);
	}
	io_thread_post(j->t, &j->done); /* j is reserve_done's from here */
	bg_end(s);
	return NULL;
}

int handle_table_reserve(conn *c, const proto_hdr *h, const uint8_t *body)
{
	proto_table_reserve_req m;
	int rc = proto_table_reserve_req_decode(h, body, &m);
	if (rc)
		return rc;
	server *s = c->srv;
	reserve_job *j = emdb_malloc(sizeof(*j));
	if (!j)
		return EMDB_ERR_NOMEM;
	*j = (reserve_job){ .srv = s, .t = c->t, .conn_id = c->id, .req_id = h->id, .table = m.table,
			    .rows = m.rows };
	io_completion_init(&j->done, c, reserve_done);
	snprintf(j->peer, sizeof(j->peer), "%s", c->peer);

	pthread_mutex_lock(&s->bg_lock);
	s->bg_running++;
	pthread_mutex_unlock(&s->bg_lock);
	pthread_attr_t attr;
	pthread_t th;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	int e = pthread_create(&th, &attr, reserve_main, j);
	pthread_attr_destroy(&attr);
	if (e) {
		emdb_free(j);
		bg_end(s);
		return handle_fail(EMDB_ERR_NOMEM, "TABLE_RESERVE: no thread to run it on (%s)",
				   strerror(e));
	}
	c->answers_owed++;
	return HANDLED_OK; /* answered by reserve_done */
}

void handle_reserve_wait_all(server *s)
{
	pthread_mutex_lock(&s->bg_lock);
	if (s->bg_running)
		log_info("waiting for %u TABLE_RESERVE call(s) to finish", s->bg_running);
	while (s->bg_running)
		pthread_cond_wait(&s->bg_idle, &s->bg_lock);
	pthread_mutex_unlock(&s->bg_lock);
}
