// The `train-fsdp` plugin: registers the `fsdp` train engine and its options.
#include "rlcore/plugin.h"

#include "fsdp_engine.h"
#include "fsdp_options.h"

namespace rlcore::train_fsdp {
namespace {

void register_engine(PluginRegistrar& registrar) {
  registrar.add<TrainEngine>(
      "fsdp", "ZeRO-3 sharded data-parallel training (verl's FSDP backend): actor, reference (frozen) and critic",
      fsdp_options_schema(), [](const FsdpOptions& options, const ComponentContext& context) {
        return std::make_shared<FsdpEngine>(options, context);
      });
  registrar.add_parallel_sizes<TrainEngine>("fsdp", fsdp_options_schema(), &fsdp_parallel_sizes);
}

}  // namespace
}  // namespace rlcore::train_fsdp

RLCORE_PLUGIN("train-fsdp", "0.1.0", rlcore::train_fsdp::register_engine)
