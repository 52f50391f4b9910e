// The default command: validate the run config and train.
#include <iomanip>
#include <ostream>

#include "cli/commands.h"
#include "rlcore/core/runtime/preemption.h"
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
  const config::TrainerConfig& settings = run.resolved.config.trainer;
  // From before the workers start: a signal then stops the run at its first step boundary.
  const runtime::PreemptionWatch preemption(
      runtime::on_preempt_from_name(settings.on_preempt),
      std::chrono::milliseconds(static_cast<int64_t>(settings.preempt_grace_s * 1000.0)));
  trainer::FitSummary summary;
  {
    trainer::RlTrainer trainer(run.session->registry(), run.resolved, run.common.plugin_paths, io.out);
    summary = trainer.fit();
  }  // the workers stop here
  if (!summary.preempted_by.empty()) {
    std::string resume;
    if (!summary.last_checkpoint.empty()) {
      resume = "; resume from " + summary.last_checkpoint;
      // The shipped configs start afresh (resume_mode: disable): a requeued job must say auto.
      if (settings.resume_mode != "auto") {
        resume += " (the same command with trainer.resume_mode=auto; this run has " + settings.resume_mode + ")";
      }
    }
    io.out << "\nrlcore: preempted by " << summary.preempted_by << " after step " << summary.steps << resume
           << "; exit status " << runtime::kExitPreempted << " (EX_TEMPFAIL: requeue the job to continue)\n";
    return runtime::kExitPreempted;
  }

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
