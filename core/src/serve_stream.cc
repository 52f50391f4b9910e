#include "rlcore/core/serve/stream.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "rlcore/core/serve/responses.h"
#include "serve_answer.h"
#include "serve_completion_parts.h"

namespace rlcore::serve {
namespace {

using nlohmann::json;

bool ends_in_replacement_character(const std::string& text) {
  static const std::string kReplacement = "\xEF\xBF\xBD";  // U+FFFD, decode_lossy's mark for broken UTF-8
  return text.size() >= kReplacement.size() &&
         text.compare(text.size() - kReplacement.size(), kReplacement.size(), kReplacement) == 0;
}

}  // namespace

std::string sse_data(const std::string& payload) { return "data: " + payload + "\n\n"; }

std::string sse_event(const json& chunk) { return sse_data(json_text(chunk)); }

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

std::vector<std::string> build_completion_stream(const CompletionRequest& request, const PreparedCompletion& prepared,
                                                 const GenerationOutput& output, const ServedModel& model,
                                                 const std::string& id, int64_t created) {
  check_output_shape(prepared, output);
  const auto n = static_cast<std::size_t>(prepared.sampling.n);
  const std::size_t samples = output.token_ids.size();
  const auto chunk = [&](json choices) {
    return json{{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model.name},
                {"choices", std::move(choices)}, {"usage", nullptr}};
  };

  // Per sample: the text each token adds (a dropped stop token adds none).
  std::vector<std::vector<std::string>> deltas(samples);
  std::size_t longest = 0;
  for (std::size_t k = 0; k < samples; ++k) {
    const auto& ids = output.token_ids[k];
    deltas[k] = text_deltas(model.tokenizer, text_token_ids(request, ids, output.finish_reasons[k]),
                            request.skip_special_tokens);
    deltas[k].resize(ids.size());
    longest = std::max(longest, ids.size());
  }

  std::vector<std::string> events;
  std::vector<int64_t> text_offsets(samples, 0);
  for (std::size_t t = 0; t < longest; ++t) {
    for (std::size_t k = 0; k < samples; ++k) {
      const auto& ids = output.token_ids[k];
      if (t >= ids.size()) continue;
      const bool last = t + 1 == ids.size();
      const std::vector<int32_t> token = {ids[t]};
      const FinishReason finish = output.finish_reasons[k];
      json logprobs = nullptr;
      if (request.logprobs) {
        logprobs = completion_logprobs(token, {output.logprobs[k][t]}, model, request.return_tokens_as_token_ids,
                                       text_offsets[k]);
      }
      text_offsets[k] += code_points(deltas[k][t]);
      const std::size_t prompt = k / n;
      json choice = {{"index", k},
                     {"text", deltas[k][t]},
                     {"logprobs", logprobs},
                     {"finish_reason", last ? json(finish_reason_name(finish)) : json(nullptr)},
                     {"stop_reason", last ? stop_reason(request, model, ids, finish) : json(nullptr)},
                     {"token_ids", request.return_token_ids ? json(token) : json(nullptr)},
                     // vLLM sends the prompt's ids with a choice's first chunk only.
                     {"prompt_token_ids", request.return_token_ids && t == 0
                                              ? json(prepared.prompt_token_ids[prompt])
                                              : json(nullptr)}};
      events.push_back(sse_event(chunk(json::array({std::move(choice)}))));
    }
  }
  if (request.include_usage) {
    int64_t prompt_tokens = 0, completion_tokens = 0;
    for (const auto& prompt_ids : prepared.prompt_token_ids) prompt_tokens += static_cast<int64_t>(prompt_ids.size());
    for (const auto& ids : output.token_ids) completion_tokens += static_cast<int64_t>(ids.size());
    json last = chunk(json::array());
    last["usage"] = {{"prompt_tokens", prompt_tokens},
                     {"total_tokens", prompt_tokens + completion_tokens},
                     {"completion_tokens", completion_tokens}};
    events.push_back(sse_event(last));
  }
  events.push_back(kSseDone);
  return events;
}

}  // namespace rlcore::serve
