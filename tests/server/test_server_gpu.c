/*
 * test_server_gpu.c - emdb-server with gpu_memory: one log line saying
 * where the hot rows live, and each table's tier and device memory in
 * INFO.  Without a GPU (or a CUDA build) the line says why and every
 * table reports tier=host; with one, tier=cuda.  Nothing else changes: the
 * data plane answers as without the key (docs/gpu.md).
 */
#include "tests/lib/server_util.h"

static srv S;

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
	cli_close(&c);
}
