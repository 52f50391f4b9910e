// A step's data metrics under verl's names, checked on a hand-made batch; the
// variance proxy metrics against verl's own function (reference/verl_variance_proxy.py).
#include "trainer/step_metrics.h"
#include "../../common/run_config_testing.h"

#include <nlohmann/json.hpp>

#include "../../common/reference_python.h"
#include "rlcore/train_engine.h"

using namespace rlcore;
using namespace rlcore::trainer;

TEST_CASE("scores, advantages and lengths are summarised as verl does") {
  Batch batch(2);
  batch.set(columns::kResponseMask, at::tensor({1.0f, 1.0f, 0.0f, 1.0f, 1.0f, 1.0f}).view({2, 3}));
  batch.set(columns::kAttentionMask, at::tensor(std::vector<int64_t>{1, 1, 1, 1, 0, 0, 1, 1, 1, 1}).view({2, 5}));
  batch.set("token_level_scores", at::tensor({0.0f, 1.0f, 0.0f, 0.0f, 0.0f, 0.0f}).view({2, 3}));
  batch.set("token_level_rewards", at::tensor({0.0f, 0.5f, 0.0f, 0.0f, 0.0f, 0.0f}).view({2, 3}));
  batch.set("advantages", at::tensor({1.0f, 1.0f, 9.0f, -1.0f, -1.0f, -1.0f}).view({2, 3}));
  batch.set("returns", at::tensor({1.0f, 1.0f, 9.0f, -1.0f, -1.0f, -1.0f}).view({2, 3}));
  const StepMetrics m = data_metrics(batch);
  CHECK(m.at("critic/score/mean") == Approx(0.5));
  CHECK(m.at("critic/score/max") == Approx(1.0));
  CHECK(m.at("critic/rewards/mean") == Approx(0.25));
  CHECK(m.at("critic/advantages/max") == Approx(1.0));  // the 9 is padding
  CHECK(m.at("critic/advantages/mean") == Approx(-0.2));
  CHECK(m.at("response_length/mean") == Approx(2.5));
  CHECK(m.at("response_length/clip_ratio") == Approx(0.5));
  CHECK(m.at("prompt_length/mean") == Approx(1.5));  // 4 - 2 and 4 - 3
  const StepMetrics perf = throughput_metrics(batch, 2.0, 2);
  CHECK(perf.at("perf/total_num_tokens") == Approx(8));
  CHECK(perf.at("perf/throughput") == Approx(2.0));
}

TEST_CASE("the variance proxy metrics are verl's, with and without IS weights and a gradient norm",
          "[verl][variance_proxy]") {
  const nlohmann::json reference = nlohmann::json::parse(
      rlcore_test::run_reference(rlcore_test::reference_script("core/trainer/reference/verl_variance_proxy.py")));
  REQUIRE(reference["cases"].size() == 4);
  for (const auto& c : reference["cases"]) {
    Batch batch(static_cast<int64_t>(c["batch"][columns::kResponseMask].size()));
    for (const auto& [key, rows] : c["batch"].items()) {
      std::vector<float> flat;
      for (const auto& row : rows) {
        for (const auto& value : row) flat.push_back(value.get<float>());
      }
      batch.set(key, at::tensor(flat).view({batch.size(), -1}));
    }
    const double grad_norm = c["grad_norm"].is_null() ? 0.0 : c["grad_norm"].get<double>();
    const StepMetrics got = variance_proxy_metrics(batch, c["grad_norm"].is_null() ? nullptr : &grad_norm);
    INFO("verl " << reference["verl"].get<std::string>() << ", IS weights: "
                 << c["batch"].contains(columns::kRolloutIsWeights) << ", grad_norm " << c["grad_norm"].dump());
    REQUIRE(got.size() == c["metrics"].size());
    for (const auto& [name, value] : c["metrics"].items()) {
      INFO(name);
      CHECK(got.at(name) == Approx(value.get<double>()).epsilon(1e-5).margin(1e-7));
    }
  }
  // Without sum_pi_squared (calculate_sum_pi_squared off) there is nothing to report.
  Batch plain(1);
  plain.set(columns::kResponseMask, at::ones({1, 2}));
  plain.set(columns::kAdvantages, at::ones({1, 2}));
  plain.set(columns::kOldLogProbs, at::zeros({1, 2}));
  CHECK(variance_proxy_metrics(plain, nullptr).empty());
}
