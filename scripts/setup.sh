#!/usr/bin/env bash
# Installs every Debian package rlcore needs to build, test and run.
# Idempotent: packages already present are left alone. Run as root (or with sudo).
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  libtorch-dev libgloo-dev libopenblas0-pthread
  libboost-dev libboost-program-options-dev libboost-filesystem-dev
  libyaml-cpp-dev libspdlog-dev libfmt-dev catch2
  libzmq3-dev cppzmq-dev nlohmann-json3-dev libcpp-httplib-dev libpcre2-dev
  bubblewrap libseccomp-dev  # the python tool's sandbox (docs/decisions/0014)
  python3 python3-pip python3-torch curl  # pip fetches Arrow C++ (scripts/setup_arrow.sh)
  clang-14 libclang-rt-14-dev  # the sanitized build and the fuzzers (scripts/test.sh --sanitize)
  clang-format-14  # the format check (scripts/check_format.sh)
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  if [[ $(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null) != *"install ok installed"* ]]; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "[setup] all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "[setup] error: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi

echo "[setup] installing ${#missing[@]} missing packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "[setup] done"
