// The `custom_function` grader: verl's custom_reward_function. A user's Python
// file defines compute_score(data_source, solution_str, ground_truth,
// extra_info, **reward_kwargs); a long-lived interpreter runs it, one JSON line
// per batch (protocol: docs/custom-rewards.md).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlcore/grader.h"

namespace rlcore::process {
class JsonLinesProcess;
}

namespace rlcore::reward {

struct CustomFunctionOptions {
  std::string path;                                         // the Python file; empty: the grader refuses to grade
  std::string name = "compute_score";                       // the function in it
  std::string python = "python3";                           // interpreter, looked up in PATH
  double timeout_s = 300.0;                                 // per batch, including the interpreter's start
  nlohmann::json reward_kwargs = nlohmann::json::object();  // extra keyword arguments of every call
};

// Extras: the numeric keys besides "score" of a dict result (verl's
// reward_extra_info); non-numeric ones (verl's "pred" strings) are left out.
class CustomFunctionGrader final : public Grader, public BatchGrader {
 public:
  // Throws rlcore::ValueError when path is set but is not a readable file.
  // The interpreter starts at the first batch.
  explicit CustomFunctionGrader(CustomFunctionOptions options);
  ~CustomFunctionGrader() override;

  // One sample as a batch of one; throws like grade_batch.
  GradeResult grade(std::string_view response, std::string_view ground_truth, std::string_view data_source,
                    const nlohmann::json& extra) const override;

  // Throws rlcore::ValueError (the program died, timed out or raised) or
  // rlcore::FormatError (a reply that breaks the protocol), naming this
  // grader, path:name, the batch and the cause. The next batch starts a new process.
  std::vector<GradeResult> grade_batch(const std::vector<GradeRequest>& requests) const override;

  // The interpreter's pid, or -1 before the first batch and after a failure.
  int process_id() const;

 private:
  std::string where(int64_t batch) const;
  std::vector<GradeResult> parse_reply(const std::string& line, int64_t batch, size_t count) const;

  CustomFunctionOptions options_;
  mutable std::mutex mutex_;  // one batch at a time through the pipe
  mutable std::unique_ptr<process::JsonLinesProcess> process_;
  mutable int64_t next_batch_ = 0;
};

// The Python adapter run with `python -c`: imports the file, then answers lines.
extern const char* const kCustomFunctionAdapter;

}  // namespace rlcore::reward
