#!/usr/bin/env bash
# A mixture of experts with expert parallelism (docs/moe.md#the-arithmetic-example): a tiny Qwen3-MoE
# on the quickstart's 2-digit addition: random init -> SFT warm start -> GRPO with the megatron actor
# at expert_model_parallel_size 2 over 2 workers and routing replay R3 (configs/grpo_moe_ep2.yaml).
#
#   bash scripts/moe_arithmetic.sh [--seed N] [--out DIR]     (defaults: --seed 1 --out runs/moe)
#
# The seed changes the model init, the dataset, the data order and the sampling. Re-running starts
# fresh: DIR is deleted first. Prints validation accuracy before and after GRPO.
set -euo pipefail
cd "$(dirname "$0")/.."

seed=1
out=runs/moe
source scripts/seed_out_args.sh
parse_seed_out_args moe_arithmetic "$@"

bash scripts/build.sh rlcore rlcore-train-fsdp rlcore-train-megatron rlcore-infer-native rlcore-reward \
  rlcore-hybrid-engine
rlcore=${RLCORE_BUILD_DIR:-build}/bin/rlcore

rm -rf "$out"
mkdir -p "$out"
started=$(date +%s)
run() { echo; echo "== moe_arithmetic: $*"; "$@"; }

run "$rlcore" model init --arch qwen3_moe --size tiny --seed "$seed" --out "$out/model"
run "$rlcore" data make --task arithmetic --seed "$seed" --val 300 --out "$out/data"
run "$rlcore" sft --config configs/quickstart_sft.yaml \
  trainer.default_local_dir="$out/sft" data.seed="$seed" \
  data.train_files="$out/data/sft.jsonl" data.val_files="$out/data/val.jsonl" actor_rollout_ref.model.path="$out/model"
run "$rlcore" --config configs/grpo_moe_ep2.yaml \
  trainer.default_local_dir="$out/grpo" data.seed="$seed" \
  data.train_files="$out/data/train.jsonl" data.val_files="$out/data/val.jsonl" \
  actor_rollout_ref.model.path="$out/sft/hf"
run "$rlcore" report "$out/grpo"
wall=$(( $(date +%s) - started ))

python3 - "$out/grpo/metrics.jsonl" "$seed" "$wall" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
key = "val-core/arithmetic/reward/mean@1"
vals = [(r["step"], r[key]) for r in rows if key in r]
train = [r for r in rows if "training/rollout_routing_mismatch" in r]
mismatch = max(r["training/rollout_routing_mismatch"] for r in train) if train else float("nan")
print(f"\nmoe_arithmetic (seed {sys.argv[2]}) finished in {int(sys.argv[3]) // 60}m{int(sys.argv[3]) % 60}s")
print(f"  val accuracy, SFT:    {100 * vals[0][1]:.1f}%   (GRPO step {vals[0][0]})")
print(f"  val accuracy, GRPO:   {100 * vals[-1][1]:.1f}%   (step {vals[-1][0]})")
print(f"  routing mismatch:     {100 * mismatch:.2f}% at most (R3: the trainer routed as the rollout did)")
PY
