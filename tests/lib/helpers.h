/*
 * helpers.h - small conveniences shared by the engine tests: opening a
 * database with one table, a reference row initializer, test values.
 */
#ifndef EMDB_TEST_HELPERS_H
#define EMDB_TEST_HELPERS_H

#ifdef EMDB_PLAIN_RUNNER
#include "tests/lib/plain_runner.h"
#else
#include <criterion/criterion.h>
#endif
#include <string.h>

#include <emdb/db.h>

static inline uint32_t make_table(emdb_db *db, const char *name, uint32_t dim, emdb_opt_kind opt,
				  emdb_init_kind init, double a, double b)
{
	emdb_table_config c = EMDB_TABLE_CONFIG_INIT;
	strcpy(c.name, name);
	c.dim = dim;
	cr_assert_eq(emdb_optimizer_defaults(opt, &c.optimizer), 0);
	c.init.kind = init;
	c.init.a = a;
	c.init.b = b;
	c.seed = 1234;
	uint32_t id = 0;
	int rc = emdb_table_create(db, &c, &id);
	cr_assert_eq(rc, 0, "create %s: %s", name, emdb_last_error());
	return id;
}

/* Table "t" of dim dim, SGD with lr 1 and zero initial values: a row is
 * exactly minus the sum of the gradients applied to it. */
static inline uint32_t make_sgd_lr1_table(emdb_db *db, uint32_t dim)
{
	emdb_table_config c = EMDB_TABLE_CONFIG_INIT;
	strcpy(c.name, "t");
	c.dim = dim;
	c.optimizer.lr = 1.0;
	uint32_t t;
	cr_assert_eq(emdb_table_create(db, &c, &t), 0, "%s", emdb_last_error());
	return t;
}

static inline emdb_db *open_db(uint32_t shards)
{
	emdb_db_config c = EMDB_DB_CONFIG_INIT;
	emdb_db *db = NULL;
	c.shards = shards;
	cr_assert_eq(emdb_db_open(&c, &db), 0, "%s", emdb_last_error());
	return db;
}

static inline uint64_t scramble(uint64_t i)
{
	uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ULL;
	return x ^ (x >> 31);
}

/* Deterministic test values of either sign, about one in eleven zero:
 * gradients and rows for comparing two implementations bit for bit. */
static inline float test_val(uint32_t seed, uint32_t i)
{
	uint32_t x = seed * 2654435761u + i * 40503u + 17u;

	x ^= x >> 13;
	x *= 0x5bd1e995u;
	x ^= x >> 15;
	if (x % 11 == 0)
		return 0.0f;
	return ((float)(x % 20001) - 10000.0f) / 4096.0f;
}

#endif
