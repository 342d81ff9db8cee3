#!/usr/bin/env bash
# Set everything up and run emdb-bench (docs/benchmarks.md); arguments are
# passed to it (try --help).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DEMDB_TESTS=OFF >/dev/null
cmake --build build/release -j"$(nproc)" --target emdb-bench
exec build/release/tools/bench/emdb-bench "$@"
