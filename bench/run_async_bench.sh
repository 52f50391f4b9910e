#!/usr/bin/env bash
# Asynchronous RL against the synchronous trainer (docs/async.md#benchmark) on a
# task with long-tailed response lengths (`rlcore data make --task
# repeated-addition`): per seed, the quickstart's tiny model is initialised and
# warm-started by SFT (the quickstart's recipe, responses up to 96 tokens), then
# the quickstart's GRPO runs the same steps from that checkpoint in each mode:
# sync (one colocated worker), one_step_off, and fully_async with staleness at
# most 2 and partial rollouts (an actor worker and a rollout worker). Prints
# markdown tables: per mode the mean over seeds of wall time, steps per hour,
# samples per second, the ratio to sync, the trainer's idle share, staleness,
# where a step's time goes, and the validation score after the same samples;
# then each seed's scores, the date and the machine.
#
#   bench/run_async_bench.sh [--steps 20] [--seeds "1 2 3"] [--out DIR] [--reuse-sft]
#
# --reuse-sft keeps DIR and each seed's SFT checkpoint from an earlier run (the
# warm start is not what is measured), and runs the three modes again.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
steps=20
seeds="1 2 3"
out=$repo/runs/async-bench
reuse_sft=0

while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=${2:?}; shift 2 ;;
    --seeds) seeds=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    --reuse-sft) reuse_sft=1; shift ;;
    -h|--help) sed -n 2,18p "$0"; exit 0 ;;
    *) echo "async bench: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
case "$steps" in ''|*[!0-9]*|0) echo "async bench: --steps must be a positive integer" >&2; exit 2 ;; esac
for seed in $seeds; do
  case "$seed" in ''|*[!0-9]*) echo "async bench: --seeds takes positive integers, got '$seed'" >&2; exit 2 ;; esac
done
case "$out" in ''|/|.) echo "async bench: refusing --out '$out' (it is deleted first)" >&2; exit 2 ;; esac
rlcore=$repo/build/bin/rlcore
[ -x "$rlcore" ] || { echo "async bench: $rlcore is missing: bash scripts/build.sh" >&2; exit 1; }
[ "$reuse_sft" = 1 ] || rm -rf "$out"
mkdir -p "$out"

response_length=96  # the longest worked answer (16 terms) is 95 characters
declare -A extra=(
  [sync]=""
  [one_step_off]="async_training.mode=one_step_off"
  [fully_async]="async_training.mode=fully_async async_training.staleness_threshold=2.0 async_training.trigger_parameter_sync_step=1 async_training.partial_rollout=true"
)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for seed in $seeds; do
  dir=$out/seed-$seed
  if [ "$reuse_sft" = 1 ] && [ -e "$dir/sft/hf/config.json" ]; then
    echo "== seed $seed: reusing $dir/sft"
  else
    echo "== seed $seed: model, data, SFT"
    rm -rf "$dir"
    mkdir -p "$dir"
    "$rlcore" model init --arch qwen2 --size tiny --seed "$seed" --out "$dir/model" > "$dir.prepare.log" 2>&1 &&
    "$rlcore" data make --task repeated-addition --seed "$seed" --out "$dir/data" >> "$dir.prepare.log" 2>&1 &&
    "$rlcore" sft --config "$repo/configs/quickstart_sft.yaml" "trainer.default_local_dir=$dir/sft" "data.seed=$seed" \
      "data.train_files=$dir/data/sft.jsonl" "data.val_files=$dir/data/val.jsonl" "actor_rollout_ref.model.path=$dir/model" \
      "data.max_response_length=$response_length" trainer.stop_at_val_reward=0.5 "trainer.logger=[jsonl]" \
      >> "$dir.prepare.log" 2>&1 || { echo "async bench: seed $seed's preparation failed; see $dir.prepare.log" >&2; exit 1; }
  fi
  rm -rf "${dir:?}"/{sync,one_step_off,fully_async}
  for mode in sync one_step_off fully_async; do
    echo "== seed $seed: $mode"
    # shellcheck disable=SC2086
    /usr/bin/time -f "%e" -o "$dir/$mode.wall" "$rlcore" --config "$repo/configs/quickstart.yaml" \
      "trainer.total_training_steps=$steps" "trainer.test_freq=$steps" trainer.save_freq=-1 \
      trainer.val_before_train=false "trainer.logger=[jsonl]" "trainer.default_local_dir=$dir/$mode" "data.seed=$seed" \
      "data.train_files=$dir/data/train.jsonl" "data.val_files=$dir/data/val.jsonl" \
      "actor_rollout_ref.model.path=$dir/sft/hf" "data.max_response_length=$response_length" ${extra[$mode]} \
      > "$dir/$mode.log" 2>&1 || { echo "async bench: seed $seed's $mode failed; see $dir/$mode.log" >&2; exit 1; }
  done
done

python3 - "$out" "$steps" "$load_before" $seeds <<'EOF_PY'
import datetime, json, os, platform, statistics, sys
out, steps, load_before, seeds = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
modes = ("sync", "one_step_off", "fully_async")
acc_key = "val-core/arithmetic/reward/mean@1"

def read(seed, mode):
    rows = [json.loads(l) for l in open(os.path.join(out, "seed-" + seed, mode, "metrics.jsonl")) if l.strip()]
    train = [m for m in rows if "timing_s/step" in m]
    mean = lambda key: statistics.mean(m.get(key, 0.0) for m in train)
    # configs/quickstart.yaml: 64 prompts x 8 responses a step
    return dict(loop=sum(m["timing_s/step"] for m in train), samples=64 * 8 * len(train),
                wall=float(open(os.path.join(out, "seed-" + seed, mode + ".wall")).read().split()[-1]),
                val=[m[acc_key] for m in rows if acc_key in m][-1], idle=mean("trainer/idle_ratio"),
                stale=mean("async/staleness/mean"), stale_max=max(m.get("async/staleness/max", 0.0) for m in train),
                gen=mean("timing_s/gen"), wait=mean("timing_s/wait_prev_gen"), logp=mean("timing_s/old_log_prob"),
                update=mean("timing_s/update_actor"), step=mean("timing_s/step"),
                length=mean("response_length/mean"), length_max=max(m["response_length/max"] for m in train))

def sft_val(seed):
    rows = [json.loads(l) for l in open(os.path.join(out, "seed-" + seed, "sft", "metrics.jsonl")) if l.strip()]
    return [m[acc_key] for m in rows if acc_key in m][-1]

runs = {(seed, mode): read(seed, mode) for seed in seeds for mode in modes}
def over_seeds(mode, key):
    return [runs[(seed, mode)][key] for seed in seeds]
def mean_sd(values, scale=1.0, fmt="%.1f"):
    if len(values) == 1: return fmt % (scale * values[0])
    return (fmt + " ± " + fmt) % (scale * statistics.mean(values), scale * statistics.stdev(values))

sync_rate = [runs[(s, "sync")]["samples"] / runs[(s, "sync")]["loop"] for s in seeds]
print()
print("| mode | train loop (s) | steps / hour | samples / s | vs sync | trainer idle | staleness mean (max) | val acc after %d steps |" % steps)
print("|---|---|---|---|---|---|---|---|")
for mode in modes:
    rates = [runs[(s, mode)]["samples"] / runs[(s, mode)]["loop"] for s in seeds]
    ratio = [r / b for r, b in zip(rates, sync_rate)]
    print("| %s | %s | %s | %s | %s | %s | %.2f (%d) | %s |" % (
        mode, mean_sd(over_seeds(mode, "loop")), mean_sd([steps * 3600 / l for l in over_seeds(mode, "loop")], fmt="%.0f"),
        mean_sd(rates), mean_sd(ratio, fmt="%.2f") + "x", mean_sd(over_seeds(mode, "idle"), 100, "%.0f") + "%",
        statistics.mean(over_seeds(mode, "stale")), max(over_seeds(mode, "stale_max")),
        mean_sd(over_seeds(mode, "val"), 100) + "%"))
print()
print("Where a step's time goes (seconds, mean over steps and seeds; gen is the rollout's own time, in the")
print("background for the asynchronous modes):")
print()
print("| mode | step | gen | wait for the batch | old log-probs | actor update | response length mean (max) |")
print("|---|---|---|---|---|---|---|")
for mode in modes:
    m = lambda key: statistics.mean(over_seeds(mode, key))
    print("| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f (%d) |" % (
        mode, m("step"), m("gen"), m("wait"), m("logp"), m("update"), m("length"), max(over_seeds(mode, "length_max"))))
print()
print("| seed | SFT val acc | " + " | ".join("%s val acc" % mode for mode in modes) + " |")
print("|---|---|" + "---|" * len(modes))
for seed in seeds:
    print("| %s | %.1f%% | " % (seed, 100 * sft_val(seed)) +
          " | ".join("%.1f%%" % (100 * runs[(seed, mode)]["val"]) for mode in modes) + " |")
print()
print("%s, %s, %d cores; load average before: %s, after: %s" % (
    datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), platform.node(), os.cpu_count(),
    load_before, " ".join(open("/proc/loadavg").read().split()[:3])))
EOF_PY
