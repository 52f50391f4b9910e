// Request validation, with messages that name the prompt or request at fault.
#include "request_checks.h"

#include <string>

#include "rlcore/error.h"
#include "sampling.h"

namespace rlcore::infer_native {
namespace {

void check_ids(const std::vector<int32_t>& ids, int64_t vocab_size, const std::string& which) {
  for (size_t t = 0; t < ids.size(); ++t) {
    if (ids[t] < 0 || ids[t] >= vocab_size) {
      throw ValueError(which + ": token " + std::to_string(t) + " has id " + std::to_string(ids[t]) +
                       ", outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
    }
  }
}

}  // namespace

void check_prompts(const std::vector<std::vector<int32_t>>& prompts, int64_t vocab_size, int64_t max_model_len) {
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto& prompt = prompts[i];
    const std::string which = "prompt " + std::to_string(i);
    if (prompt.empty()) throw ValueError(which + " is empty");
    if (static_cast<int64_t>(prompt.size()) >= max_model_len) {
      throw ValueError(which + " has " + std::to_string(prompt.size()) +
                       " tokens, leaving no room to generate under max_model_len " + std::to_string(max_model_len));
    }
    check_ids(prompt, vocab_size, which);
  }
}

void check_request(const GenerationRequest& request, int64_t vocab_size, int64_t max_model_len) {
  if (request.id.empty()) throw ValueError("request: the id is empty");
  const std::string which = "request '" + request.id + "'";
  if (request.sampling.n != 1) {
    throw ValueError(which + ": sampling n must be 1 (submit one request per sample), got " +
                     std::to_string(request.sampling.n));
  }
  try {
    validate_sampling(request.sampling);
  } catch (const ValueError& e) {
    throw ValueError(which + ": " + e.what());
  }
  if (request.prompt_ids.empty()) throw ValueError(which + ": the prompt is empty");
  check_ids(request.prompt_ids, vocab_size, which + " prompt");
  const GeneratedTokens& resumed = request.resumed;
  if (resumed.logprobs.size() != resumed.size() || resumed.weight_versions.size() != resumed.size()) {
    throw ValueError(which + ": resumed has " + std::to_string(resumed.size()) + " token ids but " +
                     std::to_string(resumed.logprobs.size()) + " log-probs and " +
                     std::to_string(resumed.weight_versions.size()) + " weight versions");
  }
  check_ids(resumed.token_ids, vocab_size, which + " resumed");
  const auto already = static_cast<int64_t>(resumed.size());
  if (already >= request.sampling.max_tokens) {
    throw ValueError(which + ": resumed already holds " + std::to_string(already) + " tokens, max_tokens is " +
                     std::to_string(request.sampling.max_tokens));
  }
  const auto prompt = static_cast<int64_t>(request.prompt_ids.size());
  if (prompt + request.sampling.max_tokens > max_model_len) {
    throw ValueError(which + ": prompt " + std::to_string(prompt) + " tokens + max_tokens " +
                     std::to_string(request.sampling.max_tokens) + " exceed max_model_len " +
                     std::to_string(max_model_len));
  }
}

void check_top_logprobs(int64_t top_logprobs, int64_t at_least, int64_t vocab_size, const std::string& which) {
  if (top_logprobs < at_least || top_logprobs > vocab_size) {
    throw ValueError(which + ": top_logprobs must be in [" + std::to_string(at_least) + ", " +
                     std::to_string(vocab_size) + "] (the vocabulary), got " + std::to_string(top_logprobs));
  }
}

void check_scored_ids(const std::vector<int32_t>& ids, int64_t vocab_size, int64_t max_model_len) {
  if (ids.empty()) throw ValueError("score_tokens(): the sequence is empty");
  if (static_cast<int64_t>(ids.size()) > max_model_len) {
    throw ValueError("score_tokens(): the sequence has " + std::to_string(ids.size()) +
                     " tokens, more than max_model_len " + std::to_string(max_model_len));
  }
  check_ids(ids, vocab_size, "score_tokens()");
}

}  // namespace rlcore::infer_native
