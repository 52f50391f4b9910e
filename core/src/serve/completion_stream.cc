// POST /v1/completions streamed: vLLM's text_completion chunks.
#include <nlohmann/json.hpp>

#include "rlcore/core/serve/stream.h"
#include "serve/completion_parts.h"

namespace rlcore::serve {

using nlohmann::json;

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

  std::vector<std::vector<int32_t>> shown(samples);
  for (std::size_t k = 0; k < samples; ++k) {
    shown[k] = text_token_ids(request, output.token_ids[k], output.finish_reasons[k]);
  }
  std::vector<std::string> events;
  std::vector<int64_t> text_offsets(samples, 0);
  for (const StreamedToken& token : streamed_tokens(output, shown, model.tokenizer, request.skip_special_tokens)) {
    const std::size_t k = token.sample;
    const auto& ids = output.token_ids[k];
    const std::vector<int32_t> token_id = {ids[token.position]};
    const FinishReason finish = output.finish_reasons[k];
    json logprobs = nullptr;
    if (request.logprobs) {
      logprobs = completion_logprobs(token_id, {output.logprobs[k][token.position]}, model,
                                     request.return_tokens_as_token_ids, text_offsets[k]);
    }
    text_offsets[k] += code_points(token.text);
    json choice = {{"index", k},
                   {"text", token.text},
                   {"logprobs", logprobs},
                   {"finish_reason", token.last ? json(finish_reason_name(finish)) : json(nullptr)},
                   {"stop_reason", token.last ? stop_reason(request, model, ids, finish) : json(nullptr)},
                   {"token_ids", request.return_token_ids ? json(token_id) : json(nullptr)},
                   // vLLM sends the prompt's ids with a choice's first chunk only.
                   {"prompt_token_ids", request.return_token_ids && token.position == 0
                                            ? json(prepared.prompt_token_ids[k / n])
                                            : json(nullptr)}};
    events.push_back(sse_event(chunk(json::array({std::move(choice)}))));
  }
  end_stream(events, request.include_usage, chunk(json::array()), usage_of(prepared, output));
  return events;
}

}  // namespace rlcore::serve
