// The `train-megatron` plugin: registers the `megatron` train engine and its options.
#include "rlcore/plugin.h"

#include "megatron_engine.h"
#include "megatron_options.h"

namespace rlcore::train_megatron {
namespace {

void register_engine(PluginRegistrar& registrar) {
  registrar.add<TrainEngine>(
      "megatron",
      "Megatron-style tensor x pipeline x data parallel training (verl's Megatron backend): actor and reference",
      megatron_options_schema(), [](const MegatronOptions& options, const ComponentContext& context) {
        return std::make_shared<MegatronEngine>(options, context);
      });
  registrar.add_parallel_sizes<TrainEngine>("megatron", megatron_options_schema(), &megatron_parallel_sizes);
}

}  // namespace
}  // namespace rlcore::train_megatron

RLCORE_PLUGIN("train-megatron", "0.1.0", rlcore::train_megatron::register_engine)
