// Core config schema and whole-config validation.
#include "rlcore/core/run_config.h"

#include "rlcore/error.h"

namespace rlcore {

const OptionsSchema<RunConfig>& run_config_schema() {
  static const OptionsSchema<RunConfig> schema = [] {
    OptionsSchema<TrainerConfig> trainer;
    trainer.key("project_name", &TrainerConfig::project_name, "Project name; part of the default run directory.")
        .key("experiment_name", &TrainerConfig::experiment_name, "Experiment name; part of the default run directory.")
        .key("default_local_dir", &TrainerConfig::default_local_dir,
             "Run directory for metrics.jsonl and checkpoints (empty: runs/<project_name>/<experiment_name>).")
        .key("logger", &TrainerConfig::logger, "Metrics sinks: console (one line per step), jsonl (metrics.jsonl).",
             one_of({"console", "jsonl"}))
        .key("log_level", &TrainerConfig::log_level, "Log level.",
             one_of({"trace", "debug", "info", "warn", "error", "off"}));
    OptionsSchema<RewardConfig> reward;
    reward
        .key("grader", &RewardConfig::grader,
             "Grader for every sample, or 'auto' to pick one by each sample's data_source (verl's default_compute_score).")
        .subtree("graders", &RewardConfig::graders, "Options per grader: reward.graders.<name>.<key> (see below).");
    OptionsSchema<RunConfig> root;
    root.section("trainer", &RunConfig::trainer, trainer)
        .section("reward", &RunConfig::reward, reward)
        .section("runtime", &RunConfig::runtime, runtime_config_schema());
    return root;
  }();
  return schema;
}

std::string RunConfig::run_dir() const {
  if (!trainer.default_local_dir.empty()) return trainer.default_local_dir;
  return "runs/" + trainer.project_name + "/" + trainer.experiment_name;
}

std::string component_options_path(const std::string& kind, const std::string& name) {
  if (kind == "reward") return "reward.graders." + name;
  if (kind == "advantage_estimator") return "algorithm";
  if (kind == "policy_loss") return "actor_rollout_ref.actor.policy_loss";
  return "plugins." + kind + "." + name;
}

namespace {

void fill_defaults(ConfigNode& tree, const std::vector<KeySpec>& keys) {
  for (const auto& key : keys) {
    if (key.type == "map") continue;
    if (!tree.at_path(key.name).defined()) {
      tree.set(key.name, key.default_value == "\"\"" ? "''" : key.default_value, "default");
    }
  }
}

void validate_graders(const Registry& registry, const RunConfig& config) {
  if (config.reward.grader != "auto") registry.get("reward", config.reward.grader);
  const ConfigNode& graders = config.reward.graders;
  for (const auto& name : graders.keys()) {
    const ConfigNode options = graders[name];
    if (!registry.find("reward", name)) {
      throw ConfigError("key " + options.describe() + ": no grader named '" + name + "' is registered; registered graders: " +
                        [&] {
                          std::string names;
                          for (const auto& n : registry.names("reward")) names += (names.empty() ? "" : ", ") + n;
                          return names;
                        }());
    }
    registry.get("reward", name).factory(options, ComponentContext());  // validates the options
  }
}

}  // namespace

ResolvedConfig resolve_config(const Registry& registry, const std::string& config_file,
                              const std::vector<std::string>& overrides) {
  ResolvedConfig resolved;
  resolved.tree = config_file.empty() ? ConfigNode::parse("", "<defaults>") : ConfigNode::load_file(config_file);
  apply_overrides(resolved.tree, overrides);
  resolved.config = run_config_schema().parse(resolved.tree);
  validate_graders(registry, resolved.config);
  fill_defaults(resolved.tree, run_config_schema().keys());
  return resolved;
}

}  // namespace rlcore
