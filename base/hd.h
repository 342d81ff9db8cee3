/*
 * hd.h - marks device-independent inline math so that the same function
 * compiles for the host (gcc) and, in later issues, for CUDA kernels (nvcc).
 */
#ifndef EMDB_HD_H
#define EMDB_HD_H

#ifdef __CUDACC__
#define EMDB_HD __host__ __device__
#else
#define EMDB_HD
#endif

#endif
