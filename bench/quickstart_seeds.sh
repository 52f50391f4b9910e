#!/usr/bin/env bash
# Runs the quickstart for several seeds (default 1 2 3 4 5) and prints a markdown table:
# seed | SFT steps | SFT acc | GRPO acc | gain | wall time | phases, the date, the machine's
# load, and the smallest gain against the quickstart's promise (>= 20 points on every seed).
#
#   bash bench/quickstart_seeds.sh [SEED ...]      (runs go to runs/quickstart-seed-N)
#
# Each run's full console output is kept in runs/quickstart-seed-N.log.
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=("$@")
[ ${#seeds[@]} -gt 0 ] || seeds=(1 2 3 4 5)

rows=()
gains=()
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for seed in "${seeds[@]}"; do
  out=runs/quickstart-seed-$seed
  echo "== seed $seed -> $out (log: $out.log)"
  mkdir -p runs
  bash scripts/quickstart.sh --seed "$seed" --out "$out" > "$out.log" 2>&1 \
    || { echo "seed $seed failed; the end of $out.log:" >&2; tail -20 "$out.log" >&2; exit 1; }
  sft_steps=$(sed -n 's/^rlcore sft: \([0-9]*\) steps.*/\1/p' "$out.log")
  sft=$(sed -n 's/^  val accuracy, SFT: *\([0-9.]*\)%.*/\1/p' "$out.log")
  grpo=$(sed -n 's/^  val accuracy, GRPO: *\([0-9.]*\)%.*/\1/p' "$out.log")
  wall=$(sed -n 's/^quickstart (seed [0-9]*) finished in \(.*\)$/\1/p' "$out.log")
  phases=$(sed -n 's/^  phases (s): *//p' "$out.log")
  gain=$(python3 -c "print(f'{$grpo - $sft:+.1f}')")
  rows+=("| $seed | $sft_steps | $sft% | $grpo% | $gain | $wall | $phases |")
  gains+=("$gain")
  echo "   SFT $sft% -> GRPO $grpo% ($gain points) in $wall"
done

echo
echo "quickstart seeds, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average before: $load_before," \
  "after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| seed | SFT steps | SFT acc | GRPO acc | gain (points) | wall time | phases (s) |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
python3 - "${gains[@]}" <<'PY'
import sys
gains = [float(g) for g in sys.argv[1:]]
worst = min(gains)
verdict = "every seed clears" if worst >= 20 else "BELOW"
print(f"\nsmallest gain {worst:+.1f} points over {len(gains)} seed(s): {verdict} the 20-point promise")
PY
