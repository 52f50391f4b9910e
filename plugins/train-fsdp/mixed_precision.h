// The precision keys of fsdp_config (verl's mixed_precision.{param,reduce,
// buffer}_dtype and their alias fsdp_config.dtype) resolved to the dtypes the
// engine computes and reduces in. Masters, gradient shards and AdamW state are
// float32 whatever these say.
#pragma once

#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "fsdp_options.h"

namespace rlcore::train_fsdp {

struct MixedPrecision {
  at::ScalarType param = at::kFloat;   // gathered parameters and activations
  at::ScalarType reduce = at::kFloat;  // gradients averaged over dp
};

// The names verl's PrecisionType accepts as strings: fp32/float32, bf16/bfloat16, fp16/float16.
std::vector<std::string> precision_names();

// ConfigError naming the key when a name is unknown, when fsdp_config.dtype and
// mixed_precision.param_dtype are both set to different dtypes, or when
// buffer_dtype is not float32.
MixedPrecision resolve_mixed_precision(const FsdpConfigOptions& options);

// ConfigError naming mixed_precision.param_dtype when `device` cannot run a
// matmul in `dtype` with this libtorch (fp16 on CPU before libtorch 2.x).
void require_compute_dtype(at::ScalarType dtype, const at::Device& device);

}  // namespace rlcore::train_fsdp
