// AdamW on flat fp32 shards (train-common): the fused CPU pass, vectorised and
// split over the intra-op threads, against torch::optim::AdamW and against the
// tensor-op form it falls back to on other layouts.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/optim/adamw.h>
#include <catch2/catch.hpp>

#include "train-common/adamw.h"

namespace {

// Not a multiple of any vector width, and several of the pass's per-thread chunks.
constexpr int64_t kElements = 100003;

struct Shard {
  at::Tensor param, exp_avg, exp_avg_sq;
};

Shard shard_like(const at::Tensor& param) { return {param.clone(), at::zeros_like(param), at::zeros_like(param)}; }

rlcore::train_common::AdamWHyper hyper_at(int64_t step) {
  rlcore::train_common::AdamWHyper hyper;
  hyper.lr = 1e-2;
  hyper.weight_decay = 0.1;
  hyper.step = step;
  hyper.grad_scale = 0.5;  // clipping's factor, as fsdp passes it
  return hyper;
}

void run_steps(Shard& shard, const std::vector<at::Tensor>& grads) {
  for (size_t i = 0; i < grads.size(); ++i)
    rlcore::train_common::adamw_update(shard.param, grads[i], shard.exp_avg, shard.exp_avg_sq,
                                       hyper_at(static_cast<int64_t>(i) + 1));
}

// A contiguous shard starting at `start` after one fused update per gradient.
Shard updated(const at::Tensor& start, const std::vector<at::Tensor>& grads) {
  Shard shard = shard_like(start);
  run_steps(shard, grads);
  return shard;
}

std::vector<at::Tensor> random_grads(int steps) {
  std::vector<at::Tensor> grads;
  for (int i = 0; i < steps; ++i) grads.push_back(at::randn({kElements}) * 1e-3);
  return grads;
}

double worst_difference(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

}  // namespace

TEST_CASE("the fused pass follows torch::optim::AdamW within a few ulps", "[adamw]") {
  at::manual_seed(7);
  const at::Tensor start = at::randn({kElements});
  const std::vector<at::Tensor> grads = random_grads(3);
  const Shard fused = updated(start, grads);

  at::Tensor reference = start.clone().requires_grad_(true);
  torch::optim::AdamW adamw({reference}, torch::optim::AdamWOptions(1e-2).weight_decay(0.1));
  for (const at::Tensor& grad : grads) {
    reference.mutable_grad() = grad * 0.5;
    adamw.step();
  }
  // torch's vector kernels fuse a multiply-add where the pass rounds twice: an ulp of the moments,
  // far below one of a parameter of size ~1 (6e-8) after lr 1e-2 scales the update.
  CHECK(worst_difference(fused.param, reference.detach()) <= 2.5e-7);
  CHECK(worst_difference(fused.param, start) > 1e-2);  // three steps of lr 1e-2 moved it
}

TEST_CASE("the fused pass and the tensor-op form agree", "[adamw]") {
  at::manual_seed(11);
  // Every other element of a buffer is not contiguous: adamw_update takes the tensor-op form for it.
  const at::Tensor start = at::randn({kElements});
  const std::vector<at::Tensor> grads = random_grads(3);
  const Shard fused = updated(start, grads);

  const auto strided = [](const at::Tensor& flat) {
    at::Tensor every_other = at::zeros({2 * kElements}).slice(0, 0, 2 * kElements, 2);
    every_other.copy_(flat);
    return every_other;
  };
  Shard ops{strided(start), strided(at::zeros({kElements})), strided(at::zeros({kElements}))};
  REQUIRE_FALSE(ops.param.is_contiguous());
  std::vector<at::Tensor> strided_grads;
  for (const at::Tensor& grad : grads) strided_grads.push_back(strided(grad));
  run_steps(ops, strided_grads);
  CHECK(worst_difference(fused.param, ops.param) <= 2.5e-7);
  CHECK(worst_difference(fused.exp_avg, ops.exp_avg) <= 1e-10);
}

TEST_CASE("threads split the fused pass without changing a bit", "[adamw]") {
  at::manual_seed(13);
  const at::Tensor start = at::randn({kElements});
  const std::vector<at::Tensor> grads = random_grads(2);
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const Shard one = updated(start, grads);
  at::set_num_threads(4);
  const Shard four = updated(start, grads);
  at::set_num_threads(threads);
  CHECK(at::equal(one.param, four.param));
  CHECK(at::equal(one.exp_avg, four.exp_avg));
  CHECK(at::equal(one.exp_avg_sq, four.exp_avg_sq));
}
