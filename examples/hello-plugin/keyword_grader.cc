// KeywordGrader: with no configured keywords, the ground truth's
// comma-separated words are the keywords.
#include "keyword_grader.h"

#include <algorithm>
#include <cctype>
#include <sstream>

namespace hello {
namespace {

std::string fold(std::string_view text, bool case_sensitive) {
  std::string folded(text);
  if (!case_sensitive) {
    std::transform(folded.begin(), folded.end(), folded.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  }
  return folded;
}

std::vector<std::string> split_commas(std::string_view text) {
  std::vector<std::string> words;
  std::stringstream in{std::string(text)};
  std::string word;
  while (std::getline(in, word, ',')) {
    word.erase(0, word.find_first_not_of(' '));
    word.erase(word.find_last_not_of(' ') + 1);
    if (!word.empty()) words.push_back(word);
  }
  return words;
}

}  // namespace

KeywordGrader::KeywordGrader(KeywordOptions options) : options_(std::move(options)) {}

rlcore::GradeResult KeywordGrader::grade(std::string_view response, std::string_view ground_truth, std::string_view,
                                         const nlohmann::json&) const {
  const auto keywords = options_.keywords.empty() ? split_commas(ground_truth) : options_.keywords;
  if (keywords.empty()) return {0.0, {{"found", 0.0}}};
  const std::string haystack = fold(response, options_.case_sensitive);
  double found = 0;
  for (const auto& keyword : keywords) {
    if (haystack.find(fold(keyword, options_.case_sensitive)) != std::string::npos) found += 1;
  }
  return {found / static_cast<double>(keywords.size()), {{"found", found}}};
}

}  // namespace hello
