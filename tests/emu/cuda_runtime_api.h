/*
 * cuda_runtime_api.h - the CUDA runtime calls emdb uses, emulated on the
 * CPU for tests (tests/emu/cuda_emu.cc; docs/gpu.md, "The CUDA tier on the
 * CPU").  Only the emulation build sees this file: tests/emu/ comes first
 * on its include path, so gpu/tier_cuda.cu and gpu/gpu_test*.c compile
 * unchanged against it, and no CUDA toolkit is needed.
 *
 * What it models, adversarially but within the documented semantics:
 *   - "device" memory is host memory the emulator tracks (so ASan sees a
 *     kernel's out-of-bounds access), filled with NaN bytes when
 *     allocated, as cudaMalloc's memory is undefined;
 *   - every stream is a queue run only when something waits for it
 *     (cudaStreamSynchronize, cudaEventSynchronize, cudaDeviceSynchronize,
 *     the implicit synchronisation of cudaFree, cudaFreeHost and copies
 *     into pageable memory): a host read before its wait sees the old
 *     bytes, a pinned buffer refilled before its queued copy ran gives
 *     the copy the new bytes;
 *   - the legacy default stream (cudaMemcpy, cudaMemset) is a queue of
 *     its own that does not order with the non-blocking streams;
 *   - copies check their kind against the memory's type and their bytes
 *     against the allocation; a kernel's stream must be the current
 *     device's.  A violation fails the call (cudaErrorInvalidValue).
 * The device count is EMDB_EMU_DEVICES (default 2, 0 for none).
 */
#ifndef EMDB_TESTS_EMU_CUDA_RUNTIME_API_H
#define EMDB_TESTS_EMU_CUDA_RUNTIME_API_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cudaError {
	cudaSuccess = 0,
	cudaErrorInvalidValue = 1,
	cudaErrorMemoryAllocation = 2,
	cudaErrorNoDevice = 100,
	cudaErrorInvalidDevice = 101,
	cudaErrorInvalidResourceHandle = 400,
} cudaError_t;

enum cudaMemcpyKind {
	cudaMemcpyHostToHost = 0,
	cudaMemcpyHostToDevice = 1,
	cudaMemcpyDeviceToHost = 2,
	cudaMemcpyDeviceToDevice = 3,
	cudaMemcpyDefault = 4,
};

enum cudaMemoryType {
	cudaMemoryTypeUnregistered = 0,
	cudaMemoryTypeHost = 1,
	cudaMemoryTypeDevice = 2,
	cudaMemoryTypeManaged = 3,
};

struct cudaPointerAttributes {
	enum cudaMemoryType type;
	int device;
	void *devicePointer;
	void *hostPointer;
};

typedef struct emu_stream *cudaStream_t;
typedef struct emu_event *cudaEvent_t;

#define cudaStreamNonBlocking 0x01u
#define cudaEventDisableTiming 0x02u
#define cudaHostAllocPortable 0x01u
#define cudaHostAllocMapped 0x02u

cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t e);

cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaMallocHost(void **p, size_t bytes);
cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned flags);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaHostGetDevicePointer(void **dev, void *host, unsigned flags);
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p);

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
			    cudaStream_t s);
cudaError_t cudaMemset(void *p, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t s);

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags);
cudaError_t cudaDeviceSynchronize(void);

/* For tests of the emulator itself and of failure paths: the next
 * `n`th cudaMalloc (1: the next one) fails with
 * cudaErrorMemoryAllocation; 0 cancels.  Ops still queued on any stream. */
void emu_fail_malloc(unsigned n);
size_t emu_queued_ops(void);
/* For tests of the kernels' grid-stride loops: every later launch runs
 * at most `blocks` blocks of `threads` threads (a multiple of 32), fewer
 * than the work asks for; 0, 0 runs launches as made. */
void emu_cap_grid(unsigned blocks, unsigned threads);

#ifdef __cplusplus
}
#endif

#endif
