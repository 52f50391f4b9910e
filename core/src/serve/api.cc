// OpenAiApi: parse, prepare, generate, build, and map every failure to an
// error object: 400 for the request's fault, 500 for the engine's.
#include "rlcore/core/serve/api.h"

#include <ctime>
#include <utility>

#include <nlohmann/json.hpp>

#include "rlcore/core/serve/api_error.h"
#include "rlcore/core/serve/chat.h"
#include "rlcore/core/serve/responses.h"
#include "rlcore/core/serve/stream.h"
#include "serve/answer.h"
#include "serve/deferred_answer.h"
#include "serve/request_driver.h"
#include "rlcore/error.h"

namespace rlcore::serve {
namespace {

// An engine without request-level generation reports each sampled token's
// log-prob and nothing more.
void refuse_reported_logprobs(const PreparedCompletion& prepared) {
  const char* field = prepared.top_logprobs > 0       ? "logprobs"
                      : prepared.prompt_logprobs >= 0 ? "prompt_logprobs"
                                                      : nullptr;
  if (field == nullptr) return;
  throw bad_request(std::string("the served engine reports only the sampled token's log-prob: ") + field +
                        " needs an engine that reports log-probs (infer-native).",
                    field);
}

}  // namespace

std::string error_text(int status, const std::string& type, const std::string& message) {
  return json_text(error_body(status, type, message));
}

OpenAiApi::OpenAiApi(std::shared_ptr<InferenceEngine> engine, ServedModel model, RequestLimits limits)
    : engine_(std::move(engine)), model_(std::move(model)), limits_(limits) {
  if (!engine_) throw ValueError("rlcore serve: no inference engine");
  if (auto* requests = capability<GeneratesRequests>(*engine_)) driver_ = std::make_unique<RequestDriver>(*requests);
}

OpenAiApi::~OpenAiApi() = default;

void OpenAiApi::with_engine(const std::function<void(InferenceEngine&)>& use) {
  // Frozen generations hold the engine shared until they finish, after the thaw.
  if (driver_ && driver_->frozen()) {
    driver_->run_on_stepping_thread([&] { use(*engine_); });
    return;
  }
  const OwnedEngineUse owned(engine_use_);
  if (driver_) {
    driver_->run_on_stepping_thread([&] { use(*engine_); });
  } else {
    use(*engine_);
  }
}

void OpenAiApi::abort_generations() {
  if (driver_) driver_->abort_all();
}

bool OpenAiApi::freeze_generations() {
  if (!driver_) return false;
  driver_->freeze();
  return true;
}

void OpenAiApi::thaw_generations(bool recompute_cache) {
  if (driver_) driver_->thaw(recompute_cache);
}

bool OpenAiApi::abort_generation(const std::string& id) { return driver_ && driver_->abort_tag(id) > 0; }

ApiResponse OpenAiApi::completions(const std::string& body) {
  return answer("/v1/completions", [&] {
    const CompletionRequest request = parse_completion_request(parse_json_object(body), limits_);
    check_model_name(request.model, model_);
    const PreparedCompletion prepared = prepare_completion(request, model_);
    const std::string id = make_completion_id();
    const auto created = static_cast<int64_t>(std::time(nullptr));
    if (driver_) {
      DeferredAnswer::EncoderFactory encoder;
      if (request.stream) {
        encoder = [this, id, created](const auto& r, const auto& p) {
          return completion_stream_encoder(r, p, model_, id, created);
        };
      }
      return deferred_answer(
          "/v1/completions", id, request, prepared, std::move(encoder),
          [this, request, prepared, id, created](const GenerationOutput& output, const ReportedLogprobs& reported) {
            return json_text(build_completion_response(request, prepared, output, model_, id, created, reported));
          });
    }
    refuse_reported_logprobs(prepared);
    const GateTicket ticket(gate_);  // a paused server refuses (503) before a stream begins
    if (request.stream) {
      return answer_stream("/v1/completions", [&] {
        return build_completion_stream(request, prepared, generate(prepared), model_, id, created);
      });
    }
    return ok(build_completion_response(request, prepared, generate(prepared), model_, id, created));
  });
}

ApiResponse OpenAiApi::chat_completions(const std::string& body) {
  return answer("/v1/chat/completions", [&] {
    ChatRequest request = parse_chat_request(body, limits_);
    check_model_name(request.completion.model, model_);
    PromptInput rendered;
    for (const int32_t id : chat_prompt_ids(request.prompt, model_)) rendered.token_ids.push_back(id);
    request.completion.prompts = {rendered};
    const PreparedCompletion prepared = prepare_completion(request.completion, model_);
    const std::string id = make_chat_completion_id();
    const auto created = static_cast<int64_t>(std::time(nullptr));
    if (driver_) {
      DeferredAnswer::EncoderFactory encoder;
      if (request.completion.stream) {
        encoder = [this, id, created](const auto& r, const auto&) {
          return chat_stream_encoder(r, model_, id, created);
        };
      }
      return deferred_answer(
          "/v1/chat/completions", id, request.completion, prepared, std::move(encoder),
          [this, request, prepared, id, created](const GenerationOutput& output, const ReportedLogprobs& reported) {
            return json_text(build_chat_response(request, prepared, output, model_, id, created, reported));
          });
    }
    refuse_reported_logprobs(prepared);
    const GateTicket ticket(gate_);
    if (request.completion.stream) {
      return answer_stream("/v1/chat/completions", [&] {
        return build_chat_stream(request, prepared, generate(prepared), model_, id, created);
      });
    }
    return ok(build_chat_response(request, prepared, generate(prepared), model_, id, created));
  });
}

GenerationOutput OpenAiApi::generate(const PreparedCompletion& prepared) {
  const OwnedEngineUse owned(engine_use_);
  return engine_->generate(prepared.prompt_token_ids, prepared.sampling);
}

ApiResponse OpenAiApi::deferred_answer(const char* route, const std::string& id, CompletionRequest request,
                                       PreparedCompletion prepared, EncoderFactory encoder, BodyBuilder build) {
  // Held until the generation ends: a paused server refuses (503) before it begins.
  std::vector<std::shared_ptr<void>> held{std::make_shared<GateTicket>(gate_),
                                          std::make_shared<SharedEngineUse>(engine_use_)};
  auto answer = std::make_shared<DeferredAnswer>(route, std::move(request), std::move(prepared), model_,
                                                 std::move(encoder), std::move(build), std::move(held));
  const PreparedCompletion& ready = answer->prepared();
  if (ready.prompt_logprobs >= 0) {
    std::vector<std::vector<PositionLogprobs>> scores;
    for (const auto& prompt : ready.prompt_token_ids)
      scores.push_back(driver_->score_tokens(prompt, ready.prompt_logprobs));
    answer->set_prompt_logprobs(std::move(scores));
  }
  // Started here, so a refusal (a full queue: 503) is the request's answer.
  driver_->start(ready.prompt_token_ids, ready.sampling, answer->listener(), id, ready.top_logprobs);
  ApiResponse response;
  response.deferred = [this, answer, id](std::shared_ptr<ResponseSink> sink) {
    answer->attach(std::move(sink), [this, id] { driver_->abort_tag(id); });
  };
  return response;
}

ApiResponse OpenAiApi::tokenize(const std::string& body) {
  return answer("/tokenize", [&] {
    const nlohmann::json fields = parse_json_object(body);
    if (fields.contains("messages")) {  // vLLM's TokenizeChatRequest: the chat template's prompt
      nlohmann::json rest = fields;     // model and return_token_strs, checked as for a text prompt
      for (const char* chat_only : {"messages", "tools", "chat_template_kwargs", "add_generation_prompt",
                                    "continue_final_message", "chat_template", "add_special_tokens"}) {
        rest.erase(chat_only);
      }
      rest["prompt"] = "";
      const TokenizeRequest request = parse_tokenize_request(rest);
      check_model_name(request.model, model_);
      const auto tokens = chat_prompt_ids(parse_chat_prompt(body), model_);
      return ok(build_tokenize_response(tokens, request.return_token_strs, model_));
    }
    const TokenizeRequest request = parse_tokenize_request(fields);
    check_model_name(request.model, model_);
    const auto tokens = serve::tokenize(request.prompt, request.add_special_tokens, model_);
    return ok(build_tokenize_response(tokens, request.return_token_strs, model_));
  });
}

ApiResponse OpenAiApi::detokenize(const std::string& body) {
  return answer("/detokenize", [&] {
    const DetokenizeRequest request = parse_detokenize_request(parse_json_object(body));
    check_model_name(request.model, model_);
    return ok(build_detokenize_response(request, model_));
  });
}

ApiResponse OpenAiApi::models() const { return ok(build_models_response(model_)); }

ApiResponse OpenAiApi::version() const { return ok(build_version_response()); }

}  // namespace rlcore::serve
