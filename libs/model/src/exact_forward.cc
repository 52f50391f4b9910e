// The exact forward's switch and its attention (see rlcore/model/exact_forward.h).
#include "rlcore/model/exact_forward.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "exact_recipe.h"

namespace rlcore::model {
namespace {

constexpr const char* kExactForwardEnv = "RLCORE_EXACT_FORWARD";

}  // namespace

// This library is linked statically into the core and into each engine plugin,
// so each has its own statics: the environment is what they share.
void set_exact_forward(bool exact) {
  if (exact != exact_forward()) ::setenv(kExactForwardEnv, exact ? "1" : "0", /*overwrite=*/1);
}

bool exact_forward() {
  const char* value = std::getenv(kExactForwardEnv);
  return value != nullptr && value[0] == '1' && value[1] == '\0';
}

bool takes_exact_path(const at::Tensor& x, const at::Tensor& weight) {
  if (!exact_forward()) return false;
  const auto float_on_cpu = [](const at::Tensor& t) {
    return t.defined() && t.device().is_cpu() && t.scalar_type() == at::kFloat;
  };
  return float_on_cpu(x) && float_on_cpu(weight);
}

at::Tensor exact_attention(const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in,
                           const at::Tensor& blocked_in, double scaling) {
  const at::Tensor q = q_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous();
  const int64_t batch = q.size(0), heads = q.size(1), len = q.size(2), dim = q.size(3);
  const int64_t kv_heads = k.size(1), keys = k.size(2), value_dim = v.size(3);
  const int64_t groups = heads / kv_heads;
  at::Tensor blocked;
  if (blocked_in.defined()) blocked = blocked_in.to(at::kBool).expand({batch, 1, len, keys}).contiguous();
  at::Tensor out = at::zeros({batch, len, heads * value_dim}, q.options());
  const float* qp = q.data_ptr<float>();
  const float* kp = k.data_ptr<float>();
  const float* vp = v.data_ptr<float>();
  const bool* bp = blocked.defined() ? blocked.data_ptr<bool>() : nullptr;
  float* op = out.data_ptr<float>();
  const auto scale = static_cast<float>(scaling);
  // Threads split the queries, never a query's sums.
  at::parallel_for(0, batch * heads * len, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> weights(static_cast<size_t>(keys));
    std::vector<float> sum_values(static_cast<size_t>(value_dim));
    for (int64_t row = begin; row < end; ++row) {
      const int64_t t = row % len, h = (row / len) % heads, b = row / (len * heads);
      const int64_t kv = b * kv_heads + h / groups;
      const float* query = qp + ((b * heads + h) * len + t) * dim;
      const bool* hidden = bp != nullptr ? bp + (b * len + t) * keys : nullptr;
      const auto visible = [&](int64_t s) { return hidden == nullptr || !hidden[s]; };
      float max = -std::numeric_limits<float>::infinity();
      for (int64_t s = 0; s < keys; ++s) {
        if (!visible(s)) continue;
        weights[s] = exact::dot(query, kp + (kv * keys + s) * dim, dim) * scale;
        max = std::max(max, weights[s]);
      }
      if (max == -std::numeric_limits<float>::infinity()) continue;  // every key hidden: a padding query
      float total = 0.0f;
      for (int64_t s = 0; s < keys; ++s) {
        if (!visible(s)) continue;
        weights[s] = std::exp(weights[s] - max);
        total = total + weights[s];
      }
      std::fill(sum_values.begin(), sum_values.end(), 0.0f);
      for (int64_t s = 0; s < keys; ++s) {
        if (!visible(s)) continue;
        const float p = weights[s] / total;
        const float* value = vp + (kv * keys + s) * value_dim;
        for (int64_t d = 0; d < value_dim; ++d) sum_values[d] = std::fma(p, value[d], sum_values[d]);
      }
      std::copy(sum_values.begin(), sum_values.end(), op + (b * len + t) * heads * value_dim + h * value_dim);
    }
  });
  return out;
}

}  // namespace rlcore::model
