/*
 * test_emu.c - the emulated CUDA runtime and NCCL of tests/emu themselves:
 * that they are as strict as their headers say, since the tests of the
 * CUDA tier on the CPU (test_tier_emu, gpu_test_emu) are worth only what
 * the emulation catches.  Run with EMDB_EMU_DEVICES=2.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <emdb/error.h>

#include "db/tier.h"

#define N 64

static float *dev_floats(void)
{
	float *d = NULL;

	cr_assert_eq(cudaMalloc((void **)&d, N * sizeof(float)), cudaSuccess);
	return d;
}

static float first(const float *d)
{
	float v[N];

	cr_assert_eq(cudaMemcpy(v, d, sizeof(v), cudaMemcpyDeviceToHost), cudaSuccess);
	return v[0];
}

static void fill(float *p, float v)
{
	for (int i = 0; i < N; i++)
		p[i] = v;
}

Test(emu, new_device_memory_is_nan)
{
	float *d = dev_floats();

	cr_assert(first(d) != first(d), "cudaMalloc's memory reads as NaN");
	cudaFree(d);
}

Test(emu, pinned_source_is_read_when_the_copy_runs_pageable_when_called)
{
	cudaStream_t s;
	float *d = dev_floats(), *pin, page[N];

	cr_assert_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
	cr_assert_eq(cudaMallocHost((void **)&pin, N * sizeof(float)), cudaSuccess);
	fill(pin, 1.0f);
	cr_assert_eq(cudaMemcpyAsync(d, pin, N * sizeof(float), cudaMemcpyHostToDevice, s), cudaSuccess);
	fill(pin, 2.0f); /* refilled before the queued copy ran */
	cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
	cr_assert_eq(first(d), 2.0f);

	fill(page, 3.0f);
	cr_assert_eq(cudaMemcpyAsync(d, page, sizeof(page), cudaMemcpyHostToDevice, s), cudaSuccess);
	fill(page, 4.0f); /* the driver staged the pageable bytes at the call */
	cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
	cr_assert_eq(first(d), 3.0f);
	cudaFreeHost(pin);
	cudaFree(d);
	cudaStreamDestroy(s);
}

Test(emu, a_read_before_its_wait_sees_the_old_bytes)
{
	cudaStream_t s;
	cudaEvent_t e;
	float *d = dev_floats(), *pin, v[N];

	fill(v, 5.0f);
	cr_assert_eq(cudaMemcpy(d, v, sizeof(v), cudaMemcpyHostToDevice), cudaSuccess);
	cr_assert_eq(cudaDeviceSynchronize(), cudaSuccess);
	cr_assert_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
	cr_assert_eq(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
	cr_assert_eq(cudaMallocHost((void **)&pin, N * sizeof(float)), cudaSuccess);
	fill(pin, 0.0f);
	cr_assert_eq(cudaMemcpyAsync(pin, d, N * sizeof(float), cudaMemcpyDeviceToHost, s), cudaSuccess);
	cr_assert_eq(cudaEventRecord(e, s), cudaSuccess);
	cr_assert_eq(pin[0], 0.0f, "nothing ran before a wait");
	cr_assert_eq(emu_queued_ops(), 2);
	cr_assert_eq(cudaEventSynchronize(e), cudaSuccess);
	cr_assert_eq(pin[0], 5.0f);
	cr_assert_eq(emu_queued_ops(), 0);
	cudaEventDestroy(e);
	cudaFreeHost(pin);
	cudaFree(d);
	cudaStreamDestroy(s);
}

Test(emu, the_legacy_stream_does_not_order_with_the_others)
{
	cudaStream_t s;
	float *d = dev_floats(), *pin, v[N];

	fill(v, 6.0f);
	/* from pageable memory: returns once staged, the copy still queued */
	cr_assert_eq(cudaMemcpy(d, v, sizeof(v), cudaMemcpyHostToDevice), cudaSuccess);
	cr_assert_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
	cr_assert_eq(cudaMallocHost((void **)&pin, N * sizeof(float)), cudaSuccess);
	cr_assert_eq(cudaMemcpyAsync(pin, d, N * sizeof(float), cudaMemcpyDeviceToHost, s), cudaSuccess);
	cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
	cr_assert(pin[0] != pin[0], "the stream ran before the legacy copy: NaN, not %g", pin[0]);
	cr_assert_eq(cudaDeviceSynchronize(), cudaSuccess);
	cr_assert_eq(first(d), 6.0f);
	cudaFreeHost(pin);
	cudaFree(d);
	cudaStreamDestroy(s);
}

Test(emu, copies_are_checked_against_the_memory)
{
	float *d = dev_floats(), a[N], b[N * 2];

	cr_assert_eq(cudaMemcpy(a, b, sizeof(a), cudaMemcpyHostToDevice), cudaErrorInvalidValue,
		     "host to host named host to device");
	cr_assert_eq(cudaGetLastError(), cudaErrorInvalidValue);
	cr_assert_eq(cudaGetLastError(), cudaSuccess, "the last error is read once");
	cr_assert_eq(cudaMemcpy(d, b, sizeof(b), cudaMemcpyHostToDevice), cudaErrorInvalidValue,
		     "past the allocation's end");
	cr_assert_eq(cudaMemcpy(a, d + 1, sizeof(a), cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
	cr_assert_eq(cudaMemset(a, 0, sizeof(a)), cudaErrorInvalidValue, "memset of host memory");
	cr_assert_eq(cudaFree(a), cudaErrorInvalidValue);
	cr_assert_eq(cudaFree(d + 1), cudaErrorInvalidValue, "not an allocation's start");
	cr_assert_eq(emu_queued_ops(), 0, "a refused call queues nothing");
	cudaFree(d);
}

Test(emu, pointer_attributes)
{
	struct cudaPointerAttributes pa;
	float *d0, *d1, *pin, h[4];

	cr_assert_eq(cudaSetDevice(1), cudaSuccess);
	d1 = dev_floats();
	cr_assert_eq(cudaSetDevice(0), cudaSuccess);
	d0 = dev_floats();
	cr_assert_eq(cudaHostAlloc((void **)&pin, 16, cudaHostAllocPortable), cudaSuccess);
	cr_assert_eq(cudaPointerGetAttributes(&pa, d1 + 3), cudaSuccess);
	cr_assert(pa.type == cudaMemoryTypeDevice && pa.device == 1);
	cr_assert_eq(cudaPointerGetAttributes(&pa, d0), cudaSuccess);
	cr_assert(pa.type == cudaMemoryTypeDevice && pa.device == 0);
	cr_assert_eq(cudaPointerGetAttributes(&pa, pin + 1), cudaSuccess);
	cr_assert(pa.type == cudaMemoryTypeHost);
	cr_assert_eq(cudaPointerGetAttributes(&pa, h), cudaSuccess);
	cr_assert(pa.type == cudaMemoryTypeUnregistered);
	cr_assert_eq(cudaSetDevice(2), cudaErrorInvalidDevice);
	cudaGetLastError();
	cudaFreeHost(pin);
	cudaFree(d0);
	cudaFree(d1);
}

Test(emu, a_failed_malloc)
{
	void *p;

	emu_fail_malloc(1);
	cr_assert_eq(cudaMalloc(&p, 16), cudaErrorMemoryAllocation);
	cr_assert_null(p);
	cudaGetLastError();
	cr_assert_eq(cudaMalloc(&p, 16), cudaSuccess);
	cudaFree(p);
}

Test(emu, nccl_needs_every_rank_and_sums_them)
{
	ncclComm_t comms[2];
	int devs[2] = { 0, 1 }, same[2] = { 0, 0 };
	float *d[2], v[N];
	cudaStream_t s[2];

	cr_assert_eq(ncclCommInitAll(comms, 2, same), ncclInvalidUsage, "one GPU twice");
	cr_assert_eq(ncclCommInitAll(comms, 2, devs), ncclSuccess);
	for (int r = 0; r < 2; r++) {
		cr_assert_eq(cudaSetDevice(r), cudaSuccess);
		d[r] = dev_floats();
		fill(v, (float)(r + 1));
		cr_assert_eq(cudaMemcpy(d[r], v, sizeof(v), cudaMemcpyHostToDevice), cudaSuccess);
		cr_assert_eq(cudaDeviceSynchronize(), cudaSuccess);
		cr_assert_eq(cudaStreamCreateWithFlags(&s[r], cudaStreamNonBlocking), cudaSuccess);
	}
	/* one rank alone: NCCL would wait for the other for ever */
	cr_assert_eq(ncclGroupStart(), ncclSuccess);
	cr_assert_eq(ncclAllReduce(d[0], d[0], N, ncclFloat, ncclSum, comms[0], s[0]), ncclSuccess);
	cr_assert_eq(ncclGroupEnd(), ncclInvalidUsage);
	/* a buffer of the other rank's device */
	cr_assert_eq(ncclGroupStart(), ncclSuccess);
	for (int r = 0; r < 2; r++)
		ncclAllReduce(d[1 - r], d[1 - r], N, ncclFloat, ncclSum, comms[r], s[r]);
	cr_assert_eq(ncclGroupEnd(), ncclInvalidArgument);

	unsigned long before = emu_nccl_reductions();

	cr_assert_eq(ncclGroupStart(), ncclSuccess);
	for (int r = 0; r < 2; r++)
		cr_assert_eq(ncclAllReduce(d[r], d[r], N, ncclFloat, ncclSum, comms[r], s[r]), ncclSuccess);
	cr_assert_eq(ncclGroupEnd(), ncclSuccess);
	cr_assert_eq(emu_nccl_reductions(), before, "queued, not run");
	cr_assert_eq(cudaSetDevice(1), cudaSuccess);
	cr_assert_eq(cudaStreamSynchronize(s[1]), cudaSuccess); /* runs rank 0's stream too */
	cr_assert_eq(emu_nccl_reductions(), before + 1);
	for (int r = 0; r < 2; r++) {
		cr_assert_eq(cudaSetDevice(r), cudaSuccess);
		cr_assert_eq(first(d[r]), 3.0f);
		cudaStreamDestroy(s[r]);
		cudaFree(d[r]);
		ncclCommDestroy(comms[r]);
	}
}

/* The CUDA tier with two replicas reduces through NCCL here, not through
 * its staged fallback. */
Test(emu, the_tier_reduces_with_nccl)
{
	tier_config c;
	tier *t;
	uint64_t slot = 3;
	float g[4] = { 1, 2, 3, 4 };
	unsigned long before;

	memset(&c, 0, sizeof(c));
	c.dim = 4;
	c.opt = EMDB_OPT_SGD;
	c.rows_per_chunk = 8;
	c.max_chunks = 1;
	c.max_pending = 8;
	c.replicas = 2;
	cr_assert_eq(tier_open(TIER_CUDA, &c, &t), EMDB_OK, "%s", emdb_last_error());
	cr_assert_eq(tier_chunk_alloc(t, 0), EMDB_OK);
	cr_assert_eq(tier_scatter_add(t, 1, &slot, 1, g), EMDB_OK);
	before = emu_nccl_reductions();
	cr_assert_eq(tier_reduce(t), EMDB_OK, "%s", emdb_last_error());
	cr_assert_eq(emu_nccl_reductions(), before + 1);
	tier_close(t);
}

Test(emu, no_device, .init = NULL)
{
	char why[200];

	setenv("EMDB_EMU_DEVICES", "0", 1); /* read at the emulator's first call */
	cr_assert(!tier_available(TIER_CUDA, why, sizeof(why)));
	cr_assert(strstr(why, "EMDB_EMU_DEVICES=0"), "%s", why);
}
