/*
 * test_server_gpu.c - emdb-server with gpu_memory: one log line saying
 * where the hot rows live, and each table's tier and device memory in
 * INFO.  Without a GPU (or a CUDA build) the line says why and every
 * table reports tier=host (INFO's tier section: every figure 0, no device
 * line); with one, tier=cuda.  Nothing else changes: the
 * data plane answers as without the key (docs/gpu.md).
 */
#include "tests/lib/server_util.h"

static srv S;

/* A table without a replica in INFO's tier section: everything zero. */
#define HOST_TIER_LINE(name)                                                                         \
	"tier_" name ": tier=host devices=0 failed=0 hot_capacity=0 rows_direct=0 rows_staged=0 "   \
	"steps_device=0 steps_replayed=0 steps_reduced=0 row_steps=0 rows_resynced=0 fallbacks=0\n"

static void stop_server(void)
{
	srv_stop(&S);
}

TestSuite(server_gpu, .fini = stop_server, .timeout = 120);

Test(server_gpu, log_line_and_info_tier)
{
	const char *extra[] = { "--gpu-memory", "1M", NULL };
	char why[200], *info;
	bool gpu = emdb_gpu_available(why, sizeof(why));
	cli c;

	srv_start(&S, extra);
	if (gpu)
		cr_assert(strstr(srv_log(&S), "gpu: each table keeps its most prefetched rows in up to "
					      "1048576 bytes"), "%s", srv_log(&S));
	else
		cr_assert(strstr(srv_log(&S), "tables stay in host memory (gpu_memory ignored)"), "%s",
			  srv_log(&S));
	cli_ready(&c, &S);
	cli_create_table(&c, "emb", 16);
	info = cli_info(&c, "tables");
	cr_assert(strstr(info, gpu ? " tier=cuda hot_rows=0 device_bytes=" :
				     " tier=host hot_rows=0 device_bytes=0\n"), "%s", info);
	free(info);
	/* The tier section: the replica's figures, one line per device. */
	info = cli_info(&c, "tier");
	cr_assert(!strncmp(info, "# Tier\n", 7), "%s", info);
	if (gpu)
		cr_assert(strstr(info, "tier_emb: tier=cuda devices=") &&
				  strstr(info, "tier_emb_device_0: device=0 hot_rows=0 device_bytes="),
			  "%s", info);
	else
		cr_assert(strstr(info, HOST_TIER_LINE("emb")), "%s", info);
	free(info);
	cli_close(&c);
}

Test(server_gpu, no_key_no_replica)
{
	char *info;
	cli c;

	srv_start(&S, NULL);
	cr_assert(!strstr(srv_log(&S), "gpu:"), "no probe without gpu_memory: %s", srv_log(&S));
	cli_ready(&c, &S);
	cli_create_table(&c, "emb", 16);
	info = cli_info(&c, "tables");
	cr_assert(strstr(info, " tier=host hot_rows=0 device_bytes=0\n"), "%s", info);
	free(info);
	info = cli_info(&c, "tier");
	cr_assert(strstr(info, HOST_TIER_LINE("emb")), "%s", info);
	cr_assert(!strstr(info, "_device_0:"), "no device line without a replica: %s", info);
	free(info);
	info = cli_info(&c, "all");
	cr_assert(strstr(info, "\n# Tier\n" HOST_TIER_LINE("emb")), "INFO all has the tier section: %s",
		  info);
	free(info);
	cli_close(&c);
}
