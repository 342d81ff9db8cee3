/*
 * tableopt.h - the KEY=VALUE options of `table create`, which cover every
 * field of emdb_table_config beyond name and dim, and their text forms
 * for `table describe`:
 *
 *   optimizer=sgd|adagrad|rowwise_adagrad|adam|ftrl   (default sgd)
 *   lr= eps= beta1= beta2= lr_decay= initial_accumulator= beta= l1= l2=
 *                         the optimizer's hyperparameters (alpha= is lr)
 *   init=zeros|uniform:LOW,HIGH|normal:MEAN,STD       (default zeros)
 *   seed=N                the initializer's seed       (default 0)
 *   default=zeros|init    what Lookup gives a missing ID (default zeros)
 *
 * One table of keys serves parsing, describing and completion.
 */
#ifndef EMDB_CLI_TABLEOPT_H
#define EMDB_CLI_TABLEOPT_H

#include <stddef.h>

#include <emdb/db.h>

/* Apply the option words argv[argc] to *cfg, whose name and dim are set.
 * optimizer= is applied first (emdb_optimizer_defaults), whatever its
 * place, and hyperparameters then override its defaults.  A key given
 * twice, an unknown key, a bad value, or a hyperparameter the optimizer
 * does not use is refused: returns -1 with the reason in err; 0 on
 * success.  Values are not range-checked here: the server does that and
 * names the field. */
int topt_parse(int argc, char *const *argv, emdb_table_config *cfg, char *err, size_t errlen);

/* Apply `table alter`'s KEY=VALUE words to *o, the table's optimizer:
 * only the hyperparameters o's kind uses and that may change at run time
 * (alpha= is lr).  optimizer=, initial_accumulator=, init=, seed= and
 * default= are fixed at creation and refused, as are an unknown key, a
 * key given twice and a value that is not a number: -1 with the reason in
 * err; 0 on success (with at least one word). */
int topt_alter(int argc, char *const *argv, emdb_optimizer *o, char *err, size_t errlen);

/* The hyperparameters o's kind uses, in display order: up to cap names
 * (static strings) and values.  Returns how many. */
size_t topt_params(const emdb_optimizer *o, const char **names, double *values, size_t cap);

/* "zeros", "uniform:-0.05,0.05", "normal:0,0.01". */
void topt_init_text(const emdb_init *init, char *buf, size_t cap);
const char *topt_init_name(emdb_init_kind kind);
const char *topt_default_name(emdb_default_kind kind);

/* Completion of one option word: the keys ("lr=", ...) while word has no
 * '=', else the values of its key ("optimizer=adam", ...).  A static
 * NULL-terminated list, unfiltered; NULL when the key has no fixed
 * values. */
const char *const *topt_candidates(const char *word);

#endif
