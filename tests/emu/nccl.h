/*
 * nccl.h - the NCCL calls of gpu/tier_cuda.cu, emulated on the CPU with
 * the CUDA runtime of this folder (tests/emu/cuda_runtime_api.h).
 *
 * An all-reduce of a group puts a marker on every rank's stream.  A
 * marker runs when its stream is waited for, as any queued work does; the
 * first one to run then runs the other ranks' streams up to their own
 * markers (the collective needs every rank), sums each element over the
 * ranks in descending rank order (NCCL names no order; callers must not
 * depend on one), and writes every rank's output.  Work queued after a
 * marker on a stream runs after the reduction, as after an NCCL kernel.
 * Float sums only: the one type and operation emdb uses.
 */
#ifndef EMDB_TESTS_EMU_NCCL_H
#define EMDB_TESTS_EMU_NCCL_H

#include <stddef.h>

#include "cuda_runtime_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
	ncclSuccess = 0,
	ncclUnhandledCudaError = 1,
	ncclInternalError = 3,
	ncclInvalidArgument = 4,
	ncclInvalidUsage = 5,
} ncclResult_t;

typedef enum { ncclFloat = 7 } ncclDataType_t;
typedef enum { ncclSum = 0 } ncclRedOp_t;
typedef struct emu_comm *ncclComm_t;

ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type,
			   ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
const char *ncclGetErrorString(ncclResult_t r);

/* All-reduces completed so far (a test's proof that NCCL's path ran). */
unsigned long emu_nccl_reductions(void);

#ifdef __cplusplus
}
#endif

#endif
