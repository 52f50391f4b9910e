// Streamed answers (`"stream": true`): server-sent events as vLLM sends them,
// `data: <chunk JSON>\n\n` per token and choice, then `data: [DONE]\n\n`.
// rlcore's engines return a whole generation at once, so the chunks are cut
// from it after it finishes: the framing, fields and the concatenated text are
// vLLM's, the timing is not token by token. The framing, the error ending and
// the token order are the routes' common part; each route shapes its chunks.
#pragma once

#include <cstddef>
#include <cstdint>
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
RLCORE_API void end_stream(std::vector<std::string>& events, bool include_usage, nlohmann::json empty_chunk,
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

// POST /v1/completions: one text_completion chunk per generated token and
// choice (the last chunk of a choice carrying finish_reason and stop_reason),
// with stream_options.include_usage a final chunk with no choices and the
// usage, then [DONE].
RLCORE_API std::vector<std::string> build_completion_stream(const CompletionRequest& request,
                                                            const PreparedCompletion& prepared,
                                                            const GenerationOutput& output, const ServedModel& model,
                                                            const std::string& id, int64_t created);

}  // namespace rlcore::serve
