#!/usr/bin/env bash
# The GPU checks of rlcore (docs/gpu.md): builds the CUDA flavour, runs the
# ctest label `cuda` and the GPU benchmarks, on whatever machine it runs on.
# Fails when no GPU is visible: the checks never skip themselves.
#
#   bash scripts/gpu-check.sh [--out DIR] [--no-bench] [--benches LIST]
#
# Dependencies: when gpu-bundle/ holds the .deb files of
# scripts/make_gpu_bundle.sh (carried to a machine without a registry, such as
# the lent H100), they are unpacked into gpu-bundle/prefix and used; otherwise
# Debian's packages through scripts/setup.sh. It builds only what it runs.
# --out DIR (default $OUT, else gpu-check-out) keeps the logs: build, ctest
# (one entry per tests/cuda file), benchmarks. --benches picks some of
# generation,swap,train_fsdp (bench/run_gpu_bench.sh; default all of them).
# libtorch: $Torch_DIR, else .venv's torch (scripts/setup_python.sh), else the
# torch of `python3` on PATH (the GPU image's own PyTorch).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-check-out}
bench=1
benches=generation,swap,train_fsdp
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift ;;
    --no-bench) bench=0 ;;
    --benches) benches=$2; shift ;;
    *) echo "gpu-check: error: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$out"
log() { echo "[gpu-check] $*" | tee -a "$out/gpu-check.log"; }

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  log "error: no GPU is visible (nvidia-smi -L fails): the cuda checks need one"
  exit 1
fi
nvidia-smi -L | tee -a "$out/gpu-check.log"
export PATH=$PATH:/usr/local/cuda/bin
{ grep -m1 PRETTY_NAME /etc/os-release; g++ --version | sed -n 1p; nvcc --version | tail -n 1; nproc; } 2>&1 | tee -a "$out/gpu-check.log"

# nccl.h: the system's, else the one the nvidia-nccl wheel beside python3's torch ships.
if ! echo '#include <nccl.h>' | g++ -E -x c++ - -I/usr/local/cuda/include >/dev/null 2>&1; then
  nccl_include=$(python3 -c 'import os, nvidia.nccl as n; print(os.path.join(list(n.__path__)[0], "include"))' 2>/dev/null || true)
  if [ -n "$nccl_include" ] && [ -f "$nccl_include/nccl.h" ]; then
    log "nccl.h from $nccl_include"
    export CPLUS_INCLUDE_PATH=$nccl_include${CPLUS_INCLUDE_PATH:+:$CPLUS_INCLUDE_PATH}
  else
    log "warning: no nccl.h found (system or python3's nvidia-nccl wheel)"
  fi
fi

# Dependencies.
if [ -d gpu-bundle ] && ls gpu-bundle/*.deb >/dev/null 2>&1; then
  prefix=$PWD/gpu-bundle/prefix
  multiarch=$prefix/usr/lib/x86_64-linux-gnu
  if [ ! -d "$prefix" ]; then
    log "unpacking $(ls gpu-bundle/*.deb | wc -l) packages into $prefix"
    for deb in gpu-bundle/*.deb; do dpkg-deb -x "$deb" "$prefix"; done
    # The .pc files name /usr; point them at the prefix (the system's own stay as they are).
    grep -rl '^prefix=/usr' "$multiarch/pkgconfig" "$prefix/usr/share/pkgconfig" 2>/dev/null |
      xargs -r sed -i "s|^prefix=/usr|prefix=$prefix/usr|"
  fi
  export CMAKE_PREFIX_PATH=$prefix/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
  export PKG_CONFIG_PATH=$multiarch/pkgconfig:$prefix/usr/share/pkgconfig
  export LD_LIBRARY_PATH=$multiarch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export CPLUS_INCLUDE_PATH=$prefix/usr/include${CPLUS_INCLUDE_PATH:+:$CPLUS_INCLUDE_PATH}
  export RLCORE_SKIP_SETUP=1
fi
# Arrow C++ (parquet), packed by make_gpu_bundle.sh from .deps/.
if [ -f gpu-bundle/arrow.tar.xz ] && [ ! -d .deps/arrow-26.0.1 ]; then
  mkdir -p .deps && tar -xJf gpu-bundle/arrow.tar.xz -C .deps && touch .deps/arrow-26.0.1/.complete
fi

# libtorch.
if [ -z "${Torch_DIR:-}" ] && [ ! -x .venv/bin/python ]; then
  Torch_DIR=$(python3 -c 'import torch, os; print(os.path.join(torch.utils.cmake_prefix_path, "Torch"))')
fi
[ -n "${Torch_DIR:-}" ] && export Torch_DIR
log "building the CUDA flavour (Torch_DIR=${Torch_DIR:-.venv})"
build_dir=${RLCORE_BUILD_DIR:-build-cuda}
# What the checks run (test_cuda pulls in rlcore and the plugins), not the CPU suite.
targets=(test_cuda)
if [ "$bench" = 1 ]; then
  for name in ${benches//,/ }; do
    case $name in
      generation|swap|train_fsdp) targets+=("bench_$name") ;;
      *) log "error: unknown benchmark '$name' in --benches (expected generation, swap, train_fsdp)"; exit 2 ;;
    esac
  done
fi
if ! bash scripts/build.sh --cuda "${targets[@]}" >"$out/build.log" 2>&1; then
  # Go on past the first failure so that one run reports every broken file.
  [ -f "$build_dir/build.ninja" ] && cmake --build "$build_dir" -- -k 0 >>"$out/build.log" 2>&1 || true
  grep -E -A3 'error:|FAILED:' "$out/build.log" | head -n 80  || true
  log "error: the CUDA build failed (full log: $out/build.log)"
  exit 1
fi
tail -n 3 "$out/build.log" | tee -a "$out/gpu-check.log"

status=0
log "ctest -L cuda"
(cd "$build_dir" && ctest -L cuda --output-on-failure --no-tests=error) 2>&1 | tee "$out/ctest-cuda.log" || status=1
cp "$build_dir/Testing/Temporary/LastTest.log" "$out/ctest-cuda-full.log" 2>/dev/null || true
if [ "$bench" = 1 ]; then
  log "GPU benchmarks"
  bash bench/run_gpu_bench.sh --build-dir "$build_dir" --benches "$benches" 2>&1 | tee "$out/bench-gpu.log" || status=1
fi
log "done: $([ $status = 0 ] && echo PASS || echo FAIL)"
exit $status
