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

double clamped(float logprob) { return std::max<double>(logprob, kMinLogprob); }

// The first `k` (id, log-prob) pairs of `top`, most likely first; none for null.
std::vector<std::pair<int32_t, float>> first_of(const TopLogprobs* top, int64_t k) {
  std::vector<std::pair<int32_t, float>> out;
  if (top == nullptr) return out;
  const std::size_t count = std::min<std::size_t>(static_cast<std::size_t>(std::max<int64_t>(k, 0)),
                                                  std::min(top->token_ids.size(), top->logprobs.size()));
  for (std::size_t i = 0; i < count; ++i) out.emplace_back(top->token_ids[i], top->logprobs[i]);
  return out;
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

CompletionLogprobs::CompletionLogprobs(const ServedModel& model, bool as_token_ids, int64_t k,
                                       int64_t initial_text_offset)
    : model_(model),
      as_token_ids_(as_token_ids),
      k_(k),
      offset_(initial_text_offset),
      text_offset_(json::array()),
      token_logprobs_(json::array()),
      tokens_(json::array()),
      top_logprobs_(json::array()) {}

void CompletionLogprobs::add(int32_t id, float logprob, const TopLogprobs* top) {
  const std::string token = token_string(model_.tokenizer, id, as_token_ids_);
  json alternatives = {{token, clamped(logprob)}};
  for (const auto& [other, other_logprob] : first_of(top, k_)) {
    alternatives.emplace(token_string(model_.tokenizer, other, as_token_ids_), clamped(other_logprob));
  }
  text_offset_.push_back(offset_);
  token_logprobs_.push_back(clamped(logprob));
  tokens_.push_back(token);
  top_logprobs_.push_back(std::move(alternatives));
  offset_ += code_points(token);
}

void CompletionLogprobs::add_unscored(int32_t id) {
  const std::string token = token_string(model_.tokenizer, id, as_token_ids_);
  text_offset_.push_back(offset_);
  token_logprobs_.push_back(nullptr);
  tokens_.push_back(token);
  top_logprobs_.push_back(nullptr);
  offset_ += code_points(token);
}

json CompletionLogprobs::to_json() const {
  return {{"text_offset", text_offset_},
          {"token_logprobs", token_logprobs_},
          {"tokens", tokens_},
          {"top_logprobs", top_logprobs_}};
}

json completion_logprobs(const std::vector<int32_t>& ids, const std::vector<float>& logprobs, const ServedModel& model,
                         bool as_token_ids, int64_t k, const std::vector<TopLogprobs>& top,
                         int64_t initial_text_offset) {
  CompletionLogprobs out(model, as_token_ids, k, initial_text_offset);
  for (std::size_t i = 0; i < ids.size(); ++i) out.add(ids[i], logprobs[i], i < top.size() ? &top[i] : nullptr);
  return out.to_json();
}

json prompt_logprobs_json(const std::vector<int32_t>& prompt, const std::vector<PositionLogprobs>& scores, int64_t k,
                          const ServedModel& model) {
  auto entry = [&model](int32_t id, float logprob, int64_t rank) {
    return json{{"logprob", clamped(logprob)},
                {"rank", rank},
                {"decoded_token", token_string(model.tokenizer, id, /*as_token_id=*/false)}};
  };
  json out = json::array({nullptr});
  for (std::size_t i = 0; i < scores.size() && i + 1 < prompt.size(); ++i) {
    const PositionLogprobs& score = scores[i];
    json position = {{std::to_string(prompt[i + 1]), entry(prompt[i + 1], score.logprob, score.rank)}};
    int64_t rank = 1;
    for (const auto& [other, other_logprob] : first_of(&score.top, k)) {
      position.emplace(std::to_string(other), entry(other, other_logprob, rank++));
    }
    out.push_back(std::move(position));
  }
  return out;
}

json chat_logprobs(const std::vector<int32_t>& ids, const std::vector<float>& logprobs, const ServedModel& model,
                   bool as_token_ids, int64_t k, const std::vector<TopLogprobs>& top) {
  auto entry = [&](int32_t id, float logprob) {
    const std::string token = token_string(model.tokenizer, id, as_token_ids);
    json bytes = json::array();
    for (const unsigned char c : token) bytes.push_back(static_cast<int>(c));
    return json{{"token", token}, {"logprob", clamped(logprob)}, {"bytes", bytes}};
  };
  json content = json::array();
  for (std::size_t i = 0; i < ids.size(); ++i) {
    json token = entry(ids[i], logprobs[i]);
    // As vLLM: the sampled token first, then the most likely others, k in all.
    json alternatives = json::array();
    if (k > 0) alternatives.push_back(token);
    for (const auto& [other, other_logprob] : first_of(i < top.size() ? &top[i] : nullptr, k)) {
      if (static_cast<int64_t>(alternatives.size()) >= k) break;
      if (other != ids[i]) alternatives.push_back(entry(other, other_logprob));
    }
    token["top_logprobs"] = std::move(alternatives);
    content.push_back(std::move(token));
  }
  return {{"content", content}};
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
