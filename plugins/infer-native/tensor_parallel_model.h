// Tensor parallelism for infer-native: turns a Transformer into one rank's
// shard of the Megatron layout (rlcore/model/tensor_parallel.h) and installs
// the row-parallel forward, so the SDK model runs TP unchanged.
#pragma once

#include <vector>

#include "rlcore/comm_context.h"
#include "rlcore/model/transformer.h"

namespace rlcore::infer_native {

// The shapes this rank holds for `config` split tp_size ways, in parameter_specs order.
std::vector<model::ParameterSpec> local_parameter_specs(const model::ModelConfig& config, int64_t tp_size);

// Reallocates every split parameter of `model` at its shard shape
// (uninitialised), sets the attention layers' local head counts and makes
// o_proj / down_proj row-parallel: local matmul, all-reduce over `group`,
// then the (replicated) bias. Column-parallel layers need nothing: their
// output is this rank's heads / channels. `group` must outlive the model's use.
void make_tensor_parallel(model::Transformer& model, const CommGroup& group);

}  // namespace rlcore::infer_native
