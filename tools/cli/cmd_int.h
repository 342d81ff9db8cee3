/*
 * cmd_int.h - what the command handlers share: their prototypes, for the
 * table in cmd.c, and the helpers they print with.
 */
#ifndef EMDB_CLI_CMD_INT_H
#define EMDB_CLI_CMD_INT_H

#include <emdb/client.h>

#include "tools/cli/cmd.h"
#include "tools/cli/out.h"
#include "tools/cli/session.h"

/* Report a usage error of the command being run: the reason, then its
 * synopsis.  Returns CLI_USAGE. */
cli_status cmd_usage(cli_session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Print "OK" (text) or {"ok":true} (JSON): for commands with nothing
 * else to say.  Returns CLI_OK. */
cli_status cmd_ok(cli_session *s);

/* Milliseconds of CLOCK_MONOTONIC: for the times commands report. */
double cmd_now_ms(void);

/* cmd.c: local commands. */
cli_status cmd_help(cli_session *s, emdb_client *c, int argc, char **argv);
cli_status cmd_quit(cli_session *s, emdb_client *c, int argc, char **argv);

/* cmd_server.c: the server and its settings. */
cli_status cmd_ping(cli_session *s, emdb_client *c, int argc, char **argv);
cli_status cmd_info(cli_session *s, emdb_client *c, int argc, char **argv);
cli_status cmd_config_get(cli_session *s, emdb_client *c, int argc, char **argv);
cli_status cmd_config_set(cli_session *s, emdb_client *c, int argc, char **argv);
cli_status cmd_stats(cli_session *s, emdb_client *c, int argc, char **argv);
cli_status cmd_shutdown(cli_session *s, emdb_client *c, int argc, char **argv);

/* cmd_cluster.c: the cluster this server belongs to. */
cli_status cmd_cluster_info(cli_session *s, emdb_client *c, int argc, char **argv);
cli_status cmd_cluster_linktest(cli_session *s, emdb_client *c, int argc, char **argv);

/* cmd_table.c: tables and their rows. */
cli_status cmd_table_create(cli_session *s, emdb_client *c, int argc, char **argv);
cli_status cmd_table_describe(cli_session *s, emdb_client *c, int argc, char **argv);
cli_status cmd_table_list(cli_session *s, emdb_client *c, int argc, char **argv);
cli_status cmd_table_drop(cli_session *s, emdb_client *c, int argc, char **argv);
cli_status cmd_table_reserve(cli_session *s, emdb_client *c, int argc, char **argv);
cli_status cmd_table_alter(cli_session *s, emdb_client *c, int argc, char **argv);
cli_status cmd_lookup(cli_session *s, emdb_client *c, int argc, char **argv);
/* The table that arg names (a name first, an id when no table has that
 * name: cmd_table.c's invariant 1), described into *info.  Reports the
 * failure itself; returns CLI_OK or CLI_FAIL. */
cli_status cmd_resolve_table(cli_session *s, emdb_client *c, const char *arg, emdb_table_info *info);

/* cmd_rows.c: a table's rows to a file and back. */
cli_status cmd_export(cli_session *s, emdb_client *c, int argc, char **argv);
cli_status cmd_import(cli_session *s, emdb_client *c, int argc, char **argv);

/* cmd_checkpoint.c: checkpoints, restore, jobs. */
cli_status cmd_checkpoint(cli_session *s, emdb_client *c, int argc, char **argv);
cli_status cmd_checkpoint_list(cli_session *s, emdb_client *c, int argc, char **argv);
cli_status cmd_checkpoint_delete(cli_session *s, emdb_client *c, int argc, char **argv);
cli_status cmd_restore(cli_session *s, emdb_client *c, int argc, char **argv);
cli_status cmd_job(cli_session *s, emdb_client *c, int argc, char **argv);

/* The statistics of a table (or the sums of stats), as "key: value" lines
 * or as members of the open JSON object. */
void cmd_put_table_stats(cli_session *s, jw *w, const emdb_table_stats *st);

#endif
