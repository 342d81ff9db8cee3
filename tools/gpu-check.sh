#!/usr/bin/env bash
# tools/gpu-check.sh - build the GPU test and benchmark and run both, on a
# machine with a GPU (docs/gpu.md).  Needs only the CUDA toolkit (nvcc,
# $CUDA_HOME or /usr/local/cuda) and a C compiler: no CMake, no Debian
# packages, no network, so a freshly lent machine runs it at once.  Takes
# under 5 minutes on one GPU (build about 1, test and benchmark about 1).
#
#   tools/gpu-check.sh [--build-only] [--sanitize] [--pack DIR] [BUILD_DIR]
#                                                 (default build/gpu-check)
#
# --build-only builds both programs and runs nothing: what a machine
# without a GPU can check (then GPU_ARCH defaults to sm_90, as "native"
# needs a device).  --sanitize runs emdb-gpu-test once more under
# compute-sanitizer's memcheck (where it is installed).  --pack DIR then
# runs DIR/run.sh: the Criterion tests that meet the GPU tier, with an
# emdb-server, packed with their libraries by tools/gpu-pack.sh on a
# machine that has Debian's packages.  Environment: GPU_ARCH (nvcc -arch, default "native":
# the GPU present), CC (default cc), JOBS (compilers at once, default
# nproc).  Exits non-zero when the build, a check or the benchmark fails,
# or when no GPU is present (emdb-gpu-test then prints "SKIP: ..." and
# exits 0, as a test suite does; this script wants a device).
set -euo pipefail

cd "$(dirname "$0")/.."
build_only=0 sanitize=0 pack=
while [ $# -gt 0 ]; do
  case $1 in
    --build-only) build_only=1; shift ;;
    --sanitize) sanitize=1; shift ;;
    --pack) pack=${2:?--pack needs a folder}; shift 2 ;;
    -*) echo "gpu-check: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ -z "$pack" ] || [ -x "$pack/run.sh" ] || { echo "gpu-check: no $pack/run.sh (tools/gpu-pack.sh)" >&2; exit 2; }
out=${1:-build/gpu-check}
cuda=${CUDA_HOME:-/usr/local/cuda}
nvcc=$cuda/bin/nvcc
cc=${CC:-cc}
if [ $build_only = 1 ]; then arch=${GPU_ARCH:-sm_90}; else arch=${GPU_ARCH:-native}; fi
jobs=${JOBS:-$(nproc)}

say() { printf '== %s\n' "$*"; }

[ -x "$nvcc" ] || { echo "gpu-check: no nvcc at $nvcc (set CUDA_HOME)" >&2; exit 1; }
mkdir -p "$out/obj"
say "nvcc: $("$nvcc" --version | tail -1)"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true

# The same flags as gpu/CMakeLists.txt: bit-identical rules need them.
cuflags=(-O3 -std=c++17 -arch="$arch" --fmad=false -prec-div=true -prec-sqrt=true -ftz=false
         -I. -Iinclude -DEMDB_HAVE_CUDA -Xcompiler -fno-strict-aliasing)
cflags=(-O2 -std=gnu11 -fno-strict-aliasing -fno-math-errno -I. -Iinclude -I"$cuda/include"
        -DEMDB_HAVE_CUDA)
libs=(-lm -lpthread -ldl -lrt)
if [ -f "$cuda/include/nccl.h" ] && ls "$cuda"/lib64/libnccl.so* >/dev/null 2>&1; then
  cuflags+=(-DEMDB_HAVE_NCCL)
  libs+=(-L"$cuda/lib64" -lnccl -Xlinker -rpath="$cuda/lib64")
  say "NCCL: $cuda/lib64"
fi

say "compiling the CUDA tier (arch $arch)"
"$nvcc" "${cuflags[@]}" -c gpu/tier_cuda.cu -o "$out/obj/tier_cuda.o"
say "compiling the host part"
objs=("$out/obj/tier_cuda.o")
# The whole engine (emdb-gpu-test drives a database through the tier),
# $jobs compilers at once; a failed one fails the build.
compile() { "$cc" "${cflags[@]}" -c "$1" -o "$out/obj/$(echo "$1" | tr / _).o"; }
pids=()
for src in base/*.c db/*.c index/*.c; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  compile "$src" &
  pids+=($!)
  objs+=("$out/obj/$(echo "$src" | tr / _).o")
done
for p in "${pids[@]}"; do wait "$p"; done
"$cc" "${cflags[@]}" -c gpu/gpu_test.c -o "$out/obj/gpu_test.o"
"$cc" "${cflags[@]}" -c gpu/gpu_test_serve.c -o "$out/obj/gpu_test_serve.o"
say "linking emdb-gpu-test and emdb-gpu-bench (static CUDA runtime)"
"$nvcc" -cudart static -arch="$arch" "$out/obj/gpu_test.o" "$out/obj/gpu_test_serve.o" "${objs[@]}" "${libs[@]}" \
  -o "$out/emdb-gpu-test"
"$nvcc" "${cuflags[@]}" -cudart static gpu/gpu_bench.cu "${objs[@]}" "${libs[@]}" -o "$out/emdb-gpu-bench"

if [ $build_only = 1 ]; then
  say "built $out/emdb-gpu-test and $out/emdb-gpu-bench (arch $arch); nothing run (--build-only)"
  exit 0
fi

say "running emdb-gpu-test"
rc=0
"$out/emdb-gpu-test" | tee "$out/gpu-test.out" || rc=$?
if grep -q '^SKIP:' "$out/gpu-test.out"; then
  say "FAILED: no GPU usable on this machine (see the line above); nothing was checked"
  exit 1
fi
say "running emdb-gpu-bench"
brc=0
"$out/emdb-gpu-bench" || brc=$?
src=0
if [ $sanitize = 1 ]; then
  if command -v compute-sanitizer >/dev/null; then
    say "emdb-gpu-test under compute-sanitizer --tool memcheck"
    compute-sanitizer --tool memcheck --leak-check no --error-exitcode 3 \
      "$out/emdb-gpu-test" >"$out/sanitize.out" 2>&1 || src=$?
    tail -n 5 "$out/sanitize.out"
  else
    say "no compute-sanitizer on PATH: --sanitize skipped"
  fi
fi
prc=0
if [ -n "$pack" ]; then
  say "running the packed tests ($pack/run.sh)"
  "$pack/run.sh" || prc=$?
fi
if [ $rc -ne 0 ] || [ $brc -ne 0 ] || [ $src -ne 0 ] || [ $prc -ne 0 ]; then
  say "FAILED: emdb-gpu-test exit $rc, emdb-gpu-bench exit $brc, sanitizer exit $src, packed tests exit $prc"
  exit 1
fi
say "gpu-check passed"
