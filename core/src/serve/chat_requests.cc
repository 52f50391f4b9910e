// Reading /v1/chat/completions bodies: the chat fields here, the sampling
// fields through the completion reader (the same checks and vLLM wording).
#include "rlcore/core/chat/chat_template.h"
#include "rlcore/core/serve/api_error.h"
#include "rlcore/core/serve/chat.h"

namespace rlcore::serve {
namespace {

using Ordered = nlohmann::ordered_json;

Ordered parse_ordered_object(const std::string& text) {
  check_json_depth(text);
  Ordered body;
  try {
    body = Ordered::parse(text);
  } catch (const Ordered::parse_error& e) {
    throw bad_request(std::string("The request body is not valid JSON: ") + e.what(), "");
  }
  if (!body.is_object()) throw bad_request("The request body must be a JSON object.", "");
  return body;
}

bool read_flag(const Ordered& body, const char* name, bool fallback) {
  const auto it = body.find(name);
  if (it == body.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) throw bad_request(std::string(name) + " must be a boolean, got " + it->dump() + ".", name);
  return it->get<bool>();
}

ChatPrompt read_chat_prompt(const Ordered& body) {
  ChatPrompt prompt;
  const auto messages = body.find("messages");
  if (messages == body.end() || !messages->is_array() || messages->empty()) {
    throw bad_request("messages must be a non-empty list of chat messages.", "messages");
  }
  for (const Ordered& message : *messages) {
    if (!message.is_object() || !message.contains("role") || !message["role"].is_string()) {
      throw bad_request("each message must be an object with a string role.", "messages");
    }
    const auto content = message.find("content");
    if (content != message.end() && !content->is_null() && !content->is_string()) {
      throw bad_request("message content must be a string (content parts are not supported by rlcore serve).",
                        "messages");
    }
  }
  prompt.messages = *messages;
  if (const auto tools = body.find("tools"); tools != body.end() && !tools->is_null()) {
    if (!tools->is_array()) throw bad_request("tools must be a list.", "tools");
    prompt.tools = *tools;
  }
  if (const auto kwargs = body.find("chat_template_kwargs"); kwargs != body.end() && !kwargs->is_null()) {
    if (!kwargs->is_object()) throw bad_request("chat_template_kwargs must be an object.", "chat_template_kwargs");
    prompt.chat_template_kwargs = *kwargs;
  }
  if (body.contains("chat_template") && !body["chat_template"].is_null()) {
    throw bad_request("chat_template in a request is not supported by rlcore serve; the checkpoint's is used.",
                      "chat_template");
  }
  if (read_flag(body, "continue_final_message", false)) {
    throw bad_request("continue_final_message=true is not supported by rlcore serve.", "continue_final_message");
  }
  prompt.add_generation_prompt = read_flag(body, "add_generation_prompt", true);
  prompt.add_special_tokens = read_flag(body, "add_special_tokens", false);
  return prompt;
}

// vLLM's checks of top_logprobs (ChatCompletionRequest.check_logprobs, then
// the engine's max_logprobs).
void check_top_logprobs(const Ordered& body, bool logprobs, const RequestLimits& limits) {
  const auto it = body.find("top_logprobs");
  if (it == body.end() || it->is_null()) return;
  if (!it->is_number_integer()) {
    throw bad_request("top_logprobs must be an integer, got " + it->dump() + ".", "top_logprobs");
  }
  const auto top = it->get<int64_t>();
  if (top < -1) throw bad_request("`top_logprobs` must be a positive value or -1.", "top_logprobs");
  if (top != 0 && !logprobs) {
    throw bad_request("when using `top_logprobs`, `logprobs` must be set to true.", "top_logprobs");
  }
  if (top == -1 || top > limits.max_logprobs) {
    throw bad_request("Requested sample logprobs of " +
                          (top == -1 ? std::string("-1 (the whole vocabulary)") : std::to_string(top)) +
                          ", which is greater than max allowed: " + std::to_string(limits.max_logprobs),
                      "top_logprobs");
  }
}

}  // namespace

ChatPrompt parse_chat_prompt(const std::string& text) { return read_chat_prompt(parse_ordered_object(text)); }

ChatRequest parse_chat_request(const std::string& text, const RequestLimits& limits) {
  const Ordered body = parse_ordered_object(text);
  ChatRequest request;
  request.prompt = read_chat_prompt(body);
  // The rest is a completion request's: the chat fields leave, a placeholder
  // prompt stands in for the rendered one, and the chat spellings map over.
  nlohmann::json completion = nlohmann::json::parse(text);
  for (const char* chat_only : {"messages", "tools", "tool_choice", "parallel_tool_calls", "chat_template_kwargs",
                                "add_generation_prompt", "continue_final_message", "chat_template", "top_logprobs",
                                "max_completion_tokens", "logprobs", "add_special_tokens"}) {
    completion.erase(chat_only);
  }
  if (body.contains("tool_choice") && !body["tool_choice"].is_null() && body["tool_choice"] != "none" &&
      body["tool_choice"] != "auto") {
    throw bad_request("tool_choice=" + body["tool_choice"].dump() + " is not supported by rlcore serve.",
                      "tool_choice");
  }
  completion["prompt"] = nlohmann::json::array({0});
  if (body.contains("max_completion_tokens") && !body["max_completion_tokens"].is_null()) {
    completion["max_tokens"] = body["max_completion_tokens"];
  }
  // Chat's echo repeats the last message, not the prompt: not served.
  if (read_flag(body, "echo", false)) throw bad_request("echo=true is not supported by rlcore serve.", "echo");
  completion.erase("echo");
  const bool logprobs = read_flag(body, "logprobs", false);
  check_top_logprobs(body, logprobs, limits);
  if (logprobs) {
    const auto top = body.find("top_logprobs");
    completion["logprobs"] = top == body.end() || top->is_null() ? int64_t{0} : top->get<int64_t>();
  }
  request.completion = parse_completion_request(completion, limits);
  request.completion.prompts.clear();
  request.completion.add_special_tokens = request.prompt.add_special_tokens;
  return request;
}

std::vector<int32_t> chat_prompt_ids(const ChatPrompt& prompt, const ServedModel& model) {
  if (!model.chat_template) {
    throw bad_request(
        "The served checkpoint has no chat template (chat_template.jinja or tokenizer_config.json's "
        "chat_template); use /v1/completions.",
        "messages");
  }
  chat::ChatTemplateOptions options;
  options.add_generation_prompt = prompt.add_generation_prompt;
  options.tools = prompt.tools;
  options.extra = prompt.chat_template_kwargs;
  std::string text;
  try {
    text = model.chat_template->render(prompt.messages, options);
  } catch (const chat::ChatTemplateError& e) {
    throw bad_request(e.what(), "messages");
  }
  return tokenize(text, prompt.add_special_tokens, model);
}

}  // namespace rlcore::serve
