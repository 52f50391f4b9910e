// Properties every grader must have: no throw on arbitrary text, a score from
// its documented set, and the same results when called from several threads.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "arithmetic_grader.h"
#include "exact_match_grader.h"
#include "gsm8k_grader.h"
#include "math_dapo_grader.h"
#include "math_grader.h"
#include "prime_math_grader.h"
#include "search_r1_grader.h"

namespace {

using rlcore::Grader;
using rlcore::GradeResult;

// Pieces that steer the parsers into their corner cases, plus invalid UTF-8.
const std::vector<std::string> kPieces = {"\\boxed",
                                          "\\boxed ",
                                          "\\boxed{",
                                          "\\fbox{",
                                          "{",
                                          "}",
                                          "$",
                                          "\\frac",
                                          "\\sqrt",
                                          "\\text{ ",
                                          "#### ",
                                          "####",
                                          "-",
                                          "1",
                                          "0",
                                          ".",
                                          ",",
                                          "=",
                                          "/",
                                          " ",
                                          "\n",
                                          "0.5",
                                          "\\\\",
                                          "\\!",
                                          "\xc3\xa9",
                                          "\xff",
                                          "\xe2\x88",
                                          "x",
                                          "\\left",
                                          "^\\circ",
                                          "\\%",
                                          "dfrac",
                                          "Answer:",
                                          "answer :",
                                          "\\text{",
                                          "$$",
                                          "frac",
                                          "sqrt",
                                          "\u017f",
                                          "\u3000",
                                          "answer is",
                                          "Interval(",
                                          "Point(",
                                          "_2",
                                          "\\pi",
                                          "1e400",
                                          "\\begin{pmatrix}",
                                          "nan",
                                          "1,000",
                                          "<answer>",
                                          "</answer>",
                                          "the",
                                          "a ",
                                          "\u03a3",
                                          "\u0130",
                                          "{\"target\": [",
                                          "\"",
                                          "]}"};

std::string random_text(std::mt19937& rng) {
  std::uniform_int_distribution<std::size_t> length(0, 24);
  std::uniform_int_distribution<std::size_t> pick(0, kPieces.size() - 1);
  std::string text;
  for (std::size_t n = length(rng); n > 0; --n) text += kPieces[pick(rng)];
  return text;
}

struct Subject {
  std::unique_ptr<Grader> grader;
  std::vector<double> allowed_scores;
};

std::vector<Subject> subjects() {
  std::vector<Subject> out;
  rlcore::reward::Gsm8kOptions strict;
  strict.format_score = 0.1;
  rlcore::reward::Gsm8kOptions flexible = strict;
  flexible.method = rlcore::reward::Gsm8kMethod::kFlexible;
  rlcore::reward::MathOptions math;
  math.format_score = 0.1;
  rlcore::reward::ArithmeticOptions arithmetic;
  arithmetic.format_score = 0.1;
  out.push_back({std::make_unique<rlcore::reward::Gsm8kGrader>(strict), {0.0, 0.1, 1.0}});
  out.push_back({std::make_unique<rlcore::reward::Gsm8kGrader>(flexible), {0.0, 0.1, 1.0}});
  out.push_back({std::make_unique<rlcore::reward::MathGrader>(math), {0.0, 0.1, 1.0}});
  out.push_back({std::make_unique<rlcore::reward::ArithmeticGrader>(arithmetic), {0.0, 0.1, 1.0}});
  out.push_back({std::make_unique<rlcore::reward::ExactMatchGrader>(), {0.0, 1.0}});
  rlcore::reward::MathDapoOptions strict_box;
  strict_box.strict_box_verify = true;
  out.push_back({std::make_unique<rlcore::reward::MathDapoGrader>(), {-1.0, 1.0}});
  out.push_back({std::make_unique<rlcore::reward::MathDapoGrader>(strict_box), {-1.0, 1.0}});
  out.push_back({std::make_unique<rlcore::reward::PrimeMathGrader>(), {0.0, 1.0}});
  out.push_back({std::make_unique<rlcore::reward::SearchR1Grader>(rlcore::reward::SearchR1Options{0.1, 1.0}),
                 {0.0, 0.1, 0.25, 1.0}});
  return out;
}

bool same(const GradeResult& a, const GradeResult& b) { return a.score == b.score && a.extras == b.extras; }

}  // namespace

TEST_CASE("graders never throw and score within their documented set") {
  std::mt19937 rng(20240601);
  const std::vector<Subject> all = subjects();
  const nlohmann::json extra = nlohmann::json::object();
  for (int i = 0; i < 3000; ++i) {
    const std::string response = random_text(rng);
    const std::string truth = random_text(rng);
    for (const Subject& subject : all) {
      GradeResult result;
      REQUIRE_NOTHROW(result = subject.grader->grade(response, truth, "", extra));
      INFO("response: " << response << "\ntruth: " << truth);
      CHECK(std::count(subject.allowed_scores.begin(), subject.allowed_scores.end(), result.score) == 1);
    }
  }
}

TEST_CASE("graders give identical results from concurrent threads") {
  std::mt19937 rng(7);
  std::vector<std::pair<std::string, std::string>> inputs;
  for (int i = 0; i < 200; ++i) inputs.emplace_back(random_text(rng), random_text(rng));
  inputs.emplace_back("\\boxed{\\frac{1}{2}}", "0.5");
  inputs.emplace_back("#### 72", "72");

  const std::vector<Subject> all = subjects();
  for (const Subject& subject : all) {
    std::vector<GradeResult> expected;
    for (const auto& [response, truth] : inputs) {
      expected.push_back(subject.grader->grade(response, truth, "", nlohmann::json()));
    }
    constexpr int kThreads = 4;
    std::vector<int> mismatches(kThreads, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int round = 0; round < 5; ++round) {
          for (std::size_t i = 0; i < inputs.size(); ++i) {
            const GradeResult got = subject.grader->grade(inputs[i].first, inputs[i].second, "", nlohmann::json());
            if (!same(got, expected[i])) ++mismatches[t];
          }
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    for (const int count : mismatches) CHECK(count == 0);
  }
}
