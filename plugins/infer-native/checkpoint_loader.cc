// Checkpoint directory -> Transformer weights, with errors that name the
// directory, the file or the tensor at fault.
#include "checkpoint_loader.h"

#include <ATen/ATen.h>

#include "rlcore/error.h"
#include "rlcore/model/tensor_parallel.h"
#include "rlcore/safetensors/safetensors.h"

namespace rlcore::infer_native {

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
