// `rlcore sft`: supervised fine-tuning on prompt/response JSONL.
#include <ostream>

#include "commands.h"
#include "rlcore/core/run_config.h"
#include "rlcore/core/session.h"
#include "rlcore/core/trainer/sft_trainer.h"

namespace po = boost::program_options;

namespace rlcore {

int run_command_sft(const std::vector<std::string>& args, CommandIo io) {
  CommonArgs common;
  std::string config_file;
  po::options_description options("rlcore sft --config FILE [--plugins PATH]... [key=value ...]");
  add_common_options(options, common);
  options.add_options()("config", po::value(&config_file), "YAML config file");
  std::vector<std::string> overrides;
  parse_command_line(args, options, overrides);
  apply_log_level(common.log_level);

  Session session(common.plugin_paths);
  const ResolvedConfig resolved = resolve_config(session.registry(), config_file, overrides);
  if (common.log_level.empty()) apply_log_level(resolved.config.trainer.log_level);
  const SftSummary summary = run_sft(session.registry(), resolved, common.plugin_paths, io.out);
  io.out << "\nrlcore sft: " << summary.steps << " steps, loss " << summary.first_loss << " -> " << summary.last_loss
         << "\n  model: " << summary.model_dir << "\n";
  return 0;
}

}  // namespace rlcore
