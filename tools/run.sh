#!/usr/bin/env bash
# Set everything up and start emdb's main job: emdb-server, in memory, on
# 127.0.0.1:7878 with its embedded defaults (docs/server.md).  Arguments are
# passed to emdb-server (try --help); Ctrl-C or SIGTERM stops it cleanly.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DEMDB_TESTS=OFF >/dev/null
cmake --build build/release -j"$(nproc)" --target emdb-server emdb-cli emdb-bench
exec build/release/net/emdb-server "$@"
