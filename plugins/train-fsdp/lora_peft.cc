// The LoRA adapters in PEFT's format, so `PeftModel.from_pretrained(base, dir)`
// (and verl's lora_adapter/ consumers, e.g. vLLM's LoRARequest) read them as is.
#include <filesystem>
#include <fstream>
#include <set>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <nlohmann/json.hpp>

#include "lora_adapters.h"
#include "rlcore/atomic_file.h"
#include "rlcore/error.h"
#include "rlcore/safetensors/safetensors.h"

namespace rlcore::train_fsdp {
namespace {

namespace fs = std::filesystem;

constexpr const char* kConfigFile = "adapter_config.json";
constexpr const char* kWeightsFile = "adapter_model.safetensors";

constexpr const char* kKeyPrefix = "base_model.model.";

std::string peft_key(const LoraPair& pair, const char* matrix) {
  return kKeyPrefix + pair.module + "." + matrix + ".weight";
}

// target_modules as PEFT reads it back to the same modules: the projection
// names when every layer has the same ones, else every module by its full name.
nlohmann::json written_targets(const LoraAdapters& adapters) {
  if (adapters.every_layer_alike()) return adapters.target_names();
  std::vector<std::string> modules;
  for (const auto& pair : adapters.pairs()) modules.push_back(pair->module);
  return modules;
}

// A string (PEFT: a regular expression, or all-linear) or a list of names.
std::vector<std::string> one_or_many(const nlohmann::json& value) {
  if (value.is_string()) return {value.get<std::string>()};
  return value.get<std::vector<std::string>>();
}

// Throws FormatError when the adapter uses a PEFT feature rlcore's LoRA does not train.
void require_plain_lora(const nlohmann::json& config, const fs::path& path) {
  auto refuse = [&path](const std::string& field, const std::string& value) {
    throw FormatError(path.string() + ": " + field + " is " + value +
                      "; rlcore trains plain LoRA and rsLoRA (no DoRA, per-module ranks, layer filters, biases or "
                      "extra trained modules)");
  };
  const std::string peft_type = config.value("peft_type", std::string("LORA"));
  if (peft_type != "LORA") refuse("peft_type", "'" + peft_type + "'");
  for (const char* flag : {"use_dora", "fan_in_fan_out", "lora_bias"})
    if (config.contains(flag) && config.at(flag).is_boolean() && config.at(flag).get<bool>()) refuse(flag, "true");
  if (config.contains("bias") && config.at("bias") != "none") refuse("bias", config.at("bias").dump());
  for (const char* field :
       {"rank_pattern", "alpha_pattern", "layers_to_transform", "modules_to_save", "target_parameters"}) {
    if (!config.contains(field)) continue;
    const nlohmann::json& value = config.at(field);
    if (!value.is_null() && !value.empty()) refuse(field, value.dump());
  }
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
                                 {"target_modules", written_targets(adapters)},
                                 {"lora_dropout", 0.0},
                                 {"bias", "none"},
                                 {"fan_in_fan_out", false},
                                 {"use_rslora", adapters.options().use_rslora},
                                 {"init_lora_weights", true},
                                 {"inference_mode", true},
                                 {"base_model_name_or_path", base_model}};
  write_file_atomically(dir / kConfigFile, config.dump(2));
}

LoraOptions read_peft_adapter_options(const std::string& dir) {
  if (fs::is_regular_file(dir))
    throw IoError(dir + ": a file; a LoRA adapter is the directory that holds " + kConfigFile + " and " + kWeightsFile);
  const fs::path config_path = fs::path(dir) / kConfigFile;
  std::ifstream in(config_path);
  if (!in) throw IoError(config_path.string() + ": missing (a LoRA adapter directory holds it)");
  try {
    const nlohmann::json config = nlohmann::json::parse(in);
    require_plain_lora(config, config_path);
    LoraOptions options;
    options.lora_rank = config.at("r").get<int64_t>();
    options.lora_alpha = config.at("lora_alpha").get<double>();
    options.target_modules = one_or_many(config.at("target_modules"));
    options.use_rslora = config.value("use_rslora", false);
    if (config.contains("exclude_modules") && !config.at("exclude_modules").is_null())
      options.exclude_modules = one_or_many(config.at("exclude_modules"));
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
  if (saved.lora_alpha != adapters.options().lora_alpha || saved.use_rslora != adapters.options().use_rslora) {
    throw FormatError((dir / kConfigFile).string() + ": lora_alpha = " + std::to_string(saved.lora_alpha) +
                      ", use_rslora = " + (saved.use_rslora ? "true" : "false") + "; lora.lora_alpha is " +
                      std::to_string(adapters.options().lora_alpha) + ", lora.use_rslora " +
                      (adapters.options().use_rslora ? "true" : "false") + " (the adapters would be scaled otherwise)");
  }
  const SafetensorsFile file(dir / kWeightsFile);
  std::set<std::string> expected;
  for (const auto& pair : adapters.pairs())
    for (const char* matrix : {"lora_A", "lora_B"}) expected.insert(peft_key(*pair, matrix));
  for (const std::string& key : file.names()) {
    if (!expected.count(key)) {
      throw FormatError(file.path().string() + ": tensor '" + key + "' is not an adapter of a module that " +
                        (dir / kConfigFile).string() + " selects");
    }
  }
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

LoraAdapters make_lora_adapters(const LoraOptions& options, model::Transformer& skeleton, const at::Device& device,
                                uint64_t seed) {
  const std::string& path = options.lora_adapter_path;
  if (path.empty()) return LoraAdapters(options, skeleton, device, seed);
  LoraOptions adapter_options;
  try {
    adapter_options = read_peft_adapter_options(path);
  } catch (const Error& e) {
    throw ConfigError(std::string("fsdp: lora.lora_adapter_path: ") + e.what());
  }
  if (options.lora_rank > 0 && options.lora_rank != adapter_options.lora_rank) {
    throw ConfigError("fsdp: lora.lora_rank is " + std::to_string(options.lora_rank) + " but the adapter " + path +
                      " (lora.lora_adapter_path) has r = " + std::to_string(adapter_options.lora_rank) +
                      "; set lora_rank to " + std::to_string(adapter_options.lora_rank) +
                      " or leave it 0 to take the adapter's");
  }
  adapter_options.lora_adapter_path = path;
  LoraAdapters adapters;
  try {
    adapters = LoraAdapters(adapter_options, skeleton, device, seed);
  } catch (const ConfigError& e) {  // its modules, named by the keys they would have under lora
    throw ConfigError((fs::path(path) / kConfigFile).string() + " (lora.lora_adapter_path): " + e.what());
  }
  read_peft_adapter(path, adapters);
  return adapters;
}

}  // namespace rlcore::train_fsdp
