/*
 * emu_int.h - what the emulated NCCL (nccl_emu.cc) uses of the emulated
 * CUDA runtime (cuda_emu.cc): its one lock, its queues and its record of
 * device memory.  Not for the code under test.
 */
#ifndef EMDB_TESTS_EMU_EMU_INT_H
#define EMDB_TESTS_EMU_EMU_INT_H

#include <deque>
#include <functional>
#include <mutex>

#include "cuda_runtime_api.h"

/* A stream: its device and the work queued on it, run in order. */
struct emu_stream {
	int dev;
	std::deque<std::function<void()>> q;
};

/* The emulator's one lock (cuda_emu.cc, invariant 1). */
std::recursive_mutex &emu_lock(void);

/* Runs s's queue until *until is set (null: to its end). */
void emu_run(cudaStream_t s, const bool *until);

/* s after resolving the legacy stream; null when s is no live stream. */
cudaStream_t emu_live_stream(cudaStream_t s);

/* Whether [p, p + bytes) lies in one allocation of device `dev`. */
bool emu_device_bytes(const void *p, size_t bytes, int dev);

/* The device whose stream s is. */
int emu_stream_device(cudaStream_t s);

#endif
