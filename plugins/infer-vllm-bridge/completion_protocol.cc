// Builds /v1/completions requests and reads their responses, trusting nothing
// in the body: every field is checked before it is used.
#include "completion_protocol.h"

#include <cmath>
#include <limits>

#include "rlcore/error.h"

namespace rlcore::infer_vllm_bridge {
namespace {

using nlohmann::json;

// vLLM sends -inf log-probs as -9999.0 (JSON has no infinity).
constexpr double kServerMinusInfinity = -9999.0;

[[noreturn]] void malformed(std::size_t choice, const std::string& what) {
  throw FormatError("vllm_bridge: malformed /v1/completions response: choices[" + std::to_string(choice) + "]" + what);
}

int32_t token_id(const json& value, std::size_t choice, std::size_t position) {
  if (value.is_number_integer() || value.is_number_unsigned()) {
    const auto id = value.get<int64_t>();
    if (id >= 0 && id <= std::numeric_limits<int32_t>::max()) return static_cast<int32_t>(id);
  }
  malformed(choice, ".token_ids[" + std::to_string(position) + "] is " + value.dump() + ", not a token id");
}

// "token_id:123" (return_tokens_as_token_ids) -> 123.
int32_t token_id_from_string(const json& value, std::size_t choice, std::size_t position) {
  static const std::string kPrefix = "token_id:";
  const std::string where = ".logprobs.tokens[" + std::to_string(position) + "]";
  if (!value.is_string()) malformed(choice, where + " is not a string");
  const auto text = value.get<std::string>();
  if (text.rfind(kPrefix, 0) != 0 || text.size() == kPrefix.size() || text.size() > kPrefix.size() + 10) {
    malformed(choice, where + " is '" + text.substr(0, 40) + "', not 'token_id:<id>' (return_tokens_as_token_ids)");
  }
  int64_t id = 0;
  for (std::size_t i = kPrefix.size(); i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9')
      malformed(choice, where + " is '" + text.substr(0, 40) + "', not 'token_id:<id>'");
    id = id * 10 + (text[i] - '0');
  }
  if (id > std::numeric_limits<int32_t>::max()) malformed(choice, where + " is out of range");
  return static_cast<int32_t>(id);
}

std::vector<int32_t> read_tokens(const json& choice, std::size_t index) {
  std::vector<int32_t> tokens;
  const auto ids = choice.find("token_ids");
  if (ids != choice.end() && !ids->is_null()) {
    if (!ids->is_array()) malformed(index, ".token_ids is not a list");
    for (std::size_t t = 0; t < ids->size(); ++t) tokens.push_back(token_id((*ids)[t], index, t));
    return tokens;
  }
  // Servers without return_token_ids: the "token_id:N" strings of the log-probs.
  const json& logprobs = choice.at("logprobs");
  if (!logprobs.contains("tokens") || !logprobs["tokens"].is_array()) {
    malformed(index, " has neither token_ids nor logprobs.tokens");
  }
  const json& strings = logprobs["tokens"];
  for (std::size_t t = 0; t < strings.size(); ++t) tokens.push_back(token_id_from_string(strings[t], index, t));
  return tokens;
}

std::vector<float> read_logprobs(const json& choice, std::size_t index, std::size_t tokens) {
  const json& logprobs = choice.at("logprobs");
  const auto values = logprobs.find("token_logprobs");
  if (values == logprobs.end() || !values->is_array()) malformed(index, ".logprobs.token_logprobs is not a list");
  if (values->size() != tokens) {
    malformed(index, ".logprobs.token_logprobs has " + std::to_string(values->size()) + " entries for " +
                         std::to_string(tokens) + " tokens");
  }
  std::vector<float> out;
  out.reserve(tokens);
  for (std::size_t t = 0; t < values->size(); ++t) {
    const json& value = (*values)[t];
    if (!value.is_number()) {
      malformed(index, ".logprobs.token_logprobs[" + std::to_string(t) + "] is " + value.dump() + ", not a number");
    }
    const double logprob = value.get<double>();
    if (!std::isfinite(logprob) || logprob > 1e-3) {
      malformed(index, ".logprobs.token_logprobs[" + std::to_string(t) + "] is " + value.dump() + ", not a log-prob");
    }
    out.push_back(logprob <= kServerMinusInfinity ? -std::numeric_limits<float>::infinity()
                                                  : static_cast<float>(std::min(logprob, 0.0)));
  }
  return out;
}

FinishReason read_finish_reason(const json& choice, std::size_t index) {
  const auto reason = choice.find("finish_reason");
  if (reason == choice.end() || !reason->is_string()) malformed(index, ".finish_reason is missing");
  const auto text = reason->get<std::string>();
  if (text == "stop") return FinishReason::kStop;
  if (text == "length") return FinishReason::kLength;
  // "abort" (vLLM aborted the request, e.g. a pause with mode=abort) and anything new.
  malformed(index, ".finish_reason is '" + text.substr(0, 40) + "': the server did not finish the sample");
}

}  // namespace

json completion_request(const std::string& model, const std::vector<std::vector<int32_t>>& prompts,
                        const SamplingParams& sampling, int64_t seed) {
  json body = {
      {"model", model},
      {"prompt", prompts},
      {"n", sampling.n},
      {"max_tokens", sampling.max_tokens},
      {"temperature", sampling.temperature},
      {"top_p", sampling.top_p},
      {"stop_token_ids", sampling.stop_token_ids},
      {"skip_special_tokens", true},
      {"logprobs", 0},
      {"return_token_ids", true},
      {"return_tokens_as_token_ids", true},
  };
  // Servers disagree on what disables top-k (-1 in older vLLM, 0 in newer); leaving it out works for all.
  if (sampling.top_k > 0) body["top_k"] = sampling.top_k;
  if (seed >= 0) body["seed"] = seed;
  return body;
}

GenerationOutput parse_completion_response(const json& body, std::size_t prompts, int64_t n) {
  if (!body.is_object() || !body.contains("choices") || !body["choices"].is_array()) {
    throw FormatError("vllm_bridge: malformed /v1/completions response: no 'choices' list in " +
                      body.dump().substr(0, 200));
  }
  const json& choices = body["choices"];
  const std::size_t expected = prompts * static_cast<std::size_t>(n);
  if (choices.size() != expected) {
    throw FormatError("vllm_bridge: /v1/completions returned " + std::to_string(choices.size()) + " choices for " +
                      std::to_string(prompts) + " prompts x n=" + std::to_string(n));
  }
  GenerationOutput out;
  out.token_ids.resize(expected);
  out.logprobs.resize(expected);
  out.finish_reasons.resize(expected, FinishReason::kLength);
  std::vector<bool> seen(expected, false);
  for (std::size_t c = 0; c < choices.size(); ++c) {
    const json& choice = choices[c];
    if (!choice.is_object()) malformed(c, " is not an object");
    // Prompt-major by `index`; vLLM sends them in order, but only the index is a promise.
    const auto index = choice.find("index");
    if (index == choice.end() || !index->is_number_integer() || index->get<int64_t>() < 0 ||
        index->get<int64_t>() >= static_cast<int64_t>(expected) || seen[index->get<std::size_t>()]) {
      malformed(c, ".index is missing, out of range or repeated");
    }
    const auto slot = index->get<std::size_t>();
    seen[slot] = true;
    if (!choice.contains("logprobs") || !choice["logprobs"].is_object()) {
      malformed(c, ".logprobs is missing (the request asked for logprobs: 0)");
    }
    out.token_ids[slot] = read_tokens(choice, c);
    out.logprobs[slot] = read_logprobs(choice, c, out.token_ids[slot].size());
    out.finish_reasons[slot] = read_finish_reason(choice, c);
  }
  return out;
}

}  // namespace rlcore::infer_vllm_bridge
