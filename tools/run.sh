#!/usr/bin/env bash
# Set everything up and start emdb's main job: emdb-server on 127.0.0.1:7878
# with its embedded defaults (docs/server.md) and a checkpoint store, as
# Redis keeps its dump in its working directory:
#
#   - the store is ./emdb-data (EMDB_DATA_DIR overrides it), so
#     `emdb-cli checkpoint` and `restore` work at once;
#   - the newest checkpoint in it is restored at start (--restore latest;
#     a fresh store starts empty).
#
# Arguments are passed to emdb-server (try --help) and win over these
# defaults: --data-dir DIR names another store, and --memory-only (this
# script's one flag) starts without a store, as `--data-dir ""` does.
# Ctrl-C or SIGTERM stops the server cleanly.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DEMDB_TESTS=OFF >/dev/null
cmake --build build/release -j"$(nproc)" --target emdb-server emdb-cli emdb-bench

store=1
args=()
for a in "$@"; do
	case "$a" in
	--memory-only) store=0 ;;
	--data-dir | --data-dir=* | --data_dir | --data_dir=* | --config | --config=*) store=0; args+=("$a") ;;
	*) args+=("$a") ;;
	esac
done
if [ "$store" -eq 1 ]; then
	dir=${EMDB_DATA_DIR:-$PWD/emdb-data}
	echo "run: checkpoint store $dir (--memory-only for none)" >&2
	args=(--data-dir "$dir" --restore latest "${args[@]}")
fi
exec build/release/net/emdb-server "${args[@]}"
