#!/usr/bin/env bash
# Packs the Debian packages rlcore builds against into gpu-bundle/ (ignored by
# git), for a GPU machine that has CUDA, PyTorch, CMake and ninja but no package
# registry: carry the folder with the working tree and scripts/gpu-check.sh
# unpacks it into gpu-bundle/prefix. libtorch is not bundled: the machine's own
# PyTorch provides it. Run here, where apt reaches Debian's mirror.
set -euo pipefail
cd "$(dirname "$0")/.."
out=gpu-bundle
limit_mib=64
# Headers and libraries of every dependency outside libtorch and CUDA, with the
# runtime libraries they pull in that a CUDA image may lack.
packages=(
  libyaml-cpp-dev libyaml-cpp0.7
  libspdlog-dev libspdlog1.10 libfmt-dev libfmt9
  libboost1.74-dev libboost-program-options1.74-dev libboost-program-options1.74.0
  nlohmann-json3-dev
  libzmq3-dev libzmq5 cppzmq-dev libsodium23 libpgm-5.3-0 libnorm1 libbsd0 libmd0
  libcpp-httplib-dev libcpp-httplib0.11 libbrotli1
  # What libzmq.pc and cpp-httplib.pc require (pkg-config reads them for the flags).
  libsodium-dev libpgm-dev libnorm-dev libbsd-dev libmd-dev libkrb5-dev comerr-dev
  libssl-dev zlib1g-dev libbrotli-dev krb5-multidev libxml2-dev libicu-dev liblzma-dev
  libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3
  # Gloo's headers: ProcessGroupGloo.hpp includes them; the wheel ships none (gloo is
  # linked into libtorch_cpu, so only the headers are needed).
  libgloo-dev
  catch2
)
command -v apt-get >/dev/null || { echo "make_gpu_bundle: error: needs apt-get (Debian 12)" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out"
if ! (cd "$out" && apt-get download -qq "${packages[@]}" 2>/dev/null); then
  apt-get update -qq
  (cd "$out" && apt-get download -qq "${packages[@]}")
fi
# Arrow C++ (parquet; scripts/setup_arrow.sh), compressed: its libraries are 60 MiB.
bash scripts/setup_arrow.sh
tar -cJf "$out/arrow.tar.xz" -C .deps arrow-26.0.1
size_mib=$(du -sm "$out" | cut -f1)
echo "make_gpu_bundle: ${#packages[@]} packages, ${size_mib} MiB in $out/"
if [ "$size_mib" -ge "$limit_mib" ]; then
  echo "make_gpu_bundle: error: the bundle is over ${limit_mib} MiB, what the device tool carries" >&2
  exit 1
fi
