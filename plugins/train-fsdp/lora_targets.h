// Which projections get LoRA adapters: PEFT's target_modules / exclude_modules
// rules over full module names ("model.layers.3.mlp.down_proj").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rlcore::train_fsdp {

// The projections of a decoder layer, in the model's order.
const std::vector<std::string>& projection_names();

// The full module name of projection `projection` of decoder layer `layer`.
std::string projection_module(int64_t layer, const std::string& projection);

// The projection a full module name ends with ("q_proj" for model.layers.0.self_attn.q_proj).
std::string projection_of(const std::string& module);

// The modules of `candidates` that `targets` select ("all-linear": every one)
// and no entry of `excludes` selects, where an entry selects a module when it
// is the module's name or a dotted suffix of it (PEFT's rule for a list:
// q_proj, self_attn.q_proj) or a regular expression matching the whole name
// (PEFT's rule for a string), in candidate order. Throws ConfigError
// naming lora.target_modules / lora.exclude_modules and the entry for an entry
// that selects nothing or is not a valid regular expression, or when nothing is left.
std::vector<std::string> select_modules(const std::vector<std::string>& candidates,
                                        const std::vector<std::string>& targets,
                                        const std::vector<std::string>& excludes);

}  // namespace rlcore::train_fsdp
