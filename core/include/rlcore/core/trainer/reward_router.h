// Batch-level rule reward: scores each sample with the grader named in config,
// or (grader: auto) with the grader registered for the sample's data_source,
// as verl's default_compute_score does. A registered data_source ending in '*'
// takes every data_source that starts with the rest (verl's startswith("aime")):
// an exact value wins, then the longest such prefix. With
// reward.custom_reward_function.path set, the `custom_function` grader (a user
// program) scores every sample instead.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "rlcore/export.h"
#include "rlcore/grader.h"
#include "rlcore/registry.h"

namespace rlcore::config {
struct RewardConfig;
}  // namespace rlcore::config

namespace rlcore::trainer {

struct RewardSample {
  std::string response;
  std::string ground_truth;
  std::string data_source;
  const nlohmann::json* extra = nullptr;  // may be null
};

class RLCORE_API RewardRouter {
 public:
  // `grader` is a registered grader name or "auto"; `grader_options` maps grader
  // names to their option subtrees.
  RewardRouter(const Registry& registry, const config::RewardConfig& config);

  GradeResult score(const RewardSample& sample) const;
  // Graders with the BatchGrader capability get one grade_batch call for all
  // their samples of the batch; the others are called per sample.
  std::vector<GradeResult> score(const std::vector<RewardSample>& samples) const;

 private:
  const Grader& grader_for(const std::string& data_source) const;

  std::shared_ptr<Grader> custom_;  // reward.custom_reward_function; null when its path is empty
  std::string fixed_grader_;
  std::map<std::string, std::shared_ptr<Grader>> graders_;           // by grader name
  std::map<std::string, std::string> grader_by_data_source_;         // data_source -> grader name
  std::map<std::string, std::string> grader_by_data_source_prefix_;  // from "<prefix>*" entries
};

}  // namespace rlcore::trainer
