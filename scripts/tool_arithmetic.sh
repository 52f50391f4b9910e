#!/usr/bin/env bash
# Tool use (docs/agent-loop.md#the-calculator-task): a tiny Qwen2 model learns to call the calculator
# for 3-digit products: random init -> SFT on a few tool-using demonstrations -> multi-turn GRPO.
#
#   bash scripts/tool_arithmetic.sh [--seed N] [--out DIR]     (defaults: --seed 1 --out runs/tool)
#
# The seed changes the model init, the dataset, the data order and the sampling. Re-running starts
# fresh: DIR is deleted first. Prints validation accuracy and tool-call rate before and after GRPO.
set -euo pipefail
cd "$(dirname "$0")/.."

seed=1
out=runs/tool
source scripts/seed_out_args.sh
parse_seed_out_args tool_arithmetic "$@"

bash scripts/build.sh rlcore rlcore-train-fsdp rlcore-infer-native rlcore-reward rlcore-hybrid-engine rlcore-tools
rlcore=${RLCORE_BUILD_DIR:-build}/bin/rlcore

rm -rf "$out"
mkdir -p "$out"
started=$(date +%s)
run() { echo; echo "== tool_arithmetic: $*"; "$@"; }

run "$rlcore" model init --arch qwen2 --size tiny --seed "$seed" --out "$out/model"
run "$rlcore" data make --task arithmetic-tool --seed "$seed" --val 200 --out "$out/data"
run "$rlcore" sft --config configs/grpo_tool_arithmetic_sft.yaml \
  trainer.default_local_dir="$out/sft" data.seed="$seed" \
  data.train_files="$out/data/sft.jsonl" data.val_files="$out/data/val.jsonl" actor_rollout_ref.model.path="$out/model"
run "$rlcore" --config configs/grpo_tool_arithmetic.yaml \
  trainer.default_local_dir="$out/grpo" data.seed="$seed" \
  data.train_files="$out/data/train.jsonl" data.val_files="$out/data/val.jsonl" \
  actor_rollout_ref.model.path="$out/sft/hf"
run "$rlcore" report "$out/grpo"
wall=$(( $(date +%s) - started ))

python3 - "$out/grpo/metrics.jsonl" "$seed" "$wall" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
acc, rate = "val-core/arithmetic/reward/mean@1", "val-aux/agent/tool_call_rate"
val = [r for r in rows if acc in r]
train = [r for r in rows if "agent/tool_call_rate" in r]
first, last = val[0], val[-1]
print(f"\ntool_arithmetic (seed {sys.argv[2]}) finished in {int(sys.argv[3]) // 60}m{int(sys.argv[3]) % 60}s")
print(f"  val accuracy:        {100 * first[acc]:.1f}% (SFT, step {first['step']}) -> {100 * last[acc]:.1f}% (step {last['step']})")
print(f"  val tool-call rate:  {100 * first[rate]:.1f}% -> {100 * last[rate]:.1f}%")
print(f"  train tool-call rate: {100 * train[0]['agent/tool_call_rate']:.1f}% (step {train[0]['step']}) -> "
      f"{100 * train[-1]['agent/tool_call_rate']:.1f}% (step {train[-1]['step']})")
PY
echo "  report:              $out/grpo/report.html"
