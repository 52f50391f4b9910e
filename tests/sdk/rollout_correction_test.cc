// Rollout correction (rlcore/rollout_correction.h) held to verl's own
// rollout_corr_helper.py, run by reference/verl_rollout_correction.py: IS weights,
// rejection masks and every metric for every IS level, TIS and IcePop thresholds,
// batch normalization and every rejection option, on log-ratios small and past
// the +-20 safety bound; and every config verl refuses, refused at validation
// with the key named.
#include "../common/algorithms_testing.h"

#include <limits>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "../common/reference_python.h"
#include "rlcore/error.h"
#include "rlcore/rollout_correction.h"

using nlohmann::json;
using rlcore::RolloutCorrectionConfig;

namespace {

constexpr double kTolerance = 2e-6;

struct Dataset {
  at::Tensor old_log_prob, rollout_log_prob, response_mask;
};

at::Tensor matrix_of(const json& rows, at::ScalarType dtype) {
  rlcore_test::Matrix matrix;
  for (const auto& row : rows) matrix.push_back(row.get<rlcore_test::Row>());
  return rlcore_test::tensor(matrix, dtype);
}

at::ScalarType dtype_of(const std::string& torch_name) {
  if (torch_name == "torch.float32") return at::kFloat;
  if (torch_name == "torch.int64") return at::kLong;
  if (torch_name == "torch.bool") return at::kBool;
  FAIL("unexpected dtype " << torch_name);
  return at::kFloat;
}

std::map<std::string, Dataset> datasets(const json& reference) {
  std::map<std::string, Dataset> out;
  for (const auto& [name, d] : reference["datasets"].items()) {
    out[name] = {matrix_of(d["old_log_prob"], at::kFloat), matrix_of(d["rollout_log_prob"], at::kFloat),
                 matrix_of(d["response_mask"], dtype_of(d["mask_dtype"]))};
  }
  return out;
}

RolloutCorrectionConfig config_of(const json& c) {
  RolloutCorrectionConfig config;
  auto text = [&](const char* key) { return c[key].is_null() ? std::string() : c[key].get<std::string>(); };
  config.rollout_is = text("rollout_is");
  config.rollout_is_threshold = text("rollout_is_threshold");
  config.rollout_is_batch_normalize = c["rollout_is_batch_normalize"];
  config.rollout_rs = text("rollout_rs");
  config.rollout_rs_threshold = text("rollout_rs_threshold");
  return config;
}

void check_matrix(const at::Tensor& actual, const json& expected, const char* what) {
  const rlcore_test::Matrix got = rlcore_test::matrix(actual);
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    REQUIRE(got[i].size() == expected[i].size());
    for (size_t j = 0; j < got[i].size(); ++j) {
      INFO(what << " row " << i << ", token " << j);
      CHECK(got[i][j] == Approx(expected[i][j].get<double>()).margin(kTolerance).epsilon(kTolerance));
    }
  }
}

void check_metrics(const std::map<std::string, double>& actual, const json& expected) {
  std::set<std::string> actual_keys, expected_keys;
  for (const auto& [key, value] : actual) actual_keys.insert(key);
  for (const auto& [key, value] : expected.items()) expected_keys.insert(key);
  CHECK(actual_keys == expected_keys);
  for (const auto& [key, value] : actual) {
    if (!expected.contains(key)) continue;
    INFO(key);
    CHECK(value == Approx(expected[key].get<double>()).margin(kTolerance).epsilon(kTolerance));
  }
}

std::string describe(const json& c) { return c["dataset"].get<std::string>() + " " + c["config"].dump(); }

}  // namespace

TEST_CASE("rollout correction gives verl's weights, masks and metrics", "[rollout_correction][verl]") {
  const json reference = json::parse(
      rlcore_test::run_reference(rlcore_test::reference_script("sdk/reference/verl_rollout_correction.py")));
  const auto data = datasets(reference);
  std::set<std::string> covered;
  int compared = 0, refused = 0, empty_ess = 0;
  for (const json& c : reference["cases"]) {
    INFO("verl " << reference["verl"].get<std::string>() << ": " << describe(c));
    const Dataset& d = data.at(c["dataset"]);
    const RolloutCorrectionConfig config = config_of(c["config"]);
    if (c.contains("key")) {
      // verl raises ValueError / TypeError / ZeroDivisionError: rlcore refuses the config up front.
      INFO("verl: " << c["error"].get<std::string>() << ": " << c["message"].get<std::string>());
      const std::string key = c["key"];
      CHECK_THAT(rlcore_test::error_of<rlcore::ConfigError>(
                     [&] { rlcore::validate_rollout_correction_config(config, "algorithm.rollout_correction"); }),
                 Catch::StartsWith("algorithm.rollout_correction." + key + ":"));
      CHECK_THAT(rlcore_test::error_of<rlcore::ConfigError>([&] {
                   rlcore::compute_rollout_correction(d.old_log_prob, d.rollout_log_prob, d.response_mask, config);
                 }),
                 Catch::StartsWith("algorithm.rollout_correction." + key + ":"));
      ++refused;
      continue;
    }
    rlcore::validate_rollout_correction_config(config, "algorithm.rollout_correction");
    const auto result = rlcore::compute_rollout_correction(d.old_log_prob, d.rollout_log_prob, d.response_mask, config);
    if (c.contains("error")) {
      // IcePop zeroed every weight and verl's ESS divided by zero; rlcore reports no effective sample.
      REQUIRE(c["error"] == "ZeroDivisionError");
      REQUIRE(result.rollout_is_weights.defined());
      CHECK(result.rollout_is_weights.abs().sum().item<double>() == 0.0);
      CHECK(result.metrics.at("rollout_corr/rollout_is_eff_sample_size") == 0.0);
      ++empty_ess;
      continue;
    }
    REQUIRE(result.rollout_is_weights.defined() == !c["weights"].is_null());
    if (!c["weights"].is_null()) check_matrix(result.rollout_is_weights, c["weights"], "rollout_is_weights");
    CHECK(result.response_mask.scalar_type() == dtype_of(c["mask_dtype"]));
    check_matrix(result.response_mask, c["mask"], "response_mask");
    check_metrics(result.metrics, c["metrics"]);
    if (!config.rollout_is.empty())
      covered.insert(config.rollout_is + (config.rollout_is_batch_normalize ? "+bn" : ""));
    for (const std::string option : {"token_k1", "token_k2", "token_k3", "seq_sum_k1", "seq_sum_k2", "seq_sum_k3",
                                     "seq_mean_k1", "seq_mean_k2", "seq_mean_k3", "seq_max_k2", "seq_max_k3"}) {
      if (result.metrics.count("rollout_corr/rollout_rs_" + option + "_mean")) covered.insert(option);
    }
    ++compared;
  }
  CHECK(covered == std::set<std::string>{"token", "token+bn", "sequence", "sequence+bn", "token_k1", "token_k2",
                                         "token_k3", "seq_sum_k1", "seq_sum_k2", "seq_sum_k3", "seq_mean_k1",
                                         "seq_mean_k2", "seq_mean_k3", "seq_max_k2", "seq_max_k3"});
  CHECK(compared > 150);
  CHECK(refused > 40);
  CHECK(empty_ess > 0);

  // The off-policy diagnostics alone (verl's compute_rollout_corr_metrics_from_logprobs).
  for (const json& c : reference["offpolicy"]) {
    INFO("offpolicy metrics on " << c["dataset"].get<std::string>());
    const Dataset& d = data.at(c["dataset"]);
    check_metrics(rlcore::compute_offpolicy_metrics(d.old_log_prob, d.rollout_log_prob, d.response_mask), c["metrics"]);
  }
}

TEST_CASE("every bad rollout correction setting fails validation naming its key", "[rollout_correction]") {
  struct Bad {
    RolloutCorrectionConfig config;
    std::string key;
    std::string says;
  };
  auto is = [](std::string level, std::string threshold) {
    RolloutCorrectionConfig c;
    c.rollout_is = std::move(level);
    c.rollout_is_threshold = std::move(threshold);
    return c;
  };
  auto rs = [](std::string options, std::string threshold) {
    RolloutCorrectionConfig c;
    c.rollout_rs = std::move(options);
    c.rollout_rs_threshold = std::move(threshold);
    return c;
  };
  const std::vector<Bad> bad = {
      {is("tokens", "2.0"), "rollout_is", "must be token or sequence"},
      {is("token", ""), "rollout_is_threshold", "must not be empty"},
      {is("sequence", "two"), "rollout_is_threshold", "invalid threshold 'two'"},
      {is("token", "0"), "rollout_is_threshold", "upper bound must be positive"},
      {is("token", "-0.5_2"), "rollout_is_threshold", "lower bound must be positive"},
      {is("token", "3_2"), "rollout_is_threshold", "lower bound must be <= upper bound"},
      {is("token", "nan"), "rollout_is_threshold", "NaN"},
      {is("token", "0.5_nan"), "rollout_is_threshold", "NaN"},
      {is("token", "1__2"), "rollout_is_threshold", "invalid threshold"},
      {rs("token_k5", "2"), "rollout_rs", "invalid option 'token_k5'; must be one of seq_max_k2"},
      {rs(" , ", "2"), "rollout_rs", "at least one option"},
      {rs("token_k2", ""), "rollout_rs_threshold", "must be set when rollout_rs is enabled"},
      {rs("token_k2,seq_max_k3", "1,2,3"), "rollout_rs_threshold", "has 3 thresholds; expected one shared"},
      {rs("seq_mean_k2", "0.1_1"), "rollout_rs_threshold", "option 'seq_mean_k2' must be a single upper bound"},
      {rs("seq_mean_k2", "-1"), "rollout_rs_threshold", "must be positive"},
      {rs("seq_max_k3", "big"), "rollout_rs_threshold", "invalid number 'big' for option 'seq_max_k3'"},
      {rs("token_k1", "0"), "rollout_rs_threshold", "for option 'token_k1' must be positive"},
      {rs("token_k1", "inf"), "rollout_rs_threshold", "must be positive"},
      {rs("seq_sum_k1", "2_1"), "rollout_rs_threshold", "must have lower <= upper"},
      {rs("seq_sum_k1", "nan"), "rollout_rs_threshold", "NaN"},
      {rs("token_k2", "nan"), "rollout_rs_threshold", "NaN"},
      {rs("token_k2", "0x1p3"), "rollout_rs_threshold", "invalid number"},
  };
  for (const Bad& b : bad) {
    INFO("is '" << b.config.rollout_is << "' '" << b.config.rollout_is_threshold << "', rs '" << b.config.rollout_rs
                << "' '" << b.config.rollout_rs_threshold << "'");
    const std::string message = rlcore_test::error_of<rlcore::ConfigError>(
        [&] { rlcore::validate_rollout_correction_config(b.config, "algorithm.rollout_correction"); });
    CHECK_THAT(message, Catch::StartsWith("algorithm.rollout_correction." + b.key + ": "));
    CHECK_THAT(message, Catch::Contains(b.says));
    // Any prefix, or none.
    CHECK_THAT(rlcore_test::error_of<rlcore::ConfigError>(
                   [&] { rlcore::validate_rollout_correction_config(b.config, "trainer.rc"); }),
               Catch::StartsWith("trainer.rc." + b.key + ": "));
    CHECK_THAT(
        rlcore_test::error_of<rlcore::ConfigError>([&] { rlcore::validate_rollout_correction_config(b.config, ""); }),
        Catch::StartsWith(b.key + ": "));
  }
  // What is off is not checked (verl reads neither threshold then), and the defaults are valid.
  RolloutCorrectionConfig off;
  off.rollout_is_threshold = "junk";
  off.rollout_rs_threshold = "junk";
  rlcore::validate_rollout_correction_config(off, "algorithm.rollout_correction");
  rlcore::validate_rollout_correction_config(is("sequence", RolloutCorrectionConfig().rollout_is_threshold), "x");
  // Python float syntax: whitespace, '_' between digits, exponents, inf.
  rlcore::validate_rollout_correction_config(is("token", " 0.5 _ 1_0 "), "x");
  rlcore::validate_rollout_correction_config(rs("token_k1,token_k2,seq_max_k3", "0.5_INF, 1e-1 ,+2"), "x");
}

TEST_CASE("rollout correction refuses inputs verl refuses", "[rollout_correction]") {
  using rlcore_test::Matrix;
  RolloutCorrectionConfig config;
  config.rollout_is = "token";
  const at::Tensor log_prob = rlcore_test::tensor(Matrix{{-1, -2}, {-0.5, -1}}, at::kFloat);
  CHECK_THAT(rlcore_test::error_of<rlcore::ValueError>([&] {
               rlcore::compute_rollout_correction(log_prob, log_prob, at::zeros({2, 2}), config);
             }),
             Catch::Contains("at least one valid token"));
  CHECK_THAT(rlcore_test::error_of<rlcore::ValueError>([&] {
               rlcore::compute_rollout_correction(log_prob, log_prob.narrow(1, 0, 1), at::ones({2, 2}), config);
             }),
             Catch::Contains("rollout_log_prob"));
  CHECK_THAT(rlcore_test::error_of<rlcore::ValueError>([&] {
               rlcore::compute_rollout_correction(log_prob, log_prob, at::ones({2, 3}), config);
             }),
             Catch::Contains("response_mask"));
  CHECK_THAT(rlcore_test::error_of<rlcore::ValueError>([&] {
               rlcore::compute_offpolicy_metrics(log_prob.reshape({4}), log_prob.reshape({4}), at::ones({4}));
             }),
             Catch::Contains("2-D"));
}

TEST_CASE("rollout correction keeps the mask's dtype, ignores autograd and reports an empty IcePop",
          "[rollout_correction]") {
  using rlcore_test::Matrix;
  const at::Tensor old_log_prob = rlcore_test::tensor(Matrix{{-1.0, -0.2, -3.0}, {-0.7, -2.0, -0.1}}, at::kFloat);
  const at::Tensor rollout_log_prob = rlcore_test::tensor(Matrix{{-1.1, -0.2, -2.0}, {-0.7, -3.0, -9.0}}, at::kFloat);
  const at::Tensor mask = rlcore_test::tensor(Matrix{{1, 1, 1}, {1, 1, 0}}, at::kBool);
  RolloutCorrectionConfig config;
  config.rollout_is = "token";
  config.rollout_rs = "token_k2";
  config.rollout_rs_threshold = "0.4";  // k2 of the -1.0 and +1.0 log-ratios is 0.5: rejected
  const auto result = rlcore::compute_rollout_correction(old_log_prob.requires_grad_(), rollout_log_prob, mask, config);
  CHECK_FALSE(result.rollout_is_weights.requires_grad());
  CHECK(result.response_mask.scalar_type() == at::kBool);
  rlcore_test::check_close(result.response_mask, Matrix{{1, 1, 0}, {1, 0, 0}});
  // Token weights exp(0.1), 1, exp(-1); exp(0), exp(1) truncated at 2; padding 0.
  rlcore_test::check_close(result.rollout_is_weights, Matrix{{std::exp(0.1f), 1, std::exp(-1.0f)}, {1, 2, 0}}, 1e-6);

  // IcePop bounds no weight falls in: every weight zero, no effective sample (verl divides by zero).
  config.rollout_is_threshold = "5_6";
  config.rollout_is_batch_normalize = true;
  const auto empty = rlcore::compute_rollout_correction(old_log_prob, rollout_log_prob, mask, config);
  CHECK(empty.rollout_is_weights.abs().sum().item<double>() == 0.0);
  CHECK(empty.metrics.at("rollout_corr/rollout_is_eff_sample_size") == 0.0);
  CHECK(empty.metrics.at("rollout_corr/rollout_is_batch_norm_factor") == 1.0);
  CHECK(empty.metrics.at("rollout_corr/rollout_is_oob_ratio") == Approx(1.0));
}
