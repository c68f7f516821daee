#!/usr/bin/env bash
# Installs every Debian 12 package kvsim needs. Idempotent: quiet and fast when all are present.
set -euo pipefail
PKGS=(
  build-essential cmake pkg-config clang-format clang libclang-rt-14-dev
  libsystemc-dev libgtest-dev libgmock-dev libbenchmark-dev librapidcheck-dev
  libyaml-cpp-dev libcli11-dev nlohmann-json3-dev libfmt-dev libsimgrid-dev
  libabsl-dev  # absl::btree_map: the content store's extent map
  python3 python3-matplotlib python3-pybind11 pybind11-dev python3-pytest python3-numpy
  python3-yaml python3-torch python3-distributed iproute2 util-linux lld
  chromium  # headless, for python/tests/test_report_pages.py
  python3-zmq  # libzmq under launched programs (cpp/tests/programs/zmq_pair.py)
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "kvsim: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
