// The built-in arithmetic task: determinism, disjoint splits, correct ground
// truths (checked independently and by the reward plugin's grader), and files
// that the dataset loader reads.
#include <catch2/catch.hpp>

#include <fstream>
#include <set>

#include "arithmetic_grader.h"
#include "data_testing.h"
#include "rlcore/core/agent/agent_loop.h"
#include "rlcore/core/data/arithmetic_task.h"
#include "rlcore/core/data/dataset.h"
#include "rlcore/error.h"
#include "rlcore/tokenizer/tokenizer.h"

using rlcore::data::ArithmeticTaskOptions;
using rlcore::data::make_arithmetic_task;

namespace {

std::string prompt_of(const nlohmann::json& record) { return record["prompt"][0]["content"]; }

// "12+35=" -> 47, parsed here rather than taken from the generator.
int64_t solve(const std::string& prompt) {
  const size_t op = prompt.find_first_of("+-*", 1);
  const int64_t a = std::stoll(prompt.substr(0, op));
  const int64_t b = std::stoll(prompt.substr(op + 1, prompt.size() - op - 2));
  return prompt[op] == '+' ? a + b : prompt[op] == '-' ? a - b : a * b;
}

ArithmeticTaskOptions small_arithmetic(int64_t seed) {
  ArithmeticTaskOptions options;
  options.train = 3000;
  options.val = 200;
  options.seed = seed;
  return options;
}

size_t count_lines(const std::string& path) {
  std::ifstream in(path);
  size_t lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  return lines;
}

}  // namespace

TEST_CASE("the arithmetic task is deterministic in its seed", "[arithmetic]") {
  const auto a = make_arithmetic_task(small_arithmetic(1));
  const auto b = make_arithmetic_task(small_arithmetic(1));
  const auto c = make_arithmetic_task(small_arithmetic(2));
  CHECK(a.train == b.train);
  CHECK(a.val == b.val);
  CHECK(a.sft == b.sft);
  CHECK(a.train != c.train);
  CHECK(a.val != c.val);
}

TEST_CASE("validation problems are distinct and never in train", "[arithmetic]") {
  const auto data = make_arithmetic_task(small_arithmetic(3));
  REQUIRE(data.train.size() == 3000);
  REQUIRE(data.val.size() == 200);
  std::set<std::string> val;
  for (const auto& record : data.val) val.insert(prompt_of(record));
  CHECK(val.size() == data.val.size());
  for (const auto& record : data.train) CHECK_FALSE(val.count(prompt_of(record)));
}

TEST_CASE("every ground truth is right and the SFT response earns full reward", "[arithmetic]") {
  ArithmeticTaskOptions options = small_arithmetic(4);
  options.ops = {"+", "-", "*"};
  const auto data = make_arithmetic_task(options);
  const rlcore::reward::ArithmeticGrader grader;
  std::set<char> ops_seen;
  bool negative_seen = false;
  REQUIRE(data.sft.size() == data.train.size());
  for (size_t i = 0; i < data.train.size(); ++i) {
    const nlohmann::json& record = data.train[i];
    const std::string prompt = prompt_of(record);
    const std::string truth = record["reward_model"]["ground_truth"];
    CHECK(record["data_source"] == rlcore::data::kArithmeticDataSource);
    CHECK(truth == std::to_string(solve(prompt)));
    CHECK(prompt.size() == 6);  // two 2-digit operands, an operator and "="
    ops_seen.insert(prompt[2]);
    negative_seen = negative_seen || truth[0] == '-';
    // The SFT record is the RL record plus its response.
    nlohmann::json sft = data.sft[i];
    const std::string response = sft["response"];
    sft.erase("response");
    CHECK(sft == record);
    CHECK(grader.grade(response, truth, rlcore::data::kArithmeticDataSource, record["extra_info"]).score == 1.0);
    CHECK(grader.grade("#### " + std::to_string(solve(prompt) + 1), truth, "", nlohmann::json()).score == 0.0);
  }
  for (const auto& record : data.val)
    CHECK(record["reward_model"]["ground_truth"] == std::to_string(solve(prompt_of(record))));
  CHECK(ops_seen == std::set<char>{'+', '-', '*'});
  CHECK(negative_seen);
}

TEST_CASE("operands have exactly the requested digits", "[arithmetic]") {
  for (int digits : {1, 3}) {
    ArithmeticTaskOptions options = small_arithmetic(5);
    options.digits = digits;
    options.val = digits == 1 ? 20 : 200;
    for (const auto& record : make_arithmetic_task(options).train) {
      const int64_t a = record["extra_info"]["a"];
      const int64_t b = record["extra_info"]["b"];
      CHECK(std::to_string(a).size() == static_cast<size_t>(digits));
      CHECK(std::to_string(b).size() == static_cast<size_t>(digits));
    }
  }
}

TEST_CASE("bad task options are errors", "[arithmetic]") {
  ArithmeticTaskOptions options = small_arithmetic(1);
  options.digits = 0;
  CHECK_THROWS_AS(make_arithmetic_task(options), rlcore::ValueError);
  options = small_arithmetic(1);
  options.ops = {"/"};
  CHECK_THROWS_WITH(make_arithmetic_task(options), Catch::Contains("'/'"));
  options.ops = {"+", "-", "+"};
  CHECK_THROWS_WITH(make_arithmetic_task(options), Catch::Contains("'+' given twice"));
  options = small_arithmetic(1);
  options.digits = 1;
  options.val = 60;  // of 100 one-digit problems
  CHECK_THROWS_WITH(make_arithmetic_task(options), Catch::Contains("more than half"));
}

TEST_CASE("written files load as RL and SFT datasets with short prompts", "[arithmetic]") {
  rlcore::testing::ScratchDir dir("arithmetic");
  const auto data = make_arithmetic_task(small_arithmetic(6));
  const auto files = rlcore::data::write_arithmetic_task(data, (dir.path() / "task").string());
  CHECK(count_lines(files.train) == 3000);
  CHECK(count_lines(files.val) == 200);
  CHECK(count_lines(files.sft) == 3000);

  const rlcore::Tokenizer tokenizer = rlcore::make_builtin_tokenizer();
  rlcore::config::DataConfig config;
  config.prompt_template = "plain";
  config.max_prompt_length = 6;  // digits are single tokens, as are "+" and "="
  const auto plain = rlcore::data::Dataset::load({files.val}, config, tokenizer, false);
  REQUIRE(plain.size() == 200);
  CHECK(plain.at(0).ground_truth == data.val[0]["reward_model"]["ground_truth"]);
  CHECK(plain.at(0).data_source == "arithmetic");

  config.max_prompt_length = 5;
  CHECK_THROWS_AS(rlcore::data::Dataset::load({files.val}, config, tokenizer, false), rlcore::ValueError);

  // Chat adds 8: <|im_start|> "user" "\n" ... <|im_end|> "\n" <|im_start|> "assistant" "\n".
  config.prompt_template = "chat";
  config.max_prompt_length = 13;
  CHECK_THROWS_AS(rlcore::data::Dataset::load({files.sft}, config, tokenizer, true), rlcore::ValueError);
  config.max_prompt_length = 14;
  const auto sft = rlcore::data::Dataset::load({files.sft}, config, tokenizer, true);
  REQUIRE(sft.size() == 3000);
  const std::string truth = data.train[0]["reward_model"]["ground_truth"];
  CHECK(sft.at(0).response_ids.size() == truth.size() + 3);  // "####", " ", a token per digit, eos
  CHECK(sft.at(0).response_ids.back() == *tokenizer.eos_token_id());
}

TEST_CASE("the tool variant: verl's agent layout, a share of calculator demonstrations, SFT loss masks",
          "[arithmetic][agent]") {
  ArithmeticTaskOptions options;
  options.train = 1000;
  options.val = 50;
  options.digits = 3;
  options.ops = {"*"};
  options.tools = true;
  options.sft_tool_share = 0.3;
  const auto data = make_arithmetic_task(options);
  CHECK(data.train[0]["agent_name"] == "tool_agent");
  CHECK(data.val[0]["extra_info"]["tools_kwargs"].contains("calculator"));
  int64_t demonstrations = 0;
  for (const auto& record : data.sft) {
    if (!record["response"].is_array()) continue;
    ++demonstrations;
    const auto& turns = record["response"];
    REQUIRE(turns.size() == 3);
    const auto call = nlohmann::json::parse(
        turns[0]["content"].get<std::string>().substr(11, turns[0]["content"].get<std::string>().size() - 23));
    CHECK(call["name"] == "calculator");
    CHECK(std::to_string(solve(call["arguments"]["expression"].get<std::string>() + "=")) ==
          record["reward_model"]["ground_truth"]);
    CHECK(turns[1]["content"] == record["reward_model"]["ground_truth"]);
  }
  CHECK(demonstrations > 250);
  CHECK(demonstrations < 350);
  options.sft_tool_share = 1.5;
  CHECK_THROWS_WITH(make_arithmetic_task(options), Catch::Contains("tool share"));

  // Loaded for SFT through the agent loop's assembler: the tool's turn is out of the loss.
  rlcore::testing::ScratchDir dir("arithmetic_tool");
  options.sft_tool_share = 0.3;
  const auto files = rlcore::data::write_arithmetic_task(data, (dir.path() / "task").string());
  const rlcore::Tokenizer tokenizer = rlcore::make_builtin_tokenizer();
  const std::string chat_ml =
      "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
      "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
  rlcore::agent::AgentLoopSettings settings;
  settings.stop_token_id = *tokenizer.eos_token_id();
  settings.response_length = 200;
  auto loop = std::make_shared<rlcore::agent::AgentLoop>(
      settings, tokenizer, rlcore::chat::ChatTemplate::from_string(chat_ml), rlcore::agent::ToolSet());
  rlcore::config::DataConfig config;
  config.max_prompt_length = 32;
  config.max_response_length = 200;
  const auto assembler = [loop](const nlohmann::json& prompt, const nlohmann::json& response) {
    const auto trajectory = loop->assemble(prompt, response);
    return rlcore::data::AssembledResponse{trajectory.response_ids, trajectory.response_mask};
  };
  const auto sft = rlcore::data::Dataset::load({files.sft}, config, tokenizer, true, {}, assembler);
  int64_t masked = 0;
  for (int64_t i = 0; i < sft.size(); ++i) {
    const auto& example = sft.at(i);
    if (example.response_loss_mask.empty()) continue;
    ++masked;
    REQUIRE(example.response_loss_mask.size() == example.response_ids.size());
    const std::string truth = data.sft[static_cast<size_t>(i)]["reward_model"]["ground_truth"];
    std::vector<int32_t> tool_tokens;
    for (size_t t = 0; t < example.response_ids.size(); ++t) {
      if (example.response_loss_mask[t] == 0) tool_tokens.push_back(example.response_ids[t]);
    }
    CHECK(tokenizer.decode(tool_tokens) == "\n<|im_start|>tool\n" + truth + "<|im_end|>\n<|im_start|>assistant\n");
    CHECK(example.response_ids.back() == *tokenizer.eos_token_id());
    CHECK(example.response_loss_mask.back() == 1);
  }
  CHECK(masked == demonstrations);
  // Without an assembler a message list is an error naming the key.
  CHECK_THROWS_WITH(rlcore::data::Dataset::load({files.sft}, config, tokenizer, true),
                    Catch::Contains("'response' must be a string") && Catch::Contains("chat template"));
}
