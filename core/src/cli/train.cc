// The default command: validate the run config and train.
#include <iomanip>
#include <ostream>

#include "cli/commands.h"
#include "rlcore/core/trainer/rl_trainer.h"

namespace rlcore::cli {
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
  const ConfiguredRun run = configure_run(args, "rlcore --config FILE [--plugins PATH]... [key=value ...]");
  trainer::RlTrainer trainer(run.session->registry(), run.resolved, run.common.plugin_paths, io.out);
  const trainer::FitSummary summary = trainer.fit();

  io.out << "\nrlcore: trained " << summary.steps - summary.resumed_from << " steps"
         << (summary.resumed_from > 0 ? " (resumed at step " + std::to_string(summary.resumed_from) + ")" : "") << "\n";
  print_validation(io.out, "before: ", summary.first_validation);
  print_validation(io.out, "after:  ", summary.last_validation);
  io.out << "  run directory: " << summary.run_dir << "\n";
  if (!summary.metrics_file.empty()) io.out << "  metrics: " << summary.metrics_file << "\n";
  if (!summary.last_checkpoint.empty()) io.out << "  checkpoint: " << summary.last_checkpoint << "\n";
  return 0;
}

}  // namespace rlcore::cli
