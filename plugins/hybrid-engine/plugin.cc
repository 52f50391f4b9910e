// The `hybrid-engine` plugin: the `bucketed` and `naive` sharding managers, the
// `identity` and `megatron` weight adaptors and the `engine` offloader.
#include "rlcore/plugin.h"

#include "engine_offloader.h"
#include "identity_adaptor.h"
#include "megatron_adaptor.h"
#include "rlcore/error.h"
#include "sharding_manager_impl.h"

namespace rlcore::hybrid_engine {
namespace {

struct NoOptions {};

// The Megatron layout depends on the model's head counts and sizes.
std::unique_ptr<MegatronAdaptor> make_megatron_adaptor(const ComponentContext& context) {
  if (context.model_path.empty()) {
    throw ConfigError("weight_adaptor megatron: needs the actor's model path (its config.json) in its context");
  }
  return std::make_unique<MegatronAdaptor>(model::ModelConfig::from_file(context.model_path + "/config.json"));
}

void register_hybrid_engine(PluginRegistrar& registrar) {
  registrar.add<ShardingManager>(
      "bucketed",
      "Zero-redundancy swap: one exactly-sized bucket per PP stage, filled as the trainer gathers, adopted by the "
      "rollout without a copy; the rollout sleeps during training.",
      hybrid_options_schema(),
      [](const HybridOptions& options) { return std::make_unique<BucketedShardingManager>(options); });
  registrar.add<ShardingManager>(
      "naive",
      "Baseline: gather the whole model, convert, copy into an always-awake rollout that keeps its own full copy.",
      hybrid_options_schema(),
      [](const HybridOptions& options) { return std::make_unique<NaiveShardingManager>(options); });
  registrar.add<WeightAdaptor>("identity",
                               "Full HF-named training tensors -> same-named rollout tensors, sliced to the rollout "
                               "rank's tensor-parallel shard.",
                               OptionsSchema<NoOptions>(),
                               [](const NoOptions&) { return std::make_unique<IdentityAdaptor>(); });
  registrar.add<WeightAdaptor>(
      "megatron",
      "Full Megatron-layout training tensors (train-megatron: fused QKV per query group, fused gate/up) -> HF-named "
      "rollout tensors, sliced to the rollout rank's tensor-parallel shard.",
      OptionsSchema<NoOptions>(),
      [](const NoOptions&, const ComponentContext& context) { return make_megatron_adaptor(context); });
  registrar.add<Offloader>("engine", "Training state to host and back through the TrainEngine's offload()/reload().",
                           OptionsSchema<NoOptions>(),
                           [](const NoOptions&) { return std::make_unique<EngineOffloader>(); });
}

}  // namespace
}  // namespace rlcore::hybrid_engine

RLCORE_PLUGIN("hybrid-engine", "0.1.0", rlcore::hybrid_engine::register_hybrid_engine)
