#!/usr/bin/env bash
# Soak benchmark: GRPO on the quickstart task for many steps (default 1,000)
# with two workers, then a table of host memory (the resident set of the
# controller and of every worker, which the trainer logs every step) and of
# step time: means of the first decile after warm-up and of the last one,
# least-squares slopes after warm-up, and the means over ten windows after warm-up.
# Memory should be flat and step time should not drift
# (docs/bench-soak.md). On a shared machine step time follows the load, so
# the table also gives the load average and the CPU seconds the run's
# processes spent per step (sampled every 2 s), which do not.
#
#   bench/run_soak_bench.sh [--steps N] [--workers N] [--warmup N] [--out DIR]
#   bench/run_soak_bench.sh --report DIR     the table of a finished run again
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
steps=1000
workers=2
warmup=100
out=$repo/runs/soak
build=1
build_dir=build
report_only=0

usage() {
  cat <<EOF
usage: bench/run_soak_bench.sh [options]
  --steps N      GRPO steps (default: $steps)
  --workers N    runtime.n_workers_per_node (default: $workers)
  --warmup N     steps left out of the slopes (default: $warmup)
  --out DIR      work directory, deleted first (default: runs/soak)
  --no-build     use the build directory as it is
  --build-dir D  the build directory (default: build); its rlcore, libraries and
                 plugins are copied to DIR/build first, so rebuilding D during the
                 soak cannot touch the running processes
  --report DIR   print the table of the finished run in DIR, run nothing
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
    --report) out=${2:?}; report_only=1; shift 2 ;;
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
case "$out" in /*) ;; *) out=$PWD/$out ;; esac  # the workers' library path is under it

# Every 2 s until the run ends: the last logged step, the 1-minute load average
# and the CPU seconds (user + system) of the controller and its workers so far.
sample() {
  local controller=$1 metrics=$2 ticks_per_s
  ticks_per_s=$(getconf CLK_TCK)
  while kill -0 "$controller" 2> /dev/null; do
    local step=0 ticks=0 pid
    [ -s "$metrics" ] && step=$(tail -n 1 "$metrics" | grep -o '"step":[0-9]*' | cut -d: -f2 || echo 0)
    for pid in "$controller" $(pgrep -P "$controller" || true); do
      ticks=$(( ticks + $(awk '{print $14 + $15}' "/proc/$pid/stat" 2> /dev/null || echo 0) ))
    done
    echo "$(date +%s) ${step:-0} $(cut -d' ' -f1 /proc/loadavg) $(awk -v t="$ticks" -v h="$ticks_per_s" 'BEGIN {print t / h}')"
    sleep 2
  done
}

run_soak() {
  if [ "$build" = 1 ]; then
    RLCORE_BUILD_DIR="$build_dir" bash scripts/build.sh rlcore rlcore-train-fsdp rlcore-infer-native rlcore-reward \
      rlcore-hybrid-engine
  fi
  copy_build "$build_dir" "$out"
  local rlcore=$out/build/bin/rlcore

  "$rlcore" model init --arch qwen2 --size tiny --seed 1 --out "$out/model" > /dev/null
  "$rlcore" data make --task arithmetic --seed 1 --val 300 --out "$out/data" > /dev/null
  echo "[soak] SFT warm start (configs/quickstart_sft.yaml)"
  "$rlcore" sft --config configs/quickstart_sft.yaml trainer.default_local_dir="$out/sft" \
    data.train_files="$out/data/sft.jsonl" data.val_files="$out/data/val.jsonl" \
    actor_rollout_ref.model.path="$out/model" trainer.logger='[jsonl]' > "$out/sft.log" 2>&1
  echo "[soak] GRPO for $steps steps with $workers workers (log: $out/grpo.log)"
  local started status=0
  started=$(date +%s)
  # Validation and a checkpoint now and then: the soak covers what a real run does.
  "$rlcore" --config configs/quickstart.yaml trainer.default_local_dir="$out/grpo" \
    data.train_files="$out/data/train.jsonl" data.val_files="$out/data/val.jsonl" \
    actor_rollout_ref.model.path="$out/sft/hf" trainer.total_training_steps="$steps" \
    trainer.test_freq=250 trainer.save_freq=500 trainer.max_ckpt_to_keep=1 trainer.val_before_train=false \
    trainer.logger='[jsonl]' runtime.n_workers_per_node="$workers" > "$out/grpo.log" 2>&1 &
  local controller=$!
  sample "$controller" "$out/grpo/metrics.jsonl" > "$out/samples.txt" &
  wait "$controller" || status=$?
  wait
  echo "$(( $(date +%s) - started )) $workers $warmup" > "$out/run.txt"
  if [ "$status" != 0 ]; then
    echo "[soak] GRPO failed (exit $status); the end of $out/grpo.log:" >&2
    tail -n 20 "$out/grpo.log" >&2
    exit "$status"
  fi
}

cd "$repo"
source bench/copy_build.sh
[ "$report_only" = 1 ] || run_soak
[ -f "$out/run.txt" ] || { echo "soak: $out has no finished run (run.txt)" >&2; exit 1; }
read -r wall workers warmup < "$out/run.txt"

python3 - "$out" "$warmup" "$wall" "$workers" <<'EOF'
import json, os, sys

out, warmup, wall, workers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rows = {}
with open(os.path.join(out, "grpo/metrics.jsonl")) as f:
    for line in f:
        record = json.loads(line)
        rows.setdefault(record["step"], {}).update(record)
steps = sorted(s for s in rows if "timing_s/step" in rows[s])
after = [s for s in steps if s > warmup]
# (time, step, load, cpu seconds); the controller may be gone before the last sample.
samples = []
if os.path.exists(os.path.join(out, "samples.txt")):
    with open(os.path.join(out, "samples.txt")) as f:
        samples = [tuple(float(v) for v in line.split()) for line in f if len(line.split()) == 4]

def slope(xs, ys):
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0

def slope_error(xs, ys):  # the standard error of slope(xs, ys); neighbours correlate, so read it as a floor
    b, mx, my = slope(xs, ys), sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    residual = sum((y - my - b * (x - mx)) ** 2 for x, y in zip(xs, ys))
    return (residual / (len(xs) - 2) / sxx) ** 0.5 if len(xs) > 2 and sxx else 0.0

def mean(values):
    return sum(values) / len(values) if values else float("nan")

decile = max(1, len(after) // 10)
first_steps, last_steps = after[:decile], after[-decile:]

def window(lo, hi):  # the samples taken while steps lo..hi ran, and one either side
    inside = [i for i, s in enumerate(samples) if lo <= s[1] <= hi]
    return samples[max(0, inside[0] - 1):inside[-1] + 2] if inside else []

def cpu_per_step(lo, hi):
    w = window(lo, hi)
    return (w[-1][3] - w[0][3]) / (w[-1][1] - w[0][1]) if len(w) > 1 and w[-1][1] > w[0][1] else float("nan")

cpu = open("/proc/cpuinfo").read().split("model name")[1].split(":")[1].splitlines()[0].strip()
print()
print(f"soak: {len(steps)} GRPO steps, {workers} workers, warm-up {warmup} steps, {wall} s wall; "
      f"{os.cpu_count()} cores, {cpu}")
print()
print(f"| resident set, mean of a decile ({decile} steps) | first after warm-up (steps {first_steps[0]}-{first_steps[-1]}) "
      f"| last (steps {last_steps[0]}-{last_steps[-1]}) | range after warm-up | slope after warm-up | change |")
print("|---|---|---|---|---|---|")
prefix = "memory/worker_rss_bytes/rank_"
ranks = sorted(int(k[len(prefix):]) for k in rows[after[-1]] if k.startswith(prefix))
series = [("memory/controller_rss_bytes", "controller")]
series += [(prefix + str(r), f"worker rank {r}") for r in ranks]
for key, name in series:
    ys = [rows[s][key] / 2**20 for s in after]
    first, last = mean(ys[:decile]), mean(ys[-decile:])
    print(f"| {name} | {first:.1f} MiB | {last:.1f} MiB | {min(ys):.1f}-{max(ys):.1f} MiB "
          f"| {100 * slope(after, ys):+.3f} ± {100 * slope_error(after, ys):.3f} MiB / 100 steps | {last - first:+.2f} MiB ({100 * (last - first) / first:+.2f}%) |")
growth = max(abs(slope(after, [rows[s][key] / 2**20 for s in after])) for key, _ in series)
print()
print(f"largest resident-set slope: {1000 * growth:.2f} MiB per 1,000 steps")
print()
print(f"| step time, mean of a decile ({decile} steps) | first after warm-up (steps {first_steps[0]}-{first_steps[-1]}) "
      f"| last (steps {last_steps[0]}-{last_steps[-1]}) | slope after warm-up | change |")
print("|---|---|---|---|---|")
times = [rows[s]["timing_s/step"] * 1000 for s in after]
first, last = mean(times[:decile]), mean(times[-decile:])
print(f"| wall time per step | {first:.0f} ms | {last:.0f} ms "
      f"| {100 * slope(after, times):+.2f} ± {100 * slope_error(after, times):.2f} ms / 100 steps "
      f"| {last - first:+.0f} ms ({100 * (last - first) / first:+.1f}%) |")
if samples:
    c_first, c_last = cpu_per_step(first_steps[0], first_steps[-1]), cpu_per_step(last_steps[0], last_steps[-1])
    print(f"| CPU time per step, controller + workers | {1000 * c_first:.0f} ms | {1000 * c_last:.0f} ms | "
          f"| {1000 * (c_last - c_first):+.0f} ms ({100 * (c_last - c_first) / c_first:+.1f}%) |")
    l_first = mean([s[2] for s in window(first_steps[0], first_steps[-1])])
    l_last = mean([s[2] for s in window(last_steps[0], last_steps[-1])])
    print(f"| load average (1 min) | {l_first:.1f} | {l_last:.1f} | | |")
    print()
    print(f"load average over the whole run: {mean([s[2] for s in samples]):.1f} "
          f"(min {min(s[2] for s in samples):.1f}, max {max(s[2] for s in samples):.1f})")
windows = [after[i * len(after) // 10:(i + 1) * len(after) // 10] for i in range(10)]
print()
print("| steps | " + " | ".join(f"{name} RSS" for _, name in series) + " | wall time per step | CPU time per step | load |")
print("|---|" + "---|" * (len(series) + 3))
for w in windows:
    if not w:
        continue
    cells = [f"{mean([rows[s][key] for s in w]) / 2**20:.1f} MiB" for key, _ in series]
    cells.append(f"{1000 * mean([rows[s]['timing_s/step'] for s in w]):.0f} ms")
    if samples:
        cells.append(f"{1000 * cpu_per_step(w[0], w[-1]):.0f} ms")
        cells.append(f"{mean([s[2] for s in window(w[0], w[-1])]):.1f}")
    else:
        cells += ["", ""]
    print(f"| {w[0]}-{w[-1]} | " + " | ".join(cells) + " |")
EOF
