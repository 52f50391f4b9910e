// The `search_r1_like_qa_em` grader: verl 0.9.1's
// verl/utils/reward_score/search_r1_like_qa_em.py (Search-R1's exact match):
// the last <answer>...</answer> of the response, normalised as SQuAD does
// (lowercase, no punctuation, no articles, single spaces), equal to one of the
// ground truth's targets.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rlcore/grader.h"

namespace rlcore::reward {

struct SearchR1Options {
  double format_score = 0.0;  // Score when an answer is found but matches no target.
  double score = 1.0;         // Score on a match (a quarter of it past 10 answer tags).
};

// normalize_answer: lower(), ASCII punctuation removed, the words a / an / the
// replaced by a space, whitespace runs collapsed to one space and trimmed.
std::string normalize_qa_answer(std::string_view text);

// extract_solution: the stripped text of the last <answer>...</answer>; nullopt without one.
std::optional<std::string> extract_tagged_answer(std::string_view response);

// The ground truth's targets: verl's {"target": [...] or "..."}, as the dataset
// hands it over (JSON text), or a plain string taken as the one target.
std::vector<std::string> qa_targets(std::string_view ground_truth);

// Extras: "acc" (1 on a match) and "format_ok" (1 when an answer was found).
class SearchR1Grader final : public Grader {
 public:
  explicit SearchR1Grader(SearchR1Options options = {});

  GradeResult grade(std::string_view response, std::string_view ground_truth, std::string_view data_source,
                    const nlohmann::json& extra) const override;

 private:
  SearchR1Options options_;
};

}  // namespace rlcore::reward
