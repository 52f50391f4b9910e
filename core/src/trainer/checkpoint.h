// Private to the core: the trainer's checkpoint directories (verl's layout):
//   <run_dir>/checkpoints/global_step_<N>/{actor,critic}/   the engines' own files
//   <run_dir>/checkpoints/global_step_<N>/trainer_state.json step, data position, KL coefficient
//   <run_dir>/checkpoints/latest_checkpointed_iteration.txt  N of the newest complete one
// A checkpoint is written under global_step_<N>.partial and renamed when
// complete, so a crash mid-save never leaves a directory that looks usable;
// the next save removes what an interrupted one left.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "rlcore/core/data/sampler.h"

namespace rlcore::trainer {

struct TrainerState {
  int64_t step = 0;
  data::SamplerState sampler;
  double kl_coef = 0.0;
};

// Creates the run directory and writes a probe file there, so an unwritable
// directory or a full disk stops the run before any worker starts. IoError
// naming trainer.default_local_dir and the system's reason.
void check_run_dir_writable(const std::string& run_dir);

class CheckpointStore {
 public:
  explicit CheckpointStore(std::string run_dir);

  std::string root() const;
  // Where the engines write step N before commit().
  std::string staging_dir(int64_t step) const;
  // Writes the trainer state, renames the staging dir into place, updates the
  // latest marker and removes the oldest beyond `keep` (0: keep all). Returns the final dir.
  std::string commit(int64_t step, const TrainerState& state, int64_t keep);

  // The newest complete checkpoint directory, if any (the marker file is only
  // for verl's tools: it lags when a save was interrupted after the rename).
  std::optional<std::string> latest() const;
  // Throws IoError / FormatError naming the file when it is missing or corrupt.
  static TrainerState read_state(const std::string& checkpoint_dir);

 private:
  std::string run_dir_;
};

}  // namespace rlcore::trainer
