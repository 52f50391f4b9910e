// What every streamed route shares: server-sent event framing, the error
// ending, and the text and order of the streamed tokens.
#include "rlcore/core/serve/stream.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "serve/answer.h"
#include "serve/completion_parts.h"

namespace rlcore::serve {
namespace {

bool ends_in_replacement_character(const std::string& text) {
  static const std::string kReplacement = "\xEF\xBF\xBD";  // U+FFFD, decode_lossy's mark for broken UTF-8
  return text.size() >= kReplacement.size() &&
         text.compare(text.size() - kReplacement.size(), kReplacement.size(), kReplacement) == 0;
}

}  // namespace

std::string sse_data(const std::string& payload) { return "data: " + payload + "\n\n"; }

std::string sse_event(const nlohmann::json& chunk) { return sse_data(json_text(chunk)); }

void end_stream(std::vector<std::string>& events, bool include_usage, nlohmann::json empty_chunk,
                const nlohmann::json& usage) {
  if (include_usage) {
    empty_chunk["usage"] = usage;
    events.push_back(sse_event(empty_chunk));
  }
  events.push_back(kSseDone);
}

std::vector<std::string> stream_error_events(const std::string& error_json) {
  return {sse_data(R"({"error":)" + error_json + "}"), kSseDone};
}

std::vector<std::string> text_deltas(const Tokenizer& tokenizer, const std::vector<int32_t>& ids,
                                     bool skip_special_tokens) {
  std::vector<std::string> deltas(ids.size());
  std::string emitted;
  for (std::size_t t = 0; t < ids.size(); ++t) {
    const bool last = t + 1 == ids.size();
    const std::string text =
        decode_text(tokenizer, std::vector<int32_t>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(t) + 1),
                    skip_special_tokens);
    if ((!last && ends_in_replacement_character(text)) || text.compare(0, emitted.size(), emitted) != 0) continue;
    deltas[t] = text.substr(emitted.size());
    emitted = text;
  }
  return deltas;
}

std::vector<StreamedToken> streamed_tokens(const GenerationOutput& output,
                                           const std::vector<std::vector<int32_t>>& shown_ids,
                                           const Tokenizer& tokenizer, bool skip_special_tokens) {
  const std::size_t samples = output.token_ids.size();
  std::vector<std::vector<std::string>> deltas(samples);
  std::size_t longest = 0;
  for (std::size_t k = 0; k < samples; ++k) {
    deltas[k] = text_deltas(tokenizer, shown_ids.at(k), skip_special_tokens);
    deltas[k].resize(output.token_ids[k].size());  // tokens not shown add no text
    longest = std::max(longest, output.token_ids[k].size());
  }
  std::vector<StreamedToken> tokens;
  for (std::size_t t = 0; t < longest; ++t) {
    for (std::size_t k = 0; k < samples; ++k) {
      const std::size_t length = output.token_ids[k].size();
      if (t < length) tokens.push_back({k, t, std::move(deltas[k][t]), t + 1 == length});
    }
  }
  return tokens;
}

}  // namespace rlcore::serve
