// A step's metrics: data, throughput, weight sync, summed over ranks (see trainer/step_metrics.h).
#include "trainer/step_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <ATen/ATen.h>

#include "rlcore/device.h"
#include "rlcore/elapsed_seconds.h"
#include "rlcore/metric_names.h"
#include "rlcore/train_engine.h"
#include "workers/worker_contract.h"

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

void add_score_extra_metrics(const std::map<std::string, std::vector<double>>& extras, StepMetrics& metrics) {
  for (const auto& [name, column] : extras) {
    double sum = 0;
    int64_t count = 0;
    for (double value : column) {
      if (!std::isnan(value)) sum += value, ++count;
    }
    if (count > 0) metrics["critic/score_extra/" + name] = sum / static_cast<double>(count);
  }
}

void add_weight_sync_metrics(const runtime::CallOutput& synced, StepMetrics& metrics) {
  double to_rollout = 0, to_train = 0, bytes_moved = 0;
  std::map<std::string, double> memory;  // the largest of each over the workers
  double rss_min = std::numeric_limits<double>::infinity(), rss_max = 0, rss_sum = 0;
  for (const auto& reply : synced.replies) {
    const workers::SyncWeightsReply sync = workers::reply_of(workers::actor_methods::kSyncWeights, reply);
    const auto rss = static_cast<double>(sync.rss_bytes);
    rss_min = std::min(rss_min, rss);
    rss_max = std::max(rss_max, rss);
    rss_sum += rss;
    metrics["memory/worker_rss_bytes/rank_" + std::to_string(reply.rank)] = rss;  // a leak in one rank
    to_rollout = std::max(to_rollout, sync.swaps.to_rollout_s);
    to_train = std::max(to_train, sync.swaps.to_train_s);
    bytes_moved = std::max(bytes_moved, static_cast<double>(sync.swaps.bytes_moved));
    const std::pair<const char*, int64_t> peaks[] = {{"planned_peak_bytes", sync.swaps.planned_peak_bytes},
                                                     {"measured_peak_bytes", sync.swaps.measured_peak_bytes},
                                                     {"allocated_bytes", sync.allocated_bytes},
                                                     {"reserved_bytes", sync.reserved_bytes}};
    for (const auto& [key, bytes] : peaks) memory[key] = std::max(memory[key], static_cast<double>(bytes));
    for (const auto& [phase, seconds] : sync.swaps.phases) {
      double& slot = metrics["timing_s/reshard_" + phase];
      slot = std::max(slot, seconds);
    }
  }
  metrics["timing_s/reshard_to_rollout"] = to_rollout;
  metrics["timing_s/reshard_to_train"] = to_train;
  metrics["perf/swap_GBps"] = to_rollout > 0 ? bytes_moved / to_rollout / 1e9 : 0.0;
  metrics["perf/swap_bytes"] = bytes_moved;
  metrics["memory/peak_swap_bytes"] = memory["measured_peak_bytes"];
  metrics["memory/planned_peak_swap_bytes"] = memory["planned_peak_bytes"];
  metrics["memory/allocated_bytes"] = memory["allocated_bytes"];
  metrics["memory/reserved_bytes"] = memory["reserved_bytes"];
  metrics["memory/worker_rss_bytes/max"] = rss_max;
  metrics["memory/worker_rss_bytes/min"] = rss_min;
  metrics["memory/worker_rss_bytes/mean"] = rss_sum / static_cast<double>(synced.replies.size());
}

void add_end_of_step_metrics(const Batch& batch, std::chrono::steady_clock::time_point step_start,
                             int64_t actor_workers, StepMetrics& metrics) {
  metrics["memory/controller_rss_bytes"] = static_cast<double>(process_rss_bytes());
  metrics["perf/cpu_memory_used_gb"] = static_cast<double>(host_memory_used_bytes()) / (1 << 30);
  const auto data = data_metrics(batch);
  metrics.insert(data.begin(), data.end());
  const auto variance = variance_proxy_metrics(
      batch, metrics.count(metric_names::kActorGradNorm) ? &metrics.at(metric_names::kActorGradNorm) : nullptr);
  metrics.insert(variance.begin(), variance.end());
  metrics[metric_names::kTimingStep] = seconds_since(step_start);
  const auto perf = throughput_metrics(batch, metrics[metric_names::kTimingStep], actor_workers);
  metrics.insert(perf.begin(), perf.end());
}

void add_trainer_idle_ratio(StepMetrics& metrics) {
  const double step_seconds = metrics[metric_names::kTimingStep];
  metrics[metric_names::kTrainerIdleRatio] =
      step_seconds > 0 ? metrics[metric_names::kTimingWaitPrevGen] / step_seconds : 0.0;
}

}  // namespace rlcore::trainer
