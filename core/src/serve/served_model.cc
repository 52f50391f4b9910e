// Loading the served model's description and turning a completion request into
// engine input, with vLLM's messages for prompts that do not fit.
#include "rlcore/core/serve/served_model.h"

#include <algorithm>
#include <ctime>

#include "rlcore/core/chat/chat_template.h"
#include "rlcore/core/serve/api_error.h"
#include "rlcore/error.h"
#include "rlcore/model/config.h"

namespace rlcore::serve {
namespace {

void add_unique(std::vector<int32_t>& ids, int32_t id) {
  if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
}

std::vector<int32_t> checked_ids(const std::vector<int64_t>& ids, const ServedModel& model, const char* param) {
  std::vector<int32_t> result;
  result.reserve(ids.size());
  for (const int64_t id : ids) {
    if (id >= model.vocab_size) throw bad_request("Token id " + std::to_string(id) + " is out of vocabulary", param);
    result.push_back(static_cast<int32_t>(id));
  }
  return result;
}

}  // namespace

ServedModel load_served_model(const std::string& dir, const std::string& name, int64_t max_model_len) {
  const auto config = model::ModelConfig::from_file(dir + "/config.json");
  ServedModel model{name.empty() ? dir : name,
                    dir,
                    max_model_len > 0 ? max_model_len : config.max_position_embeddings,
                    config.vocab_size,
                    {},
                    Tokenizer::from_pretrained_dir(dir),
                    static_cast<int64_t>(std::time(nullptr))};
  if (auto chat_template = chat::ChatTemplate::from_checkpoint(dir)) {
    model.chat_template = std::make_shared<const chat::ChatTemplate>(std::move(*chat_template));
  }
  if (auto eos = model.tokenizer.eos_token_id()) add_unique(model.eos_token_ids, *eos);
  for (const int64_t eos : config.eos_token_ids) add_unique(model.eos_token_ids, static_cast<int32_t>(eos));
  return model;
}

void check_model_name(const std::string& requested, const ServedModel& model) {
  if (!requested.empty() && requested != model.name) {
    throw ApiError(404, "NotFoundError", "The model `" + requested + "` does not exist.", "model");
  }
}

std::vector<int32_t> tokenize(const std::string& text, bool add_special_tokens, const ServedModel& model) {
  std::vector<int32_t> ids = model.tokenizer.encode(text);
  return add_special_tokens ? model.tokenizer.post_process(std::move(ids)) : ids;
}

PreparedCompletion prepare_completion(const CompletionRequest& request, const ServedModel& model) {
  PreparedCompletion prepared;
  for (const auto& prompt : request.prompts) {
    std::vector<int32_t> ids = prompt.text ? tokenize(*prompt.text, request.add_special_tokens, model)
                                           : checked_ids(prompt.token_ids, model, "prompt");
    const auto count = static_cast<int64_t>(ids.size());
    if (count == 0) throw bad_request("The decoder prompt cannot be empty", "prompt");
    if (count >= model.max_model_len) {
      throw bad_request("This model's maximum context length is " + std::to_string(model.max_model_len) +
                            " tokens. However, your request has " + std::to_string(count) +
                            " input tokens. Please reduce the length of the input messages.",
                        "input_tokens");
    }
    if (count + request.max_tokens > model.max_model_len) {
      throw bad_request("'max_tokens' or 'max_completion_tokens' is too large: " + std::to_string(request.max_tokens) +
                            ". This model's maximum context length is " + std::to_string(model.max_model_len) +
                            " tokens and your request has " + std::to_string(count) + " input tokens (" +
                            std::to_string(request.max_tokens) + " > " + std::to_string(model.max_model_len) + " - " +
                            std::to_string(count) + ").",
                        "max_tokens");
    }
    prepared.prompt_token_ids.push_back(std::move(ids));
  }

  SamplingParams& sampling = prepared.sampling;
  sampling.n = request.n;
  sampling.max_tokens = request.max_tokens;
  sampling.temperature = request.temperature;
  sampling.top_k = request.top_k;
  sampling.top_p = request.top_p;
  sampling.seed = request.seed.value_or(-1);
  for (const int32_t id : checked_ids(request.stop_token_ids, model, "stop_token_ids")) {
    add_unique(sampling.stop_token_ids, id);
  }
  if (!request.ignore_eos) {
    for (const int32_t eos : model.eos_token_ids) add_unique(sampling.stop_token_ids, eos);
  }
  prepared.top_logprobs = std::max<int64_t>(request.logprobs.value_or(0), 0);
  prepared.prompt_logprobs = request.prompt_logprobs.value_or(-1);
  if (request.echo && request.logprobs) {
    prepared.prompt_logprobs = std::max(prepared.prompt_logprobs, prepared.top_logprobs);
  }
  return prepared;
}

}  // namespace rlcore::serve
