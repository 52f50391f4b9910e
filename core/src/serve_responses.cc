// Response bodies for `rlcore serve`, field for field as vLLM's
// CompletionResponse, ModelList, TokenizeResponse and DetokenizeResponse.
#include "rlcore/core/serve/responses.h"

#include <algorithm>
#include <cstdio>
#include <random>

#include <nlohmann/json.hpp>

#include "rlcore/core/serve/api_error.h"
#include "rlcore/error.h"

namespace rlcore::serve {
namespace {

using nlohmann::json;

// vLLM clamps -inf so the JSON stays valid.
constexpr double kMinLogprob = -9999.0;

template <class Id>
bool contains(const std::vector<Id>& ids, Id id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

bool is_known(const Tokenizer& tokenizer, int32_t id) {
  try {
    tokenizer.id_to_token(id);
    return true;
  } catch (const ValueError&) {
    return false;
  }
}

// Engines may sample ids past the tokenizer (padded embedding rows); those
// decode to nothing rather than failing the whole response.
std::string decode_text(const Tokenizer& tokenizer, const std::vector<int32_t>& ids, bool skip_special_tokens) {
  try {
    return tokenizer.decode_lossy(ids, skip_special_tokens);
  } catch (const ValueError&) {
    std::vector<int32_t> known;
    for (const int32_t id : ids) {
      if (is_known(tokenizer, id)) known.push_back(id);
    }
    return tokenizer.decode_lossy(known, skip_special_tokens);
  }
}

std::string token_string(const Tokenizer& tokenizer, int32_t id, bool as_token_id) {
  const std::string placeholder = "token_id:" + std::to_string(id);
  if (as_token_id || !is_known(tokenizer, id)) return placeholder;
  return tokenizer.decode_lossy(std::vector<int32_t>{id}, /*skip_special_tokens=*/false);
}

// Python's len(): code points of valid UTF-8 (decode_lossy output is valid).
int64_t code_points(const std::string& text) {
  return std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
}

// vLLM's CompletionLogProbs. Only the sampled token's log-prob is known, so
// each top_logprobs entry holds that one token (what vLLM returns for logprobs=0).
json completion_logprobs(const std::vector<int32_t>& ids, const std::vector<float>& logprobs, const ServedModel& model,
                         bool as_token_ids) {
  json text_offset = json::array(), token_logprobs = json::array(), tokens = json::array(),
       top_logprobs = json::array();
  int64_t offset = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::string token = token_string(model.tokenizer, ids[i], as_token_ids);
    const double logprob = std::max<double>(logprobs[i], kMinLogprob);
    text_offset.push_back(offset);
    token_logprobs.push_back(logprob);
    tokens.push_back(token);
    top_logprobs.push_back(json{{token, logprob}});
    offset += code_points(token);
  }
  return {{"text_offset", text_offset},
          {"token_logprobs", token_logprobs},
          {"tokens", tokens},
          {"top_logprobs", top_logprobs}};
}

// vLLM: the stop token id that ended the sample; null for EOS or length.
json stop_reason(const CompletionRequest& request, const ServedModel& model, const std::vector<int32_t>& ids,
                 FinishReason finish) {
  if (finish != FinishReason::kStop || ids.empty()) return nullptr;
  const int32_t last = ids.back();
  if (!request.ignore_eos && contains(model.eos_token_ids, last)) return nullptr;
  if (contains<int64_t>(request.stop_token_ids, last)) return last;
  return nullptr;
}

void check_output_shape(const PreparedCompletion& prepared, const GenerationOutput& output) {
  const std::size_t expected = prepared.prompt_token_ids.size() * static_cast<std::size_t>(prepared.sampling.n);
  if (output.token_ids.size() != expected || output.logprobs.size() != expected ||
      output.finish_reasons.size() != expected) {
    throw Error("the engine returned " + std::to_string(output.token_ids.size()) + " samples, " +
                std::to_string(output.logprobs.size()) + " log-prob lists and " +
                std::to_string(output.finish_reasons.size()) + " finish reasons for " +
                std::to_string(prepared.prompt_token_ids.size()) + " prompts with n=" +
                std::to_string(prepared.sampling.n) + " (expected " + std::to_string(expected) + " of each)");
  }
  for (std::size_t k = 0; k < expected; ++k) {
    if (output.logprobs[k].size() != output.token_ids[k].size()) {
      throw Error("the engine returned " + std::to_string(output.logprobs[k].size()) + " log-probs for the " +
                  std::to_string(output.token_ids[k].size()) + " tokens of sample " + std::to_string(k));
    }
  }
}

}  // namespace

std::string make_completion_id() {
  thread_local std::mt19937_64 generator{std::random_device{}()};
  char hex[33];
  std::snprintf(hex, sizeof(hex), "%016llx%016llx", static_cast<unsigned long long>(generator()),
                static_cast<unsigned long long>(generator()));
  return std::string("cmpl-") + hex;
}

json build_completion_response(const CompletionRequest& request, const PreparedCompletion& prepared,
                               const GenerationOutput& output, const ServedModel& model, const std::string& id,
                               int64_t created) {
  check_output_shape(prepared, output);
  const auto n = static_cast<std::size_t>(prepared.sampling.n);
  json choices = json::array();
  int64_t prompt_tokens = 0, completion_tokens = 0;
  for (std::size_t i = 0; i < prepared.prompt_token_ids.size(); ++i) {
    const auto& prompt_ids = prepared.prompt_token_ids[i];
    prompt_tokens += static_cast<int64_t>(prompt_ids.size());
    for (std::size_t j = 0; j < n; ++j) {
      const std::size_t k = i * n + j;
      const auto& ids = output.token_ids[k];
      const FinishReason finish = output.finish_reasons[k];
      completion_tokens += static_cast<int64_t>(ids.size());
      // As vLLM: the stop token stays in token_ids but not in the text.
      const bool drop_stop = finish == FinishReason::kStop && !ids.empty() && !request.include_stop_str_in_output;
      const std::vector<int32_t> text_ids(ids.begin(), drop_stop ? ids.end() - 1 : ids.end());
      choices.push_back(
          {{"index", k},
           {"text", decode_text(model.tokenizer, text_ids, request.skip_special_tokens)},
           {"logprobs", request.logprobs ? completion_logprobs(ids, output.logprobs[k], model,
                                                               request.return_tokens_as_token_ids)
                                         : json(nullptr)},
           {"finish_reason", finish_reason_name(finish)},
           {"stop_reason", stop_reason(request, model, ids, finish)},
           {"token_ids", request.return_token_ids ? json(ids) : json(nullptr)},
           {"prompt_logprobs", nullptr},
           {"prompt_token_ids", request.return_token_ids ? json(prompt_ids) : json(nullptr)}});
    }
  }
  return {{"id", id},
          {"object", "text_completion"},
          {"created", created},
          {"model", model.name},
          {"choices", choices},
          {"usage",
           {{"prompt_tokens", prompt_tokens},
            {"total_tokens", prompt_tokens + completion_tokens},
            {"completion_tokens", completion_tokens},
            {"prompt_tokens_details", nullptr}}}};
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
  return {{"count", tokens.size()},
          {"max_model_len", model.max_model_len},
          {"tokens", tokens},
          {"token_strs", token_strs}};
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
