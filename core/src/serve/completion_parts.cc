#include "serve/completion_parts.h"

#include <algorithm>
#include <cstdio>
#include <random>

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

std::string token_string(const Tokenizer& tokenizer, int32_t id, bool as_token_id) {
  const std::string placeholder = "token_id:" + std::to_string(id);
  if (as_token_id || !is_known(tokenizer, id)) return placeholder;
  return tokenizer.decode_lossy(std::vector<int32_t>{id}, /*skip_special_tokens=*/false);
}

}  // namespace

bool is_known(const Tokenizer& tokenizer, int32_t id) {
  try {
    tokenizer.id_to_token(id);
    return true;
  } catch (const ValueError&) {
    return false;
  }
}

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

int64_t code_points(const std::string& text) {
  return std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
}

json completion_logprobs(const std::vector<int32_t>& ids, const std::vector<float>& logprobs, const ServedModel& model,
                         bool as_token_ids, int64_t initial_text_offset) {
  json text_offset = json::array(), token_logprobs = json::array(), tokens = json::array(),
       top_logprobs = json::array();
  int64_t offset = initial_text_offset;
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

json stop_reason(const CompletionRequest& request, const ServedModel& model, const std::vector<int32_t>& ids,
                 FinishReason finish) {
  if (finish != FinishReason::kStop || ids.empty()) return nullptr;
  const int32_t last = ids.back();
  if (!request.ignore_eos && contains(model.eos_token_ids, last)) return nullptr;
  if (contains<int64_t>(request.stop_token_ids, last)) return last;
  return nullptr;
}

json usage_of(const PreparedCompletion& prepared, const GenerationOutput& output) {
  int64_t prompt_tokens = 0, completion_tokens = 0;
  for (const auto& ids : prepared.prompt_token_ids) prompt_tokens += static_cast<int64_t>(ids.size());
  for (const auto& ids : output.token_ids) completion_tokens += static_cast<int64_t>(ids.size());
  return {{"prompt_tokens", prompt_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"completion_tokens", completion_tokens}};
}

std::string random_request_id(const std::string& prefix) {
  thread_local std::mt19937_64 generator{std::random_device{}()};
  char hex[33];
  std::snprintf(hex, sizeof(hex), "%016llx%016llx", static_cast<unsigned long long>(generator()),
                static_cast<unsigned long long>(generator()));
  return prefix + hex;
}

std::vector<int32_t> text_token_ids(const CompletionRequest& request, const std::vector<int32_t>& ids,
                                    FinishReason finish) {
  const bool drop_stop = finish == FinishReason::kStop && !ids.empty() && !request.include_stop_str_in_output;
  return std::vector<int32_t>(ids.begin(), drop_stop ? ids.end() - 1 : ids.end());
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

}  // namespace rlcore::serve
