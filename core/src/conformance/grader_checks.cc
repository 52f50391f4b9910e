// Contract checks for graders (kind `reward`): any response text scores a
// finite number without throwing, the same input scores the same, and
// concurrent calls agree with sequential ones (graders must be thread-safe).
#include <cmath>
#include <future>

#include <nlohmann/json.hpp>

#include "conformance/conformance.h"
#include "rlcore/error.h"
#include "rlcore/grader.h"

namespace rlcore::conformance {
namespace {

std::shared_ptr<Grader> make_grader(CheckEnv& env) {
  auto made = std::static_pointer_cast<Grader>(env.candidate.factory(env.candidate_options, {}));
  if (!made) throw ValueError("the factory of reward '" + env.candidate.name + "' returned null");
  return made;
}

// Ordinary answers and text a grader's parser may trip over.
std::vector<std::string> responses() {
  return {"The answer is 42.",
          "#### 42",
          "\\boxed{42}",
          "",
          " ",
          "\\boxed{",
          "}}}{{{ \\frac{1}{0} $$ \\sqrt[",
          std::string("\0\xff\xfe binary", 11),
          "caf\xc3\xa9 \xe2\x88\x9a"
          "2 \xf0\x9f\x99\x82",  // split: \x9a2 would be one escape
          "\xc3\x28 invalid utf-8",
          std::string(20000, '9'),
          std::string(2000, '(') + "1" + std::string(2000, ')'),
          "-0.0000000000000000000000000001e999999"};
}

std::string label(size_t i) { return "response " + std::to_string(i); }

Outcome check_any_text(CheckEnv& env) {
  auto grader = make_grader(env);
  const nlohmann::json extra = nlohmann::json::object();
  const auto texts = responses();
  for (size_t i = 0; i < texts.size(); ++i) {
    for (const char* truth : {"42", "", "\\frac{1}{2}"}) {
      GradeResult result;
      try {
        result = grader->grade(texts[i], truth, "", extra);
      } catch (const std::exception& e) {
        return Outcome::fail(label(i) + " with ground truth '" + truth + "' threw: " + e.what());
      }
      if (!std::isfinite(result.score)) return Outcome::fail(label(i) + ": the score is not finite");
      for (const auto& [name, value] : result.extras) {
        if (!std::isfinite(value)) return Outcome::fail(label(i) + ": extra '" + name + "' is not finite");
      }
    }
  }
  return Outcome::pass();
}

bool same(const GradeResult& a, const GradeResult& b) { return a.score == b.score && a.extras == b.extras; }

Outcome check_deterministic(CheckEnv& env) {
  auto grader = make_grader(env);
  const nlohmann::json extra = nlohmann::json::object();
  const auto texts = responses();
  for (size_t i = 0; i < texts.size(); ++i) {
    if (!same(grader->grade(texts[i], "42", "", extra), grader->grade(texts[i], "42", "", extra))) {
      return Outcome::fail(label(i) + " scored differently twice");
    }
  }
  return Outcome::pass();
}

Outcome check_thread_safe(CheckEnv& env) {
  auto grader = make_grader(env);
  const nlohmann::json extra = nlohmann::json::object();
  const auto texts = responses();
  std::vector<GradeResult> sequential;
  for (const auto& text : texts) sequential.push_back(grader->grade(text, "42", "", extra));
  std::vector<std::future<std::vector<GradeResult>>> threads;
  for (int t = 0; t < 4; ++t) {
    threads.push_back(std::async(std::launch::async, [&] {
      std::vector<GradeResult> out;
      for (int round = 0; round < 5; ++round) {
        for (const auto& text : texts) out.push_back(grader->grade(text, "42", "", extra));
      }
      return out;
    }));
  }
  for (auto& thread : threads) {
    const auto results = thread.get();
    for (size_t k = 0; k < results.size(); ++k) {
      if (!same(results[k], sequential[k % texts.size()])) {
        return Outcome::fail(label(k % texts.size()) + " scored differently on 4 concurrent threads");
      }
    }
  }
  return Outcome::pass();
}

}  // namespace

std::vector<Check> grader_checks() {
  return {{"create",
           [](CheckEnv& env) {
             // Made and asked once: a grader that needs an option to work (custom_function's
             // path) says so with a ConfigError here, which skips its checks.
             make_grader(env)->grade("42", "42", "conformance", nlohmann::json::object());
             return Outcome::pass();
           }},
          {"any_text", check_any_text},
          {"deterministic", check_deterministic},
          {"thread_safe", check_thread_safe}};
}

}  // namespace rlcore::conformance
