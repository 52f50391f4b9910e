// The `sandbox_fusion` grader: verl 0.9.1's verl/utils/reward_score/sandbox_fusion/:
// the response's code block is run on each test case of the ground truth by a
// SandboxFusion server (POST <url> {code, language, stdin, compile/run timeouts,
// memory_limit_MB}); the score is the fraction of test cases passed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlcore/grader.h"

namespace rlcore::reward {

// What to do when the sandbox cannot be asked (unreachable, HTTP error, no reply
// in time, a body that is not a JSON object).
enum class SandboxApiErrors {
  kRaise,     // rlcore: the batch fails with an error naming the URL
  kFailCase,  // verl: the test case counts as not passed (its -1)
};

struct SandboxFusionOptions {
  std::string url;              // the run_code endpoint, e.g. http://host:8080/run_code; empty: refuses to grade
  int64_t max_concurrent = 64;  // sandbox requests in flight at once (verl's concurrent_semaphore)
  int64_t memory_limit_mb = 1024;
  double timeout_s = 10;   // compile_timeout and run_timeout of each test case (verl's timeout)
  bool continuous = true;  // score the first 10 test cases only (default_compute_score's continuous=True)
  SandboxApiErrors api_errors = SandboxApiErrors::kRaise;
  double retry_delay_s = 1;   // after a 504: delay * attempt (verl: 1 s, 2 s); not a config key
  double api_timeout_s = 10;  // a request may take 2 * timeout_s + this (verl's API_TIMEOUT); not a config key
};

// Per test case, verl's check_correctness codes: true (passed), false (wrong
// answer), -1 API or sandbox error, -2 runtime error, -3 time limit, -4 compile error.
enum class CaseResult { kPassed, kWrongAnswer, kApiError, kRuntimeError, kTimeLimit, kCompileError };

// verl's _process_single_case classification of one sandbox reply (a JSON object).
CaseResult classify_sandbox_reply(const nlohmann::json& reply, const nlohmann::ordered_json& expected_output);

// The code verl sends: the first ```python block (or the first ``` block, minus a
// language line); nullopt when the response has no ``` at all (score 0).
std::optional<std::string> extract_code(std::string_view completion);

// Python's str() of a JSON value as json.loads would have made it (stdin and
// expected outputs go through str() in verl): strings as they are, None,
// True/False, Python's list/dict reprs.
std::string python_str_of(const nlohmann::ordered_json& value);

// The scoring: grade_batch runs every test case of every sample, at most
// max_concurrent at a time, and is the only way in (grade() is a batch of one).
// Extras: none (verl's compute_score returns only the score to the reward).
class SandboxFusionGrader final : public Grader, public BatchGrader {
 public:
  explicit SandboxFusionGrader(SandboxFusionOptions options);

  GradeResult grade(std::string_view response, std::string_view ground_truth, std::string_view data_source,
                    const nlohmann::json& extra) const override;

  // Throws ConfigError without a url, IoError / FormatError naming the URL, the
  // sample and the test case when the sandbox cannot be asked (api_errors: raise).
  std::vector<GradeResult> grade_batch(const std::vector<GradeRequest>& requests) const override;

 private:
  SandboxFusionOptions options_;
  std::string base_url_;  // scheme://host:port of url
  std::string path_;      // the rest of url ("/" when none)
};

}  // namespace rlcore::reward
