// The sharding managers' options: what training state leaves the device while
// the rollout runs (MindSpeed-RL's generate_config keys, with verl-style aliases),
// and what happens to the bucket's pages between swaps.
#pragma once

#include <string>

#include "bucket_memory.h"
#include "rlcore/options.h"
#include "rlcore/train_engine.h"

namespace rlcore::hybrid_engine {

struct HybridOptions {
  bool offload_train_param = false;
  bool offload_train_grad = false;
  bool offload_train_optimizer = false;
  // verl-style aliases (fsdp_config.param_offload ...); either name switches it on.
  bool param_offload = false;
  bool grad_offload = false;
  bool optimizer_offload = false;
  // lazy_free | unmap: see BucketRelease.
  std::string bucket_release = "lazy_free";
  // LoRA actors: gather the frozen base once, then rebuild only the adapted weights (LoraSwap):
  // auto (when the training weights are sharded over ranks, so a gather is a collective) | true | false.
  std::string lora_base_cache = "auto";
  // Gather the actor's units straight into the bucket where the engine can (GathersIntoBuffers).
  bool gather_into_bucket = true;
};

OptionsSchema<HybridOptions> hybrid_options_schema();
OffloadSet offload_set(const HybridOptions& options);
BucketRelease bucket_release(const HybridOptions& options);

}  // namespace rlcore::hybrid_engine
