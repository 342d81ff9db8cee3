/*
 * rowfile.c - the header of emdb-cli's row files (rowfile.h).
 *
 * Invariants:
 *   1. The decoder accepts exactly what the encoder writes for a valid
 *      header: magic and version first, then every field checked before
 *      it is trusted; the reserved bytes must be zero.
 *
 * State changes: none.
 */
#include <string.h>

#include <emdb/db.h>

#include "tools/cli/rowfile.h"

#define ROWFILE_MAGIC "EMDBROWS"
#define ROWFILE_VERSION 1u

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static void put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

void rowfile_hdr_encode(uint8_t out[ROWFILE_HDR], const rowfile_hdr *h)
{
	memset(out, 0, ROWFILE_HDR);
	memcpy(out, ROWFILE_MAGIC, 8);
	put32(out + 8, ROWFILE_VERSION);
	put32(out + 12, h->dim);
	put32(out + 16, h->per_row);
	put32(out + 20, h->kind);
	put64(out + 24, h->first_step);
	put64(out + 32, h->last_step);
	put64(out + 40, h->rows);
}

const char *rowfile_hdr_decode(const uint8_t in[ROWFILE_HDR], rowfile_hdr *h)
{
	if (memcmp(in, ROWFILE_MAGIC, 8) != 0)
		return "not an emdb row file (no EMDBROWS magic)";
	if (get32(in + 8) != ROWFILE_VERSION)
		return "a row file of another format version";
	for (int i = 48; i < ROWFILE_HDR; i++)
		if (in[i])
			return "reserved header bytes are not zero";
	h->dim = get32(in + 12);
	h->per_row = get32(in + 16);
	h->kind = get32(in + 20);
	h->first_step = get64(in + 24);
	h->last_step = get64(in + 32);
	h->rows = get64(in + 40);
	if (h->dim == 0 || h->dim > EMDB_DIM_MAX)
		return "dim out of range";
	if (h->per_row && h->per_row != emdb_optimizer_state_floats((emdb_opt_kind)h->kind, h->dim))
		return "the state width is not its optimizer's";
	return NULL;
}
