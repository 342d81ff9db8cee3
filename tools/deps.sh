#!/usr/bin/env bash
# Install what emdb needs from Debian's package archive, idempotently: only
# packages that are missing are installed, and nothing is done when all are
# present.  Every README command runs this first.
set -euo pipefail

pkgs=(
	build-essential cmake pkg-config
	librocksdb-dev rocksdb-tools libxxhash-dev libevent-dev liburing-dev libssl-dev libucx-dev
	libcriterion-dev libedit-dev
	redis-server clang
	prometheus # only for its promtool: tests/server/test_server_metrics.c checks /metrics with it
	python3-dev python3-cffi python3-numpy python3-pytest python3-torch
	libtorch-dev pybind11-dev # emdb._torch_bags, emdb.torch's training step in C++ (client/python)
)

missing=()
for p in "${pkgs[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps: installing ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null || { echo "deps: need root or sudo to install ${missing[*]}" >&2; exit 1; }
	sudo=sudo
fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"

# Debian's prometheus package (installed for its promtool) enables a
# Prometheus server; on a machine run by systemd, stop it: the tests need
# only the checker.
if [[ " ${missing[*]} " == *" prometheus "* ]] && [ -d /run/systemd/system ]; then
	$sudo systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
