// The Llama / Qwen tensor-parallel layout: which HF parameter splits along
// which dimension, shard shapes and slices.
#include "rlcore/model/tensor_parallel.h"

#include <set>

#include <ATen/ATen.h>

#include "rlcore/error.h"

namespace rlcore::model {
namespace {

const std::set<std::string>& column_modules() {
  static const std::set<std::string> modules = {"q_proj", "k_proj", "v_proj", "gate_proj", "up_proj"};
  return modules;
}

const std::set<std::string>& row_modules() {
  static const std::set<std::string> modules = {"o_proj", "down_proj"};
  return modules;
}

// "model.layers.3.self_attn.q_proj.weight" -> {"q_proj", "weight"}.
std::pair<std::string, std::string> module_and_field(const std::string& name) {
  const size_t field_dot = name.rfind('.');
  if (field_dot == std::string::npos || field_dot == 0) return {"", name};
  const size_t module_dot = name.rfind('.', field_dot - 1);
  const size_t module_begin = module_dot == std::string::npos ? 0 : module_dot + 1;
  return {name.substr(module_begin, field_dot - module_begin), name.substr(field_dot + 1)};
}

int64_t split_dim(TpSplit split) { return split == TpSplit::kRow ? 1 : 0; }

void check_tp_size(int64_t tp_size, const std::string& what) {
  if (tp_size < 1) throw ValueError(what + ": tensor-parallel size must be >= 1, got " + std::to_string(tp_size));
}

void check_divides(const char* key, int64_t value, int64_t tp_size) {
  if (value % tp_size != 0) {
    throw ValueError(std::string("tensor-parallel size ") + std::to_string(tp_size) + " does not divide the model's " +
                     key + " (" + std::to_string(value) + "): every rank must hold an equal share");
  }
}

}  // namespace

TpSplit tp_split(const std::string& name) {
  const auto [module, field] = module_and_field(name);
  if (column_modules().count(module)) return TpSplit::kColumn;
  if (row_modules().count(module) && field == "weight") return TpSplit::kRow;
  return TpSplit::kReplicated;
}

void validate_tp(const ModelConfig& config, int64_t tp_size) {
  check_tp_size(tp_size, "model config");
  if (config.latent_attention() && tp_size > 1) {
    throw ValueError("multi-head latent attention (" + config.model_type + ") is not split tensor-parallel (tp " +
                     std::to_string(tp_size) + "); use tp 1");
  }
  if (config.is_moe() && tp_size > 1) {
    throw ValueError("a mixture of experts (" + config.model_type + ") is not split tensor-parallel (tp " +
                     std::to_string(tp_size) + "): its experts are not sharded; use tp 1");
  }
  check_divides("num_attention_heads", config.num_attention_heads, tp_size);
  check_divides("num_key_value_heads", config.num_key_value_heads, tp_size);
  check_divides("intermediate_size", config.intermediate_size, tp_size);
}

std::vector<int64_t> tp_shard_shape(const std::string& name, at::IntArrayRef full_shape, int64_t tp_size) {
  check_tp_size(tp_size, "tensor '" + name + "'");
  std::vector<int64_t> shape = full_shape.vec();
  const TpSplit split = tp_split(name);
  if (split == TpSplit::kReplicated) return shape;
  const int64_t dim = split_dim(split);
  if (static_cast<int64_t>(shape.size()) <= dim || shape[dim] % tp_size != 0) {
    throw ValueError("tensor '" + name + "' of shape " + c10::str(full_shape) + " cannot be split " +
                     std::to_string(tp_size) + " ways along dim " + std::to_string(dim));
  }
  shape[dim] /= tp_size;
  return shape;
}

at::Tensor tp_slice(const std::string& name, const at::Tensor& full, int64_t tp_rank, int64_t tp_size) {
  const std::vector<int64_t> shard = tp_shard_shape(name, full.sizes(), tp_size);
  if (tp_rank < 0 || tp_rank >= tp_size) {
    throw ValueError("tensor '" + name + "': tensor-parallel rank " + std::to_string(tp_rank) + " is outside [0, " +
                     std::to_string(tp_size) + ")");
  }
  const TpSplit split = tp_split(name);
  if (split == TpSplit::kReplicated) return full;
  const int64_t dim = split_dim(split);
  return full.narrow(dim, tp_rank * shard[dim], shard[dim]);
}

}  // namespace rlcore::model
