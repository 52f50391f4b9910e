// RewardRouter: grader lookup by name or data_source.
#include "rlcore/core/reward_router.h"

#include <nlohmann/json.hpp>

#include "rlcore/core/run_config.h"
#include "rlcore/error.h"
#include "rlcore/string_join.h"

namespace rlcore {

RewardRouter::RewardRouter(const Registry& registry, const RewardConfig& config) : fixed_grader_(config.grader) {
  for (const ComponentEntry* entry : registry.entries(Grader::kKind)) {
    const ConfigNode options = config.graders[entry->name];
    graders_[entry->name] = std::static_pointer_cast<Grader>(entry->factory(options, ComponentContext()));
    for (const auto& source : entry->data_sources) grader_by_data_source_.emplace(source, entry->name);
  }
  if (fixed_grader_ != "auto" && !graders_.count(fixed_grader_)) registry.get(Grader::kKind, fixed_grader_);
}

const Grader& RewardRouter::grader_for(const std::string& data_source) const {
  if (fixed_grader_ != "auto") return *graders_.at(fixed_grader_);
  auto it = grader_by_data_source_.find(data_source);
  if (it == grader_by_data_source_.end()) {
    const std::string known =
        join(grader_by_data_source_, ", ", [](const auto& entry) { return entry.first + " -> " + entry.second; });
    throw ValueError("reward.grader is 'auto' but no grader handles data_source '" + data_source +
                     "'; known data sources: " + (known.empty() ? "(none)" : known) +
                     ". Set reward.grader to a grader name to score every sample with it.");
  }
  return *graders_.at(it->second);
}

GradeResult RewardRouter::score(const RewardSample& sample) const {
  static const nlohmann::json kNoExtra = nlohmann::json::object();
  return grader_for(sample.data_source)
      .grade(sample.response, sample.ground_truth, sample.data_source, sample.extra ? *sample.extra : kNoExtra);
}

std::vector<GradeResult> RewardRouter::score(const std::vector<RewardSample>& samples) const {
  std::vector<GradeResult> results;
  results.reserve(samples.size());
  for (const auto& sample : samples) results.push_back(score(sample));
  return results;
}

}  // namespace rlcore
