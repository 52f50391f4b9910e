// FsdpEngine's sharded checkpoints (per-rank safetensors of flat shards + JSON
// state, resharded on load from any saved world size) and the HF export.
//
//   DIR/fsdp_checkpoint.json   rank 0, written last: format, world size, step, unit layout
//   DIR/rank_<r>.safetensors   "<unit>.param" [+ ".exp_avg", ".exp_avg_sq"]: rank r's flat shards
//   DIR/rank_<r>.json          rank r's RNG state
//   DIR/lora_adapter/          with LoRA (rank 0): the adapters in PEFT's format (verl's lora_adapter/)
//   DIR/lora_optimizer.safetensors  with LoRA (rank 0): the adapters' AdamW moments
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <ATen/CPUGeneratorImpl.h>
#include <nlohmann/json.hpp>

#include "fsdp_engine.h"
#include "train-common/checkpoint_files.h"
#include "fsdp_engine_internal.h"
#include "rlcore/atomic_file.h"
#include "rlcore/error.h"
#include "rlcore/fault_point.h"
#include "rlcore/safetensors/safetensors.h"

namespace rlcore::train_fsdp {
namespace {

namespace fs = std::filesystem;

constexpr const char* kManifest = "fsdp_checkpoint.json";
constexpr const char* kFormat = "rlcore-fsdp/1";
constexpr const char* kLoraDir = "lora_adapter";
constexpr const char* kLoraOptimizer = "lora_optimizer.safetensors";

// The adapters' AdamW moments, keyed "<module>.lora_A.exp_avg" etc.
std::vector<std::pair<std::string, at::Tensor*>> lora_moments(LoraAdapters& adapters) {
  std::vector<std::pair<std::string, at::Tensor*>> out;
  for (auto& pair : adapters.pairs()) {
    out.emplace_back(pair->module + ".lora_A.exp_avg", &pair->exp_avg_a);
    out.emplace_back(pair->module + ".lora_A.exp_avg_sq", &pair->exp_avg_sq_a);
    out.emplace_back(pair->module + ".lora_B.exp_avg", &pair->exp_avg_b);
    out.emplace_back(pair->module + ".lora_B.exp_avg_sq", &pair->exp_avg_sq_b);
  }
  return out;
}

fs::path rank_file(const fs::path& dir, int64_t rank, const char* ext) {
  return dir / ("rank_" + std::to_string(rank) + ext);
}

std::string to_hex(const at::Tensor& bytes) {
  static const char* kDigits = "0123456789abcdef";
  const at::Tensor contiguous = bytes.contiguous();
  const auto* data = contiguous.data_ptr<uint8_t>();
  std::string out;
  for (int64_t i = 0; i < contiguous.numel(); ++i) {
    out.push_back(kDigits[data[i] >> 4]);
    out.push_back(kDigits[data[i] & 15]);
  }
  return out;
}

at::Tensor from_hex(const std::string& text, const fs::path& file) {
  if (text.size() % 2 != 0) throw FormatError(file.string() + ": malformed rng state");
  at::Tensor bytes = at::empty({static_cast<int64_t>(text.size() / 2)}, at::kByte);
  auto* data = bytes.data_ptr<uint8_t>();
  for (size_t i = 0; i < text.size() / 2; ++i)
    data[i] = static_cast<uint8_t>(std::stoi(text.substr(2 * i, 2), nullptr, 16));
  return bytes;
}

at::Generator default_cpu_generator() { return at::detail::getDefaultCPUGenerator(); }

// The saved shard of `tensor` in rank file `file`, checked against the saved layout.
at::Tensor saved_shard(const SafetensorsFile& file, const std::string& tensor, int64_t shard_size) {
  if (!file.contains(tensor)) throw FormatError(file.path().string() + ": missing tensor '" + tensor + "'");
  const at::Tensor view = file.view(tensor);
  if (view.dim() != 1 || view.size(0) != shard_size || view.scalar_type() != at::kFloat) {
    throw FormatError(file.path().string() + ": tensor '" + tensor + "' is not a float32 shard of " +
                      std::to_string(shard_size) + " elements");
  }
  return view;
}

}  // namespace

void FsdpEngine::save_checkpoint(const std::string& dir_text) {
  train_common::ResidentScope resident(placement_, OffloadSet::kAll);
  const fs::path dir(dir_text);
  fs::create_directories(dir);
  NamedTensors tensors;
  for (size_t u = 0; u < layouts_.size(); ++u) {
    const std::string& unit = layouts_[u].name;
    tensors.emplace_back(unit + ".param", shards_[u].param.device());
    if (trainable_ && base_trains()) {
      tensors.emplace_back(unit + ".exp_avg", shards_[u].exp_avg.device());
      tensors.emplace_back(unit + ".exp_avg_sq", shards_[u].exp_avg_sq.device());
    }
  }
  save_safetensors(rank_file(dir, dp_.rank(), ".safetensors"), tensors, {{"format", kFormat}});
  const nlohmann::json rank_state = {{"rank", dp_.rank()}, {"rng", to_hex(default_cpu_generator().get_state())}};
  write_file_atomically(rank_file(dir, dp_.rank(), ".json"), rank_state.dump(2));
  if (lora_.enabled() && dp_.rank() == 0) {  // replicated: rank 0's copy is everyone's
    write_peft_adapter((dir / kLoraDir).string(), lora_, model_path_);
    NamedTensors moments;
    for (const auto& [name, tensor] : lora_moments(lora_)) moments.emplace_back(name, *tensor);
    save_safetensors(dir / kLoraOptimizer, moments, {{"format", kFormat}});
  }
  fault_point("fsdp.save_checkpoint.rank_files_written");
  dp_.barrier();
  if (dp_.rank() == 0) {
    // Written last: its presence means every rank's files are complete.
    nlohmann::json units = nlohmann::json::array();
    for (const UnitLayout& layout : layouts_) units.push_back(unit_layout_to_json(layout));
    const nlohmann::json manifest = {{"format", kFormat},
                                     {"world_size", dp_.size()},
                                     {"step", step_},
                                     {"adam_steps", adam_steps_},
                                     {"optimizer", trainable_},
                                     {"model_head", head_ == model::ModelHead::kValue ? "value" : "lm"},
                                     {"lora_rank", lora_.rank()},
                                     {"units", units}};
    write_file_atomically(dir / kManifest, manifest.dump(2));
  }
  dp_.barrier();
}

void FsdpEngine::load_checkpoint(const std::string& dir_text) {
  train_common::ResidentScope resident(placement_, OffloadSet::kAll);
  const fs::path dir(dir_text);
  const fs::path manifest_path = dir / kManifest;
  const nlohmann::json manifest = train_common::read_json(manifest_path, "an fsdp checkpoint");
  int64_t saved_world = 0;
  std::vector<UnitLayout> saved;
  bool has_optimizer = false;
  try {
    if (manifest.at("format").get<std::string>() != kFormat)
      throw FormatError(manifest_path.string() + ": unknown format '" + manifest.at("format").get<std::string>() + "'");
    saved_world = manifest.at("world_size").get<int64_t>();
    has_optimizer = manifest.at("optimizer").get<bool>();
    for (const auto& unit : manifest.at("units")) saved.push_back(unit_layout_from_json(unit, saved_world));
    step_ = manifest.at("step").get<int64_t>();
    adam_steps_ = manifest.at("adam_steps").get<int64_t>();
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(manifest_path.string() + ": " + e.what());
  }
  if (saved_world < 1) throw FormatError(manifest_path.string() + ": world_size must be >= 1");
  if (saved.size() != layouts_.size())
    throw FormatError(manifest_path.string() + ": " + std::to_string(saved.size()) + " units, this model has " +
                      std::to_string(layouts_.size()));
  for (size_t u = 0; u < saved.size(); ++u) {
    if (!(saved[u] == layouts_[u]))
      throw FormatError(manifest_path.string() + ": unit '" + saved[u].name + "' does not match this model's '" +
                        layouts_[u].name + "' (another model or head?)");
  }
  const int64_t saved_lora_rank = manifest.value("lora_rank", int64_t{0});
  if (!trainable_ && saved_lora_rank > 0 && !lora_.enabled()) {
    // A frozen engine (rlcore export, a reference) serves what was trained: base + the checkpoint's adapters.
    lora_ = LoraAdapters(read_peft_adapter_options((dir / kLoraDir).string()), skeleton_, device_,
                         static_cast<uint64_t>(options_.seed));
  }
  if (saved_lora_rank != lora_.rank())
    throw FormatError(manifest_path.string() + ": saved with lora_rank " + std::to_string(saved_lora_rank) +
                      ", this engine has lora.lora_rank " + std::to_string(lora_.rank()));
  if (trainable_ && !has_optimizer)
    throw FormatError(manifest_path.string() + ": saved by a frozen engine, no optimizer state to train from");

  std::map<int64_t, std::unique_ptr<SafetensorsFile>> files;
  auto file_of = [&](int64_t rank) -> const SafetensorsFile& {
    auto& slot = files[rank];
    if (!slot) {
      const fs::path path = rank_file(dir, rank, ".safetensors");
      if (!fs::exists(path))
        throw IoError(path.string() + ": missing (checkpoint saved with " + std::to_string(saved_world) + " ranks)");
      slot = std::make_unique<SafetensorsFile>(path);
    }
    return *slot;
  };
  at::NoGradGuard no_grad;
  for (size_t u = 0; u < layouts_.size(); ++u) {
    train_common::ShardState& state = shards_[u];
    std::vector<std::pair<std::string, at::Tensor*>> targets = {{".param", &state.param.device()}};
    if (trainable_ && base_trains()) {
      targets.emplace_back(".exp_avg", &state.exp_avg.device());
      targets.emplace_back(".exp_avg_sq", &state.exp_avg_sq.device());
    }
    for (auto& target : targets) target.second->zero_();
    const ElementRange own = owned_range(layouts_[u], dp_.rank());
    const int64_t base = dp_.rank() * layouts_[u].shard_size;
    for (int64_t rank = 0; rank < saved_world; ++rank) {
      const ElementRange overlap = intersect(own, owned_range(saved[u], rank));
      if (overlap.size() == 0) continue;
      const SafetensorsFile& file = file_of(rank);
      for (auto& [suffix, tensor] : targets) {
        const at::Tensor source = saved_shard(file, saved[u].name + suffix, saved[u].shard_size);
        tensor->narrow(0, overlap.begin - base, overlap.size())
            .copy_(source.narrow(0, overlap.begin - rank * saved[u].shard_size, overlap.size()));
      }
    }
  }
  if (lora_.enabled()) {
    read_peft_adapter((dir / kLoraDir).string(), lora_);
    if (trainable_) {
      const SafetensorsFile moments(dir / kLoraOptimizer);
      for (auto& [name, tensor] : lora_moments(lora_)) {
        if (!moments.contains(name)) throw FormatError(moments.path().string() + ": missing tensor '" + name + "'");
        tensor->copy_(moments.view(name));
      }
    }
  }
  const fs::path rng_path = rank_file(dir, dp_.rank() % saved_world, ".json");
  try {
    default_cpu_generator().set_state(
        from_hex(train_common::read_json(rng_path, "an fsdp checkpoint").at("rng").get<std::string>(), rng_path));
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(rng_path.string() + ": " + e.what());
  }
  zero_grads();
  dp_.barrier();
}

void FsdpEngine::export_hf(const std::string& dir_text) {
  const fs::path dir(dir_text);
  const at::ScalarType dtype = config_.dtype();
  NamedTensors tensors;
  for_each_full_parameter([&](const std::string& name, const at::Tensor& full) {
    if (dp_.rank() == 0) tensors.emplace_back(name, full.to(at::kCPU, dtype, false, /*copy=*/true));
  });
  if (dp_.rank() == 0) {
    nlohmann::json json = config_.to_json();
    if (head_ == model::ModelHead::kValue) {
      // transformers' *ForTokenClassification with one label: verl's critic checkpoint.
      for (auto& arch : json["architectures"]) {
        std::string name = arch.get<std::string>();
        const size_t at = name.find("ForCausalLM");
        if (at != std::string::npos) arch = name.substr(0, at) + "ForTokenClassification";
      }
      json["num_labels"] = 1;
    }
    train_common::write_hf_export(dir, json, tensors, model_path_);
    if (lora_.enabled()) write_peft_adapter((dir / kLoraDir).string(), lora_, model_path_);
  }
  dp_.barrier();
}

}  // namespace rlcore::train_fsdp
