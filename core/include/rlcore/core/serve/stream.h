// Streamed answers (`"stream": true`): server-sent events as vLLM sends them,
// `data: <chunk JSON>\n\n` per token and choice, then `data: [DONE]\n\n`.
// With an engine that runs requests, each token's event is sent as the token
// is sampled (LiveStream); otherwise the chunks are cut from the finished
// generation. Either way a route's StreamEncoder shapes its chunks; the
// framing, the error ending, the text deltas and the token order are shared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "rlcore/core/serve/requests.h"
#include "rlcore/core/serve/served_model.h"
#include "rlcore/export.h"
#include "rlcore/inference_engine.h"

namespace rlcore::serve {

inline constexpr const char* kSseDone = "data: [DONE]\n\n";

// "data: <payload>\n\n".
RLCORE_API std::string sse_data(const std::string& payload);
// "data: <json>\n\n".
RLCORE_API std::string sse_event(const nlohmann::json& chunk);

// How every stream ends: with include_usage, `empty_chunk` (the route's chunk
// with no choices) carrying `usage`; then [DONE].
RLCORE_API std::vector<std::string> end_stream(bool include_usage, nlohmann::json empty_chunk,
                                               const nlohmann::json& usage);

// How a stream that fails after it has been accepted ends, as vLLM's: one
// event {"error": <error_json>} (`error_json`: the body a non-streamed request
// would get; the "error" key is what makes the openai client raise), then
// [DONE], in a 200 stream.
RLCORE_API std::vector<std::string> stream_error_events(const std::string& error_json);

// The text each of `ids` adds, so that the pieces concatenate to the decoded
// whole: a token that ends inside a UTF-8 character adds nothing until the
// character is complete (as vLLM's incremental detokenizer holds it back).
RLCORE_API std::vector<std::string> text_deltas(const Tokenizer& tokenizer, const std::vector<int32_t>& ids,
                                                bool skip_special_tokens);

// One streamed chunk's token: token `position` of sample `sample`, the text it
// adds, and whether it is the sample's last (the chunk that carries the finish).
struct StreamedToken {
  std::size_t sample = 0;
  std::size_t position = 0;
  std::string text;
  bool last = false;
};

// Every generated token in the order vLLM streams them: step by step, the
// samples interleaved by index within a step. `shown_ids[k]` are the ids of
// sample k whose text is shown (output.token_ids[k] less a dropped stop token,
// which then adds no text).
RLCORE_API std::vector<StreamedToken> streamed_tokens(const GenerationOutput& output,
                                                      const std::vector<std::vector<int32_t>>& shown_ids,
                                                      const Tokenizer& tokenizer, bool skip_special_tokens);

// One route's chunks, token by token.
class RLCORE_API StreamEncoder {
 public:
  virtual ~StreamEncoder();
  // The events before any token (chat: every choice announces the assistant role).
  virtual std::vector<std::string> begin(std::size_t samples) = 0;
  // The event of token ids.back() of sample `sample` (ids: the sample's ids so
  // far), its log-prob and most likely alternatives (`top`, empty where not
  // asked), the text it adds, and on the sample's last token its finish reason.
  virtual std::string token(std::size_t sample, const std::vector<int32_t>& ids, float logprob, const TopLogprobs& top,
                            const std::string& text, std::optional<FinishReason> finish) = 0;
  // With include_usage a chunk with no choices carrying `usage`; then [DONE].
  virtual std::vector<std::string> end(const nlohmann::json& usage) = 0;
};

// Every event of a finished generation, tokens in streamed_tokens() order.
RLCORE_API std::vector<std::string> encode_stream(StreamEncoder& encoder, const CompletionRequest& request,
                                                  const PreparedCompletion& prepared, const GenerationOutput& output,
                                                  const ServedModel& model);

// Encodes tokens as they arrive (in any order across samples, in order
// within one): the text of each sample held back while it ends inside a UTF-8
// character, a stop token that vLLM leaves out of the text adding none.
// Keeps references to its arguments.
class RLCORE_API LiveStream {
 public:
  LiveStream(std::unique_ptr<StreamEncoder> encoder, const CompletionRequest& request,
             const PreparedCompletion& prepared, const ServedModel& model);
  std::vector<std::string> begin();
  std::string token(std::size_t sample, int32_t id, float logprob, const TopLogprobs& top,
                    std::optional<FinishReason> finish);
  std::vector<std::string> end();  // usage from what arrived

 private:
  std::unique_ptr<StreamEncoder> encoder_;
  const CompletionRequest& request_;
  const PreparedCompletion& prepared_;
  const ServedModel& model_;
  std::vector<std::vector<int32_t>> ids_;
  std::vector<std::string> emitted_;  // each sample's text sent so far
};

// The text_completion chunk shapes (the encoder keeps references to its arguments).
RLCORE_API std::unique_ptr<StreamEncoder> completion_stream_encoder(const CompletionRequest& request,
                                                                    const PreparedCompletion& prepared,
                                                                    const ServedModel& model, const std::string& id,
                                                                    int64_t created);

// POST /v1/completions: one text_completion chunk per generated token and
// choice (the last chunk of a choice carrying finish_reason and stop_reason),
// with stream_options.include_usage a final chunk with no choices and the
// usage, then [DONE].
RLCORE_API std::vector<std::string> build_completion_stream(const CompletionRequest& request,
                                                            const PreparedCompletion& prepared,
                                                            const GenerationOutput& output, const ServedModel& model,
                                                            const std::string& id, int64_t created);

}  // namespace rlcore::serve
