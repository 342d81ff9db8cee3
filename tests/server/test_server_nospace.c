/*
 * test_server_nospace.c - emdb-server whose --data-dir is on a full file
 * system, black box: a checkpoint that does not fit fails with NOSPACE
 * and a message that says so, the server keeps serving Pull, Push and
 * Update meanwhile, and once space is freed the next checkpoint succeeds
 * without a restart.
 *
 * The file system is a 20 MiB tmpfs (tests/fullfs.h, root only: the test
 * skips, saying so, elsewhere); the .fini fixture kills the server, and
 * the mount goes with the test's process, also after a failed assertion.
 */
#define _GNU_SOURCE /* tests/tmpdir.h: nftw; tests/fullfs.h: MNT_DETACH */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <emdb/alloc.h>
#include <emdb/client.h>
#include <emdb/db.h>

#include "tests/lib/fullfs.h"
#include "tests/lib/helpers.h"
#include "tests/lib/client_server.h"

#define CALL_MS 60000
#define DIM 16
#define ROWS 40000 /* about 2.9 MB of row data per checkpoint */
#define BATCH 4000
#define MAX_CKPTS 20
#define OK(call) cr_assert_eq((call), EMDB_OK, "%s: %s", #call, emdb_client_last_error())

static test_server srv;
static fullfs fs;

static void setup(void)
{
	fullfs_setup(&fs, 20);
}

static void teardown(void)
{
	test_server_stop(&srv);
	fullfs_teardown(&fs);
}

/* Pull every row (creating them), push a gradient to each, Update once. */
static void train_all(emdb_client *c, uint32_t t)
{
	uint64_t *ids = emdb_malloc(BATCH * sizeof(uint64_t));
	float *v = emdb_malloc(BATCH * DIM * sizeof(float));
	cr_assert(ids && v);
	for (uint64_t b = 0; b < ROWS; b += BATCH) {
		for (uint64_t i = 0; i < BATCH; i++)
			ids[i] = scramble(b + i);
		OK(emdb_client_pull(c, t, ids, BATCH, DIM, v));
		for (size_t i = 0; i < (size_t)BATCH * DIM; i++)
			v[i] = 0.25f;
		OK(emdb_client_push(c, t, ids, BATCH, DIM, v));
	}
	OK(emdb_client_update(c, t, NULL));
	emdb_free(ids);
	emdb_free(v);
}

Test(server_nospace, a_full_disk_fails_the_checkpoint_and_the_server_keeps_serving, .init = setup,
     .fini = teardown, .timeout = 240)
{
	if (!fs.mounted)
		cr_skip_test("needs root to mount a 20 MiB tmpfs (uid %d)", (int)geteuid());
	fullfs_ballast(fs.ballast, 6); /* another user of the disk, freed later */
	const char *const argv[] = { "--data-dir", fs.data, NULL };
	test_server_start(&srv, argv);
	emdb_client *c = test_client_open(srv.unix_uri, CALL_MS);
	emdb_table_config cfg = EMDB_TABLE_CONFIG_INIT;
	strcpy(cfg.name, "t");
	cfg.dim = DIM;
	uint32_t t;
	OK(emdb_client_table_create(c, &cfg, &t));

	/* Checkpoints until the disk is full. */
	int rc = EMDB_OK;
	size_t made = 0;
	for (int i = 0; i < MAX_CKPTS && rc == EMDB_OK; i++) {
		train_all(c, t);
		rc = emdb_client_checkpoint(c, EMDB_CKPT_FULL, NULL);
		made += rc == EMDB_OK;
	}
	cr_assert_eq(rc, EMDB_ERR_NOSPACE, "the checkpoint that did not fit: %s: %s", emdb_err_name(rc),
		     emdb_client_last_error());
	cr_assert(strstr(emdb_client_last_error(), "o space left"), "%s", emdb_client_last_error());
	cr_assert_geq(made, 2);

	/* Completely full: still a clear error, and serving goes on. */
	fullfs_fill(fs.filler, 65536, 1024);
	train_all(c, t);
	rc = emdb_client_checkpoint(c, EMDB_CKPT_FULL, NULL);
	cr_assert_eq(rc, EMDB_ERR_NOSPACE, "%s: %s", emdb_err_name(rc), emdb_client_last_error());
	emdb_ckpt_info *list = NULL;
	size_t n = 0;
	OK(emdb_client_checkpoint_list(c, &list, &n));
	cr_assert_eq(n, made, "the failed checkpoints left nothing visible");
	rc = emdb_client_checkpoint_delete(c, list[0].id);
	cr_assert(rc == EMDB_OK || rc == EMDB_ERR_NOSPACE, "delete on a full disk: %s: %s", emdb_err_name(rc),
		  emdb_client_last_error());
	emdb_free(list);
	train_all(c, t);
	cr_assert(test_server_alive(&srv), "%s", test_server_log_tail(&srv));

	/* Space back: the next checkpoint succeeds, no restart. */
	cr_assert_eq(unlink(fs.filler), 0);
	cr_assert_eq(unlink(fs.ballast), 0);
	emdb_ckpt_info info;
	OK(emdb_client_checkpoint(c, EMDB_CKPT_FULL, &info));
	OK(emdb_client_checkpoint_list(c, &list, &n));
	cr_assert_eq(list[n - 1].id, info.id);
	emdb_free(list);
	char *text;
	OK(emdb_client_info(c, "persistence", &text));
	cr_assert(strstr(text, "store_error: none\n"), "%s", text);
	emdb_free(text);
	emdb_client_close(c);
}
