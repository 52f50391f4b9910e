// verl's keys that rlcore has no key of its own for, handled before the config
// schema sees the tree, so a verl run's config and command line work unchanged:
// each is moved to rlcore's name for it, accepted with a note that it has no
// effect here (and why), or accepted only at the value that means "off".
#pragma once

#include <string>
#include <vector>

#include "rlcore/config_node.h"

namespace rlcore::config {

enum class VerlKeyHandling {
  kMoved,      // the same setting under rlcore's key (`target`)
  kNoEffect,   // a knob of verl's own stack (vLLM, flash-attn, Ray, ...): dropped with a note
  kOnlyValue,  // a feature rlcore lacks: accepted at `value` (verl's "off"), refused otherwise
  // An option of the native rollout engine as well: kept for it, dropped with a note for other engines.
  kNativeRolloutOption,
};

struct VerlKeyRule {
  const char* key;  // verl's dotted key
  VerlKeyHandling handling;
  const char* target;  // kMoved: rlcore's key; kOnlyValue: the accepted value (YAML scalar)
  // kNoEffect: why it changes nothing here; kNativeRolloutOption: why it changes nothing for
  // other engines; kOnlyValue: what rlcore lacks.
  const char* why;
};

// Every verl key handled here, in the order of docs/config-reference.md's table.
const std::vector<VerlKeyRule>& verl_key_rules();

// Applies the rules to `tree` and returns one note per key dropped for having
// no effect. Throws ConfigError naming the key and its location when a moved
// key disagrees with rlcore's key set beside it, or a kOnlyValue key holds another value.
std::vector<std::string> apply_verl_key_rules(ConfigNode& tree);

}  // namespace rlcore::config
