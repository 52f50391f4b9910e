// The trainer's weights of one version as a Hugging Face checkpoint directory
// an inference server can load: written whole under a temporary name, fsynced,
// then renamed, so a server never sees a half-written version.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "rlcore/inference_engine.h"

namespace rlcore::infer_vllm_bridge {

class WeightSnapshots {
 public:
  // `root`: where snapshots go (created; must be visible at the same path to
  // the server). `model_path`: the checkpoint the run started from, whose
  // config and tokenizer files each snapshot carries.
  WeightSnapshots(std::filesystem::path root, std::filesystem::path model_path);

  // <root>/weights-v<version> (absolute), replacing an earlier one of that version.
  // A server reloads whole checkpoints, so the tensors `weights` lacks (a
  // load_weights call with one bucket of them) come from the checkpoint at
  // `complete_from` (the last snapshot the server took, else the model).
  std::filesystem::path write(const NamedTensorList& weights, int64_t version,
                              const std::filesystem::path& complete_from) const;
  // Removes every snapshot but `keep` (the ones a rollback may still need).
  void remove_all_but(const std::vector<std::filesystem::path>& keep) const;

  const std::filesystem::path& root() const { return root_; }
  const std::filesystem::path& model_path() const { return model_path_; }

 private:
  std::filesystem::path root_;
  std::filesystem::path model_path_;
};

}  // namespace rlcore::infer_vllm_bridge
