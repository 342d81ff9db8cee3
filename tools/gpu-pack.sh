#!/usr/bin/env bash
# tools/gpu-pack.sh - pack the GPU-facing Criterion tests, emdb-server and
# emdb-cli with the shared libraries they need, so that a GPU machine
# without Debian's packages (RocksDB, libevent, UCX, Criterion...) runs
# them: `tools/gpu-check.sh --pack DIR` there (docs/gpu.md).
#
#   tools/gpu-pack.sh [DIR]      (default build/gpu-pack)
#
# Builds, on this machine, a release tree (build/gpu-pack-tree) with the
# CUDA tier for GPU_ARCH (default 90: H100, H200), without -march=native
# (the GPU machine's CPU may lack this one's instructions), and only the
# targets packed.  DIR gets bin/ (the programs), lib/ (every shared
# library they load except glibc's, libstdc++, libgcc and NCCL, which is
# large and part of the CUDA installation there; UCX's transport modules
# in lib/ucx) and run.sh, which runs each test and an emdb-server with
# gpu_memory queried by emdb-cli.  About 45 MB.
set -euo pipefail

cd "$(dirname "$0")/.."
out=${1:-build/gpu-pack}
tree=build/gpu-pack-tree
arch=${GPU_ARCH:-90}
tests=(unit/test_tier unit/test_hot unit/test_hot_serve unit/test_hot_devices unit/test_hot_stats
       unit/test_cluster_hot concurrency/test_conc_hot client/test_client_mem_gpu
       server/test_server_gpu)

command -v nvcc >/dev/null || [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ] ||
	{ echo "gpu-pack: no CUDA toolkit (nvcc): nothing to pack" >&2; exit 1; }
cmake -S . -B "$tree" -DCMAKE_BUILD_TYPE=Release -DEMDB_NATIVE=OFF -DEMDB_TESTS=ON \
	-DEMDB_PYTHON=OFF -DEMDB_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" >/dev/null
targets=(emdb-server emdb-cli)
for t in "${tests[@]}"; do targets+=("$(basename "$t")"); done
cmake --build "$tree" -j"$(nproc)" --target "${targets[@]}"

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
bins=("$tree/net/emdb-server" "$tree/tools/cli/emdb-cli")
for t in "${tests[@]}"; do bins+=("$tree/tests/$t"); done
cp "${bins[@]}" "$out/bin/"
# Every library the programs load, but the C and C++ runtimes (present on
# any Linux) and NCCL (found in the CUDA installation by run.sh).
for b in "${bins[@]}"; do ldd "$b"; done | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u |
	grep -v -E '/(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s|libnccl)\.so' |
	while read -r lib; do cp -L "$lib" "$out/lib/"; done
ucx=$(dirname "$(ldd "$tree/net/emdb-server" | awk '/libucs\.so/ { print $3 }')")/ucx
[ -d "$ucx" ] && cp -r "$ucx" "$out/lib/ucx"
strip --strip-unneeded "$out"/lib/*.so* 2>/dev/null || true

cat >"$out/run.sh" <<'EOF'
#!/usr/bin/env bash
# Written by tools/gpu-pack.sh: runs the packed tests and an emdb-server
# with gpu_memory on this machine.  Exits non-zero when a test failed.
here=$(cd "$(dirname "$0")" && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
nccl=$( (ls "$cuda"/lib64/libnccl.so.2 "$cuda"/lib/libnccl.so.2
	 find / -xdev -path /proc -prune -o -name libnccl.so.2 -type f -print) 2>/dev/null | head -1)
export LD_LIBRARY_PATH="$here/lib${nccl:+:$(dirname "$nccl")}"
export EMDB_TEST_SERVER="$here/bin/emdb-server"
rc=0
for t in TESTS; do
	echo "== $t"
	# Criterion's verbose lines, less the passing ones: skips say why
	timeout 120 "$here/bin/$t" --jobs 4 --verbose >"$here/$t.log" 2>&1 || rc=1
	grep -v -E '^\[(RUN |PASS)\]' "$here/$t.log" | tail -40
done
echo "== emdb-server --gpu-memory 64M, emdb-cli info tier"
d=$(mktemp -d)
"$here/bin/emdb-server" --port 0 --port_file "$d/port" --gpu-memory 64M >"$d/log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -s "$d/port" ] && break; sleep 0.1; done
u="tcp://127.0.0.1:$(cat "$d/port" 2>/dev/null)"
"$here/bin/emdb-cli" -u "$u" table create emb 64 optimizer=adam
"$here/bin/emdb-cli" -u "$u" info tier
"$here/bin/emdb-cli" -u "$u" shutdown >/dev/null
wait "$pid" || rc=1
grep -E 'gpu|exit' "$d/log"
rm -rf "$d"
exit $rc
EOF
names=()
for t in "${tests[@]}"; do names+=("$(basename "$t")"); done
sed -i "s|TESTS|${names[*]}|" "$out/run.sh"
chmod +x "$out/run.sh"
echo "packed in $out: $(du -sh "$out" | cut -f1); on a GPU machine: tools/gpu-check.sh --pack $out"
