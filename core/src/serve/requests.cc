// JSON -> typed requests for `rlcore serve`: vLLM's field names and defaults,
// with a 400 naming the field for every wrong type, range or unsupported option.
#include "rlcore/core/serve/requests.h"

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "rlcore/core/serve/api_error.h"

namespace rlcore::serve {
namespace {

using nlohmann::json;

// A value as shown in messages, cut short so a huge field cannot flood the log.
std::string shown(const json& value) {
  std::string text = value.dump();
  constexpr std::size_t kMaxShown = 60;
  if (text.size() > kMaxShown) text = text.substr(0, kMaxShown - 3) + "...";
  return text;
}

std::string shown_number(double value) { return json(value).dump(); }

// "<name> <complaint>", a 400 naming the field.
ApiError field_error(const char* name, const std::string& complaint) {
  return bad_request(std::string(name) + " " + complaint, name);
}

// The field, or nullptr when absent or null (null means the default, as in vLLM).
const json* field(const json& body, const char* name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

// An integer, or nullopt for anything else. Integral floats pass (pydantic's lax
// mode accepts 16.0 for an int field); booleans do not.
std::optional<int64_t> integer_of(const json& value) {
  constexpr auto kMax = std::numeric_limits<int64_t>::max();
  if (value.is_number_unsigned()) {
    const auto unsigned_value = value.get<uint64_t>();
    if (unsigned_value > static_cast<uint64_t>(kMax)) return std::nullopt;
    return static_cast<int64_t>(unsigned_value);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  if (value.is_number_float()) {
    const double number = value.get<double>();
    // 2^63 is exactly representable; anything at or past it is out of range.
    if (std::isfinite(number) && std::floor(number) == number && number >= -9.223372036854775808e18 &&
        number < 9.223372036854775808e18) {
      return static_cast<int64_t>(number);
    }
  }
  return std::nullopt;
}

int64_t read_integer(const json& value, const char* name) {
  const auto integer = integer_of(value);
  if (!integer) throw field_error(name, "must be an integer, got " + shown(value) + ".");
  return *integer;
}

std::optional<int64_t> optional_integer(const json& body, const char* name) {
  const json* value = field(body, name);
  if (!value) return std::nullopt;
  return read_integer(*value, name);
}

std::optional<double> optional_number(const json& body, const char* name) {
  const json* value = field(body, name);
  if (!value) return std::nullopt;
  if (!value->is_number()) throw field_error(name, "must be a number, got " + shown(*value) + ".");
  const double number = value->get<double>();
  if (!std::isfinite(number)) throw field_error(name, "must be a finite number.");
  return number;
}

void read_bool(const json& body, const char* name, bool& out) {
  const json* value = field(body, name);
  if (!value) return;
  if (!value->is_boolean()) throw field_error(name, "must be a boolean, got " + shown(*value) + ".");
  out = value->get<bool>();
}

std::string read_model(const json& body) {
  const json* value = field(body, "model");
  if (!value) return "";
  if (!value->is_string()) throw bad_request("model must be a string, got " + shown(*value) + ".", "model");
  return value->get<std::string>();
}

// A list of non-negative token ids; `name` names the list in messages.
std::vector<int64_t> read_token_ids(const json& value, const char* name) {
  if (!value.is_array()) throw field_error(name, "must be a list of integers, got " + shown(value) + ".");
  std::vector<int64_t> ids;
  ids.reserve(value.size());
  for (const auto& item : value) {
    const auto id = integer_of(item);
    if (!id) throw field_error(name, "must be a list of integers, got " + shown(item) + " in it.");
    if (*id < 0) throw field_error(name, "must contain non-negative token ids, got " + std::to_string(*id) + ".");
    ids.push_back(*id);
  }
  return ids;
}

void require_object(const json& body) {
  if (!body.is_object()) throw bad_request("The request body must be a JSON object.");
}

bool is_false(const json& value) { return value.is_boolean() && !value.get<bool>(); }
bool is_zero(const json& value) { return value.is_number() && value.get<double>() == 0.0; }
bool is_one(const json& value) { return value.is_number() && value.get<double>() == 1.0; }
bool is_empty(const json& value) {
  if (value.is_string()) return value.get_ref<const std::string&>().empty();
  return (value.is_array() || value.is_object()) && value.empty();
}
bool never(const json&) { return false; }
bool is_text_format(const json& value) { return value.is_object() && value.value("type", "") == "text"; }

// vLLM options rlcore does not implement: refused unless they hold their
// default, so a client never gets silently different behaviour.
struct UnsupportedField {
  const char* name;
  bool (*is_default)(const json&);
};
constexpr UnsupportedField kUnsupportedCompletionFields[] = {
    {"best_of", is_one},
    {"suffix", never},
    {"stop", is_empty},
    {"frequency_penalty", is_zero},
    {"presence_penalty", is_zero},
    {"repetition_penalty", is_one},
    {"length_penalty", is_one},
    {"min_p", is_zero},
    {"min_tokens", is_zero},
    {"logit_bias", is_empty},
    {"use_beam_search", is_false},
    {"logprob_token_ids", never},
    {"allowed_token_ids", never},
    {"bad_words", is_empty},
    {"prompt_embeds", never},
    {"truncate_prompt_tokens", never},
    {"response_format", is_text_format},
    {"structured_outputs", never},
    {"guided_json", never},
    {"guided_regex", never},
    {"guided_choice", never},
    {"guided_grammar", never},
};

// vLLM's checks of prompt_logprobs (CompletionRequest.check_logprobs, then the
// engine's max_logprobs); stream is read first.
void read_prompt_logprobs(const json& body, const RequestLimits& limits, CompletionRequest& request) {
  request.prompt_logprobs = optional_integer(body, "prompt_logprobs");
  if (!request.prompt_logprobs) return;
  const int64_t top = *request.prompt_logprobs;
  if (top < -1) throw bad_request("`prompt_logprobs` must be a positive value or -1.", "prompt_logprobs");
  if (request.stream) {
    throw bad_request("`prompt_logprobs` are not available when `stream=True`.", "prompt_logprobs");
  }
  if (top == -1 || top > limits.max_logprobs) {
    throw bad_request("Requested prompt logprobs of " +
                          (top == -1 ? std::string("-1 (the whole vocabulary)") : std::to_string(top)) +
                          ", which is greater than max allowed: " + std::to_string(limits.max_logprobs),
                      "prompt_logprobs");
  }
}

void reject_unsupported(const json& body) {
  for (const auto& unsupported : kUnsupportedCompletionFields) {
    const json* value = field(body, unsupported.name);
    if (value && !unsupported.is_default(*value)) {
      throw bad_request(std::string(unsupported.name) + "=" + shown(*value) + " is not supported by rlcore serve.",
                        unsupported.name);
    }
  }
}

// `stream` and `stream_options` ({include_usage, continuous_usage_stats}), as vLLM validates them.
void read_stream_fields(const json& body, CompletionRequest& request) {
  read_bool(body, "stream", request.stream);
  const json* options = field(body, "stream_options");
  if (options == nullptr) return;
  if (!request.stream) throw bad_request("Stream options can only be defined when `stream=True`.", "stream_options");
  if (!options->is_object()) throw field_error("stream_options", "must be an object, got " + shown(*options));
  read_bool(*options, "include_usage", request.include_usage);
  bool continuous_usage_stats = false;
  read_bool(*options, "continuous_usage_stats", continuous_usage_stats);
  if (continuous_usage_stats) {
    throw bad_request("stream_options.continuous_usage_stats=true is not supported by rlcore serve.", "stream_options");
  }
}

constexpr const char* kPromptShapes =
    "prompt must be a string, a list of strings, a list of token ids or a list of lists of token ids.";

PromptInput token_prompt(const json& list) {
  PromptInput prompt;
  prompt.token_ids.reserve(list.size());
  for (const auto& item : list) {
    const auto id = integer_of(item);
    if (!id) throw bad_request(kPromptShapes, "prompt");
    if (*id < 0) throw bad_request("prompt token ids must be non-negative, got " + std::to_string(*id) + ".", "prompt");
    prompt.token_ids.push_back(*id);
  }
  return prompt;
}

std::vector<PromptInput> read_prompts(const json& body, int64_t max_prompts) {
  const json* value = field(body, "prompt");
  if (!value || (value->is_string() && value->get_ref<const std::string&>().empty())) {
    throw bad_request("prompt must be provided and non-empty.", "prompt");
  }
  if (value->is_string()) return {PromptInput{value->get<std::string>(), {}}};
  if (!value->is_array()) throw bad_request(kPromptShapes, "prompt");
  if (value->empty()) throw bad_request("prompt must not be an empty list.", "prompt");

  const json& first = value->front();
  if (first.is_number()) return {token_prompt(*value)};  // one prompt as token ids

  if (static_cast<int64_t>(value->size()) > max_prompts) {
    throw bad_request("prompt list length " + std::to_string(value->size()) + " exceeds the maximum allowed count of " +
                          std::to_string(max_prompts) + ".",
                      "prompt");
  }
  std::vector<PromptInput> prompts;
  prompts.reserve(value->size());
  for (const auto& item : *value) {
    if (first.is_string() && item.is_string()) {
      prompts.push_back(PromptInput{item.get<std::string>(), {}});
    } else if (first.is_array() && item.is_array()) {
      prompts.push_back(token_prompt(item));
    } else {
      throw bad_request(kPromptShapes, "prompt");
    }
  }
  return prompts;
}

}  // namespace

void check_json_depth(const std::string& body) {
  int64_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) {
        throw bad_request("The request body nests JSON deeper than " + std::to_string(kMaxJsonDepth) + " levels.");
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

json parse_json_object(const std::string& body) {
  check_json_depth(body);
  json parsed;
  try {
    parsed = json::parse(body);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for numbers like 1e999
    throw bad_request(std::string("The request body is not valid JSON: ") + e.what());
  }
  require_object(parsed);
  return parsed;
}

CompletionRequest parse_completion_request(const json& body, const RequestLimits& limits) {
  require_object(body);
  reject_unsupported(body);
  CompletionRequest request;
  request.model = read_model(body);
  request.prompts = read_prompts(body, limits.max_prompts);

  if (auto n = optional_integer(body, "n")) request.n = *n;
  if (request.n < 1) throw bad_request("n must be at least 1, got " + std::to_string(request.n) + ".", "n");
  if (request.n > limits.max_n) {
    throw bad_request("n must be at most " + std::to_string(limits.max_n) + ", got " + std::to_string(request.n) + ".",
                      "n");
  }

  if (auto max_tokens = optional_integer(body, "max_tokens")) request.max_tokens = *max_tokens;
  if (request.max_tokens < 1) {
    throw bad_request("max_tokens must be at least 1, got " + std::to_string(request.max_tokens) + ".", "max_tokens");
  }

  if (auto temperature = optional_number(body, "temperature")) request.temperature = *temperature;
  if (request.temperature < 0.0) {
    throw bad_request("temperature must be non-negative, got " + shown_number(request.temperature) + ".",
                      "temperature");
  }

  if (auto top_p = optional_number(body, "top_p")) request.top_p = *top_p;
  if (!(request.top_p > 0.0 && request.top_p <= 1.0)) {
    throw bad_request("top_p must be in (0, 1], got " + shown_number(request.top_p) + ".", "top_p");
  }

  if (auto top_k = optional_integer(body, "top_k")) request.top_k = *top_k == 0 ? -1 : *top_k;
  if (request.top_k < -1) {
    throw bad_request("top_k must be -1 or 0 (disabled), or at least 1, got " + std::to_string(request.top_k) + ".",
                      "top_k");
  }

  request.seed = optional_integer(body, "seed");

  if (const json* stop_ids = field(body, "stop_token_ids")) {
    request.stop_token_ids = read_token_ids(*stop_ids, "stop_token_ids");
  }

  request.logprobs = optional_integer(body, "logprobs");
  if (request.logprobs && *request.logprobs < -1) {
    throw bad_request("logprobs must be a non-negative integer or -1, got " + std::to_string(*request.logprobs) + ".",
                      "logprobs");
  }
  // -1 asks for the whole vocabulary, past any max_logprobs rlcore serve takes.
  if (request.logprobs && (*request.logprobs == -1 || *request.logprobs > limits.max_logprobs)) {
    throw bad_request(
        "Requested sample logprobs of " +
            (*request.logprobs == -1 ? std::string("-1 (the whole vocabulary)") : std::to_string(*request.logprobs)) +
            ", which is greater than max allowed: " + std::to_string(limits.max_logprobs),
        "logprobs");
  }
  read_stream_fields(body, request);
  read_prompt_logprobs(body, limits, request);
  read_bool(body, "echo", request.echo);
  if (request.echo && request.stream) {
    throw bad_request("echo=true is not supported with stream=true by rlcore serve.", "echo");
  }

  read_bool(body, "ignore_eos", request.ignore_eos);
  read_bool(body, "add_special_tokens", request.add_special_tokens);
  read_bool(body, "skip_special_tokens", request.skip_special_tokens);
  read_bool(body, "include_stop_str_in_output", request.include_stop_str_in_output);
  read_bool(body, "return_token_ids", request.return_token_ids);
  read_bool(body, "return_tokens_as_token_ids", request.return_tokens_as_token_ids);
  return request;
}

TokenizeRequest parse_tokenize_request(const json& body) {
  require_object(body);
  TokenizeRequest request;
  request.model = read_model(body);
  const json* prompt = field(body, "prompt");
  if (!prompt) throw bad_request("prompt is required.", "prompt");
  if (!prompt->is_string()) throw bad_request("prompt must be a string, got " + shown(*prompt) + ".", "prompt");
  request.prompt = prompt->get<std::string>();
  read_bool(body, "add_special_tokens", request.add_special_tokens);
  read_bool(body, "return_token_strs", request.return_token_strs);
  return request;
}

DetokenizeRequest parse_detokenize_request(const json& body) {
  require_object(body);
  DetokenizeRequest request;
  request.model = read_model(body);
  const json* tokens = field(body, "tokens");
  if (!tokens) throw bad_request("tokens is required.", "tokens");
  request.tokens = read_token_ids(*tokens, "tokens");
  return request;
}

}  // namespace rlcore::serve
