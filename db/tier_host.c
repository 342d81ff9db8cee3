/*
 * tier_host.c - the host backend of the tier interface (db/tier.h): rows
 * in host memory, one buffer per chunk and replica, the optimizer and
 * initializer rules of db/optim_math.h and db/init_math.h run on the CPU.
 * Always built; the oracle the conformance suite compares every other
 * backend with, and the memory of the test backend (db/tier_test.c).
 *
 * Invariants:
 *   1. A chunk's rows are zero when it is allocated (emdb_calloc).
 *   2. Accumulators acc[r][p] are zero for p >= the tier's npend: step
 *      zeroes what it applied, and open starts from zero.
 *   3. Every rule runs row by row through the same per-row functions as
 *      the engine's Update (ops_update.c), so a row stepped here equals
 *      the engine's row bit for bit given the same gradient.
 * State changes only in the calls themselves; nothing runs in between.
 */
#include <string.h>

#include <emdb/alloc.h>

#include "base/error_int.h"
#include "db/init_math.h"
#include "db/tier_int.h"

typedef struct host_tier {
	float ***chunks;   /* [replicas][max_chunks] -> rows_per_chunk rows  */
	float **acc;       /* [replicas] -> max_pending * dim floats         */
} host_tier;

static host_tier *H(const tier *t)
{
	return (host_tier *)t->impl;
}

static float *host_row(const tier *t, uint32_t r, uint64_t slot)
{
	return H(t)->chunks[r][tier_slot_chunk(t, slot)] +
	       (size_t)tier_slot_offset(t, slot) * t->row_floats;
}

static void host_close(tier *t)
{
	host_tier *h = H(t);

	if (!h)
		return;
	for (uint32_t r = 0; r < t->cfg.replicas; r++) {
		if (h->chunks)
			emdb_free(h->chunks[r]);
		if (h->acc)
			emdb_free(h->acc[r]);
	}
	emdb_free(h->chunks);
	emdb_free(h->acc);
	emdb_free(h);
	t->impl = NULL;
}

static int host_open(tier *t)
{
	host_tier *h = emdb_calloc(1, sizeof(*h));

	if (!h)
		return EMDB_ERR_NOMEM;
	t->impl = h;
	h->chunks = emdb_calloc(t->cfg.replicas, sizeof(*h->chunks));
	h->acc = emdb_calloc(t->cfg.replicas, sizeof(*h->acc));
	if (!h->chunks || !h->acc)
		goto fail;
	for (uint32_t r = 0; r < t->cfg.replicas; r++) {
		h->chunks[r] = emdb_calloc(t->cfg.max_chunks, sizeof(float *));
		h->acc[r] = emdb_calloc((size_t)t->cfg.max_pending * t->cfg.dim, sizeof(float));
		if (!h->chunks[r] || !h->acc[r])
			goto fail;
	}
	return EMDB_OK;
fail:
	host_close(t);
	return EMDB_ERR_NOMEM;
}

static int host_chunk_alloc(tier *t, uint32_t c)
{
	size_t floats = (size_t)t->cfg.rows_per_chunk * t->row_floats;

	for (uint32_t r = 0; r < t->cfg.replicas; r++) {
		H(t)->chunks[r][c] = emdb_calloc(floats, sizeof(float));
		if (!H(t)->chunks[r][c]) {
			while (r-- > 0) {
				emdb_free(H(t)->chunks[r][c]);
				H(t)->chunks[r][c] = NULL;
			}
			return EMDB_ERR_NOMEM;
		}
	}
	return EMDB_OK;
}

static void host_chunk_free(tier *t, uint32_t c)
{
	for (uint32_t r = 0; r < t->cfg.replicas; r++) {
		emdb_free(H(t)->chunks[r][c]);
		H(t)->chunks[r][c] = NULL;
	}
}

static int host_put_rows(tier *t, const uint64_t *slots, size_t n, const float *rows)
{
	size_t rb = (size_t)t->row_floats * sizeof(float);

	for (uint32_t r = 0; r < t->cfg.replicas; r++)
		for (size_t i = 0; i < n; i++)
			memcpy(host_row(t, r, slots[i]), rows + i * t->row_floats, rb);
	return EMDB_OK;
}

static int host_get_rows(tier *t, uint32_t r, const uint64_t *slots, size_t n, float *rows)
{
	size_t rb = (size_t)t->row_floats * sizeof(float);

	for (size_t i = 0; i < n; i++)
		memcpy(rows + i * t->row_floats, host_row(t, r, slots[i]), rb);
	return EMDB_OK;
}

static int host_init_rows(tier *t, const uint64_t *slots, const uint64_t *ids, size_t n,
			  const tier_init_args *a)
{
	uint32_t dim = t->cfg.dim;

	for (uint32_t r = 0; r < t->cfg.replicas; r++)
		for (size_t i = 0; i < n; i++) {
			float *row = host_row(t, r, slots[i]);

			emdb_init_row(a->init.kind, a->init.a, a->init.b, a->seed, a->table, ids[i],
				      dim, row);
			emdb_opt_init_state(a->opt.kind, &a->opt, dim, row + dim);
		}
	return EMDB_OK;
}

/* Host memory is the tier's own memory: out_in_tier changes nothing. */
static int host_gather(tier *t, uint32_t r, const uint64_t *slots, size_t n, float *out,
		       bool out_in_tier)
{
	size_t vb = (size_t)t->cfg.dim * sizeof(float);

	for (size_t i = 0; i < n; i++)
		memcpy(out + i * t->cfg.dim, host_row(t, r, slots[i]), vb);
	return EMDB_OK;
}

static int host_accumulate(tier *t, uint32_t r, const uint32_t *pidx, size_t n,
			   const float *grads)
{
	uint32_t dim = t->cfg.dim;

	for (size_t i = 0; i < n; i++) {
		float *a = H(t)->acc[r] + (size_t)pidx[i] * dim;
		const float *g = grads + i * dim;

		for (uint32_t c = 0; c < dim; c++)
			a[c] += g[c];
	}
	return EMDB_OK;
}

/* Replica order: acc_0 + acc_1 + ... on every replica. */
static int host_reduce(tier *t, uint32_t npend)
{
	size_t len = (size_t)npend * t->cfg.dim;
	float **acc = H(t)->acc;

	for (uint32_t r = 1; r < t->cfg.replicas; r++)
		for (size_t k = 0; k < len; k++)
			acc[0][k] += acc[r][k];
	for (uint32_t r = 1; r < t->cfg.replicas; r++)
		memcpy(acc[r], acc[0], len * sizeof(float));
	return EMDB_OK;
}

#define HOST_STEP_LOOP(rowfn)                                                     \
	for (size_t i = 0; i < n; i++)                                            \
		if (slots[i] != TIER_SLOT_NONE)                                   \
			rowfn(sc, dim, host_row(t, r, slots[i]), g + i * dim)

static int host_step(tier *t, const emdb_opt_scalars *sc, const uint64_t *slots, size_t n,
		     const float *grads)
{
	uint32_t dim = t->cfg.dim;

	for (uint32_t r = 0; r < t->cfg.replicas; r++) {
		const float *g = grads ? grads : H(t)->acc[r];

		switch (t->cfg.opt) {
		case EMDB_OPT_SGD:
			HOST_STEP_LOOP(emdb_opt_sgd_row);
			break;
		case EMDB_OPT_ADAGRAD:
			HOST_STEP_LOOP(emdb_opt_adagrad_row);
			break;
		case EMDB_OPT_ROWWISE_ADAGRAD:
			HOST_STEP_LOOP(emdb_opt_rowwise_adagrad_row);
			break;
		case EMDB_OPT_ADAM:
			HOST_STEP_LOOP(emdb_opt_adam_row);
			break;
		case EMDB_OPT_FTRL:
			HOST_STEP_LOOP(emdb_opt_ftrl_row);
			break;
		}
		if (!grads)
			memset(H(t)->acc[r], 0, n * (size_t)dim * sizeof(float));
	}
	return EMDB_OK;
}

const tier_backend tier_host_backend = {
	.name = "host",
	.open = host_open,
	.close = host_close,
	.chunk_alloc = host_chunk_alloc,
	.chunk_free = host_chunk_free,
	.put_rows = host_put_rows,
	.get_rows = host_get_rows,
	.init_rows = host_init_rows,
	.gather = host_gather,
	.gather_dev = NULL,
	.accumulate = host_accumulate,
	.reduce = host_reduce,
	.step = host_step,
	.owns_ptr = NULL,
	.copy = NULL,
	.available = NULL,
	.devices = NULL,
};
