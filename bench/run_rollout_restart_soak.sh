#!/usr/bin/env bash
# Rollout-restart soak (docs/bench-soak.md#a-rollout-worker-killed-every-100-steps):
# the quickstart's GRPO in async_training.mode fully_async, one actor worker and
# a rollout pool of two, run twice from the same SFT warm start: undisturbed,
# and with on_rollout_failure: restart while a rollout worker is SIGKILLed every
# --kill-every steps (the two ranks in turn). Prints both runs' curves side by
# side (score, policy loss, entropy per window of steps), their wall time, and
# the replacements and lost requests of the disturbed run.
#
# Both runs: 16 prompts x 8 samples a step (the quickstart's 64 would take an
# hour here), a sync every 2 steps, staleness_threshold 0.5 and partial
# rollouts, so that the pool is busy when a worker dies.
#
#   bench/run_rollout_restart_soak.sh [--steps 500] [--kill-every 100] [--window 50] [--out runs/restart_soak]
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
steps=500
kill_every=100
window=50
out=$repo/runs/restart_soak
build_dir=build

while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=${2:?}; shift 2 ;;
    --kill-every) kill_every=${2:?}; shift 2 ;;
    --window) window=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    --build-dir) build_dir=${2:?}; shift 2 ;;
    -h|--help) sed -n 2,10p "$0"; exit 0 ;;
    *) echo "restart soak: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
for value in "$steps" "$kill_every" "$window"; do
  case "$value" in ''|*[!0-9]*|0) echo "restart soak: counts must be positive integers, got '$value'" >&2; exit 2 ;; esac
done
case "$out" in ''|/|.) echo "restart soak: refusing --out '$out' (it is deleted first)" >&2; exit 2 ;; esac
case "$out" in /*) ;; *) out=$PWD/$out ;; esac
cd "$repo"
[ -x "$build_dir/bin/rlcore" ] || { echo "restart soak: no $build_dir/bin/rlcore; build first (bash scripts/build.sh)" >&2; exit 1; }

source bench/copy_build.sh
copy_build "$build_dir" "$out"
rlcore=$out/build/bin/rlcore

"$rlcore" model init --arch qwen2 --size tiny --seed 1 --out "$out/model" > /dev/null
"$rlcore" data make --task arithmetic --seed 1 --val 300 --out "$out/data" > /dev/null
echo "[restart soak] SFT warm start (configs/quickstart_sft.yaml)"
"$rlcore" sft --config configs/quickstart_sft.yaml trainer.default_local_dir="$out/sft" \
  data.train_files="$out/data/sft.jsonl" data.val_files="$out/data/val.jsonl" \
  actor_rollout_ref.model.path="$out/model" trainer.logger='[jsonl]' > "$out/sft.log" 2>&1

# Kills a rollout worker of the run `controller` each time its metrics pass a multiple of kill_every.
killer() {
  local controller=$1 metrics=$2 next=$kill_every victim=1 step pid
  while kill -0 "$controller" 2> /dev/null; do
    step=0
    [ -s "$metrics" ] && step=$(tail -n 1 "$metrics" | grep -o '"step":[0-9]*' | cut -d: -f2 || echo 0)
    if [ "${step:-0}" -ge "$next" ] && [ "$next" -lt "$steps" ]; then
      # Global ranks: 0 the actor, 1-2 the rollout pool.
      for pid in $(pgrep -P "$controller" || true); do
        if tr '\0' '\n' < "/proc/$pid/environ" 2> /dev/null | grep -qx "RANK=$victim"; then
          echo "$(date +%s) step $step: SIGKILL to rollout worker RANK=$victim (pid $pid)"
          kill -9 "$pid" 2> /dev/null || true
        fi
      done
      victim=$(( victim == 1 ? 2 : 1 ))
      next=$(( next + kill_every ))
    fi
    sleep 0.2
  done
}

run() {
  local name=$1 failure=$2 started status=0
  echo "[restart soak] $name: fully_async GRPO for $steps steps (log: $out/$name.log)"
  started=$(date +%s)
  "$rlcore" --config configs/quickstart.yaml trainer.default_local_dir="$out/$name" \
    data.train_files="$out/data/train.jsonl" data.val_files="$out/data/val.jsonl" \
    actor_rollout_ref.model.path="$out/sft/hf" trainer.total_training_steps="$steps" \
    trainer.test_freq=-1 trainer.save_freq=-1 trainer.val_before_train=false trainer.logger='[jsonl]' \
    runtime.n_workers_per_node=1 rollout.n_gpus_per_node=2 async_training.mode=fully_async \
    data.train_batch_size=16 actor_rollout_ref.actor.ppo_mini_batch_size=16 \
    async_training.trigger_parameter_sync_step=2 async_training.staleness_threshold=0.5 \
    async_training.partial_rollout=true \
       async_training.on_rollout_failure="$failure" > "$out/$name.log" 2>&1 &
  local controller=$!
  if [ "$name" = killed ]; then killer "$controller" "$out/$name/metrics.jsonl" > "$out/kills.txt" & fi
  wait "$controller" || status=$?
  wait
  echo "$(( $(date +%s) - started ))" > "$out/$name.seconds"
  if [ "$status" != 0 ]; then
    echo "[restart soak] $name failed (exit $status); the end of $out/$name.log:" >&2
    tail -n 20 "$out/$name.log" >&2
    exit "$status"
  fi
}

run undisturbed fail
run killed restart

python3 - "$out" "$steps" "$window" <<'EOF'
import json, os, sys

out, steps, window = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

def load(name):
    rows = {}
    with open(os.path.join(out, name, "metrics.jsonl")) as f:
        for line in f:
            record = json.loads(line)
            rows.setdefault(record["step"], {}).update(record)
    return rows

def mean(rows, key, first, last):
    values = [rows[s][key] for s in range(first, last + 1) if s in rows and key in rows[s]]
    return sum(values) / len(values) if values else float("nan")

runs = {name: load(name) for name in ("undisturbed", "killed")}
seconds = {name: int(open(os.path.join(out, name + ".seconds")).read()) for name in runs}
killed = runs["killed"]
kills = open(os.path.join(out, "kills.txt")).read().splitlines()
replaced = sum(r.get("async/rollout_workers_replaced", 0) for r in killed.values())
lost = sum(r.get("async/lost_requests", 0) for r in killed.values())
print("| run | steps finished | wall time | rollout workers killed | replaced | lost requests resubmitted |")
print("|---|---|---|---|---|---|")
for name, rows in runs.items():
    print(f"| {name} | {max(rows)} of {steps} | {seconds[name]} s | {len(kills) if name == 'killed' else 0} | "
          f"{replaced if name == 'killed' else 0:.0f} | {lost if name == 'killed' else 0:.0f} |")
print()
print("| steps | score, undisturbed | score, killed | pg_loss, undisturbed | pg_loss, killed | entropy, undisturbed | entropy, killed |")
print("|---|---|---|---|---|---|---|")
for first in range(1, steps + 1, window):
    last = min(steps, first + window - 1)
    cells = []
    for key in ("critic/score/mean", "actor/pg_loss", "actor/entropy"):
        for name in ("undisturbed", "killed"):
            cells.append(f"{mean(runs[name], key, first, last):.4f}")
    print(f"| {first}-{last} | " + " | ".join(cells) + " |")
print()
print("kills:")
for line in kills:
    print("  " + line)
EOF
