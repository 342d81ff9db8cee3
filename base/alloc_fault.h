/*
 * alloc_fault.h - failure injection into the emdb_malloc family, for
 * tests only: it is not installed and no library calls it.  The refusal
 * tests use it to check that every allocation failure leaves state
 * unchanged.
 */
#ifndef EMDB_ALLOC_FAULT_H
#define EMDB_ALLOC_FAULT_H

#include <stdint.h>

/* Failure injection, for tests: after `n` more successful allocations every
 * allocation fails until emdb_alloc_fail_reset().  n = 0 fails the very next
 * one.  Frees keep working. */
void emdb_alloc_fail_after(uint64_t n);
void emdb_alloc_fail_reset(void);
/* Allocations refused by injection since start. */
uint64_t emdb_alloc_injected_failures(void);

#endif
