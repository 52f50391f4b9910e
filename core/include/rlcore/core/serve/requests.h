// The typed requests of `rlcore serve` and the pure functions that read them
// from JSON: types, ranges and unsupported options are checked here, before any
// tokenizer or engine is involved. Every refusal is an ApiError (HTTP 400).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "rlcore/export.h"

namespace rlcore::serve {

// One prompt: text to tokenize, or token ids as sent.
struct PromptInput {
  std::optional<std::string> text;
  std::vector<int64_t> token_ids;
};

// The subset of vLLM's CompletionRequest that rlcore serves.
struct CompletionRequest {
  std::string model;  // "" when absent: the served model
  std::vector<PromptInput> prompts;
  int64_t n = 1;
  int64_t max_tokens = 16;
  double temperature = 1.0;
  double top_p = 1.0;
  int64_t top_k = -1;  // 0 in the request also means disabled
  std::optional<int64_t> seed;
  std::vector<int64_t> stop_token_ids;
  // The sampled token's log-prob and this many most likely tokens at each position.
  std::optional<int64_t> logprobs;
  // vLLM's prompt_logprobs: each prompt token's log-prob and this many most likely tokens there.
  std::optional<int64_t> prompt_logprobs;
  // The prompt's text before the completion's; with logprobs, the prompt's log-probs first.
  bool echo = false;
  bool ignore_eos = false;
  bool add_special_tokens = true;
  bool skip_special_tokens = true;
  bool include_stop_str_in_output = false;
  bool return_token_ids = false;
  bool return_tokens_as_token_ids = false;
  // Server-sent events instead of one JSON body; stream_options.include_usage
  // adds a last chunk with the whole request's usage.
  bool stream = false;
  bool include_usage = false;
};

// POST /tokenize: vLLM's TokenizeCompletionRequest.
struct TokenizeRequest {
  std::string model;
  std::string prompt;
  bool add_special_tokens = true;
  bool return_token_strs = false;
};

// POST /detokenize.
struct DetokenizeRequest {
  std::string model;
  std::vector<int64_t> tokens;
};

struct RequestLimits {
  int64_t max_n = 128;
  int64_t max_prompts = 1024;
  int64_t max_logprobs = 20;  // vLLM's default --max-logprobs
};

// Deeper nesting in a request body is a 400 before it is parsed.
inline constexpr int64_t kMaxJsonDepth = 128;
RLCORE_API void check_json_depth(const std::string& body);

// The body as a JSON object; malformed JSON, another JSON type or nesting
// deeper than kMaxJsonDepth is a 400.
RLCORE_API nlohmann::json parse_json_object(const std::string& body);

RLCORE_API CompletionRequest parse_completion_request(const nlohmann::json& body, const RequestLimits& limits = {});
RLCORE_API TokenizeRequest parse_tokenize_request(const nlohmann::json& body);
RLCORE_API DetokenizeRequest parse_detokenize_request(const nlohmann::json& body);

}  // namespace rlcore::serve
