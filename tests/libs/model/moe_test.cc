// The mixture-of-experts block: its grouped computation (tokens sorted by
// expert, one MLP call per expert with tokens) equals the per-token definition,
// and an expert no token chose is never read.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

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

namespace moe_test {

// A DeepSeek-V3 block: 8 experts in 4 groups, 2 groups searched, 3 per token, a shared expert.
SparseMoe random_deepseek_moe(int64_t hidden, bool norm_topk_prob) {
  SparseMoe moe = random_moe(hidden, 8, 6, 3, norm_topk_prob);
  moe.style = SparseMoe::Style::kDeepseekV3;
  moe.e_score_correction_bias = at::randn({8}) * 0.3;
  moe.n_group = 4;
  moe.topk_group = 2;
  moe.routed_scaling_factor = 2.5;
  moe.shared_experts = random_moe(hidden, 1, 10, 1, false).experts[0];
  return moe;
}

struct TokenChoice {
  std::vector<int64_t> experts;  // ascending
  std::vector<double> weights;   // of experts, in that order
};

// DeepSeek-V3's routing of one token by its definition, in plain loops: each
// group scored by its two best biased scores, the topk_group best groups kept,
// the top_k biased scores among their experts chosen, weighted by the unbiased
// sigmoid scores (renormalised when asked) times the scaling factor.
TokenChoice deepseek_choice(const SparseMoe& moe, const at::Tensor& token) {
  const at::Tensor logits = at::linear(token, moe.gate.weight).contiguous();
  const int64_t experts = logits.size(0);
  const int64_t group_size = experts / moe.n_group;
  std::vector<double> score(experts), biased(experts);
  for (int64_t e = 0; e < experts; ++e) {
    score[e] = 1.0 / (1.0 + std::exp(-logits[e].item<double>()));
    biased[e] = score[e] + moe.e_score_correction_bias[e].item<double>();
  }
  std::vector<std::pair<double, int64_t>> groups;
  for (int64_t g = 0; g < moe.n_group; ++g) {
    std::vector<double> members(biased.begin() + g * group_size, biased.begin() + (g + 1) * group_size);
    std::sort(members.rbegin(), members.rend());
    groups.emplace_back(members[0] + members[1], g);
  }
  std::sort(groups.rbegin(), groups.rend());
  std::vector<std::pair<double, int64_t>> candidates;
  for (int64_t i = 0; i < moe.topk_group; ++i) {
    const int64_t g = groups[i].second;
    for (int64_t e = g * group_size; e < (g + 1) * group_size; ++e) candidates.emplace_back(biased[e], e);
  }
  std::sort(candidates.rbegin(), candidates.rend());
  TokenChoice choice;
  for (int64_t k = 0; k < moe.top_k; ++k) choice.experts.push_back(candidates[k].second);
  std::sort(choice.experts.begin(), choice.experts.end());
  double total = 0;
  for (int64_t e : choice.experts) total += score[e];
  for (int64_t e : choice.experts) {
    choice.weights.push_back((moe.norm_topk_prob ? score[e] / total : score[e]) * moe.routed_scaling_factor);
  }
  return choice;
}

}  // namespace moe_test

TEST_CASE("DeepSeek-V3's group-limited routing equals its per-token definition", "[model][moe]") {
  at::manual_seed(8);
  for (const bool norm : {true, false}) {
    const SparseMoe moe = moe_test::random_deepseek_moe(16, norm);
    const at::Tensor tokens = at::randn({40, 16});
    const Routed routed = moe.route(tokens);
    REQUIRE(routed.chosen.sizes() == at::IntArrayRef({40, 3}));
    CHECK(routed.router_logits.sizes() == at::IntArrayRef({40, 8}));
    CHECK(routed.weights.scalar_type() == at::kFloat);
    int64_t outside_best_experts = 0;  // tokens whose choice the groups changed
    for (int64_t t = 0; t < tokens.size(0); ++t) {
      const moe_test::TokenChoice expected = moe_test::deepseek_choice(moe, tokens[t]);
      const auto [sorted, order] = routed.chosen[t].sort();
      const std::vector<int64_t> ours(sorted.data_ptr<int64_t>(), sorted.data_ptr<int64_t>() + sorted.numel());
      INFO("norm_topk_prob " << norm << ", token " << t);
      CHECK(ours == expected.experts);
      const at::Tensor weights = routed.weights[t].index_select(0, order);
      for (size_t k = 0; k < expected.weights.size(); ++k) {
        CHECK(weights[static_cast<int64_t>(k)].item<double>() == Approx(expected.weights[k]).epsilon(1e-6));
      }
      const at::Tensor best = std::get<1>(at::topk(routed.router_logits[t].sigmoid() + moe.e_score_correction_bias, 3));
      if (!at::equal(std::get<0>(best.sort()), sorted)) ++outside_best_experts;
    }
    CHECK(outside_best_experts > 0);  // the group limit mattered for some tokens
  }
}

TEST_CASE("DeepSeek-V3's bias steers the choice only; a replay weights by the unbiased scores", "[model][moe]") {
  at::manual_seed(9);
  SparseMoe moe = moe_test::random_deepseek_moe(16, true);
  const at::Tensor tokens = at::randn({12, 16});
  // A large bias on expert 5 sends every token there, at its unbiased score.
  moe.e_score_correction_bias.zero_();
  moe.e_score_correction_bias[5] = 10.0;
  const Routed steered = moe.route(tokens);
  CHECK((steered.chosen == 5).any(-1).all().item<bool>());
  const at::Tensor scores = steered.router_logits.sigmoid();
  const at::Tensor expected = scores.gather(1, steered.chosen);
  CHECK(at::allclose(steered.weights, expected / expected.sum(-1, true) * 2.5));

  const at::Tensor replay = at::tensor({0, 2, 7}, at::kLong).repeat({12, 1});
  const Routed replayed = moe.route(tokens, replay);
  CHECK(at::equal(replayed.chosen, replay));
  const at::Tensor at_replay = scores.gather(1, replay);
  CHECK(at::allclose(replayed.weights, at_replay / at_replay.sum(-1, true) * 2.5));
}

TEST_CASE("a DeepSeek-V3 block adds its shared experts to the routed ones", "[model][moe]") {
  at::manual_seed(10);
  const SparseMoe moe = moe_test::random_deepseek_moe(16, true);
  const at::Tensor x = at::randn({2, 5, 16});
  const at::Tensor tokens = x.reshape({-1, 16});
  at::Tensor expected = moe.shared_experts(tokens);
  for (int64_t t = 0; t < tokens.size(0); ++t) {
    const moe_test::TokenChoice choice = moe_test::deepseek_choice(moe, tokens[t]);
    for (size_t k = 0; k < choice.experts.size(); ++k) {
      expected[t] += choice.weights[k] * moe.experts[static_cast<size_t>(choice.experts[k])](tokens[t]);
    }
  }
  CHECK(at::allclose(moe(x), expected.reshape(x.sizes()), 1e-5, 1e-5));
}

TEST_CASE("a deepseek_v3 model: dense first layers, HF's names, its routing recorded and replayed", "[model][moe]") {
  ModelConfig config = preset("deepseek_v3", "tiny", 64);
  config.num_hidden_layers = 3;
  const std::vector<ParameterSpec> specs = parameter_specs(config);
  const auto shape_of = [&](const std::string& name) {
    for (const ParameterSpec& s : specs) {
      if (s.name == name) return s.shape;
    }
    return std::vector<int64_t>{};
  };
  CHECK(shape_of("model.layers.0.mlp.gate_proj.weight") == std::vector<int64_t>{384, 128});
  CHECK(shape_of("model.layers.0.mlp.gate.weight").empty());
  CHECK(shape_of("model.layers.1.mlp.gate.weight") == std::vector<int64_t>{8, 128});
  CHECK(shape_of("model.layers.1.mlp.gate.e_score_correction_bias") == std::vector<int64_t>{8});
  CHECK(shape_of("model.layers.1.mlp.experts.7.down_proj.weight") == std::vector<int64_t>{128, 96});
  CHECK(shape_of("model.layers.1.mlp.shared_experts.up_proj.weight") == std::vector<int64_t>{96, 128});
  CHECK(shape_of("model.layers.2.self_attn.q_a_proj.weight") == std::vector<int64_t>{96, 128});
  CHECK(shape_of("model.layers.2.self_attn.q_a_layernorm.weight") == std::vector<int64_t>{96});
  CHECK(shape_of("model.layers.2.self_attn.q_b_proj.weight") == std::vector<int64_t>{4 * 48, 96});
  CHECK(shape_of("model.layers.2.self_attn.kv_a_proj_with_mqa.weight") == std::vector<int64_t>{64 + 16, 128});
  CHECK(shape_of("model.layers.2.self_attn.kv_a_layernorm.weight") == std::vector<int64_t>{64});
  CHECK(shape_of("model.layers.2.self_attn.kv_b_proj.weight") == std::vector<int64_t>{4 * (32 + 32), 64});
  CHECK(shape_of("model.layers.2.self_attn.o_proj.weight") == std::vector<int64_t>{128, 4 * 32});
  CHECK(shape_of("model.layers.2.self_attn.q_proj.weight").empty());
  CHECK(shape_of("model.layers.2.self_attn.k_proj.weight").empty());

  Transformer model(config, ModelHead::kCausalLm, at::TensorOptions().dtype(at::kFloat));
  model.init_random(11);
  for (const auto& [name, tensor] : model.named_parameters()) {
    if (name.find("e_score_correction_bias") != std::string::npos) CHECK(tensor.eq(0).all().item<bool>());
  }
  const at::Tensor ids = at::randint(0, 64, {2, 6}, at::kLong);
  const auto run = [&](MoeRouting* record, const MoeRouting* replay) {
    ForwardContext ctx = model.prepare(ids, {}, {}, nullptr);
    ctx.routing = record;
    ctx.replay = replay;
    return model.apply_head(model.hidden_states(ids, ctx));
  };
  MoeRouting own;
  const at::Tensor logits = run(&own, nullptr);
  CHECK(at::allclose(logits, model.forward(ids)));
  REQUIRE(own.chosen.size() == 3);
  CHECK_FALSE(own.chosen[0].defined());
  CHECK(own.chosen[1].sizes() == at::IntArrayRef({12, 2}));
  MoeRouting replayed;
  CHECK(at::equal(run(&replayed, &own), logits));
  MoeRouting forced(3);
  forced.chosen[2] = at::tensor({0, 1}, at::kLong).repeat({12, 1});
  CHECK_FALSE(at::allclose(run(nullptr, &forced), logits));
}
