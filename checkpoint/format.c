/*
 * format.c - encoding and checking of the checkpoint store's keys and
 * values (the layout is docs/checkpoint.md; the API format.h).
 *
 * Invariants:
 *   1. Every encoder's output is accepted by its decoder, and every
 *      decoder rejects (EMDB_ERR_CORRUPT, never a crash or an out-of-range
 *      read) anything its encoder could not have written: wrong magic or
 *      version, lengths that disagree, nonzero reserved bytes, a checksum
 *      that does not match.
 *   2. Hashes are XXH3-64 (libxxhash) over exact byte ranges given in the
 *      specification, so other tools can recompute them.
 *
 * State changes: none; pure functions.
 */
#include <string.h>

#include <xxhash.h>

#include <emdb/alloc.h>
#include <emdb/error.h>

#include "base/error_int.h"
#include "checkpoint/format.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the checkpoint format is little-endian; this host is not"
#endif

static void put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static uint64_t get_be64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static void putd(uint8_t *p, double v) { memcpy(p, &v, 8); }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static double getd(const uint8_t *p) { double v; memcpy(&v, p, 8); return v; }

static int zeros(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

/* ---- keys ------------------------------------------------------------ */

void store_key_ckpt(uint8_t out[META_KEY_CKPT_LEN], uint64_t id)
{
	memcpy(out, META_KEY_CKPT, 5);
	put_be64(out + 5, id);
}

uint64_t store_key_ckpt_id(const uint8_t *key, size_t len)
{
	if (len != META_KEY_CKPT_LEN || memcmp(key, META_KEY_CKPT, 5) != 0)
		return 0;
	return get_be64(key + 5);
}

void store_key_row(uint8_t out[ROW_KEY_LEN], uint64_t ckpt, uint32_t table, uint64_t block)
{
	put_be64(out, ckpt);
	for (int i = 3; i >= 0; i--, table >>= 8)
		out[8 + i] = (uint8_t)table;
	put_be64(out + 12, block);
}

int store_key_row_decode(const uint8_t *key, size_t len, uint64_t *ckpt, uint32_t *table,
			 uint64_t *block)
{
	if (len != ROW_KEY_LEN)
		return emdb__seterr(EMDB_ERR_CORRUPT, "row key of %zu bytes, expected %d", len, ROW_KEY_LEN);
	*ckpt = get_be64(key);
	*table = (uint32_t)key[8] << 24 | (uint32_t)key[9] << 16 | (uint32_t)key[10] << 8 | key[11];
	*block = get_be64(key + 12);
	return EMDB_OK;
}

/* ---- store header ---------------------------------------------------- */

void store_hdr_encode(uint8_t out[STORE_HDR_LEN], const store_hdr *h)
{
	memset(out, 0, STORE_HDR_LEN);
	memcpy(out, STORE_MAGIC, 8);
	put32(out + 8, h->version);
	put64(out + 16, h->next_id);
	memcpy(out + 24, h->uuid, 16);
}

int store_hdr_decode(const uint8_t *p, size_t len, store_hdr *h)
{
	if (len != STORE_HDR_LEN || memcmp(p, STORE_MAGIC, 8) != 0)
		return emdb__seterr(EMDB_ERR_CORRUPT, "store header: not an emdb store (%zu bytes, bad magic)",
				    len);
	h->version = get32(p + 8);
	if (h->version == 0 || h->version > STORE_VERSION)
		return emdb__seterr(EMDB_ERR_CORRUPT,
				    "store header: format version %u, this build reads 1..%d", h->version,
				    STORE_VERSION);
	if (get32(p + 12) != 0)
		return emdb__seterr(EMDB_ERR_CORRUPT, "store header: reserved field is not zero");
	h->next_id = get64(p + 16);
	memcpy(h->uuid, p + 24, 16);
	return EMDB_OK;
}

/* ---- manifest -------------------------------------------------------- */

size_t manifest_size(uint32_t n_tables)
{
	return MANIFEST_HDR_LEN + (size_t)n_tables * MANIFEST_TABLE_LEN + 8;
}

static void table_encode(uint8_t *p, const manifest_table *t)
{
	const emdb_table_config *c = &t->cfg;
	const emdb_optimizer *o = &c->optimizer;
	memset(p, 0, MANIFEST_TABLE_LEN);
	put32(p + 0, t->id);
	put32(p + 4, t->flags);
	put64(p + 8, t->step);
	put64(p + 16, t->rows_total);
	put64(p + 24, t->rows);
	put64(p + 32, t->blocks);
	put64(p + 40, t->bytes);
	put64(p + 48, t->hash);
	put32(p + 56, c->dim);
	put32(p + 60, t->state_floats);
	memcpy(p + 64, c->name, strnlen(c->name, EMDB_NAME_MAX - 1));
	put32(p + 128, (uint32_t)o->kind);
	put32(p + 132, (uint32_t)c->init.kind);
	const double hp[9] = { o->lr, o->eps, o->beta1, o->beta2, o->lr_decay,
			       o->initial_accumulator, o->beta, o->l1, o->l2 };
	for (int i = 0; i < 9; i++)
		putd(p + 136 + 8 * i, hp[i]);
	putd(p + 208, c->init.a);
	putd(p + 216, c->init.b);
	put64(p + 224, c->seed);
	put32(p + 232, (uint32_t)c->lookup_default);
}

static int table_decode(const uint8_t *p, uint32_t i, manifest_table *t)
{
	emdb_table_config c = EMDB_TABLE_CONFIG_INIT;
	memset(t, 0, sizeof(*t));
	t->id = get32(p + 0);
	t->flags = get32(p + 4);
	t->step = get64(p + 8);
	t->rows_total = get64(p + 16);
	t->rows = get64(p + 24);
	t->blocks = get64(p + 32);
	t->bytes = get64(p + 40);
	t->hash = get64(p + 48);
	c.dim = get32(p + 56);
	t->state_floats = get32(p + 60);
	if (t->id == 0 || (t->flags & ~MANIFEST_TABLE_FULL) || !zeros(p + 236, 20) ||
	    !zeros(p + 64 + strnlen((const char *)p + 64, EMDB_NAME_MAX), EMDB_NAME_MAX -
		   strnlen((const char *)p + 64, EMDB_NAME_MAX)) ||
	    p[64 + EMDB_NAME_MAX - 1] != 0 || t->rows > t->rows_total)
		return emdb__seterr(EMDB_ERR_CORRUPT, "manifest: table record %u is malformed", i);
	memcpy(c.name, p + 64, EMDB_NAME_MAX);
	c.optimizer.kind = (emdb_opt_kind)get32(p + 128);
	c.init.kind = (emdb_init_kind)get32(p + 132);
	double hp[9];
	for (int k = 0; k < 9; k++)
		hp[k] = getd(p + 136 + 8 * k);
	c.optimizer.lr = hp[0];
	c.optimizer.eps = hp[1];
	c.optimizer.beta1 = hp[2];
	c.optimizer.beta2 = hp[3];
	c.optimizer.lr_decay = hp[4];
	c.optimizer.initial_accumulator = hp[5];
	c.optimizer.beta = hp[6];
	c.optimizer.l1 = hp[7];
	c.optimizer.l2 = hp[8];
	c.init.a = getd(p + 208);
	c.init.b = getd(p + 216);
	c.seed = get64(p + 224);
	c.lookup_default = (emdb_default_kind)get32(p + 232);
	if (emdb_optimizer_state_floats(c.optimizer.kind, c.dim) != t->state_floats || c.dim == 0 ||
	    c.dim > EMDB_DIM_MAX)
		return emdb__seterr(EMDB_ERR_CORRUPT,
				    "manifest: table '%s' has dim %u and %u state floats, which do not fit its optimizer",
				    c.name, c.dim, t->state_floats);
	t->cfg = c;
	return EMDB_OK;
}

void manifest_encode(uint8_t *out, const manifest *m)
{
	const emdb_ckpt_info *in = &m->info;
	memset(out, 0, MANIFEST_HDR_LEN);
	memcpy(out, MANIFEST_MAGIC, 8);
	put32(out + 8, STORE_VERSION);
	put32(out + 12, (uint32_t)in->kind);
	put64(out + 16, in->id);
	put64(out + 24, in->parent);
	put64(out + 32, in->base);
	put64(out + 40, in->created_ms);
	put64(out + 48, in->duration_ms);
	put32(out + 56, in->tables);
	for (uint32_t i = 0; i < in->tables; i++)
		table_encode(out + MANIFEST_HDR_LEN + (size_t)i * MANIFEST_TABLE_LEN, &m->tables[i]);
	size_t body = manifest_size(in->tables) - 8;
	put64(out + body, XXH3_64bits(out, body));
}

int manifest_decode(const uint8_t *p, size_t len, manifest *m)
{
	memset(m, 0, sizeof(*m));
	if (len < manifest_size(0) || memcmp(p, MANIFEST_MAGIC, 8) != 0)
		return emdb__seterr(EMDB_ERR_CORRUPT, "manifest: bad magic or too short (%zu bytes)", len);
	uint32_t version = get32(p + 8);
	if (version == 0 || version > STORE_VERSION)
		return emdb__seterr(EMDB_ERR_CORRUPT, "manifest: format version %u, this build reads 1..%d",
				    version, STORE_VERSION);
	uint32_t n = get32(p + 56);
	if (n > (len - manifest_size(0)) / MANIFEST_TABLE_LEN || manifest_size(n) != len)
		return emdb__seterr(EMDB_ERR_CORRUPT, "manifest: %zu bytes cannot hold %u tables", len, n);
	emdb_ckpt_info *in = &m->info;
	in->kind = (emdb_ckpt_kind)get32(p + 12);
	in->id = get64(p + 16);
	in->parent = get64(p + 24);
	in->base = get64(p + 32);
	in->created_ms = get64(p + 40);
	in->duration_ms = get64(p + 48);
	in->tables = n;
	bool full = in->kind == EMDB_CKPT_FULL;
	if ((!full && in->kind != EMDB_CKPT_INCREMENTAL) || in->id == 0 || get32(p + 60) != 0 ||
	    (full && (in->parent != 0 || in->base != in->id)) ||
	    (!full && (in->parent == 0 || in->parent >= in->id || in->base == 0 || in->base > in->parent)))
		return emdb__seterr(EMDB_ERR_CORRUPT, "manifest of checkpoint %llu: bad header fields",
				    (unsigned long long)in->id);
	if (n) {
		m->tables = emdb_calloc(n, sizeof(*m->tables));
		if (!m->tables)
			return EMDB_ERR_NOMEM;
	}
	for (uint32_t i = 0; i < n; i++) {
		manifest_table *t = &m->tables[i];
		int rc = table_decode(p + MANIFEST_HDR_LEN + (size_t)i * MANIFEST_TABLE_LEN, i, t);
		if (rc == EMDB_OK && full && !(t->flags & MANIFEST_TABLE_FULL))
			rc = emdb__seterr(EMDB_ERR_CORRUPT, "manifest: full checkpoint with a delta table");
		if (rc == EMDB_OK && i && t->id <= m->tables[i - 1].id)
			rc = emdb__seterr(EMDB_ERR_CORRUPT, "manifest: table ids out of order");
		if (rc != EMDB_OK) {
			manifest_free(m);
			return rc;
		}
		in->rows += t->rows;
		in->rows_total += t->rows_total;
		in->bytes += t->bytes;
		if (t->step > in->max_step)
			in->max_step = t->step;
	}
	/* Checked last, so that fuzzing reaches the field checks above. */
	if (get64(p + len - 8) != XXH3_64bits(p, len - 8)) {
		manifest_free(m);
		return emdb__seterr(EMDB_ERR_CORRUPT, "manifest: checksum mismatch");
	}
	return EMDB_OK;
}

void manifest_free(manifest *m)
{
	emdb_free(m->tables);
	m->tables = NULL;
}

uint64_t manifest_sum(const uint8_t *p, size_t len)
{
	return len >= 8 ? get64(p + len - 8) : 0;
}

/* ---- catalog --------------------------------------------------------- */

size_t catalog_size(uint32_t n_done, uint32_t n_pending)
{
	return CATALOG_HDR_LEN + (size_t)n_done * 16 + (size_t)n_pending * 8 + 8;
}

void catalog_encode(uint8_t *out, const store_catalog *c)
{
	memset(out, 0, CATALOG_HDR_LEN);
	memcpy(out, CATALOG_MAGIC, 8);
	put32(out + 8, CATALOG_VERSION);
	memcpy(out + 16, c->uuid, 16);
	put64(out + 32, c->next_id);
	put32(out + 40, c->n_done);
	put32(out + 44, c->n_pending);
	uint8_t *p = out + CATALOG_HDR_LEN;
	for (uint32_t i = 0; i < c->n_done; i++, p += 16) {
		put64(p, c->done[i].id);
		put64(p + 8, c->done[i].sum);
	}
	for (uint32_t i = 0; i < c->n_pending; i++, p += 8)
		put64(p, c->pending[i]);
	put64(p, XXH3_64bits(out, (size_t)(p - out)));
}

int catalog_decode(const uint8_t *p, size_t len, store_catalog *c)
{
	memset(c, 0, sizeof(*c));
	if (len < catalog_size(0, 0) || memcmp(p, CATALOG_MAGIC, 8) != 0)
		return emdb__seterr(EMDB_ERR_CORRUPT, "catalog: bad magic or too short (%zu bytes)", len);
	uint32_t version = get32(p + 8);
	if (version == 0 || version > CATALOG_VERSION)
		return emdb__seterr(EMDB_ERR_CORRUPT, "catalog: format version %u, this build reads 1..%d",
				    version, CATALOG_VERSION);
	if (get32(p + 12) != 0)
		return emdb__seterr(EMDB_ERR_CORRUPT, "catalog: reserved field is not zero");
	uint32_t nd = get32(p + 40), np = get32(p + 44);
	if (nd > CATALOG_MAX || np > CATALOG_MAX || catalog_size(nd, np) != len)
		return emdb__seterr(EMDB_ERR_CORRUPT, "catalog: %zu bytes cannot hold %u + %u ids", len, nd,
				    np);
	if (get64(p + len - 8) != XXH3_64bits(p, len - 8))
		return emdb__seterr(EMDB_ERR_CORRUPT, "catalog: checksum mismatch");
	memcpy(c->uuid, p + 16, 16);
	c->next_id = get64(p + 32);
	c->done = emdb_calloc(nd ? nd : 1, sizeof(*c->done));
	c->pending = emdb_calloc(np ? np : 1, sizeof(*c->pending));
	if (!c->done || !c->pending) {
		catalog_free(c);
		return EMDB_ERR_NOMEM;
	}
	const uint8_t *q = p + CATALOG_HDR_LEN;
	int rc = EMDB_OK;
	for (uint32_t i = 0; i < nd; i++, q += 16) {
		c->done[i] = (catalog_entry){ get64(q), get64(q + 8) };
		if (c->done[i].id == 0 || c->done[i].id >= c->next_id || (i && c->done[i].id <= c->done[i - 1].id))
			rc = EMDB_ERR_CORRUPT;
	}
	for (uint32_t i = 0; i < np; i++, q += 8) {
		c->pending[i] = get64(q);
		if (c->pending[i] == 0 || c->pending[i] >= c->next_id || (i && c->pending[i] <= c->pending[i - 1]))
			rc = EMDB_ERR_CORRUPT;
	}
	c->n_done = nd;
	c->n_pending = np;
	if (rc != EMDB_OK) {
		catalog_free(c);
		return emdb__seterr(rc, "catalog: ids out of order or not below next_id");
	}
	return EMDB_OK;
}

void catalog_free(store_catalog *c)
{
	emdb_free(c->done);
	emdb_free(c->pending);
	c->done = NULL;
	c->pending = NULL;
	c->n_done = c->n_pending = 0;
}

/* ---- row blocks ------------------------------------------------------ */

uint64_t block_seal(uint8_t *block, uint32_t n, uint32_t row_floats)
{
	size_t len = block_size(n, row_floats);
	uint64_t h = XXH3_64bits(block + BLOCK_HDR_LEN, len - BLOCK_HDR_LEN);
	put32(block, BLOCK_MAGIC);
	block[4] = STORE_VERSION;
	block[5] = 0;
	block[6] = block[7] = 0;
	put32(block + 8, n);
	put32(block + 12, row_floats);
	put64(block + 16, h);
	return h;
}

int block_decode(const uint8_t *p, size_t len, block_view *v)
{
	if (len < BLOCK_HDR_LEN || get32(p) != BLOCK_MAGIC)
		return emdb__seterr(EMDB_ERR_CORRUPT, "row block: bad magic or too short (%zu bytes)", len);
	if (p[4] == 0 || p[4] > STORE_VERSION || p[5] || p[6] || p[7])
		return emdb__seterr(EMDB_ERR_CORRUPT, "row block: version %u or flags not understood", p[4]);
	v->n = get32(p + 8);
	v->row_floats = get32(p + 12);
	uint64_t per_row = 8 + (uint64_t)v->row_floats * 4;
	if (v->n == 0 || v->row_floats == 0 || (len - BLOCK_HDR_LEN) / per_row != v->n ||
	    (len - BLOCK_HDR_LEN) % per_row)
		return emdb__seterr(EMDB_ERR_CORRUPT, "row block: %zu bytes cannot hold %u rows of %u floats",
				    len, v->n, v->row_floats);
	v->hash = get64(p + 16);
	if (XXH3_64bits(p + BLOCK_HDR_LEN, len - BLOCK_HDR_LEN) != v->hash)
		return emdb__seterr(EMDB_ERR_CORRUPT, "row block: checksum mismatch");
	v->ids = p + BLOCK_HDR_LEN;
	v->rows = v->ids + (size_t)v->n * 8;
	return EMDB_OK;
}

uint64_t store_hash_chain(uint64_t acc, uint64_t block_hash)
{
	uint8_t b[8];
	put64(b, block_hash);
	return XXH3_64bits_withSeed(b, 8, acc);
}
