// The JSON bodies `rlcore serve` answers with, in vLLM's shapes: completions,
// the model list, tokenize / detokenize and version.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "rlcore/core/serve/requests.h"
#include "rlcore/core/serve/served_model.h"
#include "rlcore/export.h"
#include "rlcore/inference_engine.h"

namespace rlcore::serve {

// "cmpl-" and 32 random hex digits, like vLLM's request ids.
RLCORE_API std::string make_completion_id();

// The text_completion object; choices are prompt-major (prompt i, sample j at
// i * n + j). Throws rlcore::Error when `output` does not hold prompts * n
// samples with one log-prob per token (an engine bug, not a bad request).
// `reported`: the most likely tokens and the prompts' log-probs, where asked.
RLCORE_API nlohmann::json build_completion_response(const CompletionRequest& request,
                                                    const PreparedCompletion& prepared, const GenerationOutput& output,
                                                    const ServedModel& model, const std::string& id, int64_t created,
                                                    const ReportedLogprobs& reported = {});

RLCORE_API nlohmann::json build_models_response(const ServedModel& model);
RLCORE_API nlohmann::json build_tokenize_response(const std::vector<int32_t>& tokens, bool return_token_strs,
                                                  const ServedModel& model);
// Throws ApiError (400) for an id the tokenizer does not know.
RLCORE_API nlohmann::json build_detokenize_response(const DetokenizeRequest& request, const ServedModel& model);
RLCORE_API nlohmann::json build_version_response();

}  // namespace rlcore::serve
