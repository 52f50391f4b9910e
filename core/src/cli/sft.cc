// `rlcore sft`: supervised fine-tuning on prompt/response JSONL.
#include <ostream>

#include "cli/commands.h"
#include "rlcore/core/trainer/sft_trainer.h"

namespace rlcore::cli {

int run_command_sft(const std::vector<std::string>& args, CommandIo io) {
  const ConfiguredRun run = configure_run(args, "rlcore sft --config FILE [--plugins PATH]... [key=value ...]");
  const trainer::SftSummary summary =
      trainer::run_sft(run.session->registry(), run.resolved, run.common.plugin_paths, io.out);
  io.out << "\nrlcore sft: " << summary.steps << " steps, loss " << summary.first_loss << " -> " << summary.last_loss
         << (summary.stopped_at_val_reward ? " (stopped at trainer.stop_at_val_reward)" : "") << "\n";
  for (const auto& [name, value] : summary.last_validation) {
    if (name.rfind("val-core/", 0) == 0) io.out << "  " << name << ": " << value << "\n";
  }
  io.out << "  model: " << summary.model_dir << "\n";
  return 0;
}

}  // namespace rlcore::cli
