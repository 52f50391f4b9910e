// The mixture-of-experts block: its grouped computation (tokens sorted by
// expert, one MLP call per expert with tokens) equals the per-token definition,
// and an expert no token chose is never read.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <limits>

#include "rlcore/model/config.h"
#include "rlcore/model/layers.h"
#include "rlcore/model/routing.h"
#include "rlcore/model/transformer.h"

#include <catch2/catch.hpp>

using namespace rlcore::model;

namespace moe_test {

Linear random_linear(int64_t in, int64_t out) { return Linear{at::randn({out, in}) * 0.3, {}, {}}; }

SparseMoe random_moe(int64_t hidden, int64_t experts, int64_t intermediate, int64_t top_k, bool norm_topk_prob) {
  SparseMoe moe;
  moe.gate = random_linear(hidden, experts);
  for (int64_t e = 0; e < experts; ++e) {
    Mlp mlp;
    mlp.gate_proj = random_linear(hidden, intermediate);
    mlp.up_proj = random_linear(hidden, intermediate);
    mlp.down_proj = random_linear(intermediate, hidden);
    moe.experts.push_back(std::move(mlp));
  }
  moe.top_k = top_k;
  moe.norm_topk_prob = norm_topk_prob;
  return moe;
}

// The definition, token by token: softmax over the router's logits, the top_k
// experts, their weights (renormalised when asked), the weighted sum of their MLPs.
at::Tensor per_token(const SparseMoe& moe, const at::Tensor& x) {
  const at::Tensor tokens = x.reshape({-1, x.size(-1)});
  at::Tensor out = at::zeros_like(tokens);
  for (int64_t t = 0; t < tokens.size(0); ++t) {
    const at::Tensor token = tokens.slice(0, t, t + 1);
    const at::Tensor probs = at::softmax(moe.gate(token).squeeze(0), -1);
    auto [weights, chosen] = at::topk(probs, moe.top_k);
    if (moe.norm_topk_prob) weights = weights / weights.sum();
    for (int64_t k = 0; k < moe.top_k; ++k) {
      const int64_t e = chosen[k].item<int64_t>();
      out[t] += weights[k] * moe.experts[static_cast<size_t>(e)](token).squeeze(0);
    }
  }
  return out.reshape(x.sizes());
}

}  // namespace moe_test

TEST_CASE("the grouped experts equal the per-token definition", "[model][moe]") {
  at::manual_seed(3);
  for (const bool norm : {true, false}) {
    const SparseMoe moe = moe_test::random_moe(16, 5, 12, 2, norm);
    const at::Tensor x = at::randn({3, 7, 16});
    const at::Tensor grouped = moe(x);
    CHECK(grouped.sizes() == x.sizes());
    CHECK(at::allclose(grouped, moe_test::per_token(moe, x), 1e-5, 1e-6));
  }
}

TEST_CASE("an expert no token chose is never read", "[model][moe]") {
  at::manual_seed(4);
  SparseMoe moe = moe_test::random_moe(8, 4, 6, 1, true);
  // The router sends every token of a positive first feature to expert 0 or 1,
  // never to expert 3, whose weights are NaN: any read of them would show.
  moe.gate.weight.zero_();
  moe.gate.weight[0][0] = 10.0;
  moe.gate.weight[1][1] = 10.0;
  moe.gate.weight[3][0] = -10.0;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  moe.experts[3].gate_proj.weight.fill_(nan);
  moe.experts[3].down_proj.weight.fill_(nan);
  const at::Tensor x = at::rand({2, 5, 8}) + 0.5;  // every feature positive
  const at::Tensor out = moe(x);
  CHECK(at::isfinite(out).all().item<bool>());
  CHECK(at::allclose(out, moe_test::per_token(moe, x), 1e-5, 1e-6));
}

TEST_CASE("a qwen3_moe model has sparse layers where its config says, with HF's parameter names", "[model][moe]") {
  ModelConfig config = preset("qwen3_moe", "tiny", 64);
  config.decoder_sparse_step = 2;  // layers 1 and 3 sparse
  const std::vector<ParameterSpec> specs = parameter_specs(config);
  const auto has = [&](const std::string& name) {
    return std::any_of(specs.begin(), specs.end(), [&](const ParameterSpec& s) { return s.name == name; });
  };
  CHECK(has("model.layers.0.mlp.gate_proj.weight"));
  CHECK_FALSE(has("model.layers.0.mlp.gate.weight"));
  CHECK(has("model.layers.1.mlp.gate.weight"));
  CHECK(has("model.layers.1.mlp.experts.7.down_proj.weight"));
  CHECK_FALSE(has("model.layers.1.mlp.gate_proj.weight"));
  CHECK_FALSE(has("model.layers.1.mlp.experts.8.down_proj.weight"));
  for (const ParameterSpec& s : specs) {
    if (s.name == "model.layers.3.mlp.experts.0.up_proj.weight") {
      CHECK(s.shape == std::vector<int64_t>{config.moe_intermediate_size, config.hidden_size});
    }
    if (s.name == "model.layers.3.mlp.gate.weight") CHECK(s.shape == std::vector<int64_t>{8, config.hidden_size});
  }
}

TEST_CASE("a forward records each sparse layer's routing, and nothing for dense layers", "[model][moe]") {
  ModelConfig config = preset("qwen3_moe", "tiny", 64);
  config.num_hidden_layers = 3;
  config.mlp_only_layers = {1};
  Transformer model(config, ModelHead::kCausalLm, at::TensorOptions().dtype(at::kFloat));
  model.init_random(5);
  const at::Tensor ids = at::randint(0, 64, {2, 6}, at::kLong);
  ForwardContext ctx = model.prepare(ids, {}, {}, nullptr);
  MoeRouting routing;
  ctx.routing = &routing;
  const at::Tensor recorded = model.apply_head(model.hidden_states(ids, ctx));
  CHECK(at::allclose(recorded, model.forward(ids)));  // recording changes nothing
  REQUIRE(routing.chosen.size() == 3);
  CHECK_FALSE(routing.chosen[1].defined());
  for (const size_t layer : {size_t{0}, size_t{2}}) {
    CHECK(routing.chosen[layer].sizes() == at::IntArrayRef({12, config.num_experts_per_tok}));
    CHECK(routing.router_logits[layer].sizes() == at::IntArrayRef({12, config.num_experts}));
    // The chosen experts are the router's top-k.
    const at::Tensor top = std::get<1>(at::topk(routing.router_logits[layer], config.num_experts_per_tok, -1));
    CHECK(at::equal(std::get<0>(top.sort(-1)), std::get<0>(routing.chosen[layer].sort(-1))));
  }
}

TEST_CASE("replaying a forward's routing reproduces it; another routing sends the tokens to those experts",
          "[model][moe]") {
  ModelConfig config = preset("qwen3_moe", "tiny", 64);
  config.num_hidden_layers = 2;
  Transformer model(config, ModelHead::kCausalLm, at::TensorOptions().dtype(at::kFloat));
  model.init_random(6);
  const at::Tensor ids = at::randint(0, 64, {2, 5}, at::kLong);
  const auto run = [&](MoeRouting* record, const MoeRouting* replay) {
    ForwardContext ctx = model.prepare(ids, {}, {}, nullptr);
    ctx.routing = record;
    ctx.replay = replay;
    return model.apply_head(model.hidden_states(ids, ctx));
  };
  MoeRouting own;
  const at::Tensor logits = run(&own, nullptr);
  MoeRouting replayed;
  CHECK(at::equal(run(&replayed, &own), logits));
  CHECK(at::equal(replayed.chosen[1], own.chosen[1]));

  // Every token of layer 1 forced to experts {6, 7}: the recorded routing is the forced one and
  // the output moves; layer 0 (no replay given) routes itself.
  MoeRouting forced(2);
  forced.chosen[1] = at::tensor({6, 7}, at::kLong).repeat({10, 1});
  MoeRouting seen;
  const at::Tensor moved = run(&seen, &forced);
  CHECK(at::equal(seen.chosen[1], forced.chosen[1]));
  CHECK(at::equal(seen.chosen[0], own.chosen[0]));
  CHECK_FALSE(at::allclose(moved, logits));
}

TEST_CASE("a routing stacked into the replay layout and back replays the same forward; -1 keeps the router's choice",
          "[model][moe]") {
  ModelConfig config = preset("qwen3_moe", "tiny", 64);
  config.num_hidden_layers = 3;
  config.mlp_only_layers = {1};
  Transformer model(config, ModelHead::kCausalLm, at::TensorOptions().dtype(at::kFloat));
  model.init_random(8);
  const at::Tensor ids = at::randint(0, 64, {2, 5}, at::kLong);
  const auto run = [&](MoeRouting* record, const MoeRouting* replay) {
    ForwardContext ctx = model.prepare(ids, {}, {}, nullptr);
    ctx.routing = record;
    ctx.replay = replay;
    return model.apply_head(model.hidden_states(ids, ctx));
  };
  CHECK(sparse_layers(config) == std::vector<int64_t>{0, 2});
  MoeRouting own;
  const at::Tensor logits = run(&own, nullptr);
  const at::Tensor stacked = stack_routing(own, config, {2, 5});
  REQUIRE(stacked.sizes() == at::IntArrayRef({2, 5, 2, config.num_experts_per_tok}));
  CHECK(at::equal(stacked.select(2, 1).reshape({10, -1}), own.chosen[2]));

  const MoeRouting replay = unstack_routing(stacked, config, at::kCPU);
  CHECK_FALSE(replay.chosen[1].defined());
  CHECK(at::equal(run(nullptr, &replay), logits));
  // Nothing recorded (-1) for the first row: it routes itself, the second row is forced.
  at::Tensor partial = stacked.clone();
  partial[0].fill_(-1);
  partial[1].select(1, 0).select(1, 0).fill_(7);
  MoeRouting seen;
  const MoeRouting forced = unstack_routing(partial, config, at::kCPU);
  run(&seen, &forced);
  const at::Tensor seen_stacked = stack_routing(seen, config, {2, 5});
  CHECK(at::equal(seen_stacked[0], stacked[0]));
  CHECK(at::equal(seen_stacked[1], partial[1]));
  CHECK_THROWS_WITH(unstack_routing(stacked.slice(2, 0, 1), config, at::kCPU),
                    Catch::Contains("2 sparse layers") && Catch::Contains("got [2, 5, 1, 2]"));
}

TEST_CASE("the load-balancing loss is top_k for balanced routing, counts real tokens only, and has a gradient",
          "[model][moe]") {
  const at::AutoGradMode grad(true);
  // 8 tokens over 4 experts, 2 each, every expert chosen 4 times, uniform router probabilities.
  MoeRouting routing(1);
  routing.router_logits[0] = at::zeros({8, 4}).requires_grad_();
  routing.chosen[0] = at::tensor({0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}, at::kLong).reshape({8, 2});
  const at::Tensor balanced = load_balancing_loss(routing, 4);
  CHECK(balanced.item<double>() == Approx(2.0));
  // A ninth, padding token routed all to expert 0 with certainty changes nothing.
  MoeRouting padded(1);
  padded.router_logits[0] = at::cat({at::zeros({8, 4}), at::tensor({50.0f, 0.0f, 0.0f, 0.0f}).reshape({1, 4})});
  padded.chosen[0] = at::cat({routing.chosen[0], at::tensor({0, 1}, at::kLong).reshape({1, 2})});
  const at::Tensor mask = at::cat({at::ones({1, 8}), at::zeros({1, 1})}, 1);
  CHECK(load_balancing_loss(padded, 4, mask).item<double>() == Approx(2.0));
  CHECK(load_balancing_loss(padded, 4).item<double>() > 2.0);
  balanced.backward();
  REQUIRE(routing.router_logits[0].grad().defined());
  CHECK(load_balancing_loss(MoeRouting(2), 4).item<double>() == 0.0);  // no sparse layer
}

TEST_CASE("the load-balancing parts sum to the loss and give each layer's gradient; the z-loss is Megatron's",
          "[model][moe]") {
  const at::AutoGradMode grad(true);
  at::manual_seed(9);
  MoeRouting routing(3);
  for (const size_t layer : {size_t{0}, size_t{2}}) {
    routing.router_logits[layer] = at::randn({6, 4}).requires_grad_();
    routing.chosen[layer] = std::get<1>(at::topk(routing.router_logits[layer].detach(), 2, -1));
  }
  const at::Tensor mask = at::tensor({1, 1, 1, 1, 0, 1}, at::kLong);
  const at::Tensor whole = load_balancing_loss(routing, 4, mask);
  const auto whole_grads = torch::autograd::grad({whole}, {routing.router_logits[0], routing.router_logits[2]});

  const LoadBalancingParts parts(routing, 4, mask);
  const at::Tensor first = parts.part(routing.router_logits[0]);
  const at::Tensor second = parts.part(routing.router_logits[2]);
  CHECK((first + second).item<double>() == Approx(whole.item<double>()).epsilon(1e-6));
  CHECK(at::allclose(torch::autograd::grad({first}, {routing.router_logits[0]})[0], whole_grads[0], 1e-6, 1e-7));
  CHECK(at::allclose(torch::autograd::grad({second}, {routing.router_logits[2]})[0], whole_grads[1], 1e-6, 1e-7));

  // z-loss: the mean over real tokens of logsumexp(logits)^2.
  const at::Tensor logits = routing.router_logits[0].detach();
  double expected = 0;
  for (int64_t t = 0; t < 6; ++t) {
    if (t == 4) continue;
    const double lse = at::logsumexp(logits[t], 0).item<double>();
    expected += lse * lse / 5.0;
  }
  CHECK(router_z_loss(logits, mask).item<double>() == Approx(expected).epsilon(1e-6));
}
