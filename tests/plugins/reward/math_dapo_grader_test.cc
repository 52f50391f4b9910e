// The math_dapo grader against verl 0.9.1's math_dapo.py: a recorded corpus
// (fixtures/math_dapo_corpus.json) plus generated huge responses, each scored by
// verl's own compute_score (reference/verl_math_graders.py) and by the C++ grader.
#include <catch2/catch.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "math_dapo_grader.h"
#include "verl_math_reference.h"

namespace {

using reward_test::load_corpus;
using reward_test::verl_results;
using rlcore::reward::math_dapo_verify;
using rlcore::reward::MathDapoGrader;
using rlcore::reward::MathDapoOptions;
using rlcore::reward::normalize_final_answer;

nlohmann::json generated_cases() {
  nlohmann::json cases = nlohmann::json::array();
  const auto add = [&](std::string response, std::string truth) {
    cases.push_back(
        {{"response", std::move(response)}, {"ground_truth", std::move(truth)}, {"strict_box_verify", false}});
  };
  add(std::string(1 << 20, 'a') + "Answer: 42", "42");
  add("Answer: 42\n" + std::string(1 << 20, 'b'), "42");
  add(std::string(1 << 20, '{') + "\\boxed{42}", "42");
  add("\\boxed{" + std::string(200000, '{') + "42", "42");
  add("Answer: " + std::string(100000, '$'), "");
  add("Answer: " + std::string(250, 'x') + "frac" + std::string(20, '1'), "x");
  return cases;
}

}  // namespace

TEST_CASE("math_dapo agrees with verl 0.9.1's compute_score on every corpus case") {
  nlohmann::json cases = load_corpus("math_dapo_corpus.json");
  REQUIRE(cases.size() > 100);
  for (const auto& extra : generated_cases()) cases.push_back(extra);
  const nlohmann::json expected = verl_results("math_dapo", cases);
  REQUIRE(expected.size() == cases.size());

  int agreed = 0;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const std::string response = cases[i].at("response");
    const std::string truth = cases[i].at("ground_truth");
    const bool strict = cases[i].at("strict_box_verify");
    INFO("case " << i << ": response " << nlohmann::json(response.substr(0, 300)).dump() << ", truth "
                 << nlohmann::json(truth).dump() << (strict ? " (strict)" : ""));
    const auto verdict = math_dapo_verify(response, truth, strict);
    CHECK(verdict.correct == expected[i].at("acc").get<bool>());
    if (expected[i].at("pred").is_null()) {
      CHECK_FALSE(verdict.pred.has_value());
    } else {
      REQUIRE(verdict.pred.has_value());
      CHECK(*verdict.pred == expected[i].at("pred").get<std::string>());
    }
    MathDapoOptions options;
    options.strict_box_verify = strict;
    const auto result = MathDapoGrader(options).grade(response, truth, "math_dapo", nlohmann::json::object());
    CHECK(result.score == expected[i].at("score").get<double>());
    agreed += verdict.correct == expected[i].at("acc").get<bool>() ? 1 : 0;
  }
  CHECK(agreed == static_cast<int>(cases.size()));
}

TEST_CASE("math_dapo scores 1 / -1 with acc, and pred only when it is a number") {
  const MathDapoGrader grader;
  const auto right = grader.grade("Answer: 1,000", "1000", "math_dapo", nlohmann::json::object());
  CHECK(right.score == 1.0);
  CHECK(right.extras.at("acc") == 1.0);
  CHECK(right.extras.at("pred") == 1000.0);
  const auto wrong = grader.grade("Answer: -2.5", "3", "aime2024", nlohmann::json::object());
  CHECK(wrong.score == -1.0);
  CHECK(wrong.extras.at("acc") == 0.0);
  CHECK(wrong.extras.at("pred") == -2.5);
  const auto text = grader.grade("Answer: \\frac{1}{2}", "\\frac12", "math", nlohmann::json::object());
  CHECK(text.score == 1.0);
  CHECK(text.extras.count("pred") == 0);
  const auto none = grader.grade("no answer", "1", "math", nlohmann::json::object());
  CHECK(none.score == -1.0);
  CHECK(none.extras.count("pred") == 0);  // "[INVALID]"
  for (const char* not_numeric : {"Answer: inf", "Answer: nan", "Answer: 1e999", "Answer: 0x10", "Answer: 1-"}) {
    INFO(not_numeric);
    CHECK(grader.grade(not_numeric, "1", "", nlohmann::json::object()).extras.count("pred") == 0);
  }
}

TEST_CASE("math_dapo strict_box_verify compares the boxed text as written") {
  MathDapoOptions strict;
  strict.strict_box_verify = true;
  const MathDapoGrader grader(strict);
  CHECK(grader.grade("\\boxed{42}", "42", "", nlohmann::json::object()).score == 1.0);
  CHECK(grader.grade("Answer: 42", "42", "", nlohmann::json::object()).score == -1.0);
  CHECK(grader.grade("\\boxed{0.5}", "\\frac{1}{2}", "", nlohmann::json::object()).score == -1.0);
  CHECK(grader.grade("\\boxed{42}" + std::string(100, ' '), "42", "", nlohmann::json::object()).score == -1.0);
}

TEST_CASE("normalize_final_answer follows verl's substitutions and regexes") {
  CHECK(normalize_final_answer("x = 1,000") == "1000");
  CHECK(normalize_final_answer("1,000,x") == "1,000,x");
  CHECK(normalize_final_answer("\\fracab") == "\\frac{a}{b}");
  CHECK(normalize_final_answer("\\sqrt2") == "\\sqrt{2}");
  CHECK(normalize_final_answer("$a$ and $b$") == "a");
  CHECK(normalize_final_answer("\\text{(C)}") == "(C)");
  CHECK(normalize_final_answer("\\boxed{\\boxed{7}}") == "\\boxed{7}");
  CHECK(normalize_final_answer("5 \\text{ cm}") == "5");
  CHECK(normalize_final_answer("\xc2\xb2") == "\xc2\xb2");  // superscript two: isdigit, kept
  const std::string ideographic_space = "\xe3\x80\x80";
  CHECK(normalize_final_answer(ideographic_space + "7" + ideographic_space) == "7");
}
