// verl's reward model (reward.reward_model) through the trainer: its scores are
// transformers' on the text verl's reward loop builds, they replace or add to
// the rule grades, the policy learns what the model rewards, and bad
// checkpoints and keys are refused by name.
#include "e2e_testing.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../common/reference_python.h"

namespace fs = std::filesystem;

namespace {

// A one-label Qwen2ForSequenceClassification made by transformers from the workspace's model.
std::string make_reward_model(const std::string& ws, const std::string& name, bool chat_template) {
  std::vector<std::string> args = {"make", ws + "/model", ws + "/" + name};
  if (!chat_template) args.push_back("--no-chat-template");
  rlcore_test::run_reference(rlcore_test::reference_script("e2e/reference/reward_model.py"), args);
  return ws + "/" + name;
}

std::vector<nlohmann::json> read_lines(const std::string& file) {
  std::ifstream in(file);
  REQUIRE(in);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

double lowercase_fraction(const std::string& text) {
  if (text.empty()) return 0.0;
  int64_t lower = 0;
  for (char c : text) lower += c >= 'a' && c <= 'z';
  return static_cast<double>(lower) / static_cast<double>(text.size());
}

e2e::RunResult run(const std::string& config, const std::vector<std::string>& overrides) {
  std::vector<std::string> args = {"--config", config};
  args.insert(args.end(), overrides.begin(), overrides.end());
  return e2e::run_rlcore(args);
}

}  // namespace

TEST_CASE("reward model scores are transformers' and replace or add to the rule grades", "[e2e][reward_model]") {
  const std::string ws = e2e::make_workspace("reward_model", 8);
  const std::string rm = make_reward_model(ws, "reward_model", /*chat_template=*/true);
  const std::string config = e2e::write_config(ws, "rm", e2e::kQuickGrpo);
  const std::vector<std::string> common = {"trainer.total_training_steps=1", "reward.reward_model.enable=true",
                                           "reward.reward_model.model_path=" + rm};

  SECTION("replace (verl): the model's score is the reward, equal to transformers' on the same text") {
    const e2e::RunResult replaced =
        run(config, {common[0], common[1], common[2], "trainer.rollout_data_dir=" + ws + "/replace"});
    INFO(replaced.output);
    REQUIRE(replaced.status == 0);
    const std::vector<nlohmann::json> lines = read_lines(ws + "/replace/1.jsonl");
    REQUIRE(lines.size() == 16);
    for (const char* field : {"input", "output", "gts", "score", "step"}) CHECK(lines[0].contains(field));  // verl's
    CHECK(lines[0]["step"] == 1);
    // transformers may print progress and warnings before it.
    const std::string printed = rlcore_test::run_reference(
        rlcore_test::reference_script("e2e/reference/reward_model.py"), {"score", rm, ws + "/replace/1.jsonl"});
    const auto at = printed.rfind("scores: ");
    REQUIRE(at != std::string::npos);
    const nlohmann::json expected = nlohmann::json::parse(printed.substr(at + 8));
    REQUIRE(expected.size() == lines.size());
    for (size_t i = 0; i < lines.size(); ++i) {
      INFO("line " << i << ": " << lines[i].dump());
      CHECK(lines[i]["rm_score"].get<double>() == Approx(expected[i].get<double>()).margin(1e-4));
      CHECK(lines[i]["score"].get<double>() == lines[i]["rm_score"].get<double>());
    }
    const auto metrics = e2e::read_metrics(ws + "/rm");
    CHECK(metrics.at(1).at("critic/score/mean") ==
          Approx(metrics.at(1).at("critic/score_extra/rm_score")).margin(1e-6));
  }

  SECTION("add: the rule grade plus the model's score") {
    fs::remove_all(ws + "/rm");
    const e2e::RunResult added = run(config, {common[0], common[1], common[2], "reward.reward_model.combine=add",
                                              "trainer.rollout_data_dir=" + ws + "/add"});
    INFO(added.output);
    REQUIRE(added.status == 0);
    for (const nlohmann::json& line : read_lines(ws + "/add/1.jsonl")) {
      INFO(line.dump());
      const double rule = lowercase_fraction(line["output"].get<std::string>());
      CHECK(line["score"].get<double>() == Approx(line["rm_score"].get<double>() + rule).margin(1e-6));
    }
  }
  fs::remove_all(ws);
}

TEST_CASE("the policy learns what the reward model rewards, in the reward model's own pool", "[e2e][reward_model]") {
  const std::string ws = e2e::make_workspace("reward_model_learns");
  // Without a chat template the model reads the prompt text and the response.
  const std::string rm = make_reward_model(ws, "reward_model", /*chat_template=*/false);
  const std::string config = e2e::write_config(ws, "learn", e2e::kLearningGrpo);
  // Two actor workers, and one more (verl's enable_resource_pool) for the reward model.
  const e2e::RunResult learned = run(config, {"trainer.total_training_steps=12", "reward.reward_model.enable=true",
                                              "reward.reward_model.model_path=" + rm, "runtime.pools.rm.nodes=[1]",
                                              "runtime.pools.rm.roles=[reward_model]"});
  INFO(learned.output);
  REQUIRE(learned.status == 0);
  CHECK_THAT(learned.output, Catch::Contains("waiting for 3 workers"));
  const auto metrics = e2e::read_metrics(ws + "/learn");
  const double first = e2e::mean_over_steps(metrics, "critic/score_extra/rm_score", 1, 3);
  const double last = e2e::mean_over_steps(metrics, "critic/score_extra/rm_score", 10, 12);
  CHECK(last > first + 0.1);
  fs::remove_all(ws);
}

TEST_CASE("a reward model without a path, or not a sequence classifier, is refused by name", "[e2e][reward_model]") {
  const std::string ws = e2e::make_workspace("reward_model_refused", 8);
  const std::string config = e2e::write_config(ws, "refused", e2e::kQuickGrpo);
  const e2e::RunResult no_path = run(config, {"reward.reward_model.enable=true"});
  CHECK(no_path.status != 0);
  CHECK_THAT(no_path.output, Catch::Contains("reward.reward_model.model_path"));

  // The workspace's model is a causal LM.
  const e2e::RunResult causal_lm =
      run(config, {"reward.reward_model.enable=true", "reward.reward_model.model_path=" + ws + "/model"});
  CHECK(causal_lm.status != 0);
  CHECK_THAT(causal_lm.output, Catch::Contains("ForSequenceClassification") && Catch::Contains("config.json"));
  CHECK_THAT(causal_lm.output, !Catch::Contains("workers ready"));  // refused before any worker starts

  const e2e::RunResult bad_combine = run(config, {"reward.reward_model.combine=mean"});
  CHECK(bad_combine.status != 0);
  CHECK_THAT(bad_combine.output, Catch::Contains("reward.reward_model.combine"));
  fs::remove_all(ws);
}
