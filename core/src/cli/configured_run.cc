// configure_run: the command-line handling the training commands share.
#include "cli/commands.h"

#include <spdlog/spdlog.h>

namespace po = boost::program_options;

namespace rlcore::cli {

ConfiguredRun configure_run(const std::vector<std::string>& args, const std::string& usage) {
  ConfiguredRun run;
  std::string config_file;
  po::options_description options(usage);
  add_common_options(options, run.common);
  options.add_options()("config", po::value(&config_file), "YAML config file");
  std::vector<std::string> overrides;
  parse_command_line(args, options, overrides);
  apply_log_level(run.common.log_level);
  run.session = std::make_unique<Session>(run.common.plugin_paths);
  run.resolved = config::resolve_config(run.session->registry(), config_file, overrides);
  if (run.common.log_level.empty()) apply_log_level(run.resolved.config.trainer.log_level);
  for (const std::string& note : run.resolved.notes) spdlog::warn("{}", note);
  return run;
}

}  // namespace rlcore::cli
