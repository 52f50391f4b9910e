// The HTTP request bodies of every `rlcore serve` route: the first byte picks
// the route, the rest is its body (or query value). Beyond refusing bad input
// without crashing, every answer must be a status with a JSON body.
#include <cstdlib>
#include <memory>

#include <nlohmann/json.hpp>

#include "fuzz_input.h"
#include "rlcore/core/serve/api.h"
#include "rlcore/core/serve/dev_mode.h"
#include "rlcore/core/serve/served_model.h"
#include "rlcore/inference_engine.h"
#include "rlcore/tokenizer/tokenizer.h"

namespace {

// Emits token 1 up to max_tokens for every sample: the HTTP layer is under test.
class OnesEngine : public rlcore::InferenceEngine {
 public:
  rlcore::GenerationOutput generate(const std::vector<std::vector<int32_t>>& prompts,
                                    const rlcore::SamplingParams& sampling) override {
    rlcore::GenerationOutput output;
    for (std::size_t i = 0; i < prompts.size() * static_cast<std::size_t>(sampling.n); ++i) {
      const auto length = static_cast<std::size_t>(std::min<int64_t>(sampling.max_tokens, 4));
      output.token_ids.emplace_back(length, 1);
      output.logprobs.emplace_back(length, -0.5f);
      output.finish_reasons.push_back(rlcore::FinishReason::kLength);
    }
    return output;
  }
  std::vector<rlcore::WeightMeta> weight_meta() const override { return {}; }
  void load_weights(const rlcore::NamedTensorList&, int64_t) override {}
  int64_t weight_version() const override { return 0; }
  void sleep() override {}
  void wake_up() override {}
};

const rlcore::serve::ServedModel& served_model() {
  static const rlcore::serve::ServedModel model = [] {
    const rlcore::Tokenizer tokenizer = rlcore::make_builtin_tokenizer();
    return rlcore::serve::ServedModel{
        "tiny", "/nonexistent/tiny", 64, tokenizer.vocab_size(), {*tokenizer.eos_token_id()}, tokenizer, 1700000000};
  }();
  return model;
}

// A JSON object, or SGLang's `null` of a successful memory-occupation route.
void check_answer(const rlcore::serve::ApiResponse& answer) {
  const bool json = nlohmann::json::accept(answer.body);
  const bool well_formed = json && (nlohmann::json::parse(answer.body).is_object() ||
                                    (answer.status == 200 && nlohmann::json::parse(answer.body).is_null()));
  if (answer.status < 200 || answer.status > 599 || !well_formed) {
    std::fprintf(stderr, "serve: status %d with body %s\n", answer.status, answer.body.c_str());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string body(rlcore_fuzz::as_text(data + 1, size - 1));
  // Fresh per input, so one input's sleep or pause cannot mask the next one's route.
  const auto api = std::make_shared<rlcore::serve::OpenAiApi>(std::make_shared<OnesEngine>(), served_model());
  rlcore::serve::DevModeApi dev(api, "/nonexistent/tiny");
  rlcore_fuzz::expect_only_rlcore_errors("serve", [&] {
    switch (data[0] % 11) {
      case 0:
        return check_answer(api->completions(body));
      case 1:
        return check_answer(api->tokenize(body));
      case 2:
        return check_answer(api->detokenize(body));
      case 3:
        return check_answer(dev.collective_rpc(body));
      case 4:
        return check_answer(dev.update_weight_version(body));
      case 5:
        return check_answer(dev.update_weights_from_disk(body));
      case 6:
        return check_answer(dev.release_memory_occupation(body));
      case 7:
        return check_answer(dev.resume_memory_occupation(body));
      case 8:
        return check_answer(dev.wake_up(rlcore_fuzz::split(body, ',')));
      case 9:
        check_answer(dev.sleep(body));
        return check_answer(api->completions(R"({"prompt": "ab", "max_tokens": 2})"));
      default:
        check_answer(dev.pause(body));
        return check_answer(dev.resume());
    }
  });
  return 0;
}
