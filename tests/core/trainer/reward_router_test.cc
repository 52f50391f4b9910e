// trainer::RewardRouter: samples grouped by grader, one grade_batch call per grader with
// the BatchGrader capability, and reward.custom_reward_function overriding the
// grader choice for every sample.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../../common/error_of.h"
#include "rlcore/core/trainer/reward_router.h"
#include "rlcore/core/config/run_config.h"
#include "rlcore/error.h"

namespace {

using rlcore::BatchGrader;
using rlcore::Grader;
using rlcore::GradeRequest;
using rlcore::GradeResult;

// Scores `base` + the response's length; counts how it was called.
class CountingGrader : public Grader {
 public:
  explicit CountingGrader(double base) : base_(base) {}
  GradeResult grade(std::string_view response, std::string_view, std::string_view,
                    const nlohmann::json&) const override {
    ++single_calls;
    return GradeResult{base_ + static_cast<double>(response.size()), {}};
  }
  mutable int single_calls = 0;

 protected:
  double base_;
};

class CountingBatchGrader final : public CountingGrader, public BatchGrader {
 public:
  using CountingGrader::CountingGrader;
  std::vector<GradeResult> grade_batch(const std::vector<GradeRequest>& requests) const override {
    batch_sizes.push_back(requests.size());
    std::vector<GradeResult> results;
    for (const GradeRequest& request : requests) {
      REQUIRE(request.extra != nullptr);
      results.push_back(GradeResult{base_ + static_cast<double>(request.response.size()), {{"batched", 1.0}}});
    }
    return results;
  }
  mutable std::vector<size_t> batch_sizes;
};

struct Graders {
  std::shared_ptr<CountingGrader> single = std::make_shared<CountingGrader>(100.0);
  std::shared_ptr<CountingBatchGrader> batch = std::make_shared<CountingBatchGrader>(200.0);
  std::shared_ptr<CountingBatchGrader> custom = std::make_shared<CountingBatchGrader>(300.0);

  rlcore::Registry registry() const {
    rlcore::Registry registry;
    auto add = [&](const std::string& name, std::shared_ptr<Grader> grader, std::vector<std::string> sources) {
      rlcore::ComponentEntry entry;
      entry.kind = Grader::kKind;
      entry.name = name;
      entry.data_sources = std::move(sources);
      entry.factory = [grader](const rlcore::ConfigNode&, const rlcore::ComponentContext&) { return grader; };
      registry.add(std::move(entry));
    };
    add("single", single, {"s", "ai*", "aime2024"});
    add("batch", batch, {"b", "aim*"});
    add(rlcore::config::kCustomFunctionGrader, custom, {});
    return registry;
  }
};

std::vector<rlcore::trainer::RewardSample> samples() {
  return {{"x", "", "s", nullptr}, {"xx", "", "b", nullptr}, {"xxx", "", "s", nullptr}, {"xxxx", "", "b", nullptr}};
}

}  // namespace

TEST_CASE("RewardRouter calls grade_batch once per batch-capable grader, in sample order") {
  const Graders graders;
  const rlcore::Registry registry = graders.registry();
  const rlcore::trainer::RewardRouter router(registry, rlcore::config::RewardConfig{});
  const std::vector<GradeResult> results = router.score(samples());
  REQUIRE(results.size() == 4);
  CHECK(results[0].score == 101.0);
  CHECK(results[1].score == 202.0);
  CHECK(results[2].score == 103.0);
  CHECK(results[3].score == 204.0);
  CHECK(results[1].extras.at("batched") == 1.0);
  CHECK(graders.single->single_calls == 2);
  CHECK(graders.batch->single_calls == 0);
  CHECK(graders.batch->batch_sizes == std::vector<size_t>{2});
  CHECK(graders.custom->batch_sizes.empty());
}

TEST_CASE("RewardRouter sends every sample to the custom function when its path is set") {
  const Graders graders;
  const rlcore::Registry registry = graders.registry();
  rlcore::config::RewardConfig config;
  config.grader = "single";
  config.custom_reward_function = rlcore::ConfigNode::parse("path: reward.py\n", "test");
  REQUIRE(rlcore::config::custom_reward_function_enabled(config));
  const rlcore::trainer::RewardRouter router(registry, config);
  const std::vector<GradeResult> results = router.score(samples());
  CHECK(results[0].score == 301.0);
  CHECK(results[3].score == 304.0);
  CHECK(graders.custom->batch_sizes == std::vector<size_t>{4});
  CHECK(graders.single->single_calls == 0);

  config.custom_reward_function = rlcore::ConfigNode::parse("path: ''\n", "test");
  CHECK_FALSE(rlcore::config::custom_reward_function_enabled(config));
}

TEST_CASE("RewardRouter routes a data_source by exact value, else by the longest '<prefix>*'") {
  const Graders graders;
  const rlcore::Registry registry = graders.registry();
  const rlcore::trainer::RewardRouter router(registry, rlcore::config::RewardConfig{});
  const auto score_of = [&](const std::string& source) { return router.score({"x", "", source, nullptr}).score; };
  CHECK(score_of("aime2025") == 201.0);  // "aim*" is longer than "ai*"
  CHECK(score_of("aime2024") == 101.0);  // an exact value wins over any prefix
  CHECK(score_of("aim") == 201.0);       // the prefix alone matches
  CHECK(score_of("ai_x") == 101.0);
  const std::string error = rlcore_test::error_of<rlcore::ValueError>([&] { router.score({"x", "", "a", nullptr}); });
  CHECK_THAT(error, Catch::Contains("'a'") && Catch::Contains("aim* -> batch") && Catch::Contains("s -> single"));
}
