// Checkpoint directory -> ModelConfig and Transformer weights, with errors
// that name model_path, the file or the tensor at fault.
#include "checkpoint_loader.h"

#include <filesystem>
#include <system_error>

#include <ATen/ATen.h>

#include "rlcore/error.h"
#include "rlcore/model/tensor_parallel.h"
#include "rlcore/safetensors/safetensors.h"

namespace rlcore::infer_native {

model::ModelConfig read_model_config(const std::string& model_path) {
  if (model_path.empty()) {
    throw ConfigError(
        "infer-native: model_path is empty; the engine serves a Hugging Face checkpoint directory "
        "(config.json + model.safetensors), e.g. one written by `rlcore model init`");
  }
  std::error_code error;
  if (!std::filesystem::is_directory(model_path, error)) {
    throw ConfigError("infer-native: model_path '" + model_path + "' is not a directory" +
                      (std::filesystem::exists(model_path, error) ? "" : " (it does not exist)"));
  }
  return model::ModelConfig::from_file((std::filesystem::path(model_path) / "config.json").string());
}

void load_checkpoint_weights(model::Transformer& model, const std::string& model_path, int64_t tp_rank,
                             int64_t tp_size) {
  const SafetensorsCheckpoint checkpoint(model_path);
  model::NamedTensors views;
  views.reserve(checkpoint.names().size());
  try {
    for (const std::string& name : checkpoint.names())
      views.emplace_back(name, model::tp_slice(name, checkpoint.view(name), tp_rank, tp_size));
    model.load(views, model::LoadMode::kStrict);
  } catch (const ValueError& e) {
    throw ValueError("checkpoint '" + model_path + "': " + e.what());
  }
}

}  // namespace rlcore::infer_native
