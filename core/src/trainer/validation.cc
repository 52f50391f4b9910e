// Validation by generation (see trainer/validation.h).
#include "trainer/validation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <utility>

#include "rlcore/error.h"
#include "trainer/generation_dump.h"
#include "trainer/rewards.h"
#include "workers/worker_contract.h"

namespace rlcore::trainer {
namespace {

const char* const kValCorePrefix = "val-core/";

std::string at_n_suffix(int64_t n) { return "/mean@" + std::to_string(n); }

}  // namespace

Validator::Validator(const config::RunConfig& config, const data::Dataset& val_set, const Tokenizer& tokenizer,
                     std::function<Rewards(const Rollout&)> score, GenerationLimits limits)
    : config_(config), val_set_(val_set), tokenizer_(tokenizer), score_(std::move(score)), limits_(std::move(limits)) {
  const std::string suffix = at_n_suffix(config.actor_rollout_ref.rollout.val_kwargs.n);
  for (int64_t i = 0; i < val_set.size(); ++i) {
    const std::string name = kValCorePrefix + val_set.at(i).data_source + "/reward" + suffix;
    if (std::find(core_names_.begin(), core_names_.end(), name) == core_names_.end()) core_names_.push_back(name);
  }
}

StepMetrics Validator::run(const RolloutWorkers& workers, int64_t version) const {
  if (!enabled()) return {};
  const auto& val = config_.actor_rollout_ref.rollout.val_kwargs;
  workers::Sampling sampling;
  sampling.validation = true;
  sampling.greedy = !val.do_sample;
  sampling.temperature = val.temperature > 0 ? val.temperature : 1.0;
  sampling.top_k = val.top_k;
  sampling.top_p = val.top_p;
  sampling.seed = config_.data.seed * 7919 + version;
  const int64_t chunk = config_.data.val_batch_size > 0 ? config_.data.val_batch_size : val_set_.size();
  const std::string suffix = at_n_suffix(val.n);
  std::map<std::string, std::pair<double, int64_t>> sums;  // metric -> (sum, count)
  std::optional<GenerationDump> dump;
  if (!config_.trainer.validation_data_dir.empty())
    dump.emplace(config_.trainer.validation_data_dir, version, "trainer.validation_data_dir");
  for (int64_t start = 0; start < val_set_.size(); start += chunk) {
    std::vector<const data::Example*> prompts;
    for (int64_t i = start; i < std::min(val_set_.size(), start + chunk); ++i) prompts.push_back(&val_set_.at(i));
    const Rollout rollout = generate_rollout(workers, prompts, val.n, sampling, limits_, version);
    const Rewards scored = score_(rollout);
    if (dump) dump->add(rollout, scored, tokenizer_);
    const auto rows = static_cast<int64_t>(rollout.examples.size());
    for (const auto& [name, value] : rollout.agent_metrics) {  // the agent loop's means, weighted by rows
      if (name.size() >= 4 &&
          (name.compare(name.size() - 4, 4, "/max") == 0 || name.compare(name.size() - 4, 4, "/min") == 0))
        continue;
      auto& agent = sums["val-aux/" + name];
      agent.first += value * static_cast<double>(rows);
      agent.second += rows;
    }
    for (size_t i = 0; i < rollout.examples.size(); ++i) {
      const std::string& source = rollout.examples[i]->data_source;
      auto& reward = sums[kValCorePrefix + source + "/reward" + suffix];
      reward.first += scored.scores[i];
      reward.second += 1;
      for (const auto& [name, column] : scored.extras) {
        if (std::isnan(column[i])) continue;
        auto& extra = sums["val-aux/" + source + "/" + name + suffix];
        extra.first += column[i];
        extra.second += 1;
      }
    }
  }
  if (dump) dump->close();
  StepMetrics metrics;
  for (const auto& [name, sum] : sums) metrics[name] = sum.first / static_cast<double>(sum.second);
  return metrics;
}

double mean_val_core_reward(const StepMetrics& metrics) {
  double sum = 0;
  int64_t count = 0;
  for (const auto& [name, value] : metrics) {
    if (name.rfind(kValCorePrefix, 0) == 0) sum += value, ++count;
  }
  return count > 0 ? sum / static_cast<double>(count) : std::numeric_limits<double>::quiet_NaN();
}

void check_stop_rule(const config::RunConfig& config) {
  if (config.trainer.val_only && config.data.val_files.empty()) {
    throw ConfigError("trainer.val_only needs data.val_files: it only validates");
  }
  if (config.trainer.stop_at_val_reward <= 0) return;
  const std::string rule = "trainer.stop_at_val_reward (" + std::to_string(config.trainer.stop_at_val_reward) + ")";
  if (config.data.val_files.empty()) throw ConfigError(rule + " needs data.val_files: it stops on validation");
  if (config.trainer.test_freq <= 0) {
    throw ConfigError(rule + " needs trainer.test_freq > 0 (it is " + std::to_string(config.trainer.test_freq) +
                      "): it is checked after each validation");
  }
}

bool reached_stop_reward(const config::TrainerConfig& trainer, const StepMetrics& validation) {
  if (trainer.stop_at_val_reward <= 0) return false;
  const double reward = mean_val_core_reward(validation);
  return !std::isnan(reward) && reward >= trainer.stop_at_val_reward;
}

}  // namespace rlcore::trainer
