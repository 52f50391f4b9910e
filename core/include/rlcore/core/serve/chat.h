// The chat routes of `rlcore serve` (POST /v1/chat/completions, and /tokenize
// with messages), as vLLM serves them: the messages rendered with the served
// checkpoint's own chat template, then generated as a completion.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlcore/core/serve/requests.h"
#include "rlcore/core/serve/stream.h"
#include "rlcore/core/serve/served_model.h"
#include "rlcore/export.h"
#include "rlcore/inference_engine.h"

namespace rlcore::serve {

// The chat fields; their key order is kept (tool schemas and tool-call
// arguments reach the template's tojson as the client wrote them).
struct ChatPrompt {
  nlohmann::ordered_json messages;
  nlohmann::ordered_json tools;  // null or a list
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
  bool add_generation_prompt = true;
  bool add_special_tokens = false;  // vLLM's default for chat: the template writes BOS
};

struct ChatRequest {
  ChatPrompt prompt;
  // Sampling and output options, read as a completion's (max_completion_tokens
  // as max_tokens, logprobs true as 0, top_logprobs ignored beyond 0).
  CompletionRequest completion;
};

// `text`: the request body (parsed again with its key order kept).
RLCORE_API ChatRequest parse_chat_request(const std::string& text, const RequestLimits& limits = {});
// The chat fields of a /tokenize body with "messages".
RLCORE_API ChatPrompt parse_chat_prompt(const std::string& text);

// The prompt ids: the served checkpoint's template rendered, then tokenized.
// 400 when the checkpoint has no chat template or the template raises.
RLCORE_API std::vector<int32_t> chat_prompt_ids(const ChatPrompt& prompt, const ServedModel& model);

// "chatcmpl-" and 32 random hex digits.
RLCORE_API std::string make_chat_completion_id();

// vLLM's chat.completion object and its chat.completion.chunk stream.
RLCORE_API nlohmann::json build_chat_response(const ChatRequest& request, const PreparedCompletion& prepared,
                                              const GenerationOutput& output, const ServedModel& model,
                                              const std::string& id, int64_t created,
                                              const ReportedLogprobs& reported = {});
RLCORE_API std::vector<std::string> build_chat_stream(const ChatRequest& request, const PreparedCompletion& prepared,
                                                      const GenerationOutput& output, const ServedModel& model,
                                                      const std::string& id, int64_t created);
// The chat.completion.chunk shapes, for a LiveStream (`options`: the chat
// request's completion part; the encoder keeps references to its arguments).
RLCORE_API std::unique_ptr<StreamEncoder> chat_stream_encoder(const CompletionRequest& options,
                                                              const ServedModel& model, const std::string& id,
                                                              int64_t created);

}  // namespace rlcore::serve
