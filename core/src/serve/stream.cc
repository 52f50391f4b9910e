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

std::vector<std::string> end_stream(bool include_usage, nlohmann::json empty_chunk, const nlohmann::json& usage) {
  std::vector<std::string> events;
  if (include_usage) {
    empty_chunk["usage"] = usage;
    events.push_back(sse_event(empty_chunk));
  }
  events.push_back(kSseDone);
  return events;
}

std::vector<std::string> stream_error_events(const std::string& error_json) {
  return {sse_data(R"({"error":)" + error_json + "}"), kSseDone};
}

namespace {

// The text `shown` adds to `emitted` (updated), or "" while it ends inside a
// UTF-8 character and more may come (`last` false).
std::string text_delta(const Tokenizer& tokenizer, const std::vector<int32_t>& shown, bool last, std::string& emitted,
                       bool skip_special_tokens) {
  const std::string text = decode_text(tokenizer, shown, skip_special_tokens);
  if ((!last && ends_in_replacement_character(text)) || text.compare(0, emitted.size(), emitted) != 0) return "";
  std::string delta = text.substr(emitted.size());
  emitted = text;
  return delta;
}

}  // namespace

StreamEncoder::~StreamEncoder() = default;

std::vector<std::string> text_deltas(const Tokenizer& tokenizer, const std::vector<int32_t>& ids,
                                     bool skip_special_tokens) {
  std::vector<std::string> deltas(ids.size());
  std::string emitted;
  for (std::size_t t = 0; t < ids.size(); ++t) {
    deltas[t] =
        text_delta(tokenizer, std::vector<int32_t>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(t) + 1),
                   t + 1 == ids.size(), emitted, skip_special_tokens);
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

std::vector<std::string> encode_stream(StreamEncoder& encoder, const CompletionRequest& request,
                                       const PreparedCompletion& prepared, const GenerationOutput& output,
                                       const ServedModel& model) {
  check_output_shape(prepared, output);
  const std::size_t samples = output.token_ids.size();
  std::vector<std::vector<int32_t>> shown(samples);
  for (std::size_t k = 0; k < samples; ++k) {
    shown[k] = text_token_ids(request, output.token_ids[k], output.finish_reasons[k]);
  }
  std::vector<std::string> events = encoder.begin(samples);
  for (const StreamedToken& token : streamed_tokens(output, shown, model.tokenizer, request.skip_special_tokens)) {
    const auto& ids = output.token_ids[token.sample];
    const std::vector<int32_t> so_far(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(token.position) + 1);
    events.push_back(encoder.token(token.sample, so_far, output.logprobs[token.sample][token.position], TopLogprobs{},
                                   token.text,
                                   token.last ? std::optional(output.finish_reasons[token.sample]) : std::nullopt));
  }
  for (std::string& event : encoder.end(usage_of(prepared, output))) events.push_back(std::move(event));
  return events;
}

LiveStream::LiveStream(std::unique_ptr<StreamEncoder> encoder, const CompletionRequest& request,
                       const PreparedCompletion& prepared, const ServedModel& model)
    : encoder_(std::move(encoder)), request_(request), prepared_(prepared), model_(model) {
  const std::size_t samples = prepared.prompt_token_ids.size() * static_cast<std::size_t>(prepared.sampling.n);
  ids_.resize(samples);
  emitted_.resize(samples);
}

std::vector<std::string> LiveStream::begin() { return encoder_->begin(ids_.size()); }

std::string LiveStream::token(std::size_t sample, int32_t id, float logprob, const TopLogprobs& top,
                              std::optional<FinishReason> finish) {
  std::vector<int32_t>& ids = ids_.at(sample);
  ids.push_back(id);
  const std::vector<int32_t> shown = text_token_ids(request_, ids, finish.value_or(FinishReason::kLength));
  const std::string text =
      text_delta(model_.tokenizer, shown, finish.has_value(), emitted_[sample], request_.skip_special_tokens);
  return encoder_->token(sample, ids, logprob, top, text, finish);
}

std::vector<std::string> LiveStream::end() {
  GenerationOutput arrived;
  arrived.token_ids = ids_;
  return encoder_->end(usage_of(prepared_, arrived));
}

}  // namespace rlcore::serve
