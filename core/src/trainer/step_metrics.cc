// A step's data and throughput metrics (see trainer/step_metrics.h).
#include "trainer/step_metrics.h"

#include <algorithm>

#include <ATen/ATen.h>

#include "rlcore/metric_names.h"
#include "rlcore/train_engine.h"

namespace rlcore::trainer {
namespace {

void add_stats(StepMetrics& metrics, const std::string& prefix, const at::Tensor& values) {
  if (values.numel() == 0) return;
  const at::Tensor v = values.to(at::kDouble);
  metrics[prefix + "/mean"] = v.mean().item<double>();
  metrics[prefix + "/max"] = v.max().item<double>();
  metrics[prefix + "/min"] = v.min().item<double>();
}

}  // namespace

StepMetrics variance_proxy_metrics(const Batch& batch, const double* grad_norm) {
  StepMetrics metrics;
  for (const char* key : {columns::kSumPiSquared, columns::kOldLogProbs, columns::kAdvantages}) {
    if (!batch.contains(key)) return metrics;
  }
  const at::Tensor mask = batch.tensor(columns::kResponseMask).to(at::kFloat);
  auto masked_sum = [&mask](const at::Tensor& values) { return at::where(mask.gt(0), values, 0.0).mul(mask).sum(-1); };
  auto masked_mean = [&](const at::Tensor& values) { return masked_sum(values) / (mask.sum(-1) + 1e-8); };
  at::Tensor w = 1 - 2 * batch.tensor(columns::kOldLogProbs).exp() + batch.tensor(columns::kSumPiSquared);
  const at::Tensor advantages = masked_mean(batch.tensor(columns::kAdvantages));
  at::Tensor total_power;
  if (batch.contains(columns::kRolloutIsWeights)) {
    const at::Tensor weights = batch.tensor(columns::kRolloutIsWeights);
    w = w * weights.square();
    const at::Tensor w_original = masked_sum(w / weights.square().clamp_min(1e-10)).clamp_min(0.0);
    total_power = (masked_mean(weights).square() * advantages.square() * w_original).mean();
  } else {
    total_power = (advantages.square() * masked_sum(w).clamp_min(0.0)).mean();
  }
  const double signal = grad_norm != nullptr ? *grad_norm * *grad_norm : 0.0;
  const int64_t rows = advantages.size(0);
  double noise = 0.0;
  if (grad_norm != nullptr && rows > 1) {
    noise = std::max(0.0, (total_power.item<double>() - signal) / static_cast<double>(rows - 1));
  }
  metrics["variance_proxy/proxy1_signal_strength"] = signal;
  metrics["variance_proxy/proxy2_total_power"] = total_power.item<double>();
  metrics["variance_proxy/proxy3_pure_noise"] = noise;
  metrics["variance_proxy/expected_a_squared"] = advantages.square().mean().item<double>();
  metrics["variance_proxy/expected_w"] = masked_sum(w).mean().item<double>();
  return metrics;
}

StepMetrics data_metrics(const Batch& batch) {
  StepMetrics metrics;
  const at::Tensor mask = batch.tensor(columns::kResponseMask).to(at::kBool);
  add_stats(metrics, "critic/score", batch.tensor(columns::kTokenLevelScores).sum(-1));
  add_stats(metrics, "critic/rewards", batch.tensor(columns::kTokenLevelRewards).sum(-1));
  add_stats(metrics, "critic/advantages", batch.tensor(columns::kAdvantages).masked_select(mask));
  add_stats(metrics, "critic/returns", batch.tensor(columns::kReturns).masked_select(mask));
  if (batch.contains(columns::kValues)) {
    const at::Tensor values = batch.tensor(columns::kValues).masked_select(mask).to(at::kDouble);
    const at::Tensor returns = batch.tensor(columns::kReturns).masked_select(mask).to(at::kDouble);
    add_stats(metrics, "critic/values", values);
    const double return_var = returns.var(/*unbiased=*/false).item<double>();
    metrics["critic/vf_explained_var"] = 1.0 - (returns - values).var(false).item<double>() / (return_var + 1e-5);
  }
  const int64_t response_width = mask.size(1);
  const at::Tensor response_length = mask.sum(-1).to(at::kDouble);
  add_stats(metrics, "response_length", response_length);
  metrics["response_length/clip_ratio"] = response_length.eq(response_width).to(at::kDouble).mean().item<double>();
  // The prompt's part of attention_mask: a multi-turn response's tool tokens are attended, not the model's.
  const at::Tensor attention = batch.tensor(columns::kAttentionMask).to(at::kDouble);
  add_stats(metrics, "prompt_length", attention.narrow(1, 0, attention.size(1) - response_width).sum(-1));
  return metrics;
}

StepMetrics throughput_metrics(const Batch& batch, double step_seconds, int64_t workers) {
  const double tokens = batch.tensor(columns::kAttentionMask).to(at::kDouble).sum().item<double>();
  return {{"perf/total_num_tokens", tokens},
          {"perf/time_per_step", step_seconds},
          {metric_names::kPerfThroughput, tokens / (step_seconds * static_cast<double>(workers))}};
}

void add_rollout_metrics(StepMetrics& metrics, const std::vector<GenerationStats>& per_rank, double response_tokens) {
  double& tokens = metrics["rollout/response_tokens"];
  tokens += response_tokens;
  const double generating = metrics[metric_names::kTimingGen];
  metrics[metric_names::kPerfRolloutTokensPerS] = generating > 0 ? tokens / generating : 0.0;
  if (per_rank.empty()) return;
  const auto ranks = static_cast<double>(per_rank.size());
  double steps = 0, rows = 0, prefills = 0, joins = 0, running_max = 0, waiting_max = 0;
  for (const GenerationStats& s : per_rank) {
    steps += static_cast<double>(s.decode_steps);
    rows += static_cast<double>(s.running_rows);
    prefills += static_cast<double>(s.prefill_rows);
    joins += static_cast<double>(s.joins);
    running_max = std::max(running_max, static_cast<double>(s.max_running));
    waiting_max = std::max(waiting_max, static_cast<double>(s.max_waiting));
  }
  // Earlier rollouts of the step are in the metrics already: the mean batch weighs each by its steps.
  double& step_count = metrics["rollout/decode_steps"];
  double& running_mean = metrics["rollout/running_mean"];
  const double earlier_rows = running_mean * step_count;
  step_count += steps / ranks;
  running_mean = step_count > 0 ? (earlier_rows + rows / ranks) / step_count : 0.0;
  metrics["rollout/prefill_rows"] += prefills / ranks;
  metrics["rollout/joins"] += joins / ranks;
  metrics["rollout/running_max"] = std::max(metrics["rollout/running_max"], running_max);
  metrics["rollout/waiting_max"] = std::max(metrics["rollout/waiting_max"], waiting_max);
}

}  // namespace rlcore::trainer
