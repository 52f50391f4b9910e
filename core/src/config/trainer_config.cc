// Schema of trainer (see trainer_config.h).
#include "rlcore/core/config/trainer_config.h"

#include "rlcore/core/metrics/metrics.h"

namespace rlcore::config {

OptionsSchema<TrainerConfig> trainer_schema() {
  OptionsSchema<TrainerConfig> trainer;
  trainer.key("project_name", &TrainerConfig::project_name, "Project name; part of the default run directory.")
      .key("experiment_name", &TrainerConfig::experiment_name, "Experiment name; part of the default run directory.")
      .key("default_local_dir", &TrainerConfig::default_local_dir,
           "Run directory for metrics.jsonl and checkpoints (empty: runs/<project_name>/<experiment_name>).")
      .key("logger", &TrainerConfig::logger,
           "Metrics sinks: console (one line per step), jsonl (metrics.jsonl), tensorboard (event files in "
           "$TENSORBOARD_DIR, else <run dir>/tensorboard).",
           one_of(metrics::metrics_sink_names()))
      .key("log_level", &TrainerConfig::log_level, "Log level.",
           one_of({"trace", "debug", "info", "warn", "error", "off"}))
      .key("total_epochs", &TrainerConfig::total_epochs, "Passes over the training set.", at_least(1))
      .key("total_training_steps", &TrainerConfig::total_training_steps,
           "Steps to train; 0: total_epochs x (prompts / data.train_batch_size).", at_least(0))
      .key("test_freq", &TrainerConfig::test_freq, "Validate every N steps and after the last; -1: never.")
      .key("save_freq", &TrainerConfig::save_freq, "Checkpoint every N steps and after the last; -1: never.")
      .key("val_before_train", &TrainerConfig::val_before_train, "Validate once before the first step.")
      .key("val_only", &TrainerConfig::val_only,
           "Validate once (whatever val_before_train says) and stop without training, e.g. to score an exported "
           "checkpoint with the rule graders.")
      .key("stop_at_val_reward", &TrainerConfig::stop_at_val_reward,
           "Stop (and save, export) after the first validation whose val-core reward, averaged over data "
           "sources, is at least this; 0: never. SFT uses it to stop at a chosen warm-start accuracy.",
           at_least(0))
      .key("balance_batch", &TrainerConfig::balance_batch,
           "Reorder each step's batch so every data-parallel rank of the actor gets about the same work (verl's "
           "sequence-length balancing: Karmarkar-Karp over 24576 x tokens + tokens^2 per row), reported as "
           "global_seqlen/*; the rows' order changes which rows share a rank and a mini-batch, not the loss.")
      .key("resume_mode", &TrainerConfig::resume_mode,
           "auto: continue from the latest checkpoint in the run directory; disable: start fresh; "
           "resume_path: from trainer.resume_from_path.",
           one_of({"auto", "disable", "resume_path"}))
      .key("resume_from_path", &TrainerConfig::resume_from_path,
           "A global_step_N checkpoint directory (resume_mode: resume_path).")
      .key("max_ckpt_to_keep", &TrainerConfig::max_ckpt_to_keep, "Checkpoints kept (oldest removed); 0: all.",
           at_least(0))
      .key("rollout_data_dir", &TrainerConfig::rollout_data_dir,
           "Write each step's responses to <dir>/<step>.jsonl (input, output, gts, score, step and the reward "
           "extras, one line per response); empty: off.")
      .key("validation_data_dir", &TrainerConfig::validation_data_dir,
           "Write each validation's responses to <dir>/<step>.jsonl (the same fields; step 0: before "
           "training); empty: off.")
      .key("on_preempt", &TrainerConfig::on_preempt,
           "What the first SIGTERM or SIGINT does (a preemption: Slurm's --signal, Kubernetes' termination): "
           "checkpoint: finish the current step, save a checkpoint that resumes exactly, stop the workers and "
           "exit with status 75 (EX_TEMPFAIL: requeue); exit: abandon the step and exit with 75 at once. A "
           "second signal exits at once (docs/launch.md#preemption).",
           one_of({"checkpoint", "exit"}))
      .key("preempt_grace_s", &TrainerConfig::preempt_grace_s,
           "Seconds after the signal within which on_preempt: checkpoint must have saved; past them the run "
           "exits with 75 without it (the previous checkpoint still resumes). Keep it below the scheduler's "
           "grace (Kubernetes' terminationGracePeriodSeconds, the lead time of Slurm's --signal).",
           at_least(0.1))
      .key("check_exact_logprobs", &TrainerConfig::check_exact_logprobs,
           "End the run at the first response token whose rollout log-prob differs from the trainer's old "
           "log-prob, naming the sample and the token. Needs actor_rollout_ref.rollout.exact_logprobs; in the "
           "asynchronous modes it checks the rows the trainer's weight version sampled whole "
           "(training/rollout_logprob_compared, docs/exact-logprobs.md). Not in verl.")
      .key("device", &TrainerConfig::device,
           "Device of every worker's engines: cuda (each worker binds cuda:<its local rank>), cpu, or auto "
           "(cuda when this build has CUDA and a GPU is visible, else cpu). See docs/launch.md.",
           one_of({"auto", "cpu", "cuda"}))
      .key("nnodes", &TrainerConfig::nnodes,
           "Nodes of the default pool 'global'; the same number as runtime.nnodes: set either (docs/launch.md).",
           at_least(1))
      .key("n_gpus_per_node", &TrainerConfig::n_gpus_per_node,
           "Workers (one device each) per node of the default pool 'global'; the same number as "
           "runtime.n_workers_per_node: set either (docs/launch.md).",
           at_least(1));
  return trainer;
}

}  // namespace rlcore::config
