// TemplateInferenceEngine: greedy or seeded sampling, one sequence at a time.
#include "template_inference_engine.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <filesystem>

#include "rlcore/error.h"
#include "rlcore/safetensors/safetensors.h"

namespace engine_template {

namespace fs = std::filesystem;
using namespace rlcore;

TemplateInferenceEngine::TemplateInferenceEngine(const InferOptions& options, const ComponentContext& context)
    : model_(model::ModelConfig::from_file((fs::path(context.model_path) / "config.json").string()),
             model::ModelHead::kCausalLm, at::TensorOptions().dtype(at::kFloat)),
      specs_(model::parameter_specs(model_.config())),
      next_seed_(static_cast<uint64_t>(options.seed)) {
  if (context.device != "cpu") throw ConfigError("template_infer runs on cpu only, not '" + context.device + "'");
  model_.load(SafetensorsCheckpoint(context.model_path).load_all());
}

GenerationOutput TemplateInferenceEngine::generate(const std::vector<std::vector<int32_t>>& prompts,
                                                   const SamplingParams& sampling) {
  if (asleep_) throw ValueError("template_infer: generate() while asleep; call wake_up() and load_weights() first");
  if (sampling.top_k > 0 || sampling.top_p < 1.0) throw ValueError("template_infer: top_k / top_p are not supported");
  if (sampling.n < 1 || sampling.max_tokens < 0) throw ValueError("template_infer: n must be >= 1, max_tokens >= 0");
  at::NoGradGuard no_grad;
  // One generator per request: the same seed gives the same samples whatever ran before.
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(
      sampling.seed >= 0 ? static_cast<uint64_t>(sampling.seed) : next_seed_++);
  GenerationOutput out;
  out.weight_version = version_;
  for (const auto& prompt : prompts) {
    for (int64_t sample = 0; sample < sampling.n; ++sample) {
      std::vector<int64_t> ids(prompt.begin(), prompt.end());
      std::vector<int32_t> tokens;
      std::vector<float> logprobs;
      FinishReason reason = FinishReason::kLength;
      while (static_cast<int64_t>(tokens.size()) < sampling.max_tokens) {
        const at::Tensor logits = model_.forward(at::tensor(ids, at::kLong).unsqueeze(0)).select(0, 0).select(0, -1);
        const bool greedy = sampling.temperature <= 0;
        const at::Tensor logp = at::log_softmax(greedy ? logits : logits / sampling.temperature, -1);
        const int64_t token =
            greedy ? logp.argmax().item<int64_t>() : at::multinomial(logp.exp(), 1, false, generator).item<int64_t>();
        tokens.push_back(static_cast<int32_t>(token));
        logprobs.push_back(logp[token].item<float>());
        ids.push_back(token);
        const auto& stops = sampling.stop_token_ids;
        if (std::find(stops.begin(), stops.end(), static_cast<int32_t>(token)) != stops.end()) {
          reason = FinishReason::kStop;
          break;
        }
      }
      out.token_ids.push_back(std::move(tokens));
      out.logprobs.push_back(std::move(logprobs));
      out.finish_reasons.push_back(reason);
    }
  }
  return out;
}

std::vector<WeightMeta> TemplateInferenceEngine::weight_meta() const {
  std::vector<WeightMeta> meta;
  for (const auto& spec : specs_) meta.push_back({spec.name, spec.shape, at::kFloat});
  return meta;
}

void TemplateInferenceEngine::load_weights(const NamedTensorList& weights, int64_t version) {
  if (asleep_) throw ValueError("template_infer: load_weights() while asleep; call wake_up() first");
  model_.load(model::NamedTensors(weights.begin(), weights.end()), model::LoadMode::kPartial);
  version_ = version;
}

// Frees the parameters; wake_up() allocates them again, to be filled by load_weights().
void TemplateInferenceEngine::sleep() {
  if (asleep_) return;
  for (auto& [name, slot] : model_.parameter_slots()) *slot = at::empty({0}, slot->options());
  asleep_ = true;
}

void TemplateInferenceEngine::wake_up() {
  if (!asleep_) return;
  // One allocation in parameter order, as the model's constructor lays them out: q/k/v and gate/up
  // stay adjacent and keep running as one GEMM, so generation is bit for bit what it was before
  // sleep(). Separate tensors would run as separate GEMMs, which may round differently.
  int64_t total = 0;
  for (const auto& spec : specs_) total += c10::multiply_integers(spec.shape);
  auto slots = model_.parameter_slots();
  const at::Tensor flat = at::zeros({total}, slots.front().second->options());
  int64_t offset = 0;
  for (size_t i = 0; i < slots.size(); ++i) {
    const int64_t numel = c10::multiply_integers(specs_[i].shape);
    *slots[i].second = flat.narrow(0, offset, numel).view(specs_[i].shape);
    offset += numel;
  }
  asleep_ = false;
}

}  // namespace engine_template
