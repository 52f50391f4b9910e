// Response bodies for `rlcore serve`, field for field as vLLM's
// CompletionResponse, ModelList, TokenizeResponse and DetokenizeResponse.
#include "rlcore/core/serve/responses.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "rlcore/core/serve/api_error.h"
#include "rlcore/error.h"
#include "serve/completion_parts.h"

namespace rlcore::serve {

using nlohmann::json;

std::string make_completion_id() { return random_request_id("cmpl-"); }

namespace {

const std::vector<PositionLogprobs>& prompt_scores(const ReportedLogprobs& reported, std::size_t prompt,
                                                   std::size_t tokens) {
  if (prompt >= reported.prompt.size() || reported.prompt[prompt].size() + 1 != tokens) {
    throw Error("the engine did not report the log-probs of prompt " + std::to_string(prompt));
  }
  return reported.prompt[prompt];
}

// Sample k's log-probs, after the prompt's with echo.
json choice_logprobs(const CompletionRequest& request, const PreparedCompletion& prepared,
                     const GenerationOutput& output, const ReportedLogprobs& reported, const ServedModel& model,
                     std::size_t prompt, std::size_t k) {
  CompletionLogprobs out(model, request.return_tokens_as_token_ids, prepared.top_logprobs);
  if (request.echo) {
    const auto& prompt_ids = prepared.prompt_token_ids[prompt];
    const auto& scores = prompt_scores(reported, prompt, prompt_ids.size());
    out.add_unscored(prompt_ids.front());
    for (std::size_t p = 0; p < scores.size(); ++p) out.add(prompt_ids[p + 1], scores[p].logprob, &scores[p].top);
  }
  const auto& ids = output.token_ids[k];
  const std::vector<TopLogprobs>* top = k < reported.top.size() ? &reported.top[k] : nullptr;
  for (std::size_t t = 0; t < ids.size(); ++t) {
    out.add(ids[t], output.logprobs[k][t], top && t < top->size() ? &(*top)[t] : nullptr);
  }
  return out.to_json();
}

// The prompt as the client sent it (its text, or its ids decoded), for echo.
std::string prompt_text(const CompletionRequest& request, const PreparedCompletion& prepared, const ServedModel& model,
                        std::size_t prompt) {
  if (prompt < request.prompts.size() && request.prompts[prompt].text) return *request.prompts[prompt].text;
  return decode_text(model.tokenizer, prepared.prompt_token_ids[prompt], /*skip_special_tokens=*/false);
}

}  // namespace

json build_completion_response(const CompletionRequest& request, const PreparedCompletion& prepared,
                               const GenerationOutput& output, const ServedModel& model, const std::string& id,
                               int64_t created, const ReportedLogprobs& reported) {
  check_output_shape(prepared, output);
  const auto n = static_cast<std::size_t>(prepared.sampling.n);
  json choices = json::array();
  for (std::size_t i = 0; i < prepared.prompt_token_ids.size(); ++i) {
    const auto& prompt_ids = prepared.prompt_token_ids[i];
    json prompt_logprobs = nullptr;
    if (request.prompt_logprobs) {
      prompt_logprobs = prompt_logprobs_json(prompt_ids, prompt_scores(reported, i, prompt_ids.size()),
                                             *request.prompt_logprobs, model);
    }
    for (std::size_t j = 0; j < n; ++j) {
      const std::size_t k = i * n + j;
      const auto& ids = output.token_ids[k];
      const FinishReason finish = output.finish_reasons[k];
      const std::vector<int32_t> text_ids = text_token_ids(request, ids, finish);
      std::string text = decode_text(model.tokenizer, text_ids, request.skip_special_tokens);
      if (request.echo) text = prompt_text(request, prepared, model, i) + text;
      choices.push_back(
          {{"index", k},
           {"text", std::move(text)},
           {"logprobs",
            request.logprobs ? choice_logprobs(request, prepared, output, reported, model, i, k) : json(nullptr)},
           {"finish_reason", finish_reason_name(finish)},
           {"stop_reason", stop_reason(request, model, ids, finish)},
           {"token_ids", request.return_token_ids ? json(ids) : json(nullptr)},
           {"prompt_logprobs", prompt_logprobs},
           {"prompt_token_ids", request.return_token_ids ? json(prompt_ids) : json(nullptr)}});
    }
  }
  json usage = usage_of(prepared, output);
  usage["prompt_tokens_details"] = nullptr;
  return {{"id", id},           {"object", "text_completion"},
          {"created", created}, {"model", model.name},
          {"choices", choices}, {"usage", usage}};
}

json build_models_response(const ServedModel& model) {
  json card = {{"id", model.name},
               {"object", "model"},
               {"created", model.created},
               {"owned_by", "rlcore"},
               {"root", model.root},
               {"parent", nullptr},
               {"max_model_len", model.max_model_len},
               {"permission", json::array()}};
  return {{"object", "list"}, {"data", json::array({card})}};
}

json build_tokenize_response(const std::vector<int32_t>& tokens, bool return_token_strs, const ServedModel& model) {
  json token_strs = nullptr;
  if (return_token_strs) {
    token_strs = json::array();
    for (const int32_t id : tokens) token_strs.push_back(model.tokenizer.id_to_token(id));
  }
  return {
      {"count", tokens.size()}, {"max_model_len", model.max_model_len}, {"tokens", tokens}, {"token_strs", token_strs}};
}

json build_detokenize_response(const DetokenizeRequest& request, const ServedModel& model) {
  std::vector<int32_t> ids;
  ids.reserve(request.tokens.size());
  for (const int64_t id : request.tokens) {
    if (id >= model.tokenizer.vocab_size() || !is_known(model.tokenizer, static_cast<int32_t>(id))) {
      throw bad_request("Token id " + std::to_string(id) + " is out of vocabulary", "tokens");
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  return {{"prompt", model.tokenizer.decode_lossy(ids)}};
}

json build_version_response() { return {{"version", RLCORE_VERSION_STRING}}; }

}  // namespace rlcore::serve
