// The options schema of the `fsdp` train engine (key names and defaults follow verl).
#include "fsdp_options.h"

#include "rlcore/error.h"

namespace rlcore::fsdp {

OptionsSchema<FsdpOptions> fsdp_options_schema() {
  OptionsSchema<FsdpConfigOptions> fsdp_config;
  fsdp_config
      .key("dtype", &FsdpConfigOptions::dtype, "Compute dtype of gathered parameters; masters stay float32.",
           one_of({"float32", "bfloat16"}))
      .key("param_offload", &FsdpConfigOptions::param_offload,
           "Keep parameter shards in host memory between calls.")
      .key("optimizer_offload", &FsdpConfigOptions::optimizer_offload,
           "Keep AdamW state in host memory between optimizer steps.");
  OptionsSchema<FsdpOptions> schema;
  schema.section("optim", &FsdpOptions::optim, train::optim_options_schema())
      .key("grad_clip", &FsdpOptions::grad_clip, "Global gradient-norm clip; <= 0 disables clipping.")
      .section("fsdp_config", &FsdpOptions::fsdp_config, fsdp_config)
      .key("seed", &FsdpOptions::seed, "Seed of a value head initialised fresh (critic from an LM checkpoint).",
           at_least(0));
  return schema;
}

}  // namespace rlcore::fsdp
