// MegatronEngine's checkpoints and HF export. A checkpoint holds every
// parameter's canonical (tp = 1) fp32 master and AdamW moments by Megatron
// name, so it loads into any tp x pp x dp layout:
//
//   DIR/megatron_checkpoint.json   written last by global rank 0: format, step, adam steps
//   DIR/model.safetensors          "<megatron name>"
//   DIR/optimizer.safetensors      "<megatron name>.exp_avg", "<megatron name>.exp_avg_sq" (trainable engines)
#include <filesystem>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <nlohmann/json.hpp>

#include "train-common/checkpoint_files.h"
#include "megatron_engine.h"
#include "rlcore/atomic_file.h"
#include "rlcore/error.h"
#include "rlcore/safetensors/safetensors.h"

namespace rlcore::train_megatron {
namespace {

namespace fs = std::filesystem;
namespace mg = model::megatron;

constexpr const char* kManifest = "megatron_checkpoint.json";
constexpr const char* kFormat = "rlcore-megatron/1";

// dp rank 0 also has ep rank 0, and gather_full brings every expert there.
bool writes_files(const ParallelGroups& groups) {
  return groups.dp.rank() == 0 && groups.tp.rank() == 0 && groups.pp.rank() == 0;
}

// Copies the rank's shard of `name` out of a canonical tensor in `file`.
void read_shard(const SafetensorsFile& file, const std::string& name, const model::ModelConfig& config,
                const mg::MegatronParam& meta, int64_t tp_rank, int64_t tp_size, at::Tensor& out) {
  if (!file.contains(name)) throw FormatError(file.path().string() + ": no tensor '" + name + "'");
  const at::Tensor full = file.view(name);
  if (full.sizes() != at::IntArrayRef(meta.shape)) {
    throw FormatError(file.path().string() + ": tensor '" + name + "' has shape " + c10::str(full.sizes()) +
                      ", this model's is " + c10::str(at::IntArrayRef(meta.shape)));
  }
  out.copy_(mg::tp_shard(config, meta, full, tp_rank, tp_size));
}

}  // namespace

void MegatronEngine::save_checkpoint(const std::string& dir_text) {
  train_common::ResidentScope resident(placement_, OffloadSet::kParams | OffloadSet::kOptimizer);
  const fs::path dir(dir_text);
  NamedTensors model, optimizer;
  const bool writer = writes_files(groups_);
  for (const mg::MegatronParam& param : mg::megatron_parameters(config_)) {
    const at::Tensor master =
        gather_full(param, [](const LocalParam& p) -> const at::Tensor& { return p.state.param.device(); });
    if (writer) model.emplace_back(param.name, master.cpu());
    if (!trainable_) continue;
    const at::Tensor m =
        gather_full(param, [](const LocalParam& p) -> const at::Tensor& { return p.state.exp_avg.device(); });
    const at::Tensor v =
        gather_full(param, [](const LocalParam& p) -> const at::Tensor& { return p.state.exp_avg_sq.device(); });
    if (writer) {
      optimizer.emplace_back(param.name + ".exp_avg", m.cpu());
      optimizer.emplace_back(param.name + ".exp_avg_sq", v.cpu());
    }
  }
  if (writer) {
    fs::create_directories(dir);
    save_safetensors(dir / "model.safetensors", model);
    if (trainable_) save_safetensors(dir / "optimizer.safetensors", optimizer);
    const nlohmann::json manifest = {
        {"format", kFormat},
        {"step", step_},
        {"adam_steps", adam_steps_},
        {"optimizer", trainable_},
        {"saved_with",
         {{"tp", groups_.tp.size()}, {"pp", groups_.pp.size()}, {"dp", groups_.dp.size()}, {"ep", groups_.ep.size()}}}};
    write_file_atomically(dir / kManifest, manifest.dump(2));
  }
  groups_.pp.barrier();
  groups_.tp.barrier();
  groups_.dp.barrier();
}

void MegatronEngine::load_checkpoint(const std::string& dir_text) {
  train_common::ResidentScope resident(placement_, OffloadSet::kParams | OffloadSet::kOptimizer);
  const fs::path dir(dir_text);
  const nlohmann::json manifest = train_common::read_json(dir / kManifest, "a megatron checkpoint");
  if (manifest.value("format", "") != kFormat) {
    throw FormatError((dir / kManifest).string() + ": format '" + manifest.value("format", "") + "', expected '" +
                      kFormat + "'");
  }
  const SafetensorsFile model(dir / "model.safetensors");
  const bool with_optimizer = trainable_ && manifest.value("optimizer", false);
  std::unique_ptr<SafetensorsFile> optimizer;
  if (with_optimizer) optimizer = std::make_unique<SafetensorsFile>(dir / "optimizer.safetensors");
  at::NoGradGuard no_grad;
  for (LocalParam& p : params_) {
    read_shard(model, p.meta.name, config_, p.meta, groups_.tp.rank(), groups_.tp.size(), p.state.param.device());
    if (!with_optimizer) continue;
    read_shard(*optimizer, p.meta.name + ".exp_avg", config_, p.meta, groups_.tp.rank(), groups_.tp.size(),
               p.state.exp_avg.device());
    read_shard(*optimizer, p.meta.name + ".exp_avg_sq", config_, p.meta, groups_.tp.rank(), groups_.tp.size(),
               p.state.exp_avg_sq.device());
  }
  step_ = manifest.value("step", int64_t{0});
  adam_steps_ = manifest.value("adam_steps", int64_t{0});
  zero_grads();
}

void MegatronEngine::export_hf(const std::string& dir) {
  NamedTensors tensors;
  const at::ScalarType dtype = config_.dtype();
  for_each_full_parameter([&](const std::string& name, const at::Tensor& full) {
    if (!writes_files(groups_)) return;
    for (const std::string& hf : mg::hf_sources(config_, name))
      tensors.emplace_back(hf, mg::to_hf(config_, hf, full).to(at::kCPU, dtype, false, /*copy=*/true));
  });
  if (writes_files(groups_)) train_common::write_hf_export(dir, config_.to_json(), tensors, model_path_);
  groups_.pp.barrier();
  groups_.tp.barrier();
  groups_.dp.barrier();
}

}  // namespace rlcore::train_megatron
