// The scoring rule the answer-extracting graders share (verl's): no answer
// scores 0, a wrong answer format_score, a right one score; extras acc and format_ok.
#pragma once

#include "rlcore/grader.h"

namespace rlcore::reward {

inline GradeResult score_answer(bool answer_found, bool correct, double score, double format_score) {
  GradeResult result;
  result.score = !answer_found ? 0.0 : correct ? score : format_score;
  result.extras["acc"] = correct ? 1.0 : 0.0;
  result.extras["format_ok"] = answer_found ? 1.0 : 0.0;
  return result;
}

}  // namespace rlcore::reward
