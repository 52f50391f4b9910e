// The default command: validate the run config and train.
#include <iomanip>
#include <ostream>

#include <spdlog/spdlog.h>

#include "commands.h"
#include "rlcore/core/run_config.h"
#include "rlcore/core/session.h"
#include "rlcore/core/trainer/rl_trainer.h"

namespace po = boost::program_options;

namespace rlcore {
namespace {

void print_validation(std::ostream& out, const std::string& label, const std::map<std::string, double>& metrics) {
  for (const auto& [name, value] : metrics) {
    if (name.rfind("val-core/", 0) == 0) {
      out << "  " << label << std::left << std::setw(44) << name << std::fixed << std::setprecision(3) << value
          << std::defaultfloat << "\n";
    }
  }
}

}  // namespace

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
  RlTrainer trainer(session.registry(), resolved, common.plugin_paths, io.out);
  const FitSummary summary = trainer.fit();

  io.out << "\nrlcore: trained " << summary.steps - summary.resumed_from << " steps"
         << (summary.resumed_from > 0 ? " (resumed at step " + std::to_string(summary.resumed_from) + ")" : "")
         << "\n";
  print_validation(io.out, "before: ", summary.first_validation);
  print_validation(io.out, "after:  ", summary.last_validation);
  io.out << "  run directory: " << summary.run_dir << "\n";
  if (!summary.metrics_file.empty()) io.out << "  metrics: " << summary.metrics_file << "\n";
  if (!summary.last_checkpoint.empty()) io.out << "  checkpoint: " << summary.last_checkpoint << "\n";
  return 0;
}

}  // namespace rlcore
