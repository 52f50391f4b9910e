// Resolution of the fsdp precision keys. fsdp_config.dtype is the alias of
// mixed_precision.param_dtype (verl's engine config falls back to `dtype`
// when mixed_precision is absent); rlcore defaults both to float32 where verl
// defaults to bf16, because most CPU runs want exact fp32 training.
#include "mixed_precision.h"

#include <ATen/ATen.h>

#include "rlcore/error.h"

namespace rlcore::train_fsdp {
namespace {

const char* const kParamKey = "fsdp_config.mixed_precision.param_dtype";

at::ScalarType dtype_of(const std::string& name, const std::string& key) {
  if (name == "fp32" || name == "float32") return at::kFloat;
  if (name == "bf16" || name == "bfloat16") return at::kBFloat16;
  if (name == "fp16" || name == "float16") return at::kHalf;
  throw ConfigError(key + ": unknown dtype '" + name + "' (fp32/float32, bf16/bfloat16, fp16/float16)");
}

}  // namespace

std::vector<std::string> precision_names() { return {"fp32", "float32", "bf16", "bfloat16", "fp16", "float16"}; }

MixedPrecision resolve_mixed_precision(const FsdpConfigOptions& options) {
  const MixedPrecisionOptions& mixed = options.mixed_precision;
  MixedPrecision out;
  if (!mixed.param_dtype.empty()) out.param = dtype_of(mixed.param_dtype, kParamKey);
  if (!options.dtype.empty()) {
    const at::ScalarType alias = dtype_of(options.dtype, "fsdp_config.dtype");
    if (!mixed.param_dtype.empty() && alias != out.param) {
      throw ConfigError("fsdp_config.dtype ('" + options.dtype + "') and " + kParamKey + " ('" + mixed.param_dtype +
                        "') name the same setting, the compute dtype; set one of them");
    }
    out.param = alias;
  }
  out.reduce = dtype_of(mixed.reduce_dtype, "fsdp_config.mixed_precision.reduce_dtype");
  // The only buffer is the rotary inv_freq; HF computes the angles from it in
  // fp32, and rounding it to 16 bits would shift every position's rotation.
  if (dtype_of(mixed.buffer_dtype, "fsdp_config.mixed_precision.buffer_dtype") != at::kFloat) {
    throw ConfigError("fsdp_config.mixed_precision.buffer_dtype: only float32 is supported (got '" +
                      mixed.buffer_dtype + "'); the model's only buffer, the rotary inv_freq, stays fp32");
  }
  return out;
}

void require_compute_dtype(at::ScalarType dtype, const at::Device& device) {
  if (dtype == at::kFloat) return;
  const at::Tensor probe = at::ones({2, 2}, at::TensorOptions().dtype(dtype).device(device));
  try {
    at::mm(probe, probe);
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    throw ConfigError(std::string(kParamKey) + ": " + std::string(c10::toString(dtype)) +
                      " compute is not available on " + device.str() + " with this libtorch (" +
                      what.substr(0, what.find('\n')) + ")");
  }
}

}  // namespace rlcore::train_fsdp
