/*
 * tableopt.c - parsing and printing the table options of `table create`
 * and `table describe` (tableopt.h).
 *
 * Invariants:
 *   1. hyper_keys[] is the one list of optimizer hyperparameters: which
 *      field each names and which optimizers use it (docs/engine.md,
 *      "Defaults and state at a glance").  Parsing refuses a key its
 *      optimizer ignores, describing shows exactly the keys it uses,
 *      completion and the unknown-key message list every key.
 *   2. The optimizer's defaults are applied before any hyperparameter, so
 *      `lr=0.1 optimizer=adam` and `optimizer=adam lr=0.1` are the same.
 *
 * State changes: none beyond the config passed in.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli/out.h"
#include "tools/cli/tableopt.h"
#include "tools/cli/words.h"

#define K(kind) (1u << (kind))
#define ALL_OPTS                                                                        \
	(K(EMDB_OPT_SGD) | K(EMDB_OPT_ADAGRAD) | K(EMDB_OPT_ROWWISE_ADAGRAD) | K(EMDB_OPT_ADAM) | \
	 K(EMDB_OPT_FTRL))

typedef struct hyper {
	const char *name;
	size_t off;     /* offsetof(emdb_optimizer, field) */
	unsigned kinds; /* K(kind) of the optimizers that use it */
} hyper;

static const hyper hyper_keys[] = {
	{ "lr", offsetof(emdb_optimizer, lr), ALL_OPTS },
	{ "eps", offsetof(emdb_optimizer, eps),
	  K(EMDB_OPT_ADAGRAD) | K(EMDB_OPT_ROWWISE_ADAGRAD) | K(EMDB_OPT_ADAM) },
	{ "beta1", offsetof(emdb_optimizer, beta1), K(EMDB_OPT_ADAM) },
	{ "beta2", offsetof(emdb_optimizer, beta2), K(EMDB_OPT_ADAM) },
	{ "lr_decay", offsetof(emdb_optimizer, lr_decay), K(EMDB_OPT_ADAGRAD) },
	{ "initial_accumulator", offsetof(emdb_optimizer, initial_accumulator),
	  K(EMDB_OPT_ADAGRAD) | K(EMDB_OPT_ROWWISE_ADAGRAD) | K(EMDB_OPT_FTRL) },
	{ "beta", offsetof(emdb_optimizer, beta), K(EMDB_OPT_FTRL) },
	{ "l1", offsetof(emdb_optimizer, l1), K(EMDB_OPT_FTRL) },
	{ "l2", offsetof(emdb_optimizer, l2), K(EMDB_OPT_FTRL) },
};
#define N_HYPER (sizeof(hyper_keys) / sizeof(hyper_keys[0]))

static const emdb_opt_kind opt_kinds[] = { EMDB_OPT_SGD, EMDB_OPT_ADAGRAD, EMDB_OPT_ROWWISE_ADAGRAD,
					   EMDB_OPT_ADAM, EMDB_OPT_FTRL };

/* The keys besides the hyperparameters, in the order help shows them. */
static const char *const other_keys[] = { "alpha", "init", "seed", "default" };
#define N_OTHER (sizeof(other_keys) / sizeof(other_keys[0]))
static const char *const optimizer_words[] = { "optimizer=sgd", "optimizer=adagrad",
					       "optimizer=rowwise_adagrad", "optimizer=adam",
					       "optimizer=ftrl", NULL };
static const char *const init_words[] = { "init=zeros", "init=uniform:", "init=normal:", NULL };
static const char *const default_words[] = { "default=zeros", "default=init", NULL };

static double *field(emdb_optimizer *o, const hyper *h)
{
	return (double *)((char *)o + h->off);
}

static bool parse_double(const char *s, double *out)
{
	char *end;
	*out = strtod(s, &end);
	return *s && !*end && end != s;
}

static bool parse_init(const char *s, emdb_init *init)
{
	char *end;
	if (!strcmp(s, "zeros")) {
		*init = (emdb_init){ EMDB_INIT_ZEROS, 0, 0 };
		return true;
	}
	if (!strncmp(s, "uniform:", 8)) {
		init->kind = EMDB_INIT_UNIFORM;
		s += 8;
	} else if (!strncmp(s, "normal:", 7)) {
		init->kind = EMDB_INIT_NORMAL;
		s += 7;
	} else {
		return false;
	}
	init->a = strtod(s, &end);
	if (end == s || *end != ',')
		return false;
	s = end + 1;
	init->b = strtod(s, &end);
	return end != s && !*end;
}

static bool parse_opt_kind(const char *s, emdb_opt_kind *kind)
{
	for (size_t i = 0; i < sizeof(opt_kinds) / sizeof(opt_kinds[0]); i++) {
		if (!strcmp(s, emdb_optimizer_name(opt_kinds[i]))) {
			*kind = opt_kinds[i];
			return true;
		}
	}
	return false;
}

/* "lr, eps, beta1, beta2": the keys of kind, for the error of a key it
 * does not use. */
static void used_keys(emdb_opt_kind kind, char *buf, size_t cap)
{
	size_t len = 0;
	buf[0] = 0;
	for (size_t i = 0; i < N_HYPER && len < cap; i++) {
		if (hyper_keys[i].kinds & K(kind))
			len += (size_t)snprintf(buf + len, cap - len, "%s%s", len ? ", " : "",
						hyper_keys[i].name);
	}
}

int topt_parse(int argc, char *const *argv, emdb_table_config *cfg, char *err, size_t errlen)
{
	const char *seen[32]; /* keys given, each once: far fewer than 32 keys exist */
	int n_seen = 0;

	/* Invariant 2: the optimizer's defaults first. */
	emdb_opt_kind kind = EMDB_OPT_SGD;
	for (int i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "optimizer=", 10) && !parse_opt_kind(argv[i] + 10, &kind)) {
			snprintf(err, errlen,
				 "unknown optimizer '%s' (sgd, adagrad, rowwise_adagrad, adam, ftrl)",
				 argv[i] + 10);
			return -1;
		}
	}
	emdb_optimizer_defaults(kind, &cfg->optimizer);

	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		const char *eq = strchr(a, '=');
		if (!eq || eq == a) {
			snprintf(err, errlen, "'%s' is not KEY=VALUE", a);
			return -1;
		}
		size_t klen = (size_t)(eq - a);
		const char *v = eq + 1;
		char key[32];
		if (klen >= sizeof(key)) {
			snprintf(err, errlen, "unknown option '%.*s'", (int)klen, a);
			return -1;
		}
		memcpy(key, a, klen);
		key[klen] = 0;
		if (!strcmp(key, "alpha"))
			snprintf(key, sizeof(key), "lr");
		for (int j = 0; j < n_seen; j++) {
			if (!strcmp(seen[j], key)) {
				snprintf(err, errlen, "option %s given twice", key);
				return -1;
			}
		}

		const hyper *h = NULL;
		for (size_t j = 0; j < N_HYPER; j++) {
			if (!strcmp(hyper_keys[j].name, key))
				h = &hyper_keys[j];
		}
		if (h) {
			seen[n_seen++] = h->name;
			if (!(h->kinds & K(kind))) {
				char used[128];
				used_keys(kind, used, sizeof(used));
				snprintf(err, errlen, "%s is not a parameter of %s (it takes %s)",
					 key, emdb_optimizer_name(kind), used);
				return -1;
			}
			if (!parse_double(v, field(&cfg->optimizer, h))) {
				snprintf(err, errlen, "%s: '%s' is not a number", key, v);
				return -1;
			}
		} else if (!strcmp(key, "optimizer")) {
			seen[n_seen++] = "optimizer";
		} else if (!strcmp(key, "init")) {
			seen[n_seen++] = "init";
			if (!parse_init(v, &cfg->init)) {
				snprintf(err, errlen,
					 "init: '%s' is not zeros, uniform:LOW,HIGH or normal:MEAN,STD", v);
				return -1;
			}
		} else if (!strcmp(key, "seed")) {
			seen[n_seen++] = "seed";
			if (!words_u64(v, &cfg->seed)) {
				snprintf(err, errlen, "seed: '%s' is not an unsigned 64-bit integer", v);
				return -1;
			}
		} else if (!strcmp(key, "default")) {
			seen[n_seen++] = "default";
			if (!strcmp(v, "zeros"))
				cfg->lookup_default = EMDB_DEFAULT_ZEROS;
			else if (!strcmp(v, "init"))
				cfg->lookup_default = EMDB_DEFAULT_INIT;
			else {
				snprintf(err, errlen, "default: '%s' is not zeros or init", v);
				return -1;
			}
		} else {
			char keys[256];
			size_t len = (size_t)snprintf(keys, sizeof(keys), "optimizer");
			for (size_t j = 0; j < N_HYPER && len < sizeof(keys); j++)
				len += (size_t)snprintf(keys + len, sizeof(keys) - len, ", %s",
							hyper_keys[j].name);
			for (size_t j = 0; j < N_OTHER && len < sizeof(keys); j++)
				len += (size_t)snprintf(keys + len, sizeof(keys) - len, ", %s",
							other_keys[j]);
			snprintf(err, errlen, "unknown option '%s' (%s)", key, keys);
			return -1;
		}
	}
	return 0;
}

int topt_alter(int argc, char *const *argv, emdb_optimizer *o, char *err, size_t errlen)
{
	const hyper *seen[N_HYPER];
	size_t n_seen = 0;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		const char *eq = strchr(a, '=');
		if (!eq || eq == a) {
			snprintf(err, errlen, "'%s' is not KEY=VALUE", a);
			return -1;
		}
		size_t klen = (size_t)(eq - a);
		char key[32];
		snprintf(key, sizeof(key), "%.*s", (int)(klen < sizeof(key) ? klen : sizeof(key) - 1), a);
		if (!strcmp(key, "alpha"))
			snprintf(key, sizeof(key), "lr");
		const hyper *h = NULL;
		for (size_t j = 0; j < N_HYPER; j++)
			if (!strcmp(hyper_keys[j].name, key))
				h = &hyper_keys[j];
		char used[128];
		used_keys(o->kind, used, sizeof(used));
		if (!h || !strcmp(key, "initial_accumulator")) {
			bool fixed = h || !strcmp(key, "optimizer") || !strcmp(key, "init") ||
				     !strcmp(key, "seed") || !strcmp(key, "default");
			if (fixed)
				snprintf(err, errlen, "%s is fixed when the table is created; alter changes %s",
					 key, used);
			else
				snprintf(err, errlen, "unknown option '%s' (alter changes %s)", key, used);
			return -1;
		}
		if (!(h->kinds & K(o->kind))) {
			snprintf(err, errlen, "%s is not a parameter of %s (it takes %s)", key,
				 emdb_optimizer_name(o->kind), used);
			return -1;
		}
		for (size_t j = 0; j < n_seen; j++) {
			if (seen[j] == h) {
				snprintf(err, errlen, "option %s given twice", key);
				return -1;
			}
		}
		seen[n_seen++] = h;
		if (!parse_double(eq + 1, field(o, h))) {
			snprintf(err, errlen, "%s: '%s' is not a number", key, eq + 1);
			return -1;
		}
	}
	if (argc == 0) {
		snprintf(err, errlen, "nothing to change: give KEY=VALUE");
		return -1;
	}
	return 0;
}

size_t topt_params(const emdb_optimizer *o, const char **names, double *values, size_t cap)
{
	size_t n = 0;
	for (size_t i = 0; i < N_HYPER && n < cap; i++) {
		if (!(hyper_keys[i].kinds & K(o->kind)))
			continue;
		names[n] = hyper_keys[i].name;
		values[n] = *(const double *)((const char *)o + hyper_keys[i].off);
		n++;
	}
	return n;
}

const char *topt_init_name(emdb_init_kind kind)
{
	switch (kind) {
	case EMDB_INIT_ZEROS:
		return "zeros";
	case EMDB_INIT_UNIFORM:
		return "uniform";
	case EMDB_INIT_NORMAL:
		return "normal";
	}
	return "unknown";
}

void topt_init_text(const emdb_init *init, char *buf, size_t cap)
{
	char a[40], b[40];
	if (init->kind == EMDB_INIT_ZEROS) {
		snprintf(buf, cap, "zeros");
		return;
	}
	out_double(a, sizeof(a), init->a);
	out_double(b, sizeof(b), init->b);
	snprintf(buf, cap, "%s:%s,%s", topt_init_name(init->kind), a, b);
}

const char *topt_default_name(emdb_default_kind kind)
{
	return kind == EMDB_DEFAULT_INIT ? "init" : "zeros";
}

const char *const *topt_candidates(const char *word)
{
	/* "KEY=" for every key, built once from the tables (invariant 1). */
	static char words[1 + N_HYPER + N_OTHER][32];
	static const char *key_words[1 + N_HYPER + N_OTHER + 1];
	if (!key_words[0]) {
		size_t k = 0;
		snprintf(words[k], sizeof(words[k]), "optimizer=");
		k++;
		for (size_t i = 0; i < N_HYPER; i++, k++)
			snprintf(words[k], sizeof(words[k]), "%s=", hyper_keys[i].name);
		for (size_t i = 0; i < N_OTHER; i++, k++)
			snprintf(words[k], sizeof(words[k]), "%s=", other_keys[i]);
		for (size_t i = 0; i < k; i++)
			key_words[i] = words[i];
		key_words[k] = NULL;
	}
	if (!strchr(word, '='))
		return key_words;
	if (!strncmp(word, "optimizer=", 10))
		return optimizer_words;
	if (!strncmp(word, "init=", 5))
		return init_words;
	if (!strncmp(word, "default=", 8))
		return default_words;
	return NULL;
}
