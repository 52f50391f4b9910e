// Sharding a Transformer for tensor-parallel inference.
#include "tensor_parallel_model.h"

#include <ATen/ATen.h>

#include "rlcore/model/tensor_parallel.h"

namespace rlcore::infer_native {
namespace {

// Sums the ranks' partial products. Gloo has no bf16/fp16 sum, so those are
// reduced in fp32 (and rounded once instead of once per rank).
at::Tensor all_reduce_partial(const CommGroup& group, at::Tensor partial) {
  if (partial.scalar_type() == at::kFloat || partial.scalar_type() == at::kDouble) {
    group.all_reduce(partial);
    return partial;
  }
  at::Tensor wide = partial.to(at::kFloat);
  group.all_reduce(wide);
  return wide.to(partial.scalar_type());
}

// Every rank's partial product sums to the full one; the bias is added once, after.
decltype(model::Linear::forward_override) row_parallel(const CommGroup& group) {
  return [group](const model::Linear& linear, const at::Tensor& x) {
    const at::Tensor y = all_reduce_partial(group, at::linear(x, linear.weight));
    return linear.bias.defined() ? y + linear.bias : y;
  };
}

}  // namespace

std::vector<model::ParameterSpec> local_parameter_specs(const model::ModelConfig& config, int64_t tp_size) {
  std::vector<model::ParameterSpec> specs = model::parameter_specs(config);
  for (model::ParameterSpec& spec : specs) spec.shape = model::tp_shard_shape(spec.name, spec.shape, tp_size);
  return specs;
}

void make_tensor_parallel(model::Transformer& model, const CommGroup& group) {
  const int64_t tp = group.size();
  model::validate_tp(model.config(), tp);
  for (auto& [name, slot] : model.parameter_slots()) {
    *slot = at::empty(model::tp_shard_shape(name, slot->sizes(), tp), slot->options());
  }
  for (model::DecoderLayer& layer : model.layers) {
    layer.self_attn.num_heads /= tp;
    layer.self_attn.num_kv_heads /= tp;
    layer.self_attn.o_proj.forward_override = row_parallel(group);
    layer.mlp.down_proj.forward_override = row_parallel(group);
  }
}

}  // namespace rlcore::infer_native
