// The LoRA adapters in PEFT's format, so `PeftModel.from_pretrained(base, dir)`
// (and verl's lora_adapter/ consumers, e.g. vLLM's LoRARequest) read them as is.
#include <filesystem>
#include <fstream>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <nlohmann/json.hpp>

#include "lora_adapters.h"
#include "rlcore/atomic_file.h"
#include "rlcore/error.h"
#include "rlcore/safetensors.h"

namespace rlcore::fsdp {
namespace {

namespace fs = std::filesystem;

constexpr const char* kConfigFile = "adapter_config.json";
constexpr const char* kWeightsFile = "adapter_model.safetensors";

std::string peft_key(const LoraPair& pair, const char* matrix) {
  return "base_model.model." + pair.module + "." + matrix + ".weight";
}

}  // namespace

void write_peft_adapter(const std::string& dir_text, const LoraAdapters& adapters, const std::string& base_model) {
  const fs::path dir(dir_text);
  fs::create_directories(dir);
  NamedTensors tensors;
  for (const auto& pair : adapters.pairs()) {
    tensors.emplace_back(peft_key(*pair, "lora_A"), pair->a.detach().to(at::kCPU).contiguous());
    tensors.emplace_back(peft_key(*pair, "lora_B"), pair->b.detach().to(at::kCPU).contiguous());
  }
  save_safetensors(dir / kWeightsFile, tensors, {{"format", "pt"}});
  const nlohmann::json config = {{"peft_type", "LORA"},
                                 {"task_type", "CAUSAL_LM"},
                                 {"r", adapters.options().lora_rank},
                                 {"lora_alpha", adapters.options().lora_alpha},
                                 {"target_modules", adapters.target_names()},
                                 {"lora_dropout", 0.0},
                                 {"bias", "none"},
                                 {"fan_in_fan_out", false},
                                 {"use_rslora", false},
                                 {"init_lora_weights", true},
                                 {"inference_mode", true},
                                 {"base_model_name_or_path", base_model}};
  write_file_atomically(dir / kConfigFile, config.dump(2));
}

LoraOptions read_peft_adapter_options(const std::string& dir) {
  const fs::path config_path = fs::path(dir) / kConfigFile;
  std::ifstream in(config_path);
  if (!in) throw IoError(config_path.string() + ": missing (a LoRA checkpoint needs its adapter)");
  try {
    const nlohmann::json config = nlohmann::json::parse(in);
    LoraOptions options;
    options.lora_rank = config.at("r").get<int64_t>();
    options.lora_alpha = config.at("lora_alpha").get<double>();
    options.target_modules = config.at("target_modules").get<std::vector<std::string>>();
    if (options.lora_rank < 1) throw FormatError(config_path.string() + ": r must be >= 1");
    return options;
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(config_path.string() + ": " + e.what());
  }
}

void read_peft_adapter(const std::string& dir_text, LoraAdapters& adapters) {
  const fs::path dir(dir_text);
  const LoraOptions saved = read_peft_adapter_options(dir_text);
  if (saved.lora_rank != adapters.options().lora_rank)
    throw FormatError((dir / kConfigFile).string() + ": r = " + std::to_string(saved.lora_rank) +
                      ", lora.lora_rank is " + std::to_string(adapters.options().lora_rank));
  const SafetensorsFile file(dir / kWeightsFile);
  at::NoGradGuard no_grad;
  for (const auto& pair : adapters.pairs()) {
    for (auto [matrix, tensor] : {std::pair<const char*, at::Tensor*>{"lora_A", &pair->a}, {"lora_B", &pair->b}}) {
      const std::string key = peft_key(*pair, matrix);
      if (!file.contains(key))
        throw FormatError(file.path().string() + ": missing tensor '" + key + "' (lora.target_modules differ?)");
      const at::Tensor saved = file.view(key);
      if (saved.sizes() != tensor->sizes())
        throw FormatError(file.path().string() + ": tensor '" + key + "' has the wrong shape");
      tensor->copy_(saved);
    }
  }
}

}  // namespace rlcore::fsdp
