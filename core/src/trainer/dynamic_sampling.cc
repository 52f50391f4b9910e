// DAPO's dynamic sampling (see trainer/dynamic_sampling.h).
#include "trainer/dynamic_sampling.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <ATen/ATen.h>

#include "rlcore/error.h"
#include "rlcore/columns.h"

namespace rlcore::trainer {
namespace {

// Group ids in order of first appearance, and each group's rows.
std::vector<std::vector<int64_t>> groups_in_order(const at::Tensor& uid) {
  const at::Tensor ids = uid.to(at::kCPU, at::kLong).contiguous();
  const int64_t* data = ids.data_ptr<int64_t>();
  std::map<int64_t, size_t> slot;
  std::vector<std::vector<int64_t>> groups;
  for (int64_t row = 0; row < ids.numel(); ++row) {
    auto [it, inserted] = slot.emplace(data[row], groups.size());
    if (inserted) groups.emplace_back();
    groups[it->second].push_back(row);
  }
  return groups;
}

// Left-pads a [B, W] column to `width` with `value`.
at::Tensor left_pad(const at::Tensor& column, int64_t width, double value) {
  const int64_t missing = width - column.size(1);
  if (missing == 0) return column;
  return at::cat({at::full({column.size(0), missing}, value, column.options()), column}, 1);
}

}  // namespace

std::vector<double> filter_metric(const Rewards& rewards, const std::string& metric) {
  if (metric == "reward") return rewards.scores;
  const auto it = rewards.extras.find(metric);
  const bool complete = it != rewards.extras.end() &&
                        std::none_of(it->second.begin(), it->second.end(), [](double v) { return std::isnan(v); });
  if (!complete) {
    std::string reported;
    for (const auto& entry : rewards.extras) reported += (reported.empty() ? "" : ", ") + entry.first;
    throw ConfigError("algorithm.filter_groups.metric is '" + metric + "', but the graders " +
                      (it == rewards.extras.end() ? "did not report it" : "did not report it for every response") +
                      " (they report: reward" + (reported.empty() ? "" : ", " + reported) + ")");
  }
  return it->second;
}

std::vector<int64_t> rows_of_informative_groups(const at::Tensor& uid, const std::vector<double>& values) {
  std::vector<int64_t> kept;
  for (const std::vector<int64_t>& rows : groups_in_order(uid)) {
    const double first = values[rows.front()];
    const bool varied = std::any_of(rows.begin(), rows.end(), [&](int64_t row) { return values[row] != first; });
    if (rows.size() == 1 || varied) kept.insert(kept.end(), rows.begin(), rows.end());
  }
  std::sort(kept.begin(), kept.end());
  return kept;
}

ScoredRollout select_rows(const ScoredRollout& scored, const std::vector<int64_t>& rows) {
  ScoredRollout out;
  out.rollout.batch = scored.rollout.batch;
  out.rollout.batch.reorder(at::tensor(rows, at::kLong));
  const Rewards& in = scored.rewards;
  out.rewards.token_level_scores = in.token_level_scores.index_select(0, at::tensor(rows, at::kLong));
  out.rollout.agent_metrics = scored.rollout.agent_metrics;
  for (int64_t row : rows) {
    out.rollout.examples.push_back(scored.rollout.examples[row]);
    if (!scored.rollout.extra_info.empty()) out.rollout.extra_info.push_back(scored.rollout.extra_info[row]);
    out.rewards.scores.push_back(in.scores[row]);
    out.rewards.responses.push_back(in.responses[row]);
    for (const auto& [name, column] : in.extras) out.rewards.extras[name].push_back(column[row]);
  }
  return out;
}

int64_t count_groups(const at::Tensor& uid) { return static_cast<int64_t>(groups_in_order(uid).size()); }

ScoredRollout concat_groups(const std::vector<ScoredRollout>& parts, int64_t max_groups, int64_t pad_id) {
  if (parts.empty()) throw ValueError("concat_groups: no rollouts given");
  // Which rows of each part survive the cut at max_groups, and their new uids.
  std::vector<ScoredRollout> kept;
  std::vector<at::Tensor> uids;
  int64_t groups = 0;
  for (const ScoredRollout& part : parts) {
    std::vector<int64_t> rows;
    std::vector<int64_t> uid;
    for (const std::vector<int64_t>& group : groups_in_order(part.rollout.batch.tensor(columns::kUid))) {
      if (groups == max_groups) break;
      rows.insert(rows.end(), group.begin(), group.end());
      uid.insert(uid.end(), group.size(), groups++);
    }
    if (rows.empty()) continue;
    kept.push_back(select_rows(part, rows));
    uids.push_back(at::tensor(uid, at::kLong));
  }
  // Prompts differ in padded width between generation batches; responses all
  // have data.max_response_length columns.
  int64_t width = 0;
  for (const ScoredRollout& part : kept) width = std::max(width, part.rollout.batch.tensor(columns::kInputIds).size(1));
  std::vector<Batch> batches;
  for (size_t i = 0; i < kept.size(); ++i) {
    Batch batch = kept[i].rollout.batch;
    batch.set(columns::kInputIds, left_pad(batch.tensor(columns::kInputIds), width, static_cast<double>(pad_id)));
    batch.set(columns::kAttentionMask, left_pad(batch.tensor(columns::kAttentionMask), width, 0));
    batch.set(columns::kPositionIds, left_pad(batch.tensor(columns::kPositionIds), width, 0));
    batch.set(columns::kUid, uids[i]);
    batches.push_back(std::move(batch));
  }
  ScoredRollout out;
  out.rollout.batch = Batch::concat(batches);
  std::vector<at::Tensor> scores;
  for (const ScoredRollout& part : kept) {
    out.rollout.examples.insert(out.rollout.examples.end(), part.rollout.examples.begin(), part.rollout.examples.end());
    out.rollout.extra_info.insert(out.rollout.extra_info.end(), part.rollout.extra_info.begin(),
                                  part.rollout.extra_info.end());
    const Rewards& r = part.rewards;
    scores.push_back(r.token_level_scores);
    out.rewards.scores.insert(out.rewards.scores.end(), r.scores.begin(), r.scores.end());
    out.rewards.responses.insert(out.rewards.responses.end(), r.responses.begin(), r.responses.end());
  }
  // A grader extra one part lacks is NaN there, as compute_rewards leaves it.
  for (const ScoredRollout& part : kept) {
    for (const auto& entry : part.rewards.extras) out.rewards.extras.emplace(entry.first, std::vector<double>());
  }
  for (auto& [name, column] : out.rewards.extras) {
    for (const ScoredRollout& part : kept) {
      const auto it = part.rewards.extras.find(name);
      if (it != part.rewards.extras.end()) {
        column.insert(column.end(), it->second.begin(), it->second.end());
      } else {
        column.insert(column.end(), part.rewards.scores.size(), std::nan(""));
      }
    }
  }
  out.rewards.token_level_scores = at::cat(scores, 0);
  return out;
}

}  // namespace rlcore::trainer
