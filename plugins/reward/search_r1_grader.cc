// The `search_r1_like_qa_em` grader, following verl's Python step by step over
// code points (python_unicode.h), so non-English answers normalise as in verl.
#include "search_r1_grader.h"

#include <nlohmann/json.hpp>

#include "answer_score.h"
#include "python_str.h"
#include "python_unicode.h"

namespace rlcore::reward {
namespace {

constexpr std::string_view kOpenTag = "<answer>";
constexpr std::string_view kCloseTag = "</answer>";
constexpr std::size_t kMaxTagsAtFullScore = 10;

bool is_ascii_punctuation(char c) {  // string.punctuation
  return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') || (c >= '{' && c <= '~');
}

std::string remove_punctuation(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text)
    if (!is_ascii_punctuation(c)) out += c;
  return out;
}

// A character `\w` matches in a str regex.
bool is_word_char(char32_t c) { return c == U'_' || python_isalnum(c); }

// Length of the whole word a, an or the at `pos` (tried in the regex's order), 0 if none.
std::size_t article_at(std::string_view text, std::size_t pos) {
  for (std::string_view article : {"a", "an", "the"}) {
    if (text.compare(pos, article.size(), article) != 0) continue;
    const std::size_t end = pos + article.size();
    std::size_t next_size = 0;
    if (end == text.size() || !is_word_char(decode_utf8(text, end, &next_size))) return article.size();
  }
  return 0;
}

// re.sub(r"\b(a|an|the)\b", " ", text). The articles start with a word
// character, so the leading \b holds exactly where the previous character is not one.
std::string remove_articles(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool after_word = false;
  std::size_t size = 0;
  for (std::size_t pos = 0; pos < text.size(); pos += size) {
    if (!after_word) {
      if (const std::size_t article = article_at(text, pos); article > 0) {
        out += ' ';
        size = article;
        after_word = true;
        continue;
      }
    }
    const char32_t c = decode_utf8(text, pos, &size);
    out.append(text.substr(pos, size));
    after_word = is_word_char(c);
  }
  return out;
}

// " ".join(text.split())
std::string collapse_whitespace(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool pending_space = false;
  std::size_t size = 0;
  for (std::size_t pos = 0; pos < text.size(); pos += size) {
    if (python_isspace(decode_utf8(text, pos, &size))) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out += ' ';
    pending_space = false;
    out.append(text.substr(pos, size));
  }
  return out;
}

std::size_t count_occurrences(std::string_view text, std::string_view needle) {
  std::size_t count = 0;
  for (std::size_t at = text.find(needle); at != std::string_view::npos; at = text.find(needle, at + needle.size()))
    ++count;
  return count;
}

}  // namespace

std::string normalize_qa_answer(std::string_view text) {
  return collapse_whitespace(remove_articles(remove_punctuation(python_lower(text))));
}

std::optional<std::string> extract_tagged_answer(std::string_view response) {
  // re.finditer(r"<answer>(.*?)</answer>", DOTALL): each match ends at the first
  // closing tag after its opening one, and the next starts after it.
  std::optional<std::string_view> last;
  std::size_t from = 0;
  while (true) {
    const std::size_t open = response.find(kOpenTag, from);
    if (open == std::string_view::npos) break;
    const std::size_t begin = open + kOpenTag.size();
    const std::size_t close = response.find(kCloseTag, begin);
    if (close == std::string_view::npos) break;
    last = response.substr(begin, close - begin);
    from = close + kCloseTag.size();
  }
  if (!last) return std::nullopt;
  return std::string(python_strip(*last));
}

std::vector<std::string> qa_targets(std::string_view ground_truth) {
  const nlohmann::json parsed = nlohmann::json::parse(ground_truth, nullptr, /*allow_exceptions=*/false);
  const nlohmann::json* targets = &parsed;
  if (parsed.is_object() && parsed.contains("target")) targets = &parsed.at("target");
  auto text_of = [](const nlohmann::json& value) {
    return value.is_string() ? value.get<std::string>() : value.dump();
  };
  if (targets->is_array()) {
    std::vector<std::string> out;
    for (const nlohmann::json& target : *targets) out.push_back(text_of(target));
    return out;
  }
  if (targets != &parsed && targets->is_string()) return {targets->get<std::string>()};
  return {std::string(ground_truth)};
}

SearchR1Grader::SearchR1Grader(SearchR1Options options) : options_(options) {}

GradeResult SearchR1Grader::grade(std::string_view response, std::string_view ground_truth,
                                  std::string_view /*data_source*/, const nlohmann::json& /*extra*/) const {
  const std::optional<std::string> answer = extract_tagged_answer(response);
  bool correct = false;
  if (answer) {
    const std::string normalized = normalize_qa_answer(*answer);
    for (const std::string& target : qa_targets(ground_truth)) {
      if (normalize_qa_answer(target) == normalized) {
        correct = true;
        break;
      }
    }
  }
  GradeResult result = score_answer(answer.has_value(), correct, options_.score, options_.format_score);
  // verl's guard against answers padded with tags.
  if (correct && (count_occurrences(response, kOpenTag) > kMaxTagsAtFullScore ||
                  count_occurrences(response, kCloseTag) > kMaxTagsAtFullScore)) {
    result.score = options_.score / 4;
  }
  return result;
}

}  // namespace rlcore::reward
