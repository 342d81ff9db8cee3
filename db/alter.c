/*
 * alter.c - emdb_table_alter: a table's optimizer hyperparameters changed
 * while it serves, for learning-rate schedules.
 *
 * Invariants:
 *   1. The change happens at a step boundary: it holds the table's
 *      rows_lock and update_lock for writing, as an Update does for its
 *      whole pass (ops_update_lock), so an Update runs entirely with the
 *      old values or entirely with the new, never a mix.
 *   2. Only the hyperparameters that act per step change: lr, eps, beta1,
 *      beta2, lr_decay, beta, l1, l2.  The kind (the state's layout) and
 *      initial_accumulator (the state a new row starts with, read by
 *      Prefetch without any lock) are fixed at creation, and a request to
 *      change them is refused, so readers of those fields never race a
 *      write.
 *   3. The new values are checked as emdb_table_create checks a
 *      configuration (db_check_table_config) before anything changes.
 *   4. t->cfg is written field by field under cfg_mu too, so whole-config
 *      readers that take no table lock (emdb_table_get_config,
 *      emdb_table_describe) copy it under cfg_mu and see all of a change
 *      or none.
 *
 * State changes: t->cfg.optimizer's per-step fields (both locks and
 * cfg_mu held).
 */
#include <stdbool.h>
#include <stdio.h>

#include "base/error_int.h"
#include "db/db_cluster.h"
#include "db/db_int.h"
#include "db/ops.h"

/* Invariants 2 and 3: would opt be accepted for t?  Changes nothing. */
static int check_alter(tbl *t, const emdb_optimizer *opt)
{
	int rc = EMDB_OK;
	emdb_table_config c;
	pthread_mutex_lock(&t->cfg_mu);
	c = t->cfg;
	pthread_mutex_unlock(&t->cfg_mu);
	const emdb_optimizer *o = &c.optimizer;
	if (opt->kind != o->kind) {
		const char *was = emdb_optimizer_name(o->kind), *now = emdb_optimizer_name(opt->kind);
		rc = emdb__seterr(EMDB_ERR_INVALID,
				  "table '%s': the optimizer is %s; it cannot become %s (its state has another layout): create a new table",
				  c.name, was ? was : "?", now ? now : "unknown");
	} else if (opt->initial_accumulator != o->initial_accumulator) {
		rc = emdb__seterr(EMDB_ERR_INVALID,
				  "table '%s': initial_accumulator is fixed at creation (%g): it sets the state of rows as they are made",
				  c.name, o->initial_accumulator);
	}
	if (rc == EMDB_OK) {
		c.optimizer = *opt;
		rc = db_check_table_config(&c);
	}
	return rc;
}

/* Check opt for the table and, when apply, make the change. */
static int alter(emdb_db *db, uint32_t id, const emdb_optimizer *opt, bool apply)
{
	tbl *t;
	if (!opt)
		return emdb__seterr(EMDB_ERR_INVALID, "emdb_table_alter: opt is NULL");
	int rc = db_table_get(db, id, &t);
	if (rc != EMDB_OK)
		return rc;
	if ((rc = check_alter(t, opt)) != EMDB_OK || !apply) {
		table_release(t);
		return rc;
	}

	ops_update_lock(t);
	pthread_mutex_lock(&t->cfg_mu);
	emdb_optimizer *w = &t->cfg.optimizer;
	w->lr = opt->lr;
	w->eps = opt->eps;
	w->beta1 = opt->beta1;
	w->beta2 = opt->beta2;
	w->lr_decay = opt->lr_decay;
	w->beta = opt->beta;
	w->l1 = opt->l1;
	w->l2 = opt->l2;
	pthread_mutex_unlock(&t->cfg_mu);
	ops_update_unlock(t);
	table_release(t);
	return EMDB_OK;
}

int emdb__table_check_alter(emdb_db *db, uint32_t id, const emdb_optimizer *opt)
{
	return alter(db, id, opt, false);
}

int emdb_table_alter(emdb_db *db, uint32_t id, const emdb_optimizer *opt)
{
	return alter(db, id, opt, true);
}
