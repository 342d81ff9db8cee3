/*
 * tests/fuzz/fuzz.h - the libFuzzer entry point, declared for the replay
 * driver and for -Wmissing-prototypes.
 */
#ifndef EMDB_FUZZ_H
#define EMDB_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
