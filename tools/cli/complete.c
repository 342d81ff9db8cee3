/*
 * complete.c - completion candidates for the shell (complete.h).
 *
 * Invariants:
 *   1. Command names come only from the command table (cmd.h), so every
 *      row is completed, and its arguments as its `comp` says.
 *   2. The current word is the text after the last blank before the
 *      cursor; candidates are whole words that replace it, so a word typed
 *      in another case ("TAB") is completed to the table's spelling.
 *   3. Command words match ignoring case, like the dispatcher; names from
 *      the server (tables, settings) match exactly.
 *
 * State changes: none beyond *m, and the session's name caches.
 */
#include <string.h>
#include <strings.h>

#include <emdb/alloc.h>

#include "tools/cli/cmd.h"
#include "tools/cli/complete.h"
#include "tools/cli/tableopt.h"
#include "tools/cli/words.h"

static const char *const info_sections[] = { "server", "clients", "memory", "ops",
					     "tables", "persistence", "tier", "cluster", "all", NULL };

static const char *const ckpt_kinds[] = { "full", "incremental", "--no-wait", NULL };
static const char *const ckpt_ids[] = { "latest", "--no-wait", NULL };

static void add(cli_matches *m, const char *word, size_t len)
{
	for (size_t i = 0; i < m->n; i++) {
		if (strlen(m->v[i]) == len && !strncmp(m->v[i], word, len))
			return;
	}
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 16;
		char **v = emdb_realloc(m->v, cap * sizeof(*v));
		if (!v)
			return;
		m->v = v;
		m->cap = cap;
	}
	char *w = emdb_malloc(len + 1);
	if (!w)
		return;
	memcpy(w, word, len);
	w[len] = 0;
	m->v[m->n++] = w;
}

static void add_if_prefix(cli_matches *m, const char *word, const char *cur, bool nocase)
{
	size_t n = strlen(cur);
	if (nocase ? !strncasecmp(word, cur, n) : !strncmp(word, cur, n))
		add(m, word, strlen(word));
}

static void add_words(cli_matches *m, const char *const *words, const char *cur)
{
	for (; *words; words++)
		add_if_prefix(m, *words, cur, true);
}

/* Word i of a command name: its start, and its length in *len; NULL when
 * the name has fewer words. */
static const char *name_word(const char *name, int i, size_t *len)
{
	const char *p = name;
	for (int k = 0; k < i; k++) {
		p = strchr(p, ' ');
		if (!p)
			return NULL;
		p++;
	}
	*len = strcspn(p, " ");
	return p;
}

/* Word k of every command name whose first k words are words[k]. */
static void add_command_words(cli_matches *m, char *const *words, int k, const char *cur)
{
	size_t n;
	const cli_cmd *cmds = cmd_table(&n);
	size_t cl = strlen(cur);
	for (size_t i = 0; i < n; i++) {
		bool match = true;
		size_t len;
		for (int j = 0; j < k && match; j++) {
			const char *w = name_word(cmds[i].name, j, &len);
			match = w && strlen(words[j]) == len && !strncasecmp(w, words[j], len);
		}
		const char *w = match ? name_word(cmds[i].name, k, &len) : NULL;
		if (w && len >= cl && !strncasecmp(w, cur, cl))
			add(m, w, len);
	}
}

static void add_list(cli_matches *m, char *const *names, size_t n, const char *cur)
{
	for (size_t i = 0; i < n; i++)
		add_if_prefix(m, names[i], cur, false);
}

void complete_line(cli_session *s, const char *line, cli_matches *m)
{
	cli_words w;
	const char *err;
	memset(m, 0, sizeof(*m));
	size_t len = strlen(line);
	size_t start = len;
	while (start > 0 && line[start - 1] != ' ' && line[start - 1] != '\t')
		start--;
	m->word_start = start;
	const char *cur = line + start;
	if (words_split(line, &w, &err) < 0)
		return; /* inside an open quote: nothing to offer */
	int k = w.trailing ? w.n : w.n - 1; /* whole words before the current one */

	int used = 0;
	const cli_cmd *cmd = k > 0 ? cmd_find(k, w.v, &used) : NULL;
	if (!cmd) {
		add_command_words(m, w.v, k, cur);
		goto done;
	}
	int ai = k - used;
	for (int r = 1; r < CLI_COMP_ARGS; r++)
		if (cmd->comp[r] == CLI_COMP_REPEAT && ai >= r)
			ai %= r;
	switch (cmd->comp[ai < CLI_COMP_ARGS ? ai : CLI_COMP_ARGS - 1]) {
	case CLI_COMP_NONE:
	case CLI_COMP_REPEAT: /* folded away above */
		break;
	case CLI_COMP_COMMAND:
		add_command_words(m, w.v + used, k - used, cur);
		break;
	case CLI_COMP_TABLE: {
		char **names;
		size_t n;
		session_table_names(s, &names, &n);
		add_list(m, names, n, cur);
		break;
	}
	case CLI_COMP_CONFIG_KEY: {
		char **names;
		size_t n;
		session_config_keys(s, &names, &n);
		add_list(m, names, n, cur);
		break;
	}
	case CLI_COMP_TABLE_OPTION: {
		const char *const *c = topt_candidates(cur);
		for (; c && *c; c++)
			add_if_prefix(m, *c, cur, false);
		break;
	}
	case CLI_COMP_INFO_SECTION:
		add_words(m, info_sections, cur);
		break;
	case CLI_COMP_CKPT_KIND:
		/* "checkpoint l<Tab>": the row "checkpoint" matched, yet
		 * "list" and "delete" are words of other rows. */
		if (ai == 0)
			add_command_words(m, w.v, k, cur);
		add_words(m, ckpt_kinds, cur);
		break;
	case CLI_COMP_CKPT_ID:
		add_words(m, ckpt_ids, cur);
		break;
	}
done:
	words_free(&w);
}

void complete_free(cli_matches *m)
{
	for (size_t i = 0; i < m->n; i++)
		emdb_free(m->v[i]);
	emdb_free(m->v);
	memset(m, 0, sizeof(*m));
}
