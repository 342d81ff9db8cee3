/*
 * tier_cuda.cu - the CUDA backend of the tier interface (db/tier.h): rows
 * in device memory, one replica per device (devices cfg.device ..
 * cfg.device + replicas - 1), the kernels of gpu/tier_kernels.cuh, one
 * stream per device, accumulators summed across devices with NCCL
 * all-reduce (or, built without NCCL, through pinned host memory in
 * replica order).
 *
 * Invariants:
 *   1. Every call is synchronous: it enqueues on the replica's stream and
 *      waits for it before returning, so the caller's host buffers are
 *      free again and errors surface in the call that caused them;
 *      except gather_submit and accumulate_submit, which enqueue, record
 *      an event after their work and return: wait_job synchronises that
 *      event (tier.h, "Asynchronous work").  Their host buffers are
 *      copied asynchronously only when pinned (tier_host_alloc); other
 *      host memory goes through the staging of invariant 3 before the
 *      call returns.  Everything runs on the replica's stream, so later
 *      work is ordered after a job, and the legacy default stream (which
 *      does not order with non-blocking streams) is never used.
 *   2. A failed cudaMalloc is NOMEM and changes nothing (what the call
 *      had allocated is freed; the CUDA context stays usable).  Any other
 *      CUDA error is IO, and db/tier.c fails the tier for good.
 *   3. Host buffers that cross to the device go through two pinned
 *      staging buffers in turn (copy one while the other is in flight;
 *      buffer k is refilled only after every replica's copy from it
 *      ended), unless the caller's buffer is pinned already; staging
 *      buffers are pinned at first use and, like the device scratch
 *      buffers, only grow.
 *   4. The directory of chunk pointers on each device changes only in
 *      chunk_alloc and chunk_free, on the replica's stream, which is
 *      synchronised before a chunk is freed or a scratch buffer replaced.
 */
#include <stdio.h>
#include <string.h>

#include <cuda_runtime.h>
#ifdef EMDB_HAVE_NCCL
#include <nccl.h>
#endif

#include <emdb/alloc.h>

#include "base/error_int.h"
#include "db/tier_int.h"
#include "gpu/tier_kernels.cuh"

#define STAGE_BYTES (8u << 20)

/* kernel<<<blocks, threads, 0, stream>>>(args): one macro, so that the
 * CPU emulation of the tests (tests/emu/cuda_runtime.h) can queue the
 * same launches. */
#ifndef TK_LAUNCH
#define TK_LAUNCH(kernel, blocks, threads, stream, ...) \
	kernel<<<(blocks), (threads), 0, (stream)>>>(__VA_ARGS__)
#endif

typedef struct cuda_replica {
	int dev;
	cudaStream_t stream;
	cudaEvent_t staged[2];    /* staging buffer k is free again        */
	cudaStream_t copy;        /* put_rows' copies, beside its kernels  */
	cudaEvent_t copied[2], used[2]; /* half k landed / was put          */
	float **h_dir;            /* [max_chunks] host copy                */
	float **d_dir;            /* [max_chunks] device                   */
	float *acc;               /* [max_pending * dim] device            */
	void *scratch[3];         /* device scratch, grown on demand       */
	size_t scratch_cap[3];
	int *bad;                 /* mapped pinned flag: a gather met a bad
				     slot (the kernel writes it through
				     d_bad, the host reads it after the
				     stream's sync)                       */
	int *d_bad;               /* bad as the device addresses it      */
#ifdef EMDB_HAVE_NCCL
	ncclComm_t comm;
#endif
} cuda_replica;

typedef struct cuda_tier {
	uint32_t stride;          /* floats per row on the device          */
	void *stage[2];           /* pinned host staging buffers, grown on
				     demand up to STAGE_BYTES             */
	size_t stage_cap[2];
	cuda_replica *rep;        /* [replicas]                            */
	bool nccl;
} cuda_tier;

static cuda_tier *C(const tier *t)
{
	return (cuda_tier *)t->impl;
}

/* Invariant 2: NOMEM for a failed allocation, IO for anything else. */
static int cuda_err(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return EMDB_OK;
	(void)cudaGetLastError();
	return emdb__seterr(e == cudaErrorMemoryAllocation ? EMDB_ERR_NOMEM : EMDB_ERR_IO,
			    "cuda tier: %s: %s", what, cudaGetErrorString(e));
}

#define CK(call, what)                                          \
	do {                                                    \
		int rc_ = cuda_err((call), (what));             \
		if (rc_)                                        \
			return rc_;                             \
	} while (0)

static tk_rows rows_of(const tier *t, uint32_t r)
{
	tk_rows R;

	R.dir = C(t)->rep[r].d_dir;
	R.rows_per_chunk = t->cfg.rows_per_chunk;
	R.rpc_shift = t->rpc_shift; /* the same convention: 32 if no power of 2 */
	R.stride = C(t)->stride;
	R.dim = t->cfg.dim;
	R.row_floats = t->row_floats;
	R.n_chunks = t->cfg.max_chunks;
	return R;
}

static bool cuda_available(char *why, size_t why_len)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);

	if (e != cudaSuccess) {
		(void)cudaGetLastError();
		snprintf(why, why_len, "no CUDA driver or device: %s", cudaGetErrorString(e));
		return false;
	}
	if (n == 0) {
		snprintf(why, why_len, "no CUDA device");
		return false;
	}
	return true;
}

/* Device scratch k of replica r, at least `bytes`. */
static int scratch(tier *t, uint32_t r, int k, size_t bytes, void **out)
{
	cuda_replica *p = &C(t)->rep[r];

	if (p->scratch_cap[k] < bytes) {
		size_t cap = p->scratch_cap[k] ? p->scratch_cap[k] : 4096;
		void *m = NULL;

		while (cap < bytes)
			cap *= 2;
		CK(cudaMalloc(&m, cap), "scratch");
		if (p->scratch[k]) { /* a job in flight may still use it */
			int rc = cuda_err(cudaStreamSynchronize(p->stream), "scratch");

			if (rc) {
				(void)cudaFree(m);
				return rc;
			}
			(void)cudaFree(p->scratch[k]);
		}
		p->scratch[k] = m;
		p->scratch_cap[k] = cap;
	}
	*out = p->scratch[k];
	return EMDB_OK;
}

static bool is_pinned(const void *p)
{
	cudaPointerAttributes a;

	if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
		(void)cudaGetLastError();
		return false;
	}
	return a.type == cudaMemoryTypeHost;
}

/* Staging buffer k, at least len <= STAGE_BYTES bytes (invariant 3):
 * pinned on first use and grown in powers of two, so a table that copies
 * little pins little.  cudaFreeHost synchronises the device, so no queued
 * copy still reads the buffer it replaces. */
static int stage_buf(tier *t, int k, size_t len, void **out)
{
	cuda_tier *c = C(t);

	if (c->stage_cap[k] < len) {
		size_t cap = c->stage_cap[k] ? c->stage_cap[k] : (size_t)64 << 10;
		void *m = NULL;

		while (cap < len)
			cap *= 2;
		if (cap > STAGE_BYTES)
			cap = STAGE_BYTES;
		CK(cudaMallocHost(&m, cap), "pinned staging");
		if (c->stage[k])
			(void)cudaFreeHost(c->stage[k]);
		c->stage[k] = m;
		c->stage_cap[k] = cap;
	}
	*out = c->stage[k];
	return EMDB_OK;
}

/* Host -> device of replica r (invariant 3). */
static int h2d(tier *t, uint32_t r, void *dst, const void *src, size_t bytes)
{
	cuda_replica *p = &C(t)->rep[r];
	size_t off = 0;
	int k = 0;

	if (is_pinned(src)) {
		CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, p->stream), "h2d");
		return EMDB_OK;
	}
	while (off < bytes) {
		size_t len = bytes - off < STAGE_BYTES ? bytes - off : STAGE_BYTES;

		/* The staging buffers are the tier's: a copy from buffer k
		 * may still be queued on any replica's stream. */
		void *sb;
		int rc;

		for (uint32_t q = 0; q < t->cfg.replicas; q++)
			CK(cudaEventSynchronize(C(t)->rep[q].staged[k]), "h2d staging");
		rc = stage_buf(t, k, len, &sb);
		if (rc)
			return rc;
		memcpy(sb, (const char *)src + off, len);
		CK(cudaMemcpyAsync((char *)dst + off, sb, len, cudaMemcpyHostToDevice, p->stream),
		   "h2d");
		CK(cudaEventRecord(p->staged[k], p->stream), "h2d event");
		off += len;
		k ^= 1;
	}
	return EMDB_OK;
}

/* Device of replica r -> host; waits for the stream (invariant 1). */
static int d2h(tier *t, uint32_t r, void *dst, const void *src, size_t bytes)
{
	cuda_replica *p = &C(t)->rep[r];
	size_t off = 0;

	if (is_pinned(dst)) {
		CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, p->stream), "d2h");
		CK(cudaStreamSynchronize(p->stream), "d2h");
		return EMDB_OK;
	}
	/* Staging buffer 0 may still feed another replica's queued copy. */
	for (uint32_t q = 0; q < t->cfg.replicas; q++)
		CK(cudaEventSynchronize(C(t)->rep[q].staged[0]), "d2h staging");
	while (off < bytes) {
		size_t len = bytes - off < STAGE_BYTES ? bytes - off : STAGE_BYTES;
		void *sb;
		int rc = stage_buf(t, 0, len, &sb);

		if (rc)
			return rc;
		CK(cudaMemcpyAsync(sb, (const char *)src + off, len, cudaMemcpyDeviceToHost,
				   p->stream), "d2h");
		CK(cudaStreamSynchronize(p->stream), "d2h");
		memcpy((char *)dst + off, sb, len);
		off += len;
	}
	return EMDB_OK;
}

static int finish(tier *t, uint32_t r, const char *what)
{
	CK(cudaGetLastError(), what);
	CK(cudaStreamSynchronize(C(t)->rep[r].stream), what);
	return EMDB_OK;
}

static int use(tier *t, uint32_t r)
{
	CK(cudaSetDevice(C(t)->rep[r].dev), "set device");
	return EMDB_OK;
}

static void cuda_close(tier *t)
{
	cuda_tier *c = C(t);

	if (!c)
		return;
	for (uint32_t r = 0; c->rep && r < t->cfg.replicas; r++) {
		cuda_replica *p = &c->rep[r];

		if (cudaSetDevice(p->dev) != cudaSuccess)
			continue;
#ifdef EMDB_HAVE_NCCL
		if (p->comm)
			ncclCommDestroy(p->comm);
#endif
		for (int k = 0; k < 3; k++)
			if (p->scratch[k])
				(void)cudaFree(p->scratch[k]);
		if (p->acc)
			(void)cudaFree(p->acc);
		if (p->bad)
			(void)cudaFreeHost(p->bad);
		if (p->d_dir)
			(void)cudaFree(p->d_dir);
		for (int k = 0; k < 2; k++) {
			if (p->staged[k])
				(void)cudaEventDestroy(p->staged[k]);
			if (p->copied[k])
				(void)cudaEventDestroy(p->copied[k]);
			if (p->used[k])
				(void)cudaEventDestroy(p->used[k]);
		}
		if (p->copy)
			(void)cudaStreamDestroy(p->copy);
		if (p->stream)
			(void)cudaStreamDestroy(p->stream);
		emdb_free(p->h_dir);
	}
	for (int k = 0; k < 2; k++)
		if (c->stage[k])
			(void)cudaFreeHost(c->stage[k]);
	emdb_free(c->rep);
	emdb_free(c);
	t->impl = NULL;
	(void)cudaGetLastError();
}

static int open_replica(tier *t, uint32_t r)
{
	cuda_replica *p = &C(t)->rep[r];
	size_t acc_bytes = (size_t)t->cfg.max_pending * t->cfg.dim * sizeof(float);

	p->dev = t->cfg.device + (int)r;
	CK(cudaSetDevice(p->dev), "set device");
	CK(cudaStreamCreateWithFlags(&p->stream, cudaStreamNonBlocking), "stream");
	CK(cudaStreamCreateWithFlags(&p->copy, cudaStreamNonBlocking), "stream");
	for (int k = 0; k < 2; k++) {
		CK(cudaEventCreateWithFlags(&p->staged[k], cudaEventDisableTiming), "event");
		CK(cudaEventCreateWithFlags(&p->copied[k], cudaEventDisableTiming), "event");
		CK(cudaEventCreateWithFlags(&p->used[k], cudaEventDisableTiming), "event");
	}
	p->h_dir = (float **)emdb_calloc(t->cfg.max_chunks, sizeof(float *));
	if (!p->h_dir)
		return EMDB_ERR_NOMEM;
	CK(cudaMalloc((void **)&p->d_dir, (size_t)t->cfg.max_chunks * sizeof(float *)), "directory");
	CK(cudaMemset(p->d_dir, 0, (size_t)t->cfg.max_chunks * sizeof(float *)), "directory");
	CK(cudaMalloc((void **)&p->acc, acc_bytes), "accumulators");
	CK(cudaMemset(p->acc, 0, acc_bytes), "accumulators");
	/* Host memory the kernels reach (unified addressing: one pointer for
	 * both), so a gather needs no memset and no copy of the flag. */
	CK(cudaHostAlloc((void **)&p->bad, sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable),
	   "flag");
	CK(cudaHostGetDevicePointer((void **)&p->d_bad, p->bad, 0), "flag");
	*(volatile int *)p->bad = 0;
	/* cudaMemset may still run; the stream does not order with it */
	CK(cudaDeviceSynchronize(), "open");
	return EMDB_OK;
}

static int cuda_open(tier *t)
{
	char why[160];
	int ndev = 0, rc;
	cuda_tier *c;

	if (!cuda_available(why, sizeof(why)))
		return emdb__seterr(EMDB_ERR_UNSUPPORTED, "cuda tier: %s", why);
	(void)cudaGetDeviceCount(&ndev);
	if (t->cfg.device < 0 || t->cfg.device + (int64_t)t->cfg.replicas > ndev)
		return emdb__seterr(EMDB_ERR_UNSUPPORTED, "cuda tier: devices %d..%d wanted, %d present",
				    t->cfg.device, t->cfg.device + (int)t->cfg.replicas - 1, ndev);
	c = (cuda_tier *)emdb_calloc(1, sizeof(*c));
	if (!c)
		return EMDB_ERR_NOMEM;
	t->impl = c;
	c->stride = (t->row_floats + 3u) & ~3u;
	c->rep = (cuda_replica *)emdb_calloc(t->cfg.replicas, sizeof(cuda_replica));
	if (!c->rep) {
		cuda_close(t);
		return EMDB_ERR_NOMEM;
	}
	for (uint32_t r = 0; r < t->cfg.replicas; r++) {
		rc = open_replica(t, r);
		if (rc) {
			cuda_close(t);
			return rc;
		}
	}
#ifdef EMDB_HAVE_NCCL
	if (t->cfg.replicas > 1) {
		ncclComm_t *comms = (ncclComm_t *)emdb_calloc(t->cfg.replicas, sizeof(ncclComm_t));
		int *devs = (int *)emdb_calloc(t->cfg.replicas, sizeof(int));
		ncclResult_t nr = ncclInternalError;

		if (comms && devs) {
			for (uint32_t r = 0; r < t->cfg.replicas; r++)
				devs[r] = c->rep[r].dev;
			nr = ncclCommInitAll(comms, (int)t->cfg.replicas, devs);
		}
		if (nr == ncclSuccess) {
			for (uint32_t r = 0; r < t->cfg.replicas; r++)
				c->rep[r].comm = comms[r];
			c->nccl = true;
		}
		emdb_free(comms);
		emdb_free(devs);
		/* Without NCCL, reduce stages through host memory. */
	}
#endif
	return EMDB_OK;
}

static void cuda_chunk_free(tier *t, uint32_t c)
{
	float *null = NULL;

	for (uint32_t r = 0; r < t->cfg.replicas; r++) {
		cuda_replica *p = &C(t)->rep[r];

		if (!p->h_dir[c] || use(t, r))
			continue;
		(void)cudaMemcpyAsync(&p->d_dir[c], &null, sizeof(null), cudaMemcpyHostToDevice,
				      p->stream);
		(void)cudaStreamSynchronize(p->stream); /* invariant 4 */
		(void)cudaFree(p->h_dir[c]);
		p->h_dir[c] = NULL;
	}
	(void)cudaGetLastError();
}

static int cuda_chunk_alloc(tier *t, uint32_t c)
{
	size_t bytes = (size_t)t->cfg.rows_per_chunk * C(t)->stride * sizeof(float);

	for (uint32_t r = 0; r < t->cfg.replicas; r++) {
		cuda_replica *p = &C(t)->rep[r];
		float *m = NULL;
		int rc = use(t, r);

		if (!rc)
			rc = cuda_err(cudaMalloc((void **)&m, bytes), "chunk");
		if (!rc)
			rc = cuda_err(cudaMemsetAsync(m, 0, bytes, p->stream), "chunk");
		if (!rc)
			rc = cuda_err(cudaMemcpyAsync(&p->d_dir[c], &m, sizeof(m),
						      cudaMemcpyHostToDevice, p->stream), "directory");
		if (!rc) /* &m is on this stack: the copy must be done */
			rc = cuda_err(cudaStreamSynchronize(p->stream), "directory");
		if (rc) {
			if (m)
				(void)cudaFree(m);
			cuda_chunk_free(t, c); /* the replicas done so far */
			return rc;
		}
		p->h_dir[c] = m;
	}
	return EMDB_OK;
}

static int upload_slots(tier *t, uint32_t r, const uint64_t *slots, size_t n, uint64_t **d)
{
	int rc = scratch(t, r, 0, n * sizeof(uint64_t), (void **)d);

	return rc ? rc : h2d(t, r, *d, slots, n * sizeof(uint64_t));
}

/* The put kernel over n rows at dr (device memory), on replica r's stream. */
static void launch_put(tier *t, uint32_t r, const uint64_t *ds, size_t n, const float *dr)
{
	if (t->row_floats % 4 == 0 && ((uintptr_t)dr & 15) == 0)
		TK_LAUNCH(tk_put_rows4, tk_blocks(n * (t->row_floats / 4)), TK_THREADS,
			  C(t)->rep[r].stream, rows_of(t, r), ds, n, (const float4 *)dr);
	else
		TK_LAUNCH(tk_put_rows, tk_blocks(n * t->row_floats), TK_THREADS, C(t)->rep[r].stream,
			  rows_of(t, r), ds, n, dr);
}

/* Rows in pinned memory, PUT_CHUNK bytes at a time through two halves of
 * a scratch buffer: the copy stream brings chunk k + 1 while the replica's
 * stream puts chunk k, so the rows take about the time of their copy. */
#define PUT_CHUNK (16u << 20)

static int put_pipelined(tier *t, uint32_t r, const uint64_t *ds, size_t n, const float *rows)
{
	cuda_replica *p = &C(t)->rep[r];
	size_t rb = (size_t)t->row_floats * sizeof(float);
	size_t per = PUT_CHUNK / rb ? PUT_CHUNK / rb : 1;
	float *half[2];
	int rc;

	if (per > n)
		per = n;
	rc = scratch(t, r, 1, 2 * per * rb, (void **)&half[0]);
	if (rc)
		return rc;
	half[1] = half[0] + per * t->row_floats;
	/* The copy stream does not order with the replica's: what is queued
	 * there (a submitted gather's copy out of scratch) ends first. */
	CK(cudaEventRecord(p->used[0], p->stream), "put rows");
	CK(cudaEventRecord(p->used[1], p->stream), "put rows");
	for (size_t off = 0, k = 0; off < n; off += per, k ^= 1) {
		size_t m = n - off < per ? n - off : per;

		CK(cudaStreamWaitEvent(p->copy, p->used[k], 0), "put rows");
		CK(cudaMemcpyAsync(half[k], rows + off * t->row_floats, m * rb, cudaMemcpyHostToDevice,
				   p->copy), "put rows");
		CK(cudaEventRecord(p->copied[k], p->copy), "put rows");
		CK(cudaStreamWaitEvent(p->stream, p->copied[k], 0), "put rows");
		launch_put(t, r, ds + off, m, half[k]);
		CK(cudaEventRecord(p->used[k], p->stream), "put rows");
	}
	return EMDB_OK;
}

/* Rows from pinned memory go through put_pipelined; others are staged
 * into a scratch buffer whole, then put. */
static int cuda_put_rows(tier *t, const uint64_t *slots, size_t n, const float *rows)
{
	bool pinned = is_pinned(rows);

	for (uint32_t r = 0; r < t->cfg.replicas; r++) {
		uint64_t *ds;
		float *dr;
		int rc = use(t, r);

		if (!rc)
			rc = upload_slots(t, r, slots, n, &ds);
		if (!rc && pinned) {
			rc = put_pipelined(t, r, ds, n, rows);
		} else if (!rc) {
			rc = scratch(t, r, 1, n * t->row_floats * sizeof(float), (void **)&dr);
			if (!rc)
				rc = h2d(t, r, dr, rows, n * t->row_floats * sizeof(float));
			if (!rc)
				launch_put(t, r, ds, n, dr);
		}
		if (!rc)
			rc = finish(t, r, "put rows");
		if (rc)
			return rc;
	}
	return EMDB_OK;
}

static int cuda_get_rows(tier *t, uint32_t r, const uint64_t *slots, size_t n, float *rows)
{
	size_t bytes = n * t->row_floats * sizeof(float);
	uint64_t *ds;
	float *dr;
	int rc = use(t, r);

	if (!rc)
		rc = upload_slots(t, r, slots, n, &ds);
	if (!rc)
		rc = scratch(t, r, 1, bytes, (void **)&dr);
	if (rc)
		return rc;
	TK_LAUNCH(tk_get_rows, tk_blocks(n * t->row_floats), TK_THREADS, C(t)->rep[r].stream,
		rows_of(t, r), ds, n, dr);
	CK(cudaGetLastError(), "get rows");
	return d2h(t, r, rows, dr, bytes);
}

static int cuda_init_rows(tier *t, const uint64_t *slots, const uint64_t *ids, size_t n,
			  const tier_init_args *a)
{
	for (uint32_t r = 0; r < t->cfg.replicas; r++) {
		uint64_t *ds, *di;
		int rc = use(t, r);

		if (!rc)
			rc = upload_slots(t, r, slots, n, &ds);
		if (!rc)
			rc = scratch(t, r, 2, n * sizeof(uint64_t), (void **)&di);
		if (!rc)
			rc = h2d(t, r, di, ids, n * sizeof(uint64_t));
		if (rc)
			return rc;
		TK_LAUNCH(tk_init_rows, tk_blocks(n), TK_THREADS, C(t)->rep[r].stream,
			rows_of(t, r), ds, di, n, a->init, a->opt, a->seed, a->table);
		rc = finish(t, r, "init rows");
		if (rc)
			return rc;
	}
	return EMDB_OK;
}

/* Whether p is memory of replica r's device. */
static int check_device_ptr(tier *t, uint32_t r, const void *p, const char *what)
{
	cudaPointerAttributes pa;

	if (cudaPointerGetAttributes(&pa, p) != cudaSuccess || pa.type != cudaMemoryTypeDevice ||
	    pa.device != C(t)->rep[r].dev) {
		(void)cudaGetLastError();
		return emdb__seterr(EMDB_ERR_INVALID, "cuda tier: %s is not memory of device %d", what,
				    C(t)->rep[r].dev);
	}
	return EMDB_OK;
}

/* The gather kernel over device slots ds into device out, then the bad
 * slot flag: INVALID when a slot was outside the chunks (its row NaN). */
static int enqueue_gather(tier *t, uint32_t r, const uint64_t *ds, size_t n, float *dout)
{
	cuda_replica *p = &C(t)->rep[r];

	if (t->cfg.dim % 4 == 0 && ((uintptr_t)dout & 15) == 0)
		TK_LAUNCH(tk_gather4, tk_blocks(n * (t->cfg.dim / 4)), TK_THREADS, p->stream,
			rows_of(t, r), ds, n, (float4 *)dout, p->d_bad);
	else
		TK_LAUNCH(tk_gather1, tk_blocks(n * t->cfg.dim), TK_THREADS, p->stream,
			rows_of(t, r), ds, n, dout, p->d_bad);
	CK(cudaGetLastError(), "gather");
	return EMDB_OK;
}

static int launch_gather(tier *t, uint32_t r, const uint64_t *ds, size_t n, float *dout)
{
	cuda_replica *p = &C(t)->rep[r];
	int rc;

	/* Only this call's kernel can write the flag: a submitted gather's
	 * slots were checked by tier.c, so its kernel never does. */
	*(volatile int *)p->bad = 0;
	rc = enqueue_gather(t, r, ds, n, dout);
	if (rc)
		return rc;
	CK(cudaStreamSynchronize(p->stream), "gather");
	if (*(volatile int *)p->bad)
		return emdb__seterr(EMDB_ERR_INVALID, "cuda tier: gather: a slot outside the chunks "
				    "allocated (its row is NaN)");
	return EMDB_OK;
}

/* out_in_tier: out must be memory of replica r's device. */
static int cuda_gather(tier *t, uint32_t r, const uint64_t *slots, size_t n, float *out,
		       bool out_in_tier)
{
	size_t bytes = n * t->cfg.dim * sizeof(float);
	uint64_t *ds;
	float *dout = out;
	int rc = use(t, r);

	if (!rc && out_in_tier)
		rc = check_device_ptr(t, r, out, "gather output");
	if (!rc)
		rc = upload_slots(t, r, slots, n, &ds);
	if (!rc && !out_in_tier)
		rc = scratch(t, r, 1, bytes, (void **)&dout);
	if (rc)
		return rc;
	rc = launch_gather(t, r, ds, n, dout);
	if (rc || out_in_tier)
		return rc;
	return d2h(t, r, out, dout, bytes);
}

/* Slots and output both on replica r's device: checked by the kernel. */
static int cuda_gather_dev(tier *t, uint32_t r, const uint64_t *slots, size_t n, float *out)
{
	int rc = use(t, r);

	if (!rc)
		rc = check_device_ptr(t, r, slots, "gather_dev slots");
	if (!rc)
		rc = check_device_ptr(t, r, out, "gather_dev output");
	return rc ? rc : launch_gather(t, r, slots, n, out);
}

/* The accumulate kernel and its uploads, enqueued on replica r's stream. */
static int enqueue_accumulate(tier *t, uint32_t r, const uint32_t *pidx, size_t n,
			      const float *grads)
{
	size_t gb = n * t->cfg.dim * sizeof(float);
	uint32_t *dp;
	float *dg;
	int rc = use(t, r);

	if (!rc)
		rc = scratch(t, r, 0, n * sizeof(uint32_t), (void **)&dp);
	if (!rc)
		rc = h2d(t, r, dp, pidx, n * sizeof(uint32_t));
	if (!rc)
		rc = scratch(t, r, 1, gb, (void **)&dg);
	if (!rc)
		rc = h2d(t, r, dg, grads, gb);
	if (rc)
		return rc;
	TK_LAUNCH(tk_accumulate, tk_blocks(n * t->cfg.dim), TK_THREADS, C(t)->rep[r].stream,
		t->cfg.dim, C(t)->rep[r].acc, dp, n, dg);
	return EMDB_OK;
}

static int cuda_accumulate(tier *t, uint32_t r, const uint32_t *pidx, size_t n,
			   const float *grads)
{
	int rc = enqueue_accumulate(t, r, pidx, n, grads);

	return rc ? rc : finish(t, r, "accumulate");
}

/* Replica order through host memory, as the host backend sums. */
static int reduce_staged(tier *t, uint32_t npend)
{
	size_t len = (size_t)npend * t->cfg.dim, bytes = len * sizeof(float);
	float *sum = (float *)emdb_malloc(bytes), *one = (float *)emdb_malloc(bytes);
	int rc = (sum && one) ? EMDB_OK : EMDB_ERR_NOMEM;

	for (uint32_t r = 0; !rc && r < t->cfg.replicas; r++) {
		rc = use(t, r);
		if (!rc)
			rc = d2h(t, r, r ? one : sum, C(t)->rep[r].acc, bytes);
		for (size_t k = 0; !rc && r && k < len; k++)
			sum[k] += one[k];
	}
	for (uint32_t r = 0; !rc && r < t->cfg.replicas; r++) {
		rc = use(t, r);
		if (!rc)
			rc = h2d(t, r, C(t)->rep[r].acc, sum, bytes);
		if (!rc)
			rc = finish(t, r, "reduce");
	}
	emdb_free(sum);
	emdb_free(one);
	return rc;
}

static int cuda_reduce(tier *t, uint32_t npend)
{
#ifdef EMDB_HAVE_NCCL
	if (C(t)->nccl) {
		size_t len = (size_t)npend * t->cfg.dim;
		ncclResult_t nr = ncclGroupStart();

		for (uint32_t r = 0; nr == ncclSuccess && r < t->cfg.replicas; r++) {
			cuda_replica *p = &C(t)->rep[r];

			nr = ncclAllReduce(p->acc, p->acc, len, ncclFloat, ncclSum, p->comm, p->stream);
		}
		if (ncclGroupEnd() != ncclSuccess || nr != ncclSuccess)
			return emdb__seterr(EMDB_ERR_IO, "cuda tier: NCCL all-reduce: %s",
					    ncclGetErrorString(nr));
		for (uint32_t r = 0; r < t->cfg.replicas; r++) {
			int rc = use(t, r);

			if (!rc)
				rc = finish(t, r, "reduce");
			if (rc)
				return rc;
		}
		return EMDB_OK;
	}
#endif
	return reduce_staged(t, npend);
}

static int cuda_step(tier *t, const emdb_opt_scalars *sc, const uint64_t *slots, size_t n,
		     const float *grads)
{
	for (uint32_t r = 0; r < t->cfg.replicas; r++) {
		cudaStream_t st = C(t)->rep[r].stream;
		const float *dg = C(t)->rep[r].acc;
		uint64_t *ds;
		int rc = use(t, r);

		if (!rc)
			rc = upload_slots(t, r, slots, n, &ds);
		if (!rc && grads) {
			float *g;

			rc = scratch(t, r, 1, n * t->cfg.dim * sizeof(float), (void **)&g);
			if (!rc)
				rc = h2d(t, r, g, grads, n * t->cfg.dim * sizeof(float));
			dg = g;
		}
		if (rc)
			return rc;
		if (t->cfg.opt == EMDB_OPT_ROWWISE_ADAGRAD)
			TK_LAUNCH(tk_step_rowwise, tk_rowwise_blocks(n, TK_ROWWISE_LANES), TK_THREADS,
				  st, rows_of(t, r), *sc, ds, n, dg, (uint32_t)TK_ROWWISE_LANES);
		else
			TK_LAUNCH(tk_step_cols, tk_blocks(n * t->cfg.dim), TK_THREADS, st,
				rows_of(t, r), t->cfg.opt, *sc, ds, n, dg);
		if (!grads)
			CK(cudaMemsetAsync(C(t)->rep[r].acc, 0, n * t->cfg.dim * sizeof(float), st),
			   "clear accumulators");
		rc = finish(t, r, "step");
		if (rc)
			return rc;
	}
	return EMDB_OK;
}

/* ---- asynchronous work (invariant 1) ---- */

typedef struct cuda_job {
	int dev;
	cudaEvent_t ev;
} cuda_job;

/* An event after the work enqueued on replica r's stream; when no event
 * can be had, the stream is synchronised instead (*job NULL: done). */
static int record_job(tier *t, uint32_t r, void **job)
{
	cuda_replica *p = &C(t)->rep[r];
	cuda_job *j = (cuda_job *)emdb_malloc(sizeof(*j));

	*job = NULL;
	CK(cudaGetLastError(), "submit");
	if (j && cudaEventCreateWithFlags(&j->ev, cudaEventDisableTiming) == cudaSuccess) {
		int rc = cuda_err(cudaEventRecord(j->ev, p->stream), "submit");

		if (rc) {
			(void)cudaEventDestroy(j->ev);
			emdb_free(j);
			return rc;
		}
		j->dev = p->dev;
		*job = j;
		return EMDB_OK;
	}
	(void)cudaGetLastError();
	emdb_free(j);
	return finish(t, r, "submit");
}

static int cuda_wait_job(tier *t, void *job)
{
	cuda_job *j = (cuda_job *)job;
	int rc = cuda_err(cudaSetDevice(j->dev), "wait");

	(void)t;
	if (!rc)
		rc = cuda_err(cudaEventSynchronize(j->ev), "wait");
	(void)cudaEventDestroy(j->ev);
	emdb_free(j);
	return rc;
}

static int cuda_gather_submit(tier *t, uint32_t r, const uint64_t *slots, size_t n, float *out,
			      void **job)
{
	size_t bytes = n * t->cfg.dim * sizeof(float);
	uint64_t *ds;
	float *dout;
	int rc = use(t, r);

	*job = NULL;
	if (!rc)
		rc = upload_slots(t, r, slots, n, &ds);
	if (!rc)
		rc = scratch(t, r, 1, bytes, (void **)&dout);
	if (!rc) /* tier.c checked the slots: the bad flag stays 0 */
		rc = enqueue_gather(t, r, ds, n, dout);
	if (rc)
		return rc;
	if (!is_pinned(out))
		return d2h(t, r, out, dout, bytes);
	CK(cudaMemcpyAsync(out, dout, bytes, cudaMemcpyDeviceToHost, C(t)->rep[r].stream), "gather");
	return record_job(t, r, job);
}

static int cuda_accumulate_submit(tier *t, uint32_t r, const uint32_t *pidx, size_t n,
				  const float *grads, void **job)
{
	int rc = enqueue_accumulate(t, r, pidx, n, grads);

	*job = NULL;
	return rc ? rc : record_job(t, r, job);
}

/* Pinned host memory, reachable from every device (portable). */
static void *cuda_host_alloc(tier *t, size_t bytes)
{
	void *p = NULL;

	(void)t;
	if (cudaHostAlloc(&p, bytes, cudaHostAllocPortable) != cudaSuccess) {
		(void)cudaGetLastError();
		return NULL;
	}
	return p;
}

static void cuda_host_free(tier *t, void *p)
{
	(void)t;
	(void)cudaFreeHost(p);
	(void)cudaGetLastError();
}

/* cudaPointerGetAttributes: device memory of replica r's device. */
static bool cuda_owns_ptr(const tier *t, uint32_t r, const void *p)
{
	cudaPointerAttributes pa;

	if (cudaPointerGetAttributes(&pa, p) != cudaSuccess) {
		(void)cudaGetLastError();
		return false;
	}
	return pa.type == cudaMemoryTypeDevice && pa.device == C(t)->rep[r].dev;
}

static int cuda_copy(tier *t, uint32_t r, void *dst, const void *src, size_t bytes, bool to_tier)
{
	int rc = use(t, r);

	if (rc)
		return rc;
	if (!to_tier)
		return d2h(t, r, dst, src, bytes);
	rc = h2d(t, r, dst, src, bytes);
	return rc ? rc : finish(t, r, "copy in");
}

static uint32_t cuda_devices(void)
{
	int n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess) {
		(void)cudaGetLastError();
		return 0;
	}
	return (uint32_t)n;
}

extern "C" const tier_backend tier_cuda_backend = {
	"cuda",
	cuda_open,
	cuda_close,
	cuda_chunk_alloc,
	cuda_chunk_free,
	cuda_put_rows,
	cuda_get_rows,
	cuda_init_rows,
	cuda_gather,
	cuda_gather_dev,
	cuda_accumulate,
	cuda_reduce,
	cuda_step,
	cuda_owns_ptr,
	cuda_copy,
	cuda_available,
	cuda_devices,
	cuda_gather_submit,
	cuda_accumulate_submit,
	cuda_wait_job,
	cuda_host_alloc,
	cuda_host_free,
};
