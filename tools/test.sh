#!/usr/bin/env bash
# Set everything up and run the whole test suite: every test under
# AddressSanitizer + UndefinedBehaviorSanitizer, then the concurrency tests
# under ThreadSanitizer, then a short campaign of every libFuzzer target.
# Warnings are errors.  CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh
jobs=$(nproc)

export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"

cmake -S . -B build/asan -DEMDB_SANITIZE=address -DEMDB_WERROR=ON >/dev/null
cmake --build build/asan -j"$jobs"
(cd build/asan && ctest --output-on-failure --timeout 900)

# The Python package (client/python, docs/python.md) with Debian's pytest:
# the package is built without sanitizers in build/release (the tree
# tools/run.sh uses; a sanitized module would need the runtime preloaded
# into python3), the server it talks to is the ASan one.
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DEMDB_TESTS=OFF >/dev/null
cmake --build build/release -j"$jobs" --target emdb_python
EMDB_PYTHON_BUILD="$PWD/build/release" EMDB_TEST_SERVER="$PWD/build/asan/net/emdb-server" \
	/usr/bin/python3 -m pytest -q -p no:cacheprovider client/python/tests

# The CUDA backend (where a toolkit is found) is compiled by the ASan and
# release builds above; the ThreadSanitizer and fuzz builds leave it out.
cmake -S . -B build/tsan -DEMDB_SANITIZE=thread -DEMDB_WERROR=ON -DEMDB_CUDA=OFF >/dev/null
# emdb-server links UCX (the cluster's link), and UCX's libucm patches
# madvise() at load; glibc calls it as a thread exits, after
# ThreadSanitizer has torn down that thread's state, and TSan's lock
# interceptor then faults (SIGSEGV at shutdown).  Memory events are for
# UCX's registration cache, which no TSan test needs: leave them off.
export UCX_MEM_EVENTS=no
cmake --build build/tsan -j"$jobs"
(cd build/tsan && ctest -L concurrency --output-on-failure --timeout 900)

# The server's and the client's black-box tests again, against the
# ThreadSanitizer server (tests/lib/server_spawn.h honours EMDB_TEST_SERVER):
# the tests themselves stay Criterion binaries from the ASan build.  The
# suppressions are for the uninstrumented librocksdb (tests/tsan.supp).
for t in build/asan/tests/server/test_server build/asan/tests/server/test_server_auth \
	 build/asan/tests/server/test_server_load build/asan/tests/server/test_server_malformed \
	 build/asan/tests/server/test_server_ckpt build/asan/tests/server/test_server_crash \
	 build/asan/tests/server/test_server_timeout build/asan/tests/server/test_server_versions \
	 build/asan/tests/server/test_server_memory build/asan/tests/server/test_server_slots \
	 build/asan/tests/server/test_server_nospace build/asan/tests/server/test_server_metrics \
	 build/asan/tests/client/test_client_net build/asan/tests/client/test_client_tls \
	 build/asan/tests/client/test_client_step; do
	echo "== $t against build/tsan/net/emdb-server"
	EMDB_TEST_SERVER="$PWD/build/tsan/net/emdb-server" \
		TSAN_OPTIONS="halt_on_error=1:suppressions=$PWD/tests/tsan.supp" "$t" --jobs 2
done

# A bounded campaign of every libFuzzer target (EMDB_FUZZ_CI_SECONDS each,
# 15 by default), seeded with its committed corpus: a crash, a leak or an
# UBSan report fails the run.  New inputs stay in build/fuzz, never in the
# committed corpora.
fuzz_seconds=${EMDB_FUZZ_CI_SECONDS:-15}
cmake -S . -B build/fuzz -DEMDB_FUZZ=ON -DEMDB_FUZZ_SECONDS="$fuzz_seconds" -DEMDB_CUDA=OFF >/dev/null
for t in fuzz_frame fuzz_store fuzz_text fuzz_link fuzz_node; do
	echo "== $t: $fuzz_seconds s of libFuzzer"
	if ! cmake --build build/fuzz --target "${t}_run" >"build/fuzz/$t.log" 2>&1; then
		tail -n 60 "build/fuzz/$t.log"
		echo "== $t failed: the input is build/fuzz/tests/fuzz/crash-* (or leak-*, timeout-*)"
		exit 1
	fi
	grep -E '^Done [0-9]+ runs' "build/fuzz/$t.log"
done
