#!/usr/bin/env bash
# Concurrency benchmark of `rlcore serve` (issue 36): N = 1, 8, 32 clients each
# POST one greedy /v1/completions of --max-tokens tokens at once; prints the wall
# time until the last answer, relative to one request alone, for the server as
# it runs (continuous batching) and for one request at a time (max_num_seqs=1,
# how the server answered before), both measured in this run.
#   bench/run_serve_concurrency_bench.sh [--build-dir DIR] [--size tiny|100m] [--clients 1,8,32]
#                                        [--max-tokens N] [--dtype auto|float32|bfloat16] [--no-build]
# (dtype auto: the checkpoint's, bfloat16 for `rlcore model init`).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$repo/build
size=100m
clients=1,8,32
max_tokens=64
dtype=auto
build=1
while [[ $# -gt 0 ]]; do
  case $1 in
    --build-dir) build_dir=$(realpath -m "$2"); shift 2 ;;
    --size) size=$2; shift 2 ;;
    --clients) clients=$2; shift 2 ;;
    --max-tokens) max_tokens=$2; shift 2 ;;
    --dtype) dtype=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    *) echo "run_serve_concurrency_bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
if [[ $build == 1 ]]; then bash "$repo/scripts/build.sh" rlcore rlcore-infer-native >/dev/null; fi
work=$build_dir/bench-serve-concurrency
model=$work/qwen2-$size
mkdir -p "$work"
[[ -f $model/config.json ]] ||
  "$build_dir/bin/rlcore" model init --arch qwen2 --size "$size" --seed 0 --out "$model" --force >/dev/null
params=$(python3 -c "import json,sys; c=json.load(open(sys.argv[1])); print(c['hidden_size'], c['num_hidden_layers'], c['vocab_size'])" "$model/config.json")
[[ $dtype != auto ]] || dtype=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get('torch_dtype', 'float32'))" "$model/config.json")
echo "machine: $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p')), $(free -g | awk '/Mem:/ {print $2}') GiB; $(date -u '+%Y-%m-%d %H:%M UTC'); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "model: qwen2 $size (hidden, layers, vocab: $params), $dtype, $max_tokens greedy tokens per request (ignore_eos); server: $(nproc) threads"

source "$repo/bench/serve_process.sh"
trap stop_serve EXIT

# Prints "N seconds" per client count: N threads post at once, timed to the last answer.
measure() {
  python3 - "$server" "$max_tokens" "$clients" <<'PY'
import json, sys, threading, time, urllib.request
server, max_tokens, counts = sys.argv[1], int(sys.argv[2]), [int(c) for c in sys.argv[3].split(",")]
def post(k, out):
    body = json.dumps({"prompt": [11 + k % 50, 12, 13, 14, 15, 16, 17, 18], "max_tokens": max_tokens,
                       "temperature": 0, "ignore_eos": True}).encode()
    req = urllib.request.Request(server + "/v1/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=3600) as r:
        out[k] = json.load(r)["usage"]["completion_tokens"]
post(0, {})  # warm-up
for n in counts:
    out = {}
    threads = [threading.Thread(target=post, args=(k, out)) for k in range(n)]
    start = time.perf_counter()
    for t in threads: t.start()
    for t in threads: t.join()
    wall = time.perf_counter() - start
    assert len(out) == n and all(v == max_tokens for v in out.values()), out
    print(n, f"{wall:.3f}")
PY
}

serve_args=(--model "$model" --plugins "$build_dir/plugins" --log-level warn "dtype=$dtype")
start_serve "$work/serve.log" "${serve_args[@]}"
continuous=$(measure)
stop_serve
start_serve "$work/serve.log" "${serve_args[@]}" max_num_seqs=1
serial=$(measure)
stop_serve

python3 - "$continuous" "$serial" <<'PY'
import sys
cont = dict(line.split() for line in sys.argv[1].splitlines())
ser = dict(line.split() for line in sys.argv[2].splitlines())
one_c, one_s = float(cont["1"]), float(ser["1"])
print()
print("| concurrent requests | continuous batching (s) | x one request | one at a time (s) | x one request | speed-up |")
print("|---|---|---|---|---|---|")
for n in cont:
    c, s = float(cont[n]), float(ser[n])
    print(f"| {n} | {c:.2f} | {c / one_c:.2f} | {s:.2f} | {s / one_s:.2f} | {s / c:.2f} |")
PY
