/*
 * rowfile.h - the header of emdb-cli's row files (export, import;
 * docs/cli.md, "Row files"): 64 bytes, little-endian, then `rows` records
 * of an ID (u64), a vector (dim f32) and the optimizer state (per_row
 * f32).  Pure functions, so the decoder is fuzzed (fuzz_text).
 */
#ifndef EMDB_CLI_ROWFILE_H
#define EMDB_CLI_ROWFILE_H

#include <stddef.h>
#include <stdint.h>

#define ROWFILE_HDR 64

typedef struct rowfile_hdr {
	uint32_t dim, per_row, kind; /* kind: emdb_opt_kind of the state */
	uint64_t first_step, last_step, rows;
} rowfile_hdr;

/* Bytes of one record. */
static inline size_t rowfile_record(const rowfile_hdr *h)
{
	return 8 + 4 * (size_t)h->dim + 4 * (size_t)h->per_row;
}

void rowfile_hdr_encode(uint8_t out[ROWFILE_HDR], const rowfile_hdr *h);
/* NULL and *h filled, or what is wrong with the header (a static
 * string): magic, version, reserved bytes, dim 1..EMDB_DIM_MAX, a state
 * width that is not its optimizer's. */
const char *rowfile_hdr_decode(const uint8_t in[ROWFILE_HDR], rowfile_hdr *h);

#endif
