#!/usr/bin/env bash
# Set everything up and start emdb's main job.  Until the network server
# lands this is the engine benchmark on its default workload; arguments are
# passed to emdb-bench (try --help).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DEMDB_TESTS=OFF >/dev/null
cmake --build build/release -j"$(nproc)" --target emdb-bench
exec build/release/tools/bench/emdb-bench "$@"
