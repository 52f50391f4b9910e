#!/usr/bin/env bash
# The quickstart: sets up, builds and runs the main job on the embedded default.
#
# The RL trainer has not landed yet, so for now this runs the smallest real
# thing rlcore has end to end: it lists the plugins rlcore finds on its own and
# scores a file of model responses with the reward plugin's graders (picked per
# sample by data_source, as the trainer will do), then prints the config a run
# would use.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh rlcore rlcore-reward
rlcore=${RLCORE_BUILD_DIR:-build}/bin/rlcore

echo; echo "== rlcore plugins"
"$rlcore" plugins
echo; echo "== rlcore grade examples/data/graded_responses.jsonl (grader chosen by data_source)"
"$rlcore" grade examples/data/graded_responses.jsonl
echo; echo "== rlcore config --config configs/quickstart.yaml"
"$rlcore" config --config configs/quickstart.yaml
echo
echo "quickstart: the RL trainer (GRPO on the built-in arithmetic task) is not in this build yet;"
echo "            this run exercised plugin loading, config resolution and the reward graders."
