/*
 * nccl_emu.cc - the NCCL of tests/emu/nccl.h: communicators made together
 * by ncclCommInitAll, float all-reduces collected per group and run as
 * markers on the ranks' streams (the header says how).
 *
 * Invariants:
 *   1. Everything runs under the CUDA emulator's lock (emu_lock), markers
 *      included: they run inside that emulator's queues.
 *   2. A group ends with exactly one call per rank of every clique it
 *      touched, each of the same count on its own device's memory and
 *      stream; otherwise ncclGroupEnd returns ncclInvalidUsage and queues
 *      nothing (real NCCL would wait for the missing ranks for ever).
 *   3. A collective reduces once: when its first marker runs, after every
 *      rank's stream has run up to its marker.
 */
#include <stdint.h>
#include <string.h>

#include <map>
#include <memory>
#include <vector>

#include "emu_int.h"
#include "nccl.h"

struct clique {
	int n;
};

struct emu_comm {
	int rank, dev;
	std::shared_ptr<clique> cl;
};

namespace {

struct call {
	const float *send;
	float *recv;
	size_t count;
	ncclComm_t comm;
	cudaStream_t stream;
};

struct collective {
	int n;
	size_t count;
	std::vector<const float *> send;
	std::vector<float *> recv;
	std::vector<cudaStream_t> stream;
	std::unique_ptr<bool[]> arrived;
	bool done;
};

thread_local int depth;
thread_local std::vector<call> calls;
unsigned long reductions;

/* Invariant 3: every rank's stream up to its marker, then the sums. */
void marker(const std::shared_ptr<collective> &c, int r)
{
	c->arrived[r] = true;
	for (int q = 0; q < c->n; q++)
		if (!c->arrived[q])
			emu_run(c->stream[q], &c->arrived[q]);
	if (c->done)
		return;
	std::vector<float> sum(c->count);

	for (size_t i = 0; i < c->count; i++) {
		float acc = c->send[c->n - 1][i];

		for (int q = c->n - 2; q >= 0; q--)
			acc += c->send[q][i];
		sum[i] = acc;
	}
	for (int q = 0; q < c->n; q++)
		memcpy(c->recv[q], sum.data(), c->count * sizeof(float));
	c->done = true;
	reductions++;
}

/* Invariant 2, then one collective per clique. */
ncclResult_t launch(std::vector<call> &g)
{
	std::map<clique *, std::vector<call *>> by;

	for (call &k : g) {
		cudaStream_t s = emu_live_stream(k.stream);
		size_t bytes = k.count * sizeof(float);

		if (!s || emu_stream_device(s) != k.comm->dev || !emu_device_bytes(k.send, bytes, k.comm->dev) ||
		    !emu_device_bytes(k.recv, bytes, k.comm->dev))
			return ncclInvalidArgument;
		k.stream = s;
		by[k.comm->cl.get()].push_back(&k);
	}
	for (auto &e : by) {
		std::vector<call *> &v = e.second;

		if ((int)v.size() != e.first->n)
			return ncclInvalidUsage;
		for (call *k : v)
			if (k->count != v[0]->count)
				return ncclInvalidUsage;
	}
	for (auto &e : by) {
		int n = e.first->n;
		auto c = std::make_shared<collective>();

		c->n = n;
		c->count = e.second[0]->count;
		c->send.resize(n);
		c->recv.resize(n);
		c->stream.resize(n);
		c->arrived.reset(new bool[n]());
		c->done = false;
		for (call *k : e.second) {
			c->send[k->comm->rank] = k->send;
			c->recv[k->comm->rank] = k->recv;
			c->stream[k->comm->rank] = k->stream;
		}
		for (int r = 0; r < n; r++)
			c->stream[r]->q.push_back([c, r]() { marker(c, r); });
	}
	return ncclSuccess;
}

} // namespace

extern "C" {

ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
	std::lock_guard<std::recursive_mutex> g(emu_lock());
	int count = 0;

	if (ndev < 1 || cudaGetDeviceCount(&count) != cudaSuccess)
		return ncclUnhandledCudaError;
	for (int r = 0; r < ndev; r++) {
		if (devlist[r] < 0 || devlist[r] >= count)
			return ncclInvalidArgument;
		for (int q = 0; q < r; q++)
			if (devlist[q] == devlist[r])
				return ncclInvalidUsage; /* NCCL: duplicate GPU */
	}
	auto cl = std::make_shared<clique>();

	cl->n = ndev;
	for (int r = 0; r < ndev; r++)
		comms[r] = new emu_comm{ r, devlist[r], cl };
	return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
	delete comm;
	return ncclSuccess;
}

ncclResult_t ncclGroupStart(void)
{
	depth++;
	return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void)
{
	std::lock_guard<std::recursive_mutex> g(emu_lock());
	ncclResult_t r = ncclSuccess;

	if (depth == 0)
		return ncclInvalidUsage;
	if (--depth == 0) {
		r = launch(calls);
		calls.clear();
	}
	return r;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type,
			   ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
	std::lock_guard<std::recursive_mutex> g(emu_lock());

	if (type != ncclFloat || op != ncclSum || !comm)
		return ncclInvalidArgument;
	calls.push_back(call{ (const float *)send, (float *)recv, count, comm, stream });
	if (depth == 0) { /* a group of its own */
		ncclResult_t r = launch(calls);

		calls.clear();
		return r;
	}
	return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t r)
{
	switch (r) {
	case ncclSuccess:
		return "no error (emulated)";
	case ncclUnhandledCudaError:
		return "unhandled cuda error (emulated)";
	case ncclInternalError:
		return "internal error (emulated)";
	case ncclInvalidArgument:
		return "invalid argument (emulated)";
	case ncclInvalidUsage:
		return "invalid usage: every rank must call, once, in one group (emulated)";
	}
	return "unknown result (emulated)";
}

unsigned long emu_nccl_reductions(void)
{
	std::lock_guard<std::recursive_mutex> g(emu_lock());

	return reductions;
}

} // extern "C"
