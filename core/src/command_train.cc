// The default command: validate the run config and start training.
#include <ostream>

#include <spdlog/spdlog.h>

#include "commands.h"
#include "rlcore/core/run_config.h"
#include "rlcore/core/session.h"

namespace po = boost::program_options;

namespace rlcore {

int run_command_train(const std::vector<std::string>& args, CommandIo io) {
  CommonArgs common;
  std::string config_file;
  po::options_description options("rlcore --config FILE [--plugins PATH]... [key=value ...]");
  add_common_options(options, common);
  options.add_options()("config", po::value(&config_file), "YAML config file");
  std::vector<std::string> overrides;
  parse_command_line(args, options, overrides);
  apply_log_level(common.log_level);

  Session session(common.plugin_paths);
  const ResolvedConfig resolved = resolve_config(session.registry(), config_file, overrides);
  if (common.log_level.empty()) apply_log_level(resolved.config.trainer.log_level);
  io.err << "rlcore: the config is valid, but this build has no RL trainer yet (it lands with the trainer issue);\n"
            "        try `rlcore config`, `rlcore plugins` or `rlcore grade`.\n";
  return 3;
}

}  // namespace rlcore
