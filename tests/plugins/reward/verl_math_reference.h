// The math graders' corpora (fixtures/*_corpus.json) and verl 0.9.1's verdicts
// on them, from reference/verl_math_graders.py. Include after catch.hpp.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../../common/reference_python.h"

namespace reward_test {

inline nlohmann::json load_corpus(const std::string& name) {
  std::ifstream in(rlcore_test::reference_script("plugins/reward/fixtures/" + name));
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

// verl's result for each of `cases` from the grader `grader` (math_dapo | prime),
// through a temporary corpus file.
inline nlohmann::json verl_results(const std::string& grader, const nlohmann::json& cases) {
  char path[] = "/tmp/rlcore_verl_math_corpus_XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  ::close(fd);
  std::ofstream(path) << cases.dump();
  const std::string output = rlcore_test::run_reference(
      rlcore_test::reference_script("plugins/reward/reference/verl_math_graders.py"), {grader, path});
  std::remove(path);
  // The result is the last line; verl may print before it (and the reference's stderr is merged in).
  const std::string trimmed = output.substr(0, output.find_last_not_of('\n') + 1);
  const nlohmann::json reply = nlohmann::json::parse(trimmed.substr(trimmed.rfind('\n') + 1));
  CHECK(reply.at("verl") == "0.9.1");
  return reply.at("results");
}

}  // namespace reward_test
