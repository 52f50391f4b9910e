// RewardRouter: grader lookup by name or data_source (or the custom function
// for every sample), batched per grader where the grader can take a batch.
#include "rlcore/core/trainer/reward_router.h"

#include <algorithm>
#include <utility>

#include <nlohmann/json.hpp>

#include "rlcore/core/config/run_config.h"
#include "rlcore/error.h"
#include "rlcore/string_join.h"

namespace rlcore::trainer {

RewardRouter::RewardRouter(const Registry& registry, const config::RewardConfig& config)
    : fixed_grader_(config.grader) {
  for (const ComponentEntry* entry : registry.entries(Grader::kKind)) {
    const ConfigNode options = config.graders[entry->name];
    graders_[entry->name] = std::static_pointer_cast<Grader>(entry->factory(options, ComponentContext()));
    for (const auto& source : entry->data_sources) {
      if (!source.empty() && source.back() == '*') {
        grader_by_data_source_prefix_.emplace(source.substr(0, source.size() - 1), entry->name);
      } else {
        grader_by_data_source_.emplace(source, entry->name);
      }
    }
  }
  if (fixed_grader_ != "auto" && !graders_.count(fixed_grader_)) registry.get(Grader::kKind, fixed_grader_);
  if (config::custom_reward_function_enabled(config)) {
    const ComponentEntry& entry = registry.get(Grader::kKind, config::kCustomFunctionGrader);
    custom_ = std::static_pointer_cast<Grader>(entry.factory(config.custom_reward_function, ComponentContext()));
  }
}

const Grader& RewardRouter::grader_for(const std::string& data_source) const {
  if (custom_) return *custom_;
  if (fixed_grader_ != "auto") return *graders_.at(fixed_grader_);
  if (auto it = grader_by_data_source_.find(data_source); it != grader_by_data_source_.end()) {
    return *graders_.at(it->second);
  }
  // The longest registered prefix wins; the map is sorted, so walk it backwards.
  for (auto it = grader_by_data_source_prefix_.rbegin(); it != grader_by_data_source_prefix_.rend(); ++it) {
    if (data_source.compare(0, it->first.size(), it->first) == 0) return *graders_.at(it->second);
  }
  std::string known =
      join(grader_by_data_source_, ", ", [](const auto& entry) { return entry.first + " -> " + entry.second; });
  const std::string prefixes =
      join(grader_by_data_source_prefix_, ", ", [](const auto& entry) { return entry.first + "* -> " + entry.second; });
  if (!prefixes.empty()) known += (known.empty() ? "" : ", ") + prefixes;
  throw ValueError("reward.grader is 'auto' but no grader handles data_source '" + data_source +
                   "'; known data sources: " + (known.empty() ? "(none)" : known) +
                   ". Set reward.grader to a grader name to score every sample with it.");
}

GradeResult RewardRouter::score(const RewardSample& sample) const {
  static const nlohmann::json kNoExtra = nlohmann::json::object();
  return grader_for(sample.data_source)
      .grade(sample.response, sample.ground_truth, sample.data_source, sample.extra ? *sample.extra : kNoExtra);
}

std::vector<GradeResult> RewardRouter::score(const std::vector<RewardSample>& samples) const {
  static const nlohmann::json kNoExtra = nlohmann::json::object();
  std::vector<GradeResult> results(samples.size());
  // Sample indices per grader, in first-seen order of the graders.
  std::vector<std::pair<const Grader*, std::vector<size_t>>> groups;
  for (size_t i = 0; i < samples.size(); ++i) {
    const Grader* grader = &grader_for(samples[i].data_source);
    auto group = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == grader; });
    if (group == groups.end()) group = groups.insert(groups.end(), {grader, {}});
    group->second.push_back(i);
  }
  for (const auto& [grader, indices] : groups) {
    if (const auto* batch = dynamic_cast<const BatchGrader*>(grader)) {
      std::vector<GradeRequest> requests;
      requests.reserve(indices.size());
      for (size_t i : indices) {
        const RewardSample& s = samples[i];
        requests.push_back({s.response, s.ground_truth, s.data_source, s.extra ? s.extra : &kNoExtra});
      }
      std::vector<GradeResult> graded = batch->grade_batch(requests);
      if (graded.size() != indices.size()) {
        throw ValueError("a batch grader returned " + std::to_string(graded.size()) + " results for " +
                         std::to_string(indices.size()) + " samples");
      }
      for (size_t k = 0; k < indices.size(); ++k) results[indices[k]] = std::move(graded[k]);
    } else {
      for (size_t i : indices) results[i] = score(samples[i]);
    }
  }
  return results;
}

}  // namespace rlcore::trainer
