/*
 * cuda_emu.cc - the CUDA runtime of tests/emu/cuda_runtime_api.h on the
 * CPU: tracked allocations, streams as queues run when waited for, events
 * as markers in those queues, kernels as calls per thread
 * (tests/emu/cuda_runtime.h).
 *
 * Invariants:
 *   1. One recursive mutex guards everything; queued work runs under it,
 *      in the thread that waits, so the emulator itself has no threads.
 *   2. A queue runs only when waited for: the stream's own synchronize,
 *      an event recorded on it, cudaDeviceSynchronize (that device's
 *      queues), cudaFree and cudaFreeHost (every queue: they synchronise
 *      the device, as the real calls do), a copy into pageable memory (it
 *      returns when done, as the real one does) and cudaMemcpy (the
 *      legacy queue only).  Nothing else runs queued work.
 *   3. A copy from pageable memory takes its bytes when it is called (the
 *      driver stages them before returning); a copy from pinned or device
 *      memory reads them when it runs.
 *   4. Every allocation is in `allocs` from its allocation to its free;
 *      a copy or memset whose bytes are not inside one allocation of the
 *      kind its direction names fails with cudaErrorInvalidValue and
 *      queues nothing.
 */
#include <stdio.h>
#include <stdlib.h>

#include <array>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "cuda_runtime.h"
#include "emu_int.h"

emu_dim3 blockIdx, threadIdx, blockDim, gridDim; /* invariant 1 */

struct emu_event {
	std::shared_ptr<bool> done; /* null: never recorded */
	cudaStream_t stream;
};

namespace {

enum mem_kind { PAGEABLE, PINNED, DEVICE };

struct allocation {
	size_t size;
	mem_kind kind;
	int dev;
};

std::recursive_mutex mu;
std::map<uintptr_t, allocation> allocs;
std::set<cudaStream_t> streams;
cudaStream_t *legacy; /* per device; never freed: still reachable at exit */
int ndev = -1;
unsigned fail_malloc_in;
thread_local int cur_dev;
thread_local cudaError_t last_err = cudaSuccess;

/* __shfl_sync (cuda_runtime.h): per warp, what each lane offered at each
 * of its calls, in order. */
std::unordered_map<uint64_t, std::array<std::vector<uint64_t>, 32>> shfl_log;
unsigned cap_blocks, cap_threads; /* emu_cap_grid */

typedef std::lock_guard<std::recursive_mutex> guard;

int devices()
{
	if (ndev < 0) {
		const char *v = getenv("EMDB_EMU_DEVICES");

		ndev = v && *v ? atoi(v) : 2;
		if (ndev < 0)
			ndev = 0;
		legacy = new cudaStream_t[ndev ? ndev : 1];
		for (int d = 0; d < ndev; d++)
			legacy[d] = new emu_stream{ d, {} };
	}
	return ndev;
}

cudaError_t fail(cudaError_t e)
{
	last_err = e;
	return e;
}

/* The allocation holding p, or null (*base its start). */
const allocation *find(const void *p, uintptr_t *base)
{
	auto it = allocs.upper_bound((uintptr_t)p);

	if (it == allocs.begin())
		return nullptr;
	--it;
	if ((uintptr_t)p >= it->first + it->second.size)
		return nullptr;
	*base = it->first;
	return &it->second;
}

mem_kind kind_of(const void *p)
{
	uintptr_t b;
	const allocation *a = find(p, &b);

	return a ? a->kind : PAGEABLE;
}

/* [p, p + n) inside one allocation of kind k (PAGEABLE: in none). */
bool inside(const void *p, size_t n, mem_kind k)
{
	uintptr_t b;
	const allocation *a = find(p, &b);

	if (k == PAGEABLE)
		return !a;
	return a && a->kind == k && (uintptr_t)p + n <= b + a->size;
}

cudaStream_t resolve(cudaStream_t s)
{
	return s ? s : legacy[cur_dev];
}

/* Runs s's queue until `until` is set, or to its end (invariant 2). */
void run(cudaStream_t s, const bool *until = nullptr)
{
	while (!s->q.empty() && !(until && *until)) {
		std::function<void()> op = std::move(s->q.front());

		s->q.pop_front();
		op();
	}
}

void run_all()
{
	for (cudaStream_t s : streams)
		run(s);
	for (int d = 0; d < ndev; d++)
		run(legacy[d]);
}

bool ptr_free(void *p, mem_kind k)
{
	auto it = allocs.find((uintptr_t)p);

	if (it == allocs.end() || it->second.kind != k)
		return false;
	run_all();
	allocs.erase(it);
	free(p);
	return true;
}

/* A tracked allocation of kind k on the current device (invariant 4),
 * its contents undefined: NaN bytes. */
cudaError_t new_allocation(void **p, size_t bytes, mem_kind k)
{
	*p = malloc(bytes ? bytes : 1);
	if (!*p)
		return fail(cudaErrorMemoryAllocation);
	memset(*p, 0xff, bytes);
	allocs[(uintptr_t)*p] = allocation{ bytes ? bytes : 1, k, cur_dev };
	return cudaSuccess;
}

cudaError_t host_alloc(void **p, size_t bytes)
{
	if (devices() == 0)
		return fail(cudaErrorNoDevice);
	return new_allocation(p, bytes, PINNED);
}

/* The direction a copy names is the memory it touches (invariant 4). */
bool copy_ok(void *dst, const void *src, size_t n, cudaMemcpyKind kind)
{
	mem_kind d = kind_of(dst), s = kind_of(src);

	switch (kind) {
	case cudaMemcpyHostToDevice:
		return inside(dst, n, DEVICE) && s != DEVICE && (s == PAGEABLE || inside(src, n, s));
	case cudaMemcpyDeviceToHost:
		return inside(src, n, DEVICE) && d != DEVICE && (d == PAGEABLE || inside(dst, n, d));
	case cudaMemcpyDeviceToDevice:
		return inside(dst, n, DEVICE) && inside(src, n, DEVICE);
	case cudaMemcpyHostToHost:
		return d != DEVICE && s != DEVICE;
	case cudaMemcpyDefault:
		return (d == PAGEABLE || inside(dst, n, d)) && (s == PAGEABLE || inside(src, n, s));
	}
	return false;
}

cudaError_t enqueue_copy(void *dst, const void *src, size_t n, cudaMemcpyKind kind,
			 cudaStream_t s)
{
	if (devices() == 0)
		return fail(cudaErrorNoDevice);
	if (!copy_ok(dst, src, n, kind))
		return fail(cudaErrorInvalidValue);
	if (n == 0)
		return cudaSuccess;
	s = resolve(s);
	if (kind_of(src) == PAGEABLE) { /* invariant 3 */
		auto bytes = std::make_shared<std::vector<char>>((const char *)src,
								 (const char *)src + n);

		s->q.push_back([dst, bytes]() { memcpy(dst, bytes->data(), bytes->size()); });
	} else {
		s->q.push_back([dst, src, n]() { memmove(dst, src, n); });
	}
	if (kind_of(dst) == PAGEABLE)
		run(s);
	return cudaSuccess;
}

cudaError_t enqueue_memset(void *p, int v, size_t n, cudaStream_t s)
{
	if (devices() == 0)
		return fail(cudaErrorNoDevice);
	if (!inside(p, n, DEVICE))
		return fail(cudaErrorInvalidValue);
	resolve(s)->q.push_back([p, v, n]() { memset(p, v, n); });
	return cudaSuccess;
}

} // namespace

std::recursive_mutex &emu_lock(void)
{
	return mu;
}

void emu_run(cudaStream_t s, const bool *until)
{
	run(s, until);
}

cudaStream_t emu_live_stream(cudaStream_t s)
{
	if (devices() == 0 || (s && !streams.count(s)))
		return nullptr;
	return resolve(s);
}

bool emu_device_bytes(const void *p, size_t bytes, int dev)
{
	uintptr_t b;
	const allocation *a = find(p, &b);

	return inside(p, bytes, DEVICE) && a->dev == dev;
}

int emu_stream_device(cudaStream_t s)
{
	return s->dev;
}

extern "C" {

cudaError_t cudaGetDeviceCount(int *count)
{
	guard g(mu);

	*count = devices();
	return *count ? cudaSuccess : fail(cudaErrorNoDevice);
}

cudaError_t cudaSetDevice(int device)
{
	guard g(mu);

	if (device < 0 || device >= devices())
		return fail(devices() ? cudaErrorInvalidDevice : cudaErrorNoDevice);
	cur_dev = device;
	return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
	*device = cur_dev;
	return cudaSuccess;
}

cudaError_t cudaGetLastError(void)
{
	cudaError_t e = last_err;

	last_err = cudaSuccess;
	return e;
}

const char *cudaGetErrorString(cudaError_t e)
{
	switch (e) {
	case cudaSuccess:
		return "no error (emulated)";
	case cudaErrorInvalidValue:
		return "invalid argument (emulated)";
	case cudaErrorMemoryAllocation:
		return "out of memory (emulated)";
	case cudaErrorNoDevice:
		return "no CUDA-capable device is detected (emulated, EMDB_EMU_DEVICES=0)";
	case cudaErrorInvalidDevice:
		return "invalid device ordinal (emulated)";
	case cudaErrorInvalidResourceHandle:
		return "invalid resource handle (emulated)";
	}
	return "unknown error (emulated)";
}

cudaError_t cudaMalloc(void **p, size_t bytes)
{
	guard g(mu);

	*p = nullptr;
	if (devices() == 0)
		return fail(cudaErrorNoDevice);
	if (fail_malloc_in && --fail_malloc_in == 0)
		return fail(cudaErrorMemoryAllocation);
	return new_allocation(p, bytes, DEVICE);
}

cudaError_t cudaFree(void *p)
{
	guard g(mu);

	if (!p)
		return cudaSuccess;
	return ptr_free(p, DEVICE) ? cudaSuccess : fail(cudaErrorInvalidValue);
}

cudaError_t cudaMallocHost(void **p, size_t bytes)
{
	guard g(mu);

	return host_alloc(p, bytes);
}

cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned flags)
{
	guard g(mu);

	(void)flags; /* portable and mapped: one address space here */
	return host_alloc(p, bytes);
}

cudaError_t cudaFreeHost(void *p)
{
	guard g(mu);

	if (!p)
		return cudaSuccess;
	return ptr_free(p, PINNED) ? cudaSuccess : fail(cudaErrorInvalidValue);
}

/* One address space: the device sees pinned memory at its host address. */
cudaError_t cudaHostGetDevicePointer(void **dev, void *host, unsigned flags)
{
	guard g(mu);

	*dev = nullptr;
	if (flags || kind_of(host) != PINNED)
		return fail(cudaErrorInvalidValue);
	*dev = host;
	return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p)
{
	guard g(mu);
	uintptr_t b;
	const allocation *al = find(p, &b);

	memset(a, 0, sizeof(*a));
	a->device = -2;
	if (!al)
		return cudaSuccess;
	a->type = al->kind == DEVICE ? cudaMemoryTypeDevice : cudaMemoryTypeHost;
	a->device = al->dev;
	a->devicePointer = (void *)p;
	a->hostPointer = al->kind == PINNED ? (void *)p : nullptr;
	return cudaSuccess;
}

/* The legacy stream's earlier work first; then, as the CUDA documents
 * ("API synchronization behavior"): from pageable memory to the device
 * it returns once the bytes are staged (the copy itself may still be
 * queued), from pinned memory or to the host once it is done, between
 * device addresses at once. */
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind)
{
	guard g(mu);
	cudaError_t e;

	if (devices() == 0)
		return fail(cudaErrorNoDevice);
	run(legacy[cur_dev]);
	e = enqueue_copy(dst, src, bytes, kind, nullptr);
	if (e == cudaSuccess && (kind_of(dst) != DEVICE || kind_of(src) == PINNED))
		run(legacy[cur_dev]);
	return e;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
			    cudaStream_t s)
{
	guard g(mu);

	return enqueue_copy(dst, src, bytes, kind, s);
}

cudaError_t cudaMemset(void *p, int value, size_t bytes)
{
	guard g(mu);

	return enqueue_memset(p, value, bytes, nullptr);
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t s)
{
	guard g(mu);

	return enqueue_memset(p, value, bytes, s);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
	guard g(mu);

	(void)flags; /* every stream here is its own queue: non-blocking */
	if (devices() == 0)
		return fail(cudaErrorNoDevice);
	*s = new emu_stream{ cur_dev, {} };
	streams.insert(*s);
	return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
	guard g(mu);

	if (!streams.count(s))
		return fail(cudaErrorInvalidResourceHandle);
	run(s); /* its work completes, as on a device */
	streams.erase(s);
	delete s;
	return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	guard g(mu);

	if (devices() == 0)
		return fail(cudaErrorNoDevice);
	if (s && !streams.count(s))
		return fail(cudaErrorInvalidResourceHandle);
	run(resolve(s));
	return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
	(void)flags;
	*e = new emu_event{ nullptr, nullptr };
	return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
	guard g(mu);

	delete e; /* a queued marker keeps its own flag */
	return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
	guard g(mu);

	if (devices() == 0)
		return fail(cudaErrorNoDevice);
	if (s && !streams.count(s))
		return fail(cudaErrorInvalidResourceHandle);
	std::shared_ptr<bool> done = std::make_shared<bool>(false);

	e->done = done;
	e->stream = resolve(s);
	e->stream->q.push_back([done]() { *done = true; });
	return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
	guard g(mu);

	if (e->done && !*e->done) {
		std::shared_ptr<bool> done = e->done; /* the marker's own */

		run(e->stream, done.get());
	}
	return cudaSuccess;
}

/* Work queued on s after this runs after the work e marks: a queued op
 * that runs e's stream up to e's marker (invariant 2: only when s runs). */
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags)
{
	guard g(mu);

	if (devices() == 0)
		return fail(cudaErrorNoDevice);
	if (flags || (s && !streams.count(s)))
		return fail(s ? cudaErrorInvalidResourceHandle : cudaErrorInvalidValue);
	if (!e->done || *e->done)
		return cudaSuccess; /* never recorded, or done: nothing to wait for */
	std::shared_ptr<bool> done = e->done;
	cudaStream_t from = e->stream;

	resolve(s)->q.push_back([done, from]() { run(from, done.get()); });
	return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
	guard g(mu);

	if (devices() == 0)
		return fail(cudaErrorNoDevice);
	for (cudaStream_t s : streams)
		if (s->dev == cur_dev)
			run(s);
	run(legacy[cur_dev]);
	return cudaSuccess;
}

void emu_cap_grid(unsigned blocks, unsigned threads)
{
	guard g(mu);

	cap_blocks = blocks;
	cap_threads = threads;
}

void emu_fail_malloc(unsigned n)
{
	guard g(mu);

	fail_malloc_in = n;
}

size_t emu_queued_ops(void)
{
	guard g(mu);
	size_t n = 0;

	for (cudaStream_t s : streams)
		n += s->q.size();
	for (int d = 0; d < ndev; d++)
		n += legacy[d]->q.size();
	return n;
}

} // extern "C"

/* After a thread of a kernel: a lane other than 0 made as many shuffles
 * as lane 0 of its warp (which ran before it); fewer is a divergent
 * shuffle too, whose broadcast a GPU would hand to no one. */
static void shfl_check_lane(void)
{
	uint64_t warp = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
	unsigned lane = threadIdx.x & 31;
	auto it = shfl_log.find(warp);
	size_t made = it == shfl_log.end() ? 0 : it->second[lane].size();
	size_t lane0 = it == shfl_log.end() ? 0 : it->second[0].size();

	if (lane != 0 && made != lane0) {
		fprintf(stderr, "emulated __shfl_sync: lane %u of warp %llu calls it %zu times, lane 0 "
				"%zu (a divergent shuffle)\n", lane, (unsigned long long)warp, made, lane0);
		abort();
	}
}

void emu_enqueue_kernel(cudaStream_t s, unsigned blocks, unsigned threads,
			std::function<void()> body)
{
	guard g(mu);

	if (devices() == 0) {
		fail(cudaErrorNoDevice);
		return;
	}
	if ((s && !streams.count(s)) || resolve(s)->dev != cur_dev) {
		fail(cudaErrorInvalidResourceHandle);
		return;
	}
	if (blocks == 0 || threads == 0 || threads > 1024) {
		fail(cudaErrorInvalidValue);
		return;
	}
	if (cap_blocks && blocks > cap_blocks)
		blocks = cap_blocks;
	if (cap_threads)
		threads = cap_threads;
	resolve(s)->q.push_back([blocks, threads, body]() {
		for (unsigned b = 0; b < blocks; b++)
			for (unsigned t = 0; t < threads; t++) {
				blockIdx = emu_dim3{ b, 0, 0 };
				threadIdx = emu_dim3{ t, 0, 0 };
				blockDim = emu_dim3{ threads, 1, 1 };
				gridDim = emu_dim3{ blocks, 1, 1 };
				body();
				shfl_check_lane();
			}
		shfl_log.clear();
	});
}

uint64_t emu_shfl(unsigned mask, uint64_t bits, int src_lane)
{
	uint64_t warp = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
	unsigned lane = threadIdx.x & 31;
	std::array<std::vector<uint64_t>, 32> &log = shfl_log[warp];
	size_t k = log[lane].size(); /* this lane's k-th call */

	if (mask != 0xffffffffu || src_lane < 0 || (unsigned)src_lane > lane) {
		fprintf(stderr, "emulated __shfl_sync: only a full warp taking a value from the "
				"caller's lane or a lower one is emulated (mask %#x, lane %u reads %d)\n",
			mask, lane, src_lane);
		abort();
	}
	log[lane].push_back(bits);
	if ((unsigned)src_lane == lane)
		return bits;
	if (k >= log[src_lane].size()) {
		fprintf(stderr, "emulated __shfl_sync: lane %u of warp %llu calls it more often than "
				"lane %d (a divergent shuffle)\n", lane, (unsigned long long)warp, src_lane);
		abort();
	}
	return log[src_lane][k];
}
