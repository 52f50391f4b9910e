#!/usr/bin/env bash
# The quickstart (README's main command): installs and builds rlcore, then trains a tiny Qwen2 model
# on 2-digit addition: random init -> SFT warm start -> GRPO, and writes the HTML report.
#
#   bash scripts/quickstart.sh [--seed N] [--out DIR]     (defaults: --seed 1 --out runs/quickstart)
#
# The seed changes the model init, the dataset, the data order and the sampling. Re-running starts
# fresh: DIR is deleted first. docs/quickstart.md explains each step and the expected output.
set -euo pipefail
cd "$(dirname "$0")/.."

seed=1
out=runs/quickstart
source scripts/seed_out_args.sh
parse_seed_out_args quickstart "$@"

bash scripts/build.sh rlcore rlcore-train-fsdp rlcore-infer-native rlcore-reward rlcore-hybrid-engine
rlcore=${RLCORE_BUILD_DIR:-build}/bin/rlcore

rm -rf "$out"
mkdir -p "$out"
log="$out/timings.txt"
: > "$log"
started=$(date +%s)
phase_start=$started

# Prints a banner, runs the command, records its wall time as "<name> <seconds>" in $log.
phase() {
  local name=$1; shift
  echo; echo "== quickstart [$name] $*"
  phase_start=$(date +%s)
  "$@"
  echo "$name $(( $(date +%s) - phase_start ))" >> "$log"
}

phase model "$rlcore" model init --arch qwen2 --size tiny --seed "$seed" --out "$out/model"
phase data "$rlcore" data make --task arithmetic --seed "$seed" --val 300 --out "$out/data"
phase sft "$rlcore" sft --config configs/quickstart_sft.yaml \
  trainer.default_local_dir="$out/sft" data.seed="$seed" \
  data.train_files="$out/data/sft.jsonl" data.val_files="$out/data/val.jsonl" actor_rollout_ref.model.path="$out/model"
phase grpo "$rlcore" --config configs/quickstart.yaml \
  trainer.default_local_dir="$out/grpo" data.seed="$seed" \
  data.train_files="$out/data/train.jsonl" data.val_files="$out/data/val.jsonl" \
  actor_rollout_ref.model.path="$out/sft/hf"
phase report "$rlcore" report "$out/grpo"
wall=$(( $(date +%s) - started ))
echo "total $wall" >> "$log"

# Validation accuracy (greedy, the val set) at the first and last validated steps of GRPO:
# step 0 is the SFT checkpoint (val_before_train).
read -r sft_acc grpo_acc last_step < <(python3 - "$out/grpo/metrics.jsonl" <<'EOF'
import json, sys
key = "val-core/arithmetic/reward/mean@1"
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
vals = [(r["step"], r[key]) for r in rows if key in r]
print(f"{100 * vals[0][1]:.1f} {100 * vals[-1][1]:.1f} {vals[-1][0]}")
EOF
)
checkpoint=$(ls -d "$out"/grpo/checkpoints/global_step_* 2>/dev/null | sort -t_ -k3 -n | tail -1 || true)

echo
echo "quickstart (seed $seed) finished in $((wall / 60))m$((wall % 60))s"
echo "  phases (s):           $(tr '\n' ' ' < "$log")"
echo "  val accuracy, SFT:    ${sft_acc}%   (GRPO step 0)"
echo "  val accuracy, GRPO:   ${grpo_acc}%   (step $last_step)"
echo "  report:               $out/grpo/report.html"
echo "  RL checkpoint:        ${checkpoint:-none saved}"
echo "  SFT model (HF):       $out/sft/hf"
