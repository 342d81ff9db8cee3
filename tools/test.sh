#!/usr/bin/env bash
# Set everything up and run the whole test suite: every test under
# AddressSanitizer + UndefinedBehaviorSanitizer, then the concurrency tests
# under ThreadSanitizer.  Warnings are errors.  CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh
jobs=$(nproc)

cmake -S . -B build/asan -DEMDB_SANITIZE=address -DEMDB_WERROR=ON >/dev/null
cmake --build build/asan -j"$jobs"
(cd build/asan && ctest --output-on-failure --timeout 900)

cmake -S . -B build/tsan -DEMDB_SANITIZE=thread -DEMDB_WERROR=ON >/dev/null
cmake --build build/tsan -j"$jobs"
(cd build/tsan && ctest -L concurrency --output-on-failure --timeout 900)
