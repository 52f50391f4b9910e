#!/usr/bin/env bash
# Asynchronous RL against the synchronous trainer (docs/async.md#benchmark): the
# quickstart's GRPO from its SFT checkpoint, the same steps, seed and data, in
# each mode: sync (one colocated worker), one_step_off and fully_async (an actor
# worker and a rollout worker). Prints a markdown table: wall time, steps per
# hour, samples per second, the ratio to sync, the trainer's idle share, the
# staleness and the validation score after the same samples; then the date and
# the machine.
#
#   bench/run_async_bench.sh [--steps N] [--quickstart DIR] [--out DIR]
#
# Needs a finished quickstart (bash scripts/quickstart.sh): its model and data.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
steps=40
quickstart=$repo/runs/quickstart
out=$repo/runs/async-bench

while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=${2:?}; shift 2 ;;
    --quickstart) quickstart=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    -h|--help) sed -n 2,13p "$0"; exit 0 ;;
    *) echo "async bench: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
case "$steps" in ''|*[!0-9]*|0) echo "async bench: --steps must be a positive integer" >&2; exit 2 ;; esac
for need in "$quickstart/sft/hf/config.json" "$quickstart/data/train.jsonl" "$quickstart/data/val.jsonl"; do
  [ -e "$need" ] || { echo "async bench: $need is missing: run bash scripts/quickstart.sh first" >&2; exit 1; }
done
case "$out" in ''|/|.) echo "async bench: refusing --out '$out' (it is deleted first)" >&2; exit 2 ;; esac
rm -rf "$out"
mkdir -p "$out"
rlcore=$repo/build/bin/rlcore
[ -x "$rlcore" ] || { echo "async bench: $rlcore is missing: bash scripts/build.sh" >&2; exit 1; }

common=(--config "$repo/configs/quickstart.yaml" "trainer.total_training_steps=$steps" "trainer.test_freq=$steps"
        trainer.save_freq=-1 trainer.val_before_train=false "trainer.logger=[jsonl]"
        "data.train_files=$quickstart/data/train.jsonl" "data.val_files=$quickstart/data/val.jsonl"
        "actor_rollout_ref.model.path=$quickstart/sft/hf")
declare -A extra=(
  [sync]=""
  [one_step_off]="async_training.mode=one_step_off"
  [fully_async]="async_training.mode=fully_async async_training.staleness_threshold=1.0 async_training.trigger_parameter_sync_step=1 async_training.partial_rollout=true"
)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for mode in sync one_step_off fully_async; do
  echo "== $mode"
  # shellcheck disable=SC2086
  /usr/bin/time -f "%e" -o "$out/$mode.wall" "$rlcore" "${common[@]}" "trainer.default_local_dir=$out/$mode" \
    ${extra[$mode]} > "$out/$mode.log" 2>&1 || { echo "async bench: $mode failed; see $out/$mode.log" >&2; exit 1; }
done

python3 - "$out" "$steps" "$load_before" <<'EOF'
import json, sys, platform, datetime, os
out, steps, load_before = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows = {}
for mode in ("sync", "one_step_off", "fully_async"):
    metrics = [json.loads(l) for l in open(os.path.join(out, mode, "metrics.jsonl")) if l.strip()]
    train = [m for m in metrics if "timing_s/step" in m]
    wall = float(open(os.path.join(out, mode + ".wall")).read().split()[-1])
    steps_time = sum(m["timing_s/step"] for m in train)
    samples = len(train) * 64 * 8  # configs/quickstart.yaml: 64 prompts x 8 responses a step
    val = [m for m in metrics if "val-core/arithmetic/reward/mean@1" in m]
    idle = [m.get("trainer/idle_ratio", 0.0) for m in train]
    stale = [m.get("async/staleness/mean", 0.0) for m in train]
    rows[mode] = dict(wall=wall, steps_time=steps_time, samples=samples,
                      val=val[-1]["val-core/arithmetic/reward/mean@1"] if val else float("nan"),
                      idle=sum(idle) / len(idle), stale=sum(stale) / len(stale))
base = rows["sync"]["steps_time"]
print()
print("| mode | wall (s) | train loop (s) | steps / hour | samples / s | vs sync | trainer idle | staleness (mean) | val acc after %d steps |" % steps)
print("|---|---|---|---|---|---|---|---|---|")
for mode, r in rows.items():
    print("| %s | %.1f | %.1f | %.0f | %.1f | %.2fx | %.0f%% | %.2f | %.1f%% |" % (
        mode, r["wall"], r["steps_time"], steps * 3600 / r["steps_time"], r["samples"] / r["steps_time"],
        base / r["steps_time"], 100 * r["idle"], r["stale"], 100 * r["val"]))
print()
print("%s, %s, %d cores; load average before: %s, after: %s" % (
    datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), platform.node(), os.cpu_count(),
    load_before, " ".join(open("/proc/loadavg").read().split()[:3])))
EOF
