#!/usr/bin/env bash
# Soak benchmark: GRPO on the quickstart task for many steps (default 1,000)
# with two workers, then a table of host memory (the controller's resident set
# and the workers' smallest and largest) and step time over the run: values at
# the end of warm-up and at the end, and least-squares slopes after warm-up.
# Memory should be flat and step time should not drift (docs/bench-soak.md).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
steps=1000
workers=2
warmup=100
out=$repo/runs/soak
build=1
build_dir=build

usage() {
  cat <<EOF
usage: bench/run_soak_bench.sh [options]
  --steps N      GRPO steps (default: $steps)
  --workers N    runtime.n_workers_per_node (default: $workers)
  --warmup N     steps left out of the slopes (default: $warmup)
  --out DIR      work directory, deleted first (default: runs/soak)
  --no-build     use the existing build directory
  --build-dir D  the build directory whose bin/rlcore runs (default: build); a copy of
                 its bin/, lib/ and plugins/ keeps a soak safe from rebuilds meanwhile
                 (set LD_LIBRARY_PATH=D/lib then)
EOF
}

while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=${2:?}; shift 2 ;;
    --workers) workers=${2:?}; shift 2 ;;
    --warmup) warmup=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    --no-build) build=0; shift ;;
    --build-dir) build_dir=${2:?}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "soak: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
for value in "$steps" "$workers" "$warmup"; do
  case "$value" in ''|*[!0-9]*) echo "soak: counts must be non-negative integers, got '$value'" >&2; exit 2 ;; esac
done
if [ "$warmup" -ge "$steps" ]; then
  echo "soak: --warmup ($warmup) must be below --steps ($steps)" >&2
  exit 2
fi
case "$out" in ''|/|.) echo "soak: refusing --out '$out' (it is deleted first)" >&2; exit 2 ;; esac

cd "$repo"
if [ "$build" = 1 ]; then
  RLCORE_BUILD_DIR="$build_dir" bash scripts/build.sh rlcore rlcore-train-fsdp rlcore-infer-native rlcore-reward rlcore-hybrid-engine
fi
rlcore=$(cd "$build_dir" && pwd)/bin/rlcore

rm -rf "$out"
mkdir -p "$out"
"$rlcore" model init --arch qwen2 --size tiny --seed 1 --out "$out/model" > /dev/null
"$rlcore" data make --task arithmetic --seed 1 --val 300 --out "$out/data" > /dev/null
echo "[soak] SFT warm start (configs/quickstart_sft.yaml)"
"$rlcore" sft --config configs/quickstart_sft.yaml trainer.default_local_dir="$out/sft" \
  data.train_files="$out/data/sft.jsonl" data.val_files="$out/data/val.jsonl" \
  actor_rollout_ref.model.path="$out/model" trainer.logger='[jsonl]' > "$out/sft.log" 2>&1
echo "[soak] GRPO for $steps steps with $workers workers (log: $out/grpo.log)"
started=$(date +%s)
# Validation and a checkpoint now and then: the soak covers what a real run does.
"$rlcore" --config configs/quickstart.yaml trainer.default_local_dir="$out/grpo" \
  data.train_files="$out/data/train.jsonl" data.val_files="$out/data/val.jsonl" \
  actor_rollout_ref.model.path="$out/sft/hf" trainer.total_training_steps="$steps" \
  trainer.test_freq=250 trainer.save_freq=500 trainer.max_ckpt_to_keep=1 trainer.val_before_train=false \
  trainer.logger='[jsonl]' runtime.n_workers_per_node="$workers" > "$out/grpo.log" 2>&1
wall=$(( $(date +%s) - started ))

python3 - "$out/grpo/metrics.jsonl" "$warmup" "$wall" "$workers" <<'EOF'
import json, os, sys

path, warmup, wall, workers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rows = {}
with open(path) as f:
    for line in f:
        record = json.loads(line)
        rows.setdefault(record["step"], {}).update(record)
steps = sorted(s for s in rows if "timing_s/step" in rows[s])
after = [s for s in steps if s > warmup]

def slope(xs, ys):
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0

def mean(values):
    return sum(values) / len(values)

decile = max(1, len(after) // 10)
print()
print(f"soak: {len(steps)} GRPO steps, {workers} workers, warm-up {warmup} steps, {wall} s wall; "
      f"{os.cpu_count()} cores, {open('/proc/cpuinfo').read().split('model name')[1].split(':')[1].splitlines()[0].strip()}; "
      f"load average at the end {os.getloadavg()[1]:.1f} (5 min), {os.getloadavg()[2]:.1f} (15 min)")
print()
print("| series | at step %d | at step %d | slope after warm-up | change after warm-up |" % (after[0], after[-1]))
print("|---|---|---|---|---|")
prefix = "memory/worker_rss_bytes/rank_"
ranks = sorted(int(k[len(prefix):]) for k in rows[after[-1]] if k.startswith(prefix))
series = [("memory/controller_rss_bytes", "controller RSS")]
series += [(prefix + str(r), f"worker rank {r} RSS") for r in ranks]
for key, name in series:
    ys = [rows[s][key] / 2**20 for s in after]
    print(f"| {name} | {ys[0]:.1f} MiB | {ys[-1]:.1f} MiB | {100 * slope(after, ys):+.3f} MiB / 100 steps "
          f"| {ys[-1] - ys[0]:+.1f} MiB ({100 * (ys[-1] - ys[0]) / ys[0]:+.2f}%) |")
times = [rows[s]["timing_s/step"] * 1000 for s in after]
first, last = mean(times[:decile]), mean(times[-decile:])
print(f"| step time (mean of a decile) | {first:.0f} ms | {last:.0f} ms | {100 * slope(after, times):+.2f} ms / 100 steps "
      f"| {last - first:+.0f} ms ({100 * (last - first) / first:+.1f}%) |")
EOF
