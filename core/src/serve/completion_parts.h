// The parts of a completion answer that the whole response and its streamed
// chunks share: decoding, vLLM's log-prob object, stop reasons, output checks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlcore/core/serve/requests.h"
#include "rlcore/core/serve/served_model.h"
#include "rlcore/inference_engine.h"

namespace rlcore::serve {

// Whether the tokenizer has a token for `id`.
bool is_known(const Tokenizer& tokenizer, int32_t id);

// The text of `ids`; ids past the tokenizer (padded embedding rows) decode to nothing.
std::string decode_text(const Tokenizer& tokenizer, const std::vector<int32_t>& ids, bool skip_special_tokens);

// Python's len(): code points of valid UTF-8.
int64_t code_points(const std::string& text);

// vLLM's CompletionLogProbs, token by token: text offsets from
// `initial_text_offset`, and in top_logprobs each token with the `k` most
// likely tokens at its position (only itself where they are not given).
class CompletionLogprobs {
 public:
  CompletionLogprobs(const ServedModel& model, bool as_token_ids, int64_t k, int64_t initial_text_offset = 0);
  // A sampled (or scored) token; `top` may be null.
  void add(int32_t id, float logprob, const TopLogprobs* top);
  // The prompt's first token, which has no log-prob (echo).
  void add_unscored(int32_t id);
  nlohmann::json to_json() const;

 private:
  const ServedModel& model_;
  bool as_token_ids_;
  int64_t k_;
  int64_t offset_;
  nlohmann::json text_offset_, token_logprobs_, tokens_, top_logprobs_;
};

// The CompletionLogProbs of `ids` and their log-probs; `top[i]` where given.
nlohmann::json completion_logprobs(const std::vector<int32_t>& ids, const std::vector<float>& logprobs,
                                   const ServedModel& model, bool as_token_ids, int64_t k = 0,
                                   const std::vector<TopLogprobs>& top = {}, int64_t initial_text_offset = 0);

// vLLM's prompt_logprobs of one prompt: null for the first token, then per
// token {"<id>": {logprob, rank, decoded_token}} for it and the `k` most likely there.
nlohmann::json prompt_logprobs_json(const std::vector<int32_t>& prompt, const std::vector<PositionLogprobs>& scores,
                                    int64_t k, const ServedModel& model);

// vLLM's ChatCompletionLogProbs: each token with, in top_logprobs, the first
// `k` of itself and the most likely tokens at its position.
nlohmann::json chat_logprobs(const std::vector<int32_t>& ids, const std::vector<float>& logprobs,
                             const ServedModel& model, bool as_token_ids, int64_t k,
                             const std::vector<TopLogprobs>& top = {});

// vLLM: the stop token id that ended the sample; null for EOS or length.
nlohmann::json stop_reason(const CompletionRequest& request, const ServedModel& model, const std::vector<int32_t>& ids,
                           FinishReason finish);

// The ids whose text is shown: as vLLM, a stop token stays in token_ids but not in the text.
std::vector<int32_t> text_token_ids(const CompletionRequest& request, const std::vector<int32_t>& ids,
                                    FinishReason finish);

// {prompt_tokens, total_tokens, completion_tokens}: each prompt counted once,
// every sampled token (stop tokens included).
nlohmann::json usage_of(const PreparedCompletion& prepared, const GenerationOutput& output);

// `prefix` and 32 random hex digits, like vLLM's request ids ("cmpl-", "chatcmpl-").
std::string random_request_id(const std::string& prefix);

// Throws rlcore::Error when `output` does not hold prompts * n samples with
// one log-prob per token (an engine bug, not a bad request).
void check_output_shape(const PreparedCompletion& prepared, const GenerationOutput& output);

}  // namespace rlcore::serve
