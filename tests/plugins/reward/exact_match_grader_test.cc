// The exact_match grader and its strip / case options.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "exact_match_grader.h"

namespace {

using rlcore::reward::ExactMatchGrader;
using rlcore::reward::ExactMatchOptions;

double score(const ExactMatchOptions& opts, std::string_view response, std::string_view truth) {
  return ExactMatchGrader(opts).grade(response, truth, "", nlohmann::json()).score;
}

}  // namespace

TEST_CASE("exact_match defaults: trimmed, case-sensitive") {
  const ExactMatchOptions defaults;
  CHECK(score(defaults, "Paris", "Paris") == 1.0);
  CHECK(score(defaults, " Paris\n", "\tParis ") == 1.0);
  CHECK(score(defaults, "paris", "Paris") == 0.0);
  CHECK(score(defaults, "Paris, France", "Paris") == 0.0);
  CHECK(score(defaults, "", "") == 1.0);
  CHECK(score(defaults, " \n", "") == 1.0);
  CHECK(score(defaults, "", "Paris") == 0.0);
}

TEST_CASE("exact_match options") {
  ExactMatchOptions raw;
  raw.strip = false;
  CHECK(score(raw, " Paris", "Paris") == 0.0);
  CHECK(score(raw, "Paris", "Paris") == 1.0);

  ExactMatchOptions any_case;
  any_case.case_sensitive = false;
  any_case.score = 3.0;
  CHECK(score(any_case, "PARIS", "paris") == 3.0);
  CHECK(score(any_case, "PARIS", "pari") == 0.0);
  // Only ASCII letters fold: "\xc3\x80" (A grave) and "\xc3\xa0" (a grave) differ.
  CHECK(score(any_case, "P\xc3\x80RIS", "p\xc3\xa0ris") == 0.0);

  const auto result = ExactMatchGrader(any_case).grade("Yes", "yes", "", nlohmann::json());
  CHECK(result.extras.at("acc") == 1.0);
}
