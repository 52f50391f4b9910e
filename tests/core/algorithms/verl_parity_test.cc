// The built-in advantage estimators held to verl's own functions: the inputs
// and expected outputs come from verl's core_algos.py run by
// reference/verl_estimators.py (float32, interleaved groups of 1 to 4
// responses, ties, length-1 and full-length responses), for every estimator
// both have and each option that changes the math.
#include "algorithms_testing.h"

#include <set>

#include <nlohmann/json.hpp>

#include "../../common/reference_python.h"
#include "rlcore/advantage_estimator.h"
#include "rlcore/config_node.h"
#include "rlcore/core/builtin_algorithms.h"
#include "rlcore/registry.h"

using nlohmann::json;

namespace {

at::Tensor float_tensor(const json& rows) {
  rlcore_test::Matrix matrix;
  for (const auto& row : rows) matrix.push_back(row.get<rlcore_test::Row>());
  return rlcore_test::tensor(matrix, at::kFloat);
}

at::Tensor float_vector(const json& row) { return rlcore_test::tensor(row.get<rlcore_test::Row>(), at::kFloat); }

void check_matches(const at::Tensor& actual, const json& expected) {
  const rlcore_test::Matrix got = rlcore_test::matrix(actual);
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    REQUIRE(got[i].size() == expected[i].size());
    for (size_t j = 0; j < got[i].size(); ++j) {
      const double want = expected[i][j].get<double>();
      INFO("row " << i << ", token " << j);
      CHECK(got[i][j] == Approx(want).margin(2e-6).epsilon(2e-6));
    }
  }
}

}  // namespace

TEST_CASE("every advantage estimator verl and rlcore share gives verl's values", "[algorithms][verl]") {
  const json reference = json::parse(
      rlcore_test::run_reference(rlcore_test::reference_script("core/algorithms/reference/verl_estimators.py")));
  rlcore::Registry registry;
  rlcore::register_builtin_algorithms(registry);
  std::set<std::string> covered;
  for (const json& c : reference["cases"]) {
    const std::string name = c["name"];
    INFO("verl " << reference["verl"].get<std::string>() << ": " << name << " " << c["options"].dump());
    const auto estimator = registry.create<rlcore::AdvantageEstimator>(
        name, c["options"].empty() ? rlcore::ConfigNode() : rlcore::ConfigNode::parse(c["options"].dump(), name));
    rlcore::AdvantageInput input;
    input.token_level_rewards = float_tensor(c["token_level_rewards"]);
    input.response_mask = float_tensor(c["response_mask"]);
    input.index = at::tensor(c["index"].get<std::vector<int64_t>>(), at::kLong);
    if (c.contains("values")) input.values = float_tensor(c["values"]);
    if (c.contains("reward_baselines")) input.reward_baselines = float_vector(c["reward_baselines"]);
    const rlcore::AdvantageOutput output = estimator->compute(input);
    check_matches(output.advantages, c["advantages"]);
    check_matches(output.returns, c["returns"]);
    covered.insert(name);
  }
  CHECK(covered == std::set<std::string>{"gae", "grpo", "grpo_vectorized", "grpo_passk", "rloo", "rloo_vectorized",
                                          "opo", "gpg", "reinforce_plus_plus", "reinforce_plus_plus_baseline",
                                          "remax"});
}
