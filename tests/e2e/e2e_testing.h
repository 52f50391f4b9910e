// Helpers of the end-to-end trainer tests: a scratch run directory with a tiny
// model and dataset, running the rlcore binary, and reading metrics.jsonl.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <catch2/catch.hpp>

namespace e2e {

struct RunResult {
  int status = -1;
  std::string output;  // stdout + stderr
};

// Runs build/bin/rlcore with `args` (the e2e plugin directory is added).
// `shell_prefix` goes before the binary in the shell command: environment
// assignments (`RLCORE_FAULT=...`) or a wrapper whose script runs "$0" "$@".
RunResult run_rlcore(const std::vector<std::string>& args, const std::string& shell_prefix = "");

// `arg` quoted for the shell.
std::string shell_quote(const std::string& arg);

// A fresh directory under the system temp dir holding model/ (a tiny qwen2)
// and prompts.jsonl (`prompts` plain-text prompts, data_source "letters").
std::string make_workspace(const std::string& name, int prompts = 64);

// A config for the workspace (2 workers, lowercase_fraction reward, the
// workspace's model and prompts) completed by `yaml`: the algorithm and the
// actor_rollout_ref / critic sections (trainer, data, reward and runtime are set here).
std::string write_config(const std::string& workspace, const std::string& name, const std::string& yaml);

// GRPO settings under which the lowercase reward is learned within 12 steps
// (the CPU e2e test and the GPU one hold the same bar).
inline constexpr const char* kLearningGrpo = R"(
actor_rollout_ref:
  actor:
    ppo_mini_batch_size: 8
    ppo_micro_batch_size_per_gpu: 16
    optim: {lr: 0.003, weight_decay: 0.0}
  rollout: {n: 8, temperature: 1.0}
algorithm: {adv_estimator: grpo}
)";

// The cheapest GRPO step, for tests of what happens around it.
inline constexpr const char* kQuickGrpo = R"(
actor_rollout_ref:
  actor: {ppo_mini_batch_size: 8}
  rollout: {n: 2}
algorithm: {adv_estimator: grpo}
)";

// metrics.jsonl of a run directory: step -> metric -> value (later lines win).
std::map<int64_t, std::map<std::string, double>> read_metrics(const std::string& run_dir);

double mean_over_steps(const std::map<int64_t, std::map<std::string, double>>& metrics, const std::string& key,
                       int64_t first, int64_t last);

}  // namespace e2e
