/*
 * hot_batch.h - the batches of the serving-path checks of the hot rows'
 * device replica, shared by tests/unit/test_hot_serve.c (test tier) and
 * gpu/gpu_test_serve.c (CUDA tier): hot ids twice and cold ids twice,
 * interleaved, and gradients with no -0 and no NaN.  Header-only, no test
 * framework.
 */
#ifndef EMDB_TEST_HOT_BATCH_H
#define EMDB_TEST_HOT_BATCH_H

#include <stddef.h>
#include <stdint.h>

/* ids[0..n): every third position one of the cold ids id_of(cold_from
 * + k % n_cold), the others the hot ids id_of(k % n_hot) in turn. */
static inline void hot_batch(uint64_t *ids, size_t n, uint64_t n_hot, uint64_t n_cold, uint64_t cold_from,
			     uint64_t (*id_of)(uint64_t))
{
	uint64_t h = 0, c = 0;

	for (size_t i = 0; i < n; i++)
		ids[i] = i % 3 ? id_of(h++ % n_hot) : id_of(cold_from + c++ % n_cold);
}

/* Gradients of step s for rows of dim floats: multiples of 0.01 in
 * [-0.11, 0.11], +0 included. */
static inline void hot_grads(int s, float *g, size_t rows, uint32_t dim)
{
	for (size_t k = 0; k < rows * dim; k++)
		g[k] = (float)((int)((k * 7 + (size_t)s * 5) % 23) - 11) * 0.01f;
}

#endif
