#!/usr/bin/python3
"""Write the C sources of emdb's two cffi extension modules.

    build_ffi.py OUTDIR

cffi's API mode: the declarations below are checked against the real
<emdb/client.h> by the C compiler when CMake compiles the generated
sources (client/python/CMakeLists.txt), and every struct is declared with
`...;`, so the compiler, not this file, decides its layout and a field
added to a header can never be misread.  Only what the package calls is
declared.

Two modules are written from the same declarations:
  emdb/_native.c      linked with libemdb_client.so: tcp://, tls://,
                      unix:// (no engine, no RocksDB in the process);
  emdb/_native_mem.c  linked with the static archives of the client, its
                      mem:// transport and the engine: imported only when a
                      program opens a mem:// database.
"""
import os
import sys

import cffi

CDEF = r"""
/* emdb/error.h, emdb/alloc.h */
const char *emdb_strerror(int err);
const char *emdb_err_name(int err);
void emdb_free(void *p);

/* emdb/db.h */
#define EMDB_NAME_MAX ...
#define EMDB_DIM_MAX ...
typedef enum emdb_opt_kind { EMDB_OPT_SGD, EMDB_OPT_ADAGRAD, EMDB_OPT_ROWWISE_ADAGRAD,
	EMDB_OPT_ADAM, EMDB_OPT_FTRL, ... } emdb_opt_kind;
typedef struct emdb_optimizer {
	emdb_opt_kind kind;
	double lr; double eps; double beta1; double beta2; double lr_decay;
	double initial_accumulator; double beta; double l1; double l2;
	...;
} emdb_optimizer;
typedef enum emdb_init_kind { EMDB_INIT_ZEROS, EMDB_INIT_UNIFORM, EMDB_INIT_NORMAL, ... } emdb_init_kind;
typedef struct emdb_init { emdb_init_kind kind; double a; double b; ...; } emdb_init;
typedef enum emdb_default_kind { EMDB_DEFAULT_ZEROS, EMDB_DEFAULT_INIT, ... } emdb_default_kind;
typedef struct emdb_db_config {
	uint32_t size; uint32_t shards; uint64_t chunk_bytes; uint32_t max_batch; uint32_t max_tables;
	...;
} emdb_db_config;
typedef struct emdb_table_config {
	uint32_t size; uint32_t dim; char name[...];
	emdb_optimizer optimizer; emdb_init init; uint64_t seed; emdb_default_kind lookup_default;
	...;
} emdb_table_config;
typedef struct emdb_table_stats {
	uint64_t rows, step, pending_rows, bytes_vectors, bytes_optimizer, bytes_index,
		bytes_grads, bytes_overhead;
	uint64_t calls_prefetch, calls_pull, calls_push, calls_update, calls_lookup;
	uint64_t ids_prefetch, ids_pull, ids_push, ids_lookup;
	uint64_t lookup_misses, rows_updated, index_resizes;
	...;
} emdb_table_stats;
typedef struct emdb_table_info { uint32_t id; emdb_table_config config; emdb_table_stats stats; ...; } emdb_table_info;
typedef struct emdb_db_stats {
	uint64_t tables; emdb_table_stats total; uint64_t alloc_bytes; uint64_t alloc_peak; ...;
} emdb_db_stats;
typedef enum emdb_pool { EMDB_POOL_SUM, EMDB_POOL_MEAN, ... } emdb_pool;
int emdb_optimizer_defaults(emdb_opt_kind kind, emdb_optimizer *opt);
uint32_t emdb_optimizer_state_floats(emdb_opt_kind kind, uint32_t dim);
const char *emdb_optimizer_name(emdb_opt_kind kind);

/* emdb/checkpoint.h */
typedef enum emdb_ckpt_kind { EMDB_CKPT_FULL, EMDB_CKPT_INCREMENTAL, ... } emdb_ckpt_kind;
typedef struct emdb_ckpt_info {
	uint64_t id; emdb_ckpt_kind kind; uint32_t tables; uint64_t parent; uint64_t base;
	uint64_t created_ms; uint64_t duration_ms; uint64_t max_step; uint64_t rows;
	uint64_t rows_total; uint64_t bytes;
	...;
} emdb_ckpt_info;
typedef enum emdb_job_phase { EMDB_PHASE_PENDING, EMDB_PHASE_SWITCH, EMDB_PHASE_SCAN,
	EMDB_PHASE_WRITE, EMDB_PHASE_SYNC, EMDB_PHASE_READ, EMDB_PHASE_SWAP, EMDB_PHASE_DONE,
	EMDB_PHASE_FAILED, ... } emdb_job_phase;
typedef struct emdb_progress {
	emdb_job_phase phase; uint64_t rows_done, rows_total, bytes_done, bytes_total;
	uint64_t elapsed_ns; uint64_t ckpt_id;
	...;
} emdb_progress;

/* emdb/client.h */
typedef struct emdb_client emdb_client;
typedef struct emdb_future emdb_future;
typedef struct emdb_client_ticket emdb_client_ticket;
typedef enum emdb_role { EMDB_ROLE_NONE, EMDB_ROLE_READER, EMDB_ROLE_TRAINER, EMDB_ROLE_ADMIN, ... } emdb_role;
typedef struct emdb_client_options {
	uint32_t size; uint32_t timeout_ms; uint32_t connect_timeout_ms; uint32_t mem_threads;
	const char *token; const char *client_name; const emdb_db_config *mem_config;
	const char *tls_ca_file; const char *tls_cert_file; const char *tls_key_file;
	uint32_t busy_poll_us;
	uint32_t worker_rank;
	...;
} emdb_client_options;
#define EMDB_FUTURE_PENDING ...
#define EMDB_CLIENT_UPDATE_WORKERS_MAX ...
typedef enum emdb_job_kind { EMDB_JOB_NONE, EMDB_JOB_CHECKPOINT_FULL, EMDB_JOB_CHECKPOINT_INCREMENTAL,
	EMDB_JOB_RESTORE, ... } emdb_job_kind;
typedef enum emdb_job_state { EMDB_JOB_IDLE, EMDB_JOB_RUNNING, EMDB_JOB_DONE, EMDB_JOB_FAILED, ... } emdb_job_state;
typedef struct emdb_job_status {
	uint64_t job; emdb_job_kind kind; emdb_job_state state; emdb_progress progress;
	emdb_ckpt_info result; int error; char message[...];
	...;
} emdb_job_status;
typedef struct emdb_client_kv { const char *key; const char *value; ...; } emdb_client_kv;

void emdb_py_options_init(emdb_client_options *o);
int emdb_client_connect(const char *uri, const emdb_client_options *opts, emdb_client **out);
void emdb_client_close(emdb_client *c);
emdb_role emdb_client_role(const emdb_client *c);
const char *emdb_client_server(const emdb_client *c);
uint32_t emdb_client_max_batch(const emdb_client *c);
int emdb_client_protocol_version(const emdb_client *c);
void emdb_client_set_timeout(emdb_client *c, uint32_t timeout_ms);
uint32_t emdb_client_timeout(const emdb_client *c);
const char *emdb_client_last_error(void);

int emdb_client_ping(emdb_client *c);
int emdb_client_info(emdb_client *c, const char *section, char **text);
int emdb_client_config_get(emdb_client *c, const char *pattern, emdb_client_kv **kv, size_t *n);
int emdb_client_config_set(emdb_client *c, const char *key, const char *value);
int emdb_client_shutdown(emdb_client *c);

int emdb_client_table_create(emdb_client *c, const emdb_table_config *cfg, uint32_t *out_id);
int emdb_client_table_drop(emdb_client *c, uint32_t table);
int emdb_client_table_find(emdb_client *c, const char *name, uint32_t *out_id);
int emdb_client_table_describe(emdb_client *c, uint32_t table, emdb_table_info *out);
int emdb_client_table_list(emdb_client *c, uint32_t *ids, size_t cap, size_t *n_out);
int emdb_client_stats(emdb_client *c, emdb_db_stats *out);
int emdb_client_table_reserve(emdb_client *c, uint32_t table, uint64_t rows);
int emdb_client_table_alter(emdb_client *c, uint32_t table, const emdb_optimizer *opt);
int emdb_client_table_scan(emdb_client *c, uint32_t table, uint64_t cursor, size_t max_rows,
			   uint32_t dim, uint32_t per_row, uint64_t *ids, float *vecs, float *state,
			   size_t *n_out, uint64_t *next_cursor, uint64_t *step_out);
int emdb_client_table_load(emdb_client *c, uint32_t table, const uint64_t *ids, size_t n,
			   uint32_t dim, const float *vecs, uint32_t per_row, const float *state);

int emdb_client_checkpoint_start(emdb_client *c, emdb_ckpt_kind kind, uint64_t *job);
int emdb_client_restore_start(emdb_client *c, uint64_t id, uint64_t *job);
int emdb_client_job_status(emdb_client *c, uint64_t job, emdb_job_status *out);
int emdb_client_job_wait(emdb_client *c, uint64_t job, int64_t timeout_ms, uint32_t poll_ms,
			 void (*progress)(void *arg, const emdb_job_status *st), void *arg,
			 emdb_job_status *out);
int emdb_client_checkpoint(emdb_client *c, emdb_ckpt_kind kind, emdb_ckpt_info *info);
int emdb_client_restore(emdb_client *c, uint64_t id, emdb_ckpt_info *info);
int emdb_client_checkpoint_list(emdb_client *c, emdb_ckpt_info **out, size_t *n);
int emdb_client_checkpoint_delete(emdb_client *c, uint64_t id);

typedef struct emdb_linktest_msg {
	uint32_t rank; uint32_t reserved; uint64_t request_bytes; uint64_t reply_bytes;
} emdb_linktest_msg;
typedef struct emdb_linktest_result {
	uint64_t rounds; uint64_t elapsed_ns; uint64_t bytes_sent; uint64_t bytes_received;
} emdb_linktest_result;
int emdb_client_linktest(emdb_client *c, const emdb_linktest_msg *msgs, size_t n, uint32_t depth,
			 uint32_t duration_ms, emdb_linktest_result *out);

void emdb_client_ticket_free(emdb_client_ticket *t);
size_t emdb_client_ticket_count(const emdb_client_ticket *t);
uint32_t emdb_client_ticket_table(const emdb_client_ticket *t);

int emdb_client_prefetch(emdb_client *c, uint32_t table, const uint64_t *ids, size_t n,
			 emdb_client_ticket **out);
int emdb_client_pull(emdb_client *c, uint32_t table, const uint64_t *ids, size_t n, uint32_t dim,
		     float *out);
int emdb_client_pull_ticket(emdb_client *c, uint32_t table, const emdb_client_ticket *t, uint32_t dim,
			    float *out);
int emdb_client_pull_bags(emdb_client *c, uint32_t table, const uint64_t *ids, size_t n,
			  const uint64_t *offsets, size_t n_bags, emdb_pool pool, uint32_t dim, float *out);
int emdb_client_pull_bags_ticket(emdb_client *c, uint32_t table, const emdb_client_ticket *t,
				 const uint64_t *offsets, size_t n_bags, emdb_pool pool, uint32_t dim,
				 float *out);
int emdb_client_pull_bags_weighted(emdb_client *c, uint32_t table, const uint64_t *ids, size_t n,
				   const uint64_t *offsets, size_t n_bags, emdb_pool pool,
				   const float *weights, uint32_t dim, float *out);
int emdb_client_pull_bags_weighted_ticket(emdb_client *c, uint32_t table, const emdb_client_ticket *t,
					  const uint64_t *offsets, size_t n_bags, emdb_pool pool,
					  const float *weights, uint32_t dim, float *out);
int emdb_client_push_bags_weighted(emdb_client *c, uint32_t table, const uint64_t *ids, size_t n,
				   const uint64_t *offsets, size_t n_bags, emdb_pool pool,
				   const float *weights, uint32_t dim, const float *grads);
int emdb_client_push_bags_weighted_ticket(emdb_client *c, uint32_t table, const emdb_client_ticket *t,
					  const uint64_t *offsets, size_t n_bags, emdb_pool pool,
					  const float *weights, uint32_t dim, const float *grads);
int emdb_client_push(emdb_client *c, uint32_t table, const uint64_t *ids, size_t n, uint32_t dim,
		     const float *grads);
int emdb_client_push_ticket(emdb_client *c, uint32_t table, const emdb_client_ticket *t, uint32_t dim,
			    const float *grads);
int emdb_client_push_bags(emdb_client *c, uint32_t table, const uint64_t *ids, size_t n,
			  const uint64_t *offsets, size_t n_bags, emdb_pool pool, uint32_t dim,
			  const float *grads);
int emdb_client_push_bags_ticket(emdb_client *c, uint32_t table, const emdb_client_ticket *t,
				 const uint64_t *offsets, size_t n_bags, emdb_pool pool, uint32_t dim,
				 const float *grads);
int emdb_client_update(emdb_client *c, uint32_t table, uint64_t *rows_out);
int emdb_client_update_all(emdb_client *c, uint64_t *rows_out);
int emdb_client_push_update(emdb_client *c, uint32_t table, const uint64_t *ids, size_t n, uint32_t dim,
			    const float *grads, uint64_t *rows_out);
int emdb_client_push_update_ticket(emdb_client *c, uint32_t table, const emdb_client_ticket *t,
				   uint32_t dim, const float *grads, uint64_t *rows_out);
int emdb_client_update_sync(emdb_client *c, uint32_t table, uint32_t workers, uint64_t *rows_out);
int emdb_client_lookup(emdb_client *c, uint32_t table, const uint64_t *ids, size_t n, uint32_t dim,
		       float *out, uint8_t *found);
int emdb_client_read_state(emdb_client *c, uint32_t table, const uint64_t *ids, size_t n,
			   uint32_t per_row, float *state, uint8_t *found);

emdb_future *emdb_client_prefetch_async(emdb_client *c, uint32_t table, const uint64_t *ids, size_t n,
					emdb_client_ticket **out);
int emdb_future_wait(emdb_future *f, int64_t timeout_ms);
int emdb_future_poll(emdb_future *f);
void emdb_future_free(emdb_future *f);
"""

# The options' defaults are the header's initializer, not a copy of it.
SOURCE = r"""
#include <emdb/client.h>
#include <emdb/alloc.h>

static void emdb_py_options_init(emdb_client_options *o)
{
	emdb_client_options d = EMDB_CLIENT_OPTIONS_INIT;
	*o = d;
}
"""


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: build_ffi.py OUTDIR", file=sys.stderr)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name in ("_native", "_native_mem"):
        ffi = cffi.FFI()
        ffi.cdef(CDEF)
        ffi.set_source("emdb." + name, SOURCE)
        path = os.path.join(out, name + ".c")
        tmp = path + ".tmp"
        ffi.emit_c_code(tmp)
        # Keep the old file (and its timestamp) when nothing changed, so
        # that make does not recompile the module.
        with open(tmp, "rb") as f:
            new = f.read()
        try:
            with open(path, "rb") as f:
                same = f.read() == new
        except OSError:
            same = False
        if same:
            os.unlink(tmp)
        else:
            os.replace(tmp, path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
