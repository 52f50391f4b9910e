// The sharding managers' option keys.
#include "hybrid_options.h"

namespace rlcore::hybrid_engine {

OptionsSchema<HybridOptions> hybrid_options_schema() {
  OptionsSchema<HybridOptions> schema;
  schema
      .key("offload_train_param", &HybridOptions::offload_train_param,
           "Move the actor's parameters to host memory while the rollout runs.")
      .key("offload_train_grad", &HybridOptions::offload_train_grad,
           "Move the actor's gradients to host memory while the rollout runs.")
      .key("offload_train_optimizer", &HybridOptions::offload_train_optimizer,
           "Move the actor's optimizer state to host memory while the rollout runs.")
      .key("param_offload", &HybridOptions::param_offload, "verl-style alias of offload_train_param.")
      .key("grad_offload", &HybridOptions::grad_offload, "verl-style alias of offload_train_grad.")
      .key("optimizer_offload", &HybridOptions::optimizer_offload, "verl-style alias of offload_train_optimizer.")
      .key("bucket_release", &HybridOptions::bucket_release,
           "What a CPU bucket's pages become when the rollout sleeps: lazy_free (MADV_FREE: the kernel may "
           "take them, and the next swap reuses those it did not) or unmap (fresh pages every swap).",
           one_of({"lazy_free", "unmap"}))
      .key("lora_base_cache", &HybridOptions::lora_base_cache,
           "When the actor trains LoRA adapters: the first swap gathers the frozen base and keeps it (host "
           "memory on a GPU), and later swaps rebuild only the adapted weights, with no collective. auto: when the "
           "training weights are sharded over ranks (one rank has no collective to save); false: every swap "
           "gathers every weight.",
           one_of({"auto", "true", "false"}))
      .key("gather_into_bucket", &HybridOptions::gather_into_bucket,
           "bucketed: the actor engine gathers each unit straight into the bucket, where the engine can "
           "(capability gather_into_buffer: fsdp) and the rollout lays the unit's weights out as the trainer "
           "does; a swap then holds no gathered copy (on NCCL: one all-gather into the bucket per unit). false: "
           "every unit is gathered into memory of its own and copied in.");
  return schema;
}

OffloadSet offload_set(const HybridOptions& options) {
  OffloadSet set = OffloadSet::kNone;
  if (options.offload_train_param || options.param_offload) set = set | OffloadSet::kParams;
  if (options.offload_train_grad || options.grad_offload) set = set | OffloadSet::kGrads;
  if (options.offload_train_optimizer || options.optimizer_offload) set = set | OffloadSet::kOptimizer;
  return set;
}

BucketRelease bucket_release(const HybridOptions& options) {
  return options.bucket_release == "unmap" ? BucketRelease::kUnmap : BucketRelease::kLazyFree;
}

}  // namespace rlcore::hybrid_engine
