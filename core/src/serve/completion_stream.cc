// POST /v1/completions streamed: vLLM's text_completion chunks.
#include <nlohmann/json.hpp>

#include "rlcore/core/serve/stream.h"
#include "serve/completion_parts.h"

namespace rlcore::serve {
namespace {

using nlohmann::json;

class CompletionEncoder final : public StreamEncoder {
 public:
  CompletionEncoder(const CompletionRequest& request, const PreparedCompletion& prepared, const ServedModel& model,
                    std::string id, int64_t created)
      : request_(request), prepared_(prepared), model_(model), id_(std::move(id)), created_(created) {}

  std::vector<std::string> begin(std::size_t samples) override {
    text_offsets_.assign(samples, 0);
    return {};
  }

  std::string token(std::size_t k, const std::vector<int32_t>& ids, float logprob, const TopLogprobs& top,
                    const std::string& text, std::optional<FinishReason> finish) override {
    const std::vector<int32_t> token_id = {ids.back()};
    const std::size_t position = ids.size() - 1;
    json logprobs = nullptr;
    if (request_.logprobs) {
      logprobs = completion_logprobs(token_id, {logprob}, model_, request_.return_tokens_as_token_ids,
                                     prepared_.top_logprobs, {top}, text_offsets_[k]);
    }
    text_offsets_[k] += code_points(text);
    const auto n = static_cast<std::size_t>(prepared_.sampling.n);
    json choice = {
        {"index", k},
        {"text", text},
        {"logprobs", logprobs},
        {"finish_reason", finish ? json(finish_reason_name(*finish)) : json(nullptr)},
        {"stop_reason", finish ? stop_reason(request_, model_, ids, *finish) : json(nullptr)},
        {"token_ids", request_.return_token_ids ? json(token_id) : json(nullptr)},
        // vLLM sends the prompt's ids with a choice's first chunk only.
        {"prompt_token_ids",
         request_.return_token_ids && position == 0 ? json(prepared_.prompt_token_ids[k / n]) : json(nullptr)}};
    return sse_event(chunk(json::array({std::move(choice)})));
  }

  std::vector<std::string> end(const json& usage) override {
    return end_stream(request_.include_usage, chunk(json::array()), usage);
  }

 private:
  json chunk(json choices) const {
    return json{{"id", id_},
                {"object", "text_completion"},
                {"created", created_},
                {"model", model_.name},
                {"choices", std::move(choices)},
                {"usage", nullptr}};
  }

  const CompletionRequest& request_;
  const PreparedCompletion& prepared_;
  const ServedModel& model_;
  std::string id_;
  int64_t created_;
  std::vector<int64_t> text_offsets_;
};

}  // namespace

std::unique_ptr<StreamEncoder> completion_stream_encoder(const CompletionRequest& request,
                                                         const PreparedCompletion& prepared, const ServedModel& model,
                                                         const std::string& id, int64_t created) {
  return std::make_unique<CompletionEncoder>(request, prepared, model, id, created);
}

std::vector<std::string> build_completion_stream(const CompletionRequest& request, const PreparedCompletion& prepared,
                                                 const GenerationOutput& output, const ServedModel& model,
                                                 const std::string& id, int64_t created) {
  CompletionEncoder encoder(request, prepared, model, id, created);
  return encode_stream(encoder, request, prepared, output, model);
}

}  // namespace rlcore::serve
