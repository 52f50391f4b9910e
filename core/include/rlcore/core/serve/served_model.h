// ServedModel: what `rlcore serve` knows about the model behind the engine
// (name, limits, tokenizer, EOS ids), and the step from a parsed request to
// engine input: tokenization and the checks that need the model.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rlcore/capabilities.h"
#include "rlcore/core/serve/requests.h"
#include "rlcore/export.h"
#include "rlcore/inference_engine.h"
#include "rlcore/tokenizer/tokenizer.h"

namespace rlcore::chat {
class ChatTemplate;
}

namespace rlcore::serve {

struct ServedModel {
  std::string name;           // the id clients send as "model"
  std::string root;           // the checkpoint directory
  int64_t max_model_len = 0;  // prompt + completion tokens
  int64_t vocab_size = 0;     // embedding rows: token ids must be below this
  std::vector<int32_t> eos_token_ids;
  Tokenizer tokenizer;
  int64_t created = 0;  // unix time the server started
  // The checkpoint's chat template (the chat routes); null when it has none.
  std::shared_ptr<const chat::ChatTemplate> chat_template;
};

// Reads <dir>/config.json and the tokenizer files. `name` "" serves the
// model as `dir`, as vLLM does without --served-model-name.
RLCORE_API ServedModel load_served_model(const std::string& dir, const std::string& name, int64_t max_model_len);

// 404 NotFoundError unless `requested` is "" or the served name.
RLCORE_API void check_model_name(const std::string& requested, const ServedModel& model);

// Prompt text -> ids; add_special_tokens runs the tokenizer's post-processor (BOS).
RLCORE_API std::vector<int32_t> tokenize(const std::string& text, bool add_special_tokens, const ServedModel& model);

// What generate() receives for one completion request.
struct PreparedCompletion {
  std::vector<std::vector<int32_t>> prompt_token_ids;
  SamplingParams sampling;
  int64_t top_logprobs = 0;      // most likely tokens per sampled token (the request's logprobs)
  int64_t prompt_logprobs = -1;  // most likely tokens per prompt token; -1: the prompt is not scored
};

// What the engine reports beyond each sampled token's log-prob
// (ReportsLogprobs), where the request asks for it.
struct ReportedLogprobs {
  // [sample][token]: the most likely tokens where each token was sampled
  // (shorter where an aborted sample's last ones were not reported).
  std::vector<std::vector<TopLogprobs>> top;
  // [prompt][position - 1]: each prompt token after the first.
  std::vector<std::vector<PositionLogprobs>> prompt;
};

// Tokenizes the prompts and checks them against the model: token ids within
// the vocabulary, no empty prompt, prompt + max_tokens within max_model_len.
// EOS joins stop_token_ids unless ignore_eos.
RLCORE_API PreparedCompletion prepare_completion(const CompletionRequest& request, const ServedModel& model);

}  // namespace rlcore::serve
