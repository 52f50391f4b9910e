// POST /v1/chat/completions answers: vLLM's chat.completion object, or its
// chat.completion.chunk events when streamed.
#include "rlcore/core/serve/chat.h"
#include "rlcore/core/serve/stream.h"
#include "serve/completion_parts.h"

namespace rlcore::serve {
namespace {

using nlohmann::json;

const std::vector<TopLogprobs>& no_top() {
  static const std::vector<TopLogprobs> none;
  return none;
}

}  // namespace

std::string make_chat_completion_id() { return random_request_id("chatcmpl-"); }

json build_chat_response(const ChatRequest& request, const PreparedCompletion& prepared, const GenerationOutput& output,
                         const ServedModel& model, const std::string& id, int64_t created,
                         const ReportedLogprobs& reported) {
  check_output_shape(prepared, output);
  const CompletionRequest& options = request.completion;
  json prompt_logprobs = nullptr;
  if (options.prompt_logprobs) {
    const auto& prompt = prepared.prompt_token_ids.front();
    if (reported.prompt.empty() || reported.prompt.front().size() + 1 != prompt.size()) {
      throw Error("the engine did not report the log-probs of the prompt");
    }
    prompt_logprobs = prompt_logprobs_json(prompt, reported.prompt.front(), *options.prompt_logprobs, model);
  }
  json choices = json::array();
  for (std::size_t k = 0; k < output.token_ids.size(); ++k) {
    const auto& ids = output.token_ids[k];
    const FinishReason finish = output.finish_reasons[k];
    const json message = {
        {"role", "assistant"},
        {"content", decode_text(model.tokenizer, text_token_ids(options, ids, finish), options.skip_special_tokens)},
        {"refusal", nullptr},
        {"annotations", nullptr},
        {"audio", nullptr},
        {"function_call", nullptr},
        {"tool_calls", json::array()},
        {"reasoning_content", nullptr}};
    choices.push_back(
        {{"index", k},
         {"message", message},
         {"logprobs", options.logprobs
                          ? chat_logprobs(ids, output.logprobs[k], model, options.return_tokens_as_token_ids,
                                          prepared.top_logprobs, k < reported.top.size() ? reported.top[k] : no_top())
                          : json(nullptr)},
         {"finish_reason", finish_reason_name(finish)},
         {"stop_reason", stop_reason(options, model, ids, finish)},
         {"token_ids", options.return_token_ids ? json(ids) : json(nullptr)}});
  }
  return {{"id", id},
          {"object", "chat.completion"},
          {"created", created},
          {"model", model.name},
          {"choices", choices},
          {"service_tier", nullptr},
          {"system_fingerprint", nullptr},
          {"usage", usage_of(prepared, output)},
          {"prompt_logprobs", prompt_logprobs},
          {"prompt_token_ids", options.return_token_ids ? json(prepared.prompt_token_ids.front()) : json(nullptr)}};
}

namespace {

class ChatEncoder final : public StreamEncoder {
 public:
  ChatEncoder(const CompletionRequest& options, const ServedModel& model, std::string id, int64_t created)
      : options_(options), model_(model), id_(std::move(id)), created_(created) {}

  // As vLLM: every choice first announces the assistant role with empty content.
  std::vector<std::string> begin(std::size_t samples) override {
    std::vector<std::string> events;
    for (std::size_t k = 0; k < samples; ++k) {
      events.push_back(sse_event(chunk(json::array({{{"index", k},
                                                     {"delta", {{"role", "assistant"}, {"content", ""}}},
                                                     {"logprobs", nullptr},
                                                     {"finish_reason", nullptr}}}))));
    }
    return events;
  }

  std::string token(std::size_t k, const std::vector<int32_t>& ids, float logprob, const TopLogprobs& top,
                    const std::string& text, std::optional<FinishReason> finish) override {
    json logprobs = nullptr;
    if (options_.logprobs) {
      logprobs = chat_logprobs({ids.back()}, {logprob}, model_, options_.return_tokens_as_token_ids,
                               std::max<int64_t>(*options_.logprobs, 0), {top});
    }
    return sse_event(
        chunk(json::array({{{"index", k},
                            {"delta", {{"content", text}}},
                            {"logprobs", logprobs},
                            {"finish_reason", finish ? json(finish_reason_name(*finish)) : json(nullptr)},
                            {"stop_reason", finish ? stop_reason(options_, model_, ids, *finish) : json(nullptr)}}})));
  }

  std::vector<std::string> end(const json& usage) override {
    return end_stream(options_.include_usage, chunk(json::array()), usage);
  }

 private:
  json chunk(json choices) const {
    return json{{"id", id_},
                {"object", "chat.completion.chunk"},
                {"created", created_},
                {"model", model_.name},
                {"choices", std::move(choices)},
                {"usage", nullptr}};
  }

  const CompletionRequest& options_;
  const ServedModel& model_;
  std::string id_;
  int64_t created_;
};

}  // namespace

std::unique_ptr<StreamEncoder> chat_stream_encoder(const CompletionRequest& options, const ServedModel& model,
                                                   const std::string& id, int64_t created) {
  return std::make_unique<ChatEncoder>(options, model, id, created);
}

std::vector<std::string> build_chat_stream(const ChatRequest& request, const PreparedCompletion& prepared,
                                           const GenerationOutput& output, const ServedModel& model,
                                           const std::string& id, int64_t created) {
  ChatEncoder encoder(request.completion, model, id, created);
  return encode_stream(encoder, request.completion, prepared, output, model);
}

}  // namespace rlcore::serve
