/*
 * cuda_runtime.h - the CUDA C++ that gpu/tier_cuda.cu and
 * gpu/tier_kernels.cuh use, for g++ (tests/emu/cuda_runtime_api.h says
 * what the emulation is for and what it models).  A kernel is an ordinary
 * function here; TK_LAUNCH queues it on a stream, and when the stream
 * runs, every thread of the grid is one call, block after block, thread
 * after thread in ascending order, with blockIdx, threadIdx, blockDim and
 * gridDim set for that call.  The arguments are converted to the
 * kernel's parameter types when it is launched, as with <<<>>>.
 *
 * __shfl_sync: threads run one at a time, so a warp's lower lanes have run
 * to their end before a higher lane starts.  The emulation records what
 * each lane offers at each call, in order, and gives a lane's k-th call
 * the k-th value of the lane it reads, which must be itself or a lower
 * lane.  That is exact for such reads when every lane of the warp reaches
 * the shuffle the same number of times (tk_step_rowwise: each row's lanes
 * read its first lane); a read from a higher lane, or lanes calling
 * different numbers of times (a divergent shuffle, a bug on a GPU too),
 * aborts with a message.
 */
#ifndef EMDB_TESTS_EMU_CUDA_RUNTIME_H
#define EMDB_TESTS_EMU_CUDA_RUNTIME_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <functional>
#include <tuple>
#include <utility>

#include "cuda_runtime_api.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline

struct emu_dim3 {
	unsigned x, y, z;
};
/* Plain globals: kernels run only under the emulator's one mutex. */
extern emu_dim3 blockIdx, threadIdx, blockDim, gridDim;

struct alignas(16) float4 {
	float x, y, z, w;
};

static inline float4 make_float4(float x, float y, float z, float w)
{
	return float4{ x, y, z, w };
}

uint64_t emu_shfl(unsigned mask, uint64_t bits, int src_lane);

template <class T> static inline T __shfl_sync(unsigned mask, T v, int src_lane)
{
	static_assert(sizeof(T) <= sizeof(uint64_t), "emulated __shfl_sync: 8 bytes at most");
	uint64_t b = 0;
	T r;

	memcpy(&b, &v, sizeof(v));
	b = emu_shfl(mask, b, src_lane);
	memcpy(&r, &b, sizeof(r));
	return r;
}

/* Queues `body` (one thread of the grid) blocks x threads times on s;
 * fails like a launch (cudaGetLastError) when s is not the current
 * device's. */
void emu_enqueue_kernel(cudaStream_t s, unsigned blocks, unsigned threads,
			std::function<void()> body);

template <class... P, class... A>
static inline void emu_launch(cudaStream_t s, unsigned blocks, unsigned threads, void (*k)(P...),
			      A &&...a)
{
	std::tuple<P...> args(std::forward<A>(a)...);

	emu_enqueue_kernel(s, blocks, threads, [k, args]() { std::apply(k, args); });
}

#define TK_LAUNCH(kernel, blocks, threads, stream, ...) \
	emu_launch((stream), (blocks), (threads), kernel, __VA_ARGS__)

#endif
