#!/usr/bin/env bash
# Load benchmark of `rlcore serve`'s event-driven HTTP server (issue 55), with
# the official openai client (AsyncOpenAI, max_retries=0): N clients, spread
# over several client processes that start together, each send one greedy
# completion of --max-tokens tokens (ignore_eos), whole and streamed. Per N it
# prints the time until the last answer, TTFT and inter-token latency p50/p99
# (streamed), the errors, the server's RSS, and the ratio to the engine alone:
# one request with the N clients' prompts, the same decode batch without N clients.
# Then 8 streamed clients with and without 1,024 idle keep-alive connections.
#   bench/run_serve_load_bench.sh [--build-dir DIR] [--sizes tiny,100m] [--clients 1,8,32,128,512,1024]
#                                 [--max-tokens N] [--processes P] [--no-build]
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$repo/build
sizes=tiny,100m
clients=1,8,32,128,512,1024
max_tokens=64
processes=4
build=1
while [[ $# -gt 0 ]]; do
  case $1 in
    --build-dir) build_dir=$(realpath -m "$2"); shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --clients) clients=$2; shift 2 ;;
    --max-tokens) max_tokens=$2; shift 2 ;;
    --processes) processes=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    *) echo "run_serve_load_bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
python=$repo/.venv/bin/python
[[ -x $python ]] || { echo "run_serve_load_bench.sh: $python missing (bash scripts/setup_python.sh makes it)" >&2; exit 1; }
if [[ $build == 1 ]]; then bash "$repo/scripts/build.sh" rlcore rlcore-infer-native >/dev/null; fi
work=$build_dir/bench-serve-load
mkdir -p "$work"
echo "machine: $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p')), $(free -g | awk '/Mem:/ {print $2}') GiB; $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "clients: $processes processes of asyncio AsyncOpenAI (openai $("$python" -c 'import openai; print(openai.__version__)')), on the same machine as the server; $max_tokens greedy tokens per request (ignore_eos)"

source "$repo/bench/serve_process.sh"
trap stop_serve EXIT

rss_mib() { awk '/^VmRSS/ {printf "%.0f", $2 / 1024}' "/proc/$serve_pid/status"; }

# Seconds one request with the $1 clients' prompts takes: the engine's batched decode alone.
engine_alone() {
  "$python" - "$server" "$1" "$max_tokens" <<'PY'
import json, sys, time, urllib.request
server, n, max_tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
prompts = [f"Question {k}: what is {k} plus {k}?" for k in range(n)]  # the clients' prompts
body = json.dumps({"prompt": prompts, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}).encode()
request = urllib.request.Request(server + "/v1/completions", body, {"Content-Type": "application/json"})
start = time.perf_counter()
with urllib.request.urlopen(request, timeout=3600) as answer:
    assert json.load(answer)["usage"]["completion_tokens"] == n * max_tokens
print(f"{time.perf_counter() - start:.3f}")
PY
}

load() {  # load N [--stream] [--idle K] -> one JSON line
  local n=$1; shift
  "$python" "$repo/bench/python/serve_load_client.py" "$server" --model "$model" --clients "$n" \
    --processes "$processes" --max-tokens "$max_tokens" "$@"
}

row() {  # row N BASELINE JSON -> a table row
  "$python" - "$1" "$2" "$3" "$(rss_mib)" <<'PY'
import json, sys
n, baseline, d, rss = sys.argv[1], float(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4]
ms = lambda v: "-" if v is None else f"{v * 1000:.0f}"
mode = "streamed" if d["stream"] else "whole"
print(f"| {n} | {mode} | {d['all_done_s']:.2f} | {d['all_done_s'] / baseline:.2f} | {ms(d['ttft_p50_s'])} | "
      f"{ms(d['ttft_p99_s'])} | {ms(d['itl_p50_s'])} | {ms(d['itl_p99_s'])} | {d['errors']} | {rss} |")
if d["errors"]:
    print(f"first error: {d['first_error']}", file=sys.stderr)
PY
}

for size in ${sizes//,/ }; do
  model=$work/qwen2-$size
  [[ -f $model/config.json ]] ||
    "$build_dir/bin/rlcore" model init --arch qwen2 --size "$size" --seed 0 --out "$model" --force >/dev/null
  start_serve "$work/serve-$size.log" --model "$model" --plugins "$build_dir/plugins" --log-level warn \
    --keep-alive-timeout-s 600 max_num_seqs=1024
  engine_alone 4 >/dev/null  # warm-up
  echo
  echo "qwen2 $size ($(sed -n 's/.*open files \([0-9]*\).*/open files \1/p' "$work/serve-$size.log"), max_num_seqs 1024):"
  echo
  echo "| clients | answer | all done (s) | x engine alone | TTFT p50 (ms) | TTFT p99 (ms) | ITL p50 (ms) | ITL p99 (ms) | errors | server RSS (MiB) |"
  echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"
  for n in ${clients//,/ }; do
    baseline=$(engine_alone "$n")
    row "$n" "$baseline" "$(load "$n")"
    row "$n" "$baseline" "$(load "$n" --stream)"
  done
  quiet=$(load 8 --stream)
  crowded=$(load 8 --stream --idle 1024)
  "$python" - "$quiet" "$crowded" <<'PY'
import json, sys
quiet, crowded = json.loads(sys.argv[1]), json.loads(sys.argv[2])
rate = lambda d: d["tokens"] / d["all_done_s"]
print()
print("| 8 streamed clients | all done (s) | tokens/s | ITL p50 (ms) | errors |")
print("|---|---:|---:|---:|---:|")
for name, d in (("alone", quiet), ("beside 1,024 idle keep-alive connections", crowded)):
    print(f"| {name} | {d['all_done_s']:.2f} | {rate(d):.0f} | {d['itl_p50_s'] * 1000:.1f} | {d['errors']} |")
print(f"\nthroughput beside the idle connections: {rate(crowded) / rate(quiet):.2f} x alone")
PY
  stop_serve
done
