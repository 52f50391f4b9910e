// PEFT's module selection for LoRA: list entries match a name or its dotted
// suffix, string entries match as a whole-name regular expression. rlcore
// accepts both forms in every entry, so `exclude_modules: down_proj` (a verl
// string) excludes the down projections instead of matching nothing.
#include "lora_targets.h"

#include <algorithm>
#include <regex>

#include "rlcore/error.h"
#include "rlcore/string_join.h"

namespace rlcore::train_fsdp {
namespace {

bool is_suffix(const std::string& pattern, const std::string& module) {
  if (pattern == module) return true;
  return module.size() > pattern.size() &&
         module.compare(module.size() - pattern.size(), pattern.size(), pattern) == 0 &&
         module[module.size() - pattern.size() - 1] == '.';
}

// One entry of target_modules / exclude_modules, compiled.
struct Selector {
  std::string pattern;
  std::regex expression;

  bool operator()(const std::string& module) const {
    return is_suffix(pattern, module) || std::regex_match(module, expression);
  }
};

std::vector<Selector> compile(const std::vector<std::string>& patterns, const std::string& key) {
  std::vector<Selector> selectors;
  for (const std::string& pattern : patterns) {
    try {
      selectors.push_back({pattern, std::regex(pattern, std::regex::ECMAScript)});
    } catch (const std::regex_error& e) {
      throw ConfigError("fsdp: " + key + " entry '" + pattern +
                        "' is not a module name or a valid regular "
                        "expression (" +
                        e.what() + ")");
    }
  }
  return selectors;
}

std::string what_selects(const std::vector<std::string>& candidates) {
  return "names among " + join(projection_names(), ", ") +
         " (or dotted suffixes such as self_attn.q_proj), or a regular expression over full names such as " +
         (candidates.empty() ? std::string("model.layers.0.self_attn.q_proj") : candidates.front()) +
         "; rlcore adapts the decoder layers' projections only";
}

}  // namespace

const std::vector<std::string>& projection_names() {
  static const std::vector<std::string> names = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                                 "gate_proj", "up_proj", "down_proj"};
  return names;
}

std::string projection_module(int64_t layer, const std::string& projection) {
  const bool attention =
      projection == "q_proj" || projection == "k_proj" || projection == "v_proj" || projection == "o_proj";
  return "model.layers." + std::to_string(layer) + (attention ? ".self_attn." : ".mlp.") + projection;
}

std::string projection_of(const std::string& module) { return module.substr(module.rfind('.') + 1); }

std::vector<std::string> select_modules(const std::vector<std::string>& candidates,
                                        const std::vector<std::string>& targets,
                                        const std::vector<std::string>& excludes) {
  if (targets.empty())
    throw ConfigError("fsdp: lora.target_modules is empty; use 'all-linear' or " + what_selects(candidates));
  const bool all_linear = std::find(targets.begin(), targets.end(), "all-linear") != targets.end();
  std::vector<std::string> named_targets;
  for (const std::string& target : targets)
    if (target != "all-linear") named_targets.push_back(target);
  const std::vector<Selector> target_selectors = compile(named_targets, "lora.target_modules");
  const std::vector<Selector> exclude_selectors = compile(excludes, "lora.exclude_modules");
  auto require_used = [&candidates](const std::vector<Selector>& selectors, const std::string& key) {
    for (const Selector& selector : selectors) {
      if (std::none_of(candidates.begin(), candidates.end(), selector)) {
        throw ConfigError("fsdp: " + key + " entry '" + selector.pattern + "' selects no module; expected " +
                          (key == "lora.target_modules" ? "'all-linear', " : "") + what_selects(candidates));
      }
    }
  };
  require_used(target_selectors, "lora.target_modules");
  require_used(exclude_selectors, "lora.exclude_modules");
  std::vector<std::string> selected;
  for (const std::string& module : candidates) {
    const auto matches = [&module](const Selector& selector) { return selector(module); };
    const bool targeted = all_linear || std::any_of(target_selectors.begin(), target_selectors.end(), matches);
    if (targeted && std::none_of(exclude_selectors.begin(), exclude_selectors.end(), matches))
      selected.push_back(module);
  }
  if (selected.empty())
    throw ConfigError("fsdp: lora.exclude_modules excludes every module lora.target_modules selects (" +
                      join(targets, ", ") + "): no adapter would train");
  return selected;
}

}  // namespace rlcore::train_fsdp
