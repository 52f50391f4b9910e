// `template_infer`: an InferenceEngine that re-runs the full sequence for every
// new token (no KV cache): slow, but short enough to read in one sitting.
#pragma once

#include <string>
#include <vector>

#include "rlcore/inference_engine.h"
#include "rlcore/model/transformer.h"
#include "rlcore/registry.h"

namespace engine_template {

struct InferOptions {
  int64_t seed = 0;  // seeds requests that give none (SamplingParams::seed = -1)
};

class TemplateInferenceEngine final : public rlcore::InferenceEngine {
 public:
  TemplateInferenceEngine(const InferOptions& options, const rlcore::ComponentContext& context);

  rlcore::GenerationOutput generate(const std::vector<std::vector<int32_t>>& prompts,
                                    const rlcore::SamplingParams& sampling) override;
  std::vector<rlcore::WeightMeta> weight_meta() const override;
  void load_weights(const rlcore::NamedTensorList& weights, int64_t version) override;
  int64_t weight_version() const override { return version_; }
  void sleep() override;
  void wake_up() override;

 private:
  rlcore::model::Transformer model_;
  std::vector<rlcore::model::ParameterSpec> specs_;
  uint64_t next_seed_;
  int64_t version_ = 0;
  bool asleep_ = false;
};

}  // namespace engine_template
