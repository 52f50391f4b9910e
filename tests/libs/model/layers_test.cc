// Building blocks against formulas written out element by element in the test
// (a different code path from the vectorised implementation).
#include <cmath>

#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/tensor.h>

#include "rlcore/model/config.h"
#include "rlcore/model/layers.h"

#include <catch2/catch.hpp>

using namespace rlcore::model;

namespace {

ModelConfig rope_config(int64_t head_dim, double theta) {
  ModelConfig c = preset("llama", "tiny", 100);
  c.head_dim = head_dim;
  c.rope_theta = theta;
  return c;
}

}  // namespace

TEST_CASE("rope inv_freq is 1 / theta^(2i/d)", "[model]") {
  const ModelConfig c = rope_config(64, 10000.0);
  const at::Tensor inv_freq = rope_inv_freq(c);
  REQUIRE(inv_freq.sizes() == at::IntArrayRef{32});
  auto a = inv_freq.accessor<float, 1>();
  for (int64_t i = 0; i < 32; ++i) {
    const double expected = 1.0 / std::pow(10000.0, 2.0 * static_cast<double>(i) / 64.0);
    CHECK(a[i] == Approx(expected).epsilon(1e-6));
  }
}

TEST_CASE("llama3 rope scaling follows the Llama 3.1 frequency bands", "[model]") {
  ModelConfig c = rope_config(64, 500000.0);
  c.rope_scaling = RopeScaling{"llama3", 32.0, 1.0, 4.0, 8192};
  const at::Tensor inv_freq = rope_inv_freq(c);
  auto scaled = inv_freq.accessor<float, 1>();
  int bands[3] = {0, 0, 0};
  for (int64_t i = 0; i < 32; ++i) {
    const double f = 1.0 / std::pow(500000.0, 2.0 * static_cast<double>(i) / 64.0);
    const double wavelen = 2 * M_PI / f;
    double expected = f;
    if (wavelen > 8192.0) {  // low frequencies: divided by the factor
      expected = f / 32.0, ++bands[0];
    } else if (wavelen >= 8192.0 / 4.0) {  // medium: interpolated
      const double smooth = (8192.0 / wavelen - 1.0) / (4.0 - 1.0);
      expected = (1 - smooth) * f / 32.0 + smooth * f, ++bands[1];
    } else {
      ++bands[2];
    }
    CHECK(scaled[i] == Approx(expected).epsilon(1e-5));
  }
  // The head_dim/theta chosen exercise all three bands.
  CHECK(bands[0] > 0);
  CHECK(bands[1] > 0);
  CHECK(bands[2] > 0);
  c.rope_scaling = RopeScaling{"linear", 4.0};
  CHECK(rope_inv_freq(c)[1].item<float>() == Approx(1.0 / std::pow(500000.0, 2.0 / 64.0) / 4.0).epsilon(1e-6));
}

TEST_CASE("rotary cos/sin and rotation match the per-element formula", "[model]") {
  const int64_t d = 16;
  const ModelConfig c = rope_config(d, 10000.0);
  const RotaryEmbedding rope(c, at::kCPU);
  const at::Tensor positions = at::tensor({0, 1, 7, 42, 3, 3, 0, 50}, at::kLong).view({2, 4});
  const auto [cos, sin] = rope.cos_sin(positions, at::kFloat);
  REQUIRE(cos.sizes() == at::IntArrayRef{2, 4, d});

  const int64_t heads = 3;
  const at::Tensor x = at::randn({2, heads, 4, d});
  const at::Tensor rotated = apply_rotary(x, cos, sin);
  auto xa = x.accessor<float, 4>();
  auto ra = rotated.accessor<float, 4>();
  auto ca = cos.accessor<float, 3>();
  auto pa = positions.accessor<int64_t, 2>();
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t t = 0; t < 4; ++t) {
      for (int64_t i = 0; i < d / 2; ++i) {
        const double angle = static_cast<double>(pa[b][t]) / std::pow(10000.0, 2.0 * static_cast<double>(i) / d);
        // HF duplicates the d/2 frequencies: element i and i + d/2 share one angle.
        CHECK(ca[b][t][i] == Approx(std::cos(angle)).margin(2e-5));
        CHECK(ca[b][t][i + d / 2] == Approx(std::cos(angle)).margin(2e-5));
        for (int64_t h = 0; h < heads; ++h) {
          const double x1 = xa[b][h][t][i], x2 = xa[b][h][t][i + d / 2];
          // rotate_half: the pair (x1, x2) rotates by `angle`.
          CHECK(ra[b][h][t][i] == Approx(x1 * std::cos(angle) - x2 * std::sin(angle)).margin(1e-4));
          CHECK(ra[b][h][t][i + d / 2] == Approx(x2 * std::cos(angle) + x1 * std::sin(angle)).margin(1e-4));
        }
      }
    }
  }
  const at::Tensor half = rotate_half(at::arange(4, at::kFloat));
  CHECK(half.equal(at::tensor({-2.0f, -3.0f, 0.0f, 1.0f})));
}

TEST_CASE("RMSNorm normalises by the root mean square, then scales", "[model]") {
  const RmsNorm norm{at::randn({8}), 1e-6};
  const at::Tensor x = at::randn({3, 8});
  const at::Tensor y = norm(x);
  auto xa = x.accessor<float, 2>();
  auto ya = y.accessor<float, 2>();
  auto wa = norm.weight.accessor<float, 1>();
  for (int64_t r = 0; r < 3; ++r) {
    double mean_square = 0;
    for (int64_t i = 0; i < 8; ++i) mean_square += xa[r][i] * xa[r][i] / 8.0;
    for (int64_t i = 0; i < 8; ++i) {
      CHECK(ya[r][i] == Approx(wa[i] * xa[r][i] / std::sqrt(mean_square + 1e-6)).margin(1e-5));
    }
  }
  // A bf16 model: bf16 in and out, normalised in fp32 inside.
  const RmsNorm half{norm.weight.to(at::kBFloat16), 1e-6};
  const at::Tensor y_half = half(x.to(at::kBFloat16));
  CHECK(y_half.scalar_type() == at::kBFloat16);
  CHECK(y_half.to(at::kFloat).sub(y).abs().max().item<float>() < 0.05 * y.abs().max().item<float>());
}

TEST_CASE("Linear uses an installed forward override", "[model]") {
  Linear linear{at::randn({4, 3}), at::randn({4}), nullptr};
  const at::Tensor x = at::randn({2, 3});
  const at::Tensor plain = linear(x);
  // y = x W^T + b element-wise.
  auto xa = x.accessor<float, 2>();
  auto wa = linear.weight.accessor<float, 2>();
  auto ba = linear.bias.accessor<float, 1>();
  for (int64_t r = 0; r < 2; ++r) {
    for (int64_t o = 0; o < 4; ++o) {
      double sum = ba[o];
      for (int64_t i = 0; i < 3; ++i) sum += xa[r][i] * wa[o][i];
      CHECK(plain[r][o].item<float>() == Approx(sum).margin(1e-5));
    }
  }
  int calls = 0;
  linear.forward_override = [&calls](const Linear& self, const at::Tensor& input) {
    ++calls;
    return input.matmul(self.weight.t()).mul(2);
  };
  CHECK(linear(x).allclose(x.matmul(linear.weight.t()).mul(2)));
  CHECK(calls == 1);
}
