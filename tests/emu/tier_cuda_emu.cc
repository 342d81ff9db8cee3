/*
 * tier_cuda_emu.cc - gpu/tier_cuda.cu itself, compiled by g++ against the
 * emulated CUDA runtime of this folder (cuda_runtime.h), for the tests
 * that run the CUDA tier on the CPU (CMakeLists.txt here).
 */
#include "gpu/tier_cuda.cu"
