#!/usr/bin/env bash
# Routing replay's effect (docs/moe.md#measured): a tiny Qwen3-MoE (`rlcore model init --arch
# qwen3_moe`) warm-started by SFT on the quickstart's arithmetic task, then the quickstart's GRPO
# from that checkpoint with the rollout and the actor in bf16, the rollout recording its routing
# (rollout.enable_rollout_routing_replay), once per actor.router_replay.mode: disabled, R2, R3.
# Prints a markdown table per mode, the mean over the steps of: the share of (token, sparse layer)
# pairs the trainer's old-log-prob pass routed to other experts than the rollout
# (training/rollout_routing_mismatch), the rollout-vs-trainer probability difference
# (training/rollout_probs_diff_max, _mean), the seconds per step and its ratio to disabled, and the
# validation accuracy at the end; then the date and the machine.
#
#   bench/run_routing_replay_bench.sh [--steps 20] [--seed 1] [--actor-dtype bfloat16] [--out DIR]
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
steps=20
seed=1
actor_dtype=bfloat16
out=$repo/runs/routing-replay-bench

while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=${2:?}; shift 2 ;;
    --seed) seed=${2:?}; shift 2 ;;
    --actor-dtype) actor_dtype=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    -h|--help) sed -n 2,12p "$0"; exit 0 ;;
    *) echo "routing replay bench: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
case "$steps" in ''|*[!0-9]*|0) echo "routing replay bench: --steps must be a positive integer" >&2; exit 2 ;; esac
case "$seed" in ''|*[!0-9]*) echo "routing replay bench: --seed must be a non-negative integer" >&2; exit 2 ;; esac
case "$out" in ''|/|.) echo "routing replay bench: refusing --out '$out' (it is deleted first)" >&2; exit 2 ;; esac
rlcore=${RLCORE_BUILD_DIR:-$repo/build}/bin/rlcore
[ -x "$rlcore" ] || { echo "routing replay bench: $rlcore is missing: bash scripts/build.sh" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out"

echo "== model, data, SFT (seed $seed)"
{
  "$rlcore" model init --arch qwen3_moe --size tiny --seed "$seed" --out "$out/model" &&
  "$rlcore" data make --task arithmetic --seed "$seed" --val 300 --out "$out/data" &&
  "$rlcore" sft --config "$repo/configs/quickstart_sft.yaml" "trainer.default_local_dir=$out/sft" "data.seed=$seed" \
    "data.train_files=$out/data/sft.jsonl" "data.val_files=$out/data/val.jsonl" "actor_rollout_ref.model.path=$out/model" \
    "trainer.logger=[jsonl]"
} > "$out/prepare.log" 2>&1 || { echo "routing replay bench: preparation failed; see $out/prepare.log" >&2; exit 1; }

for mode in disabled R2 R3; do
  echo "== GRPO, router_replay.mode $mode"
  /usr/bin/time -f "%e" -o "$out/$mode.wall" "$rlcore" --config "$repo/configs/quickstart.yaml" \
    "trainer.total_training_steps=$steps" "trainer.test_freq=$steps" trainer.save_freq=-1 \
    trainer.val_before_train=false "trainer.logger=[jsonl]" "trainer.default_local_dir=$out/$mode" "data.seed=$seed" \
    "data.train_files=$out/data/train.jsonl" "data.val_files=$out/data/val.jsonl" \
    "actor_rollout_ref.model.path=$out/sft/hf" actor_rollout_ref.rollout.dtype=bfloat16 \
    "actor_rollout_ref.actor.fsdp_config.dtype=$actor_dtype" \
    actor_rollout_ref.rollout.enable_rollout_routing_replay=true "actor_rollout_ref.actor.router_replay.mode=$mode" \
    > "$out/$mode.log" 2>&1 || { echo "routing replay bench: $mode failed; see $out/$mode.log" >&2; exit 1; }
done

python3 - "$out" "$steps" "$actor_dtype" <<'EOF_PY'
import json, os, platform, subprocess, sys, datetime
out, steps, actor_dtype = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def rows(mode):
    return [json.loads(l) for l in open(os.path.join(out, mode, "metrics.jsonl")) if l.strip()]
def mean(values):
    return sum(values) / len(values) if values else float("nan")
val_key = "val-core/arithmetic/reward/mean@1"
table = {}
for mode in ("disabled", "R2", "R3"):
    r = rows(mode)
    train = [x for x in r if "training/rollout_probs_diff_max" in x]
    val = [x[val_key] for x in r if val_key in x]
    table[mode] = dict(
        mismatch=mean([x["training/rollout_routing_mismatch"] for x in train]),
        diff_max=mean([x["training/rollout_probs_diff_max"] for x in train]),
        diff_mean=mean([x["training/rollout_probs_diff_mean"] for x in train]),
        step_s=mean([x["timing_s/step"] for x in train]),
        val=val[-1] if val else float("nan"))
print(f"\nRouting replay, tiny Qwen3-MoE after SFT, {steps} GRPO steps, rollout bf16, actor {actor_dtype} "
      f"(means over the steps)\n")
print("| router_replay.mode | routing mismatch | rollout_probs_diff_max | rollout_probs_diff_mean | s/step | vs disabled | val acc |")
print("|---|---|---|---|---|---|---|")
base = table["disabled"]["step_s"]
for mode, t in table.items():
    print(f"| {mode} | {100 * t['mismatch']:.2f}% | {t['diff_max']:.4f} | {t['diff_mean']:.6f} | {t['step_s']:.2f} | "
          f"{t['step_s'] / base:.2f}x | {100 * t['val']:.1f}% |")
cpu = "unknown"
try:
    cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
except (OSError, StopIteration):
    pass
print(f"\n{datetime.date.today()}, {cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}")
EOF_PY
