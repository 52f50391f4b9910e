// The gsm8k-style task: determinism, disjoint splits, worked answers whose
// every step is right (checked here, not taken from the generator), ground
// truths as verl's extract_solution and the gsm8k grader read them, and
// parquet files in exactly the schema verl's examples/data_preprocess/gsm8k.py
// writes, read back by pyarrow and by the dataset loader.
#include <catch2/catch.hpp>

#include <regex>
#include <set>

#include "../../common/reference_python.h"
#include "data_testing.h"
#include "gsm8k_grader.h"
#include "rlcore/core/data/dataset.h"
#include "rlcore/core/data/gsm8k_style_task.h"
#include "rlcore/error.h"
#include "rlcore/tokenizer/tokenizer.h"

using nlohmann::json;
using rlcore::data::Gsm8kStyleTaskOptions;
using rlcore::data::make_gsm8k_style_task;

namespace {

Gsm8kStyleTaskOptions small_gsm8k(int64_t seed) {
  Gsm8kStyleTaskOptions options;
  options.train = 400;
  options.test = 100;
  options.seed = seed;
  return options;
}

// "12+30+5" or "48/2": one kind of operator, evaluated here.
int64_t evaluate(const std::string& expression) {
  static const std::regex term(R"(([+\-*/]?)(\d+))");
  int64_t value = 0;
  for (auto it = std::sregex_iterator(expression.begin(), expression.end(), term); it != std::sregex_iterator(); ++it) {
    const int64_t operand = std::stoll((*it)[2]);
    const std::string op = (*it)[1];
    if (op.empty() || op == "+") {
      value = op.empty() ? operand : value + operand;
    } else if (op == "-") {
      value -= operand;
    } else if (op == "*") {
      value *= operand;
    } else {
      REQUIRE(operand != 0);
      REQUIRE(value % operand == 0);  // grade-school division comes out even
      value /= operand;
    }
  }
  return value;
}

// verl's extract_solution (examples/data_preprocess/gsm8k.py).
std::string verl_extract_solution(const std::string& answer) {
  static const std::regex solution(R"(#### (\-?[0-9\.\,]+))");
  std::smatch match;
  REQUIRE(std::regex_search(answer, match, solution));
  std::string text = match[1];
  text.erase(std::remove(text.begin(), text.end(), ','), text.end());
  return text;
}

}  // namespace

TEST_CASE("gsm8k-style: the same seed gives the same problems, splits are disjoint", "[data][gsm8k_style]") {
  const auto data = make_gsm8k_style_task(small_gsm8k(3));
  CHECK(data.train == make_gsm8k_style_task(small_gsm8k(3)).train);
  CHECK(data.test == make_gsm8k_style_task(small_gsm8k(3)).test);
  CHECK(data.train != make_gsm8k_style_task(small_gsm8k(4)).train);
  REQUIRE(data.train.size() == 400);
  REQUIRE(data.test.size() == 100);
  std::set<std::string> test_questions;
  for (size_t i = 0; i < data.test.size(); ++i) {
    CHECK(data.test[i]["extra_info"]["index"] == i);
    CHECK(data.test[i]["extra_info"]["split"] == "test");
    test_questions.insert(data.test[i]["extra_info"]["question"].get<std::string>());
  }
  CHECK(test_questions.size() == data.test.size());
  std::set<std::string> templates;
  for (const auto& record : data.train) {
    CHECK(test_questions.count(record["extra_info"]["question"].get<std::string>()) == 0);
    templates.insert(record["extra_info"]["question"].get<std::string>().substr(0, 12));
  }
  CHECK(templates.size() > 20);  // many templates and names, not one problem repeated
  CHECK_THROWS_AS(make_gsm8k_style_task({-1, 0, 1}), rlcore::ValueError);
}

TEST_CASE("gsm8k-style: every step is right and the ground truth is what verl and the grader read",
          "[data][gsm8k_style]") {
  const auto data = make_gsm8k_style_task(small_gsm8k(1));
  const rlcore::reward::Gsm8kGrader grader;
  static const std::regex step(R"(<<([0-9+\-*/]+)=(-?\d+)>>(-?\d+))");
  for (const auto& record : data.train) {
    const std::string answer = record["extra_info"]["answer"];
    const std::string truth = record["reward_model"]["ground_truth"];
    INFO(answer);
    CHECK(record["data_source"] == "openai/gsm8k");
    CHECK(record["ability"] == "math");
    CHECK(record["reward_model"]["style"] == "rule");
    CHECK(record["prompt"].size() == 1);
    CHECK(record["prompt"][0]["role"] == "user");
    CHECK(record["prompt"][0]["content"] ==
          record["extra_info"]["question"].get<std::string>() + " " + rlcore::data::kGsm8kInstruction);
    int64_t last = 0;
    int steps = 0;
    for (auto it = std::sregex_iterator(answer.begin(), answer.end(), step); it != std::sregex_iterator(); ++it) {
      const int64_t value = std::stoll((*it)[2]);
      CHECK(evaluate((*it)[1]) == value);
      CHECK((*it)[3] == (*it)[2]);
      last = value;
      ++steps;
    }
    CHECK(steps >= 2);
    CHECK(std::to_string(last) == truth);
    CHECK(verl_extract_solution(answer) == truth);
    CHECK(grader.grade(answer, truth, "openai/gsm8k", json()).score == 1.0);
    CHECK(grader.grade("#### " + std::to_string(last + 1), truth, "openai/gsm8k", json()).score == 0.0);
  }
}

TEST_CASE("gsm8k-style: the files have verl's GSM8K parquet schema and load as a dataset", "[data][gsm8k_style]") {
  rlcore::testing::ScratchDir dir("gsm8k_style");
  const auto data = make_gsm8k_style_task(small_gsm8k(2));
  const auto files = rlcore::data::write_gsm8k_style_task(data, (dir.path() / "gsm8k").string());
  CHECK(files.train == (dir.path() / "gsm8k" / "train.parquet").string());
  CHECK(files.test == (dir.path() / "gsm8k" / "test.parquet").string());

  const json read = json::parse(rlcore_test::run_reference(
      rlcore_test::reference_script("core/data/reference/parquet_reference.py"), {"read", files.train}));
  // What `datasets` writes for verl's gsm8k.py records (struct fields sorted).
  CHECK(read["schema"] ==
        json::array({"data_source: string", "prompt: list<element: struct<content: string, role: string>>",
                     "ability: string", "reward_model: struct<ground_truth: string, style: string>",
                     "extra_info: struct<answer: string, index: int64, question: string, "
                     "split: string>"}));
  CHECK(read["rows"] == json(data.train));

  const rlcore::Tokenizer tokenizer = rlcore::make_builtin_tokenizer();
  rlcore::config::DataConfig config;
  config.max_prompt_length = 1024;
  const auto test = rlcore::data::Dataset::load({files.test}, config, tokenizer, false);
  REQUIRE(test.size() == 100);
  CHECK(test.at(7).data_source == "openai/gsm8k");
  CHECK(test.at(7).ground_truth == data.test[7]["reward_model"]["ground_truth"]);
  CHECK(test.at(7).extra_info == data.test[7]["extra_info"]);
}
