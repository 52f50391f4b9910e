// The `engine-template` plugin: registers template_train and template_infer.
#include "rlcore/plugin.h"

#include "template_inference_engine.h"
#include "template_train_engine.h"

namespace engine_template {
namespace {

void register_engines(rlcore::PluginRegistrar& registrar) {
  registrar.add<rlcore::TrainEngine>(
      "template_train", "Single-process TrainEngine on the SDK Transformer with AdamW (examples/engine-template)",
      train_options_schema(), [](const TrainOptions& options, const rlcore::ComponentContext& context) {
        return std::make_shared<TemplateTrainEngine>(options, context);
      });
  registrar.add<rlcore::InferenceEngine>(
      "template_infer", "Cache-free generation with the SDK Transformer (examples/engine-template)",
      rlcore::OptionsSchema<InferOptions>().key(
          "seed", &InferOptions::seed, "Seeds requests that give no seed (sampling seed -1).", rlcore::at_least(0)),
      [](const InferOptions& options, const rlcore::ComponentContext& context) {
        return std::make_shared<TemplateInferenceEngine>(options, context);
      });
}

}  // namespace
}  // namespace engine_template

RLCORE_PLUGIN("engine-template", "0.1.0", engine_template::register_engines)
