// Private to the core: DAPO's dynamic sampling (verl's algorithm.filter_groups).
// A prompt group whose responses all score the same has zero advantage under
// group baselines and only dilutes the update, so such groups are dropped and
// more prompts are generated until a full batch of informative groups exists.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/generation.h"
#include "trainer/rewards.h"

namespace rlcore::trainer {

// A rollout with the rewards of its rows.
struct ScoredRollout {
  Rollout rollout;
  Rewards rewards;
};

// The value each row is compared on: its score for "reward", else the grader
// extra of that name. Throws ConfigError naming the metric and the extras the
// graders did report when a row lacks it.
std::vector<double> filter_metric(const Rewards& rewards, const std::string& metric);

// The rows to keep, in order: those of every group (rows sharing "uid") with a
// single row or with values that are not all equal (verl: std > 0).
std::vector<int64_t> rows_of_informative_groups(const at::Tensor& uid, const std::vector<double>& values);

// `scored` restricted to `rows` (uid, examples and rewards alike).
ScoredRollout select_rows(const ScoredRollout& scored, const std::vector<int64_t>& rows);

// The first `max_groups` groups of `parts`, concatenated: prompts left-padded
// to the longest (with `pad_id`), uid renumbered so groups stay apart.
ScoredRollout concat_groups(const std::vector<ScoredRollout>& parts, int64_t max_groups, int64_t pad_id);

// Number of distinct groups in a uid column.
int64_t count_groups(const at::Tensor& uid);

}  // namespace rlcore::trainer
