// A small real grader: the fraction of required keywords the response contains.
#pragma once

#include <string>
#include <vector>

#include "rlcore/grader.h"

namespace hello {

struct KeywordOptions {
  std::vector<std::string> keywords;  // every keyword the response should mention
  bool case_sensitive = false;
};

class KeywordGrader final : public rlcore::Grader {
 public:
  explicit KeywordGrader(KeywordOptions options);
  rlcore::GradeResult grade(std::string_view response, std::string_view ground_truth, std::string_view data_source,
                            const nlohmann::json& extra) const override;

 private:
  KeywordOptions options_;
};

}  // namespace hello
