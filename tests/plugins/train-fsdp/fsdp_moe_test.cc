// A mixture of experts in the fsdp engine: the router's losses (their values
// and gradients equal a plain Transformer's with the losses added, with and
// without gradient checkpointing) and routing replay (ReplaysRouting: a
// recorded routing replays bitwise; a forced one is what the forward and the
// update use).
#include "fsdp_engine_testing.h"

#include <torch/csrc/autograd/autograd.h>

#include "fsdp_engine.h"
#include "fsdp_options.h"
#include "rlcore/capabilities.h"
#include "rlcore/columns.h"
#include "rlcore/error.h"
#include "rlcore/model/routing.h"

using namespace fsdp_test;
using rlcore::train_fsdp::FsdpEngine;
using rlcore::train_fsdp::FsdpOptions;

namespace fsdp_moe_test {

// Two sparse layers of 6 experts, top-2, renormalised.
rlcore::model::ModelConfig moe_config() {
  rlcore::model::ModelConfig c = rlcore::model::preset("qwen3_moe", "tiny", 64);
  c.hidden_size = 32;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.num_hidden_layers = 2;
  c.num_experts = 6;
  c.num_experts_per_tok = 2;
  c.moe_intermediate_size = 16;
  c.max_position_embeddings = 64;
  c.initializer_range = 0.2;
  c.pad_token_id.reset();
  c.validate("tiny fsdp moe config");
  return c;
}

rlcore::Batch small_batch(int64_t vocab) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(6);
  at::Tensor ids = at::randint(1, vocab, {3, 7}, generator, at::kLong);
  at::Tensor mask = at::ones({3, 7}, at::kLong);
  mask[0][0] = 0;  // left-padded prompt
  mask[2][6] = 0;  // right-padded response
  ids = ids * mask;
  rlcore::Batch batch(3);
  batch.set(rlcore::columns::kInputIds, ids);
  batch.set(rlcore::columns::kAttentionMask, mask);
  batch.set(rlcore::columns::kResponses, ids.slice(1, 4).clone());
  batch.set(rlcore::columns::kResponseMask, mask.slice(1, 4).to(at::kFloat));
  batch.set("advantages", at::randn({3, 3}, generator));
  return batch;
}

rlcore::model::Transformer load_reference(const TempDir& dir) {
  rlcore::model::Transformer model(moe_config());
  rlcore::SafetensorsCheckpoint checkpoint(dir.path());
  rlcore::NamedTensors tensors;
  for (const auto& name : checkpoint.names()) tensors.emplace_back(name, checkpoint.load(name));
  model.load(tensors);
  return model;
}

// The reference's loss: the policy gradient plus the router losses, over the whole batch.
struct ReferenceLoss {
  at::Tensor loss;
  double aux = 0;
  double z_mean = 0;
};

ReferenceLoss reference_loss(const rlcore::model::Transformer& model, const rlcore::Batch& batch, double aux_coeff,
                             double z_coeff) {
  const at::Tensor ids = batch.tensor(rlcore::columns::kInputIds);
  const at::Tensor mask = batch.tensor(rlcore::columns::kAttentionMask);
  rlcore::model::ForwardContext ctx = model.prepare(ids, mask, {}, nullptr);
  rlcore::model::MoeRouting routing;
  ctx.routing = &routing;
  const at::Tensor logits = model.apply_head(model.hidden_states(ids, ctx));
  const at::Tensor responses = batch.tensor(rlcore::columns::kResponses);
  const int64_t prompt = ids.size(1) - responses.size(1);
  const at::Tensor logp = at::log_softmax(logits.slice(1, prompt - 1, prompt - 1 + responses.size(1)), -1)
                              .gather(-1, responses.unsqueeze(-1))
                              .squeeze(-1);
  const at::Tensor response_mask = batch.tensor(rlcore::columns::kResponseMask);
  ReferenceLoss out;
  const at::Tensor aux = rlcore::model::load_balancing_loss(routing, model.config().num_experts, mask);
  at::Tensor z_sum = at::zeros({});
  for (const int64_t layer : rlcore::model::sparse_layers(model.config())) {
    z_sum = z_sum + rlcore::model::router_z_loss(routing.router_logits[static_cast<size_t>(layer)], mask);
  }
  out.loss = -(logp * batch.tensor("advantages") * response_mask).sum() / response_mask.sum() + aux_coeff * aux +
             z_coeff * z_sum / 2.0;  // the mean over the 2 sparse layers
  out.aux = aux.item<double>();
  out.z_mean = z_sum.item<double>() / 2.0;
  return out;
}

}  // namespace fsdp_moe_test

TEST_CASE("fsdp adds the router losses of a mixture of experts as a plain Transformer would, and reports them",
          "[fsdp][moe]") {
  TempDir dir;
  write_tiny_checkpoint(dir.path(), fsdp_moe_test::moe_config());
  const rlcore::Batch batch = fsdp_moe_test::small_batch(64);
  for (const bool checkpointing : {true, false}) {
    INFO("enable_gradient_checkpointing " << checkpointing);
    FsdpOptions options;
    options.optim.lr = 1e-2;
    options.grad_clip = 0;
    options.enable_gradient_checkpointing = checkpointing;
    options.fsdp_config.moe_aux_loss_coeff = 0.5;
    options.fsdp_config.moe_z_loss_coeff = 0.01;
    FsdpEngine engine(options, context_for(dir));

    rlcore::model::Transformer reference = fsdp_moe_test::load_reference(dir);
    reference.set_requires_grad(true);
    const fsdp_moe_test::ReferenceLoss expected = fsdp_moe_test::reference_loss(reference, batch, 0.5, 0.01);
    std::vector<at::Tensor> params;
    for (const auto& entry : reference.named_parameters()) params.push_back(entry.second);
    const auto grads = torch::autograd::grad({expected.loss}, params);
    double squares = 0;
    for (const auto& g : grads) squares += g.to(at::kDouble).pow(2).sum().item<double>();

    const auto metrics = engine.train_step(batch, rlcore::ForwardOptions{}, pg_loss).metrics;
    CHECK(metrics.at("moe_aux_loss") == Approx(expected.aux).epsilon(1e-5));
    CHECK(metrics.at("moe_z_loss") == Approx(expected.z_mean).epsilon(1e-5));
    // The router losses' gradients are in the norm: without them it differs.
    CHECK(metrics.at("grad_norm") == Approx(std::sqrt(squares)).epsilon(1e-4));
    const auto without = torch::autograd::grad({fsdp_moe_test::reference_loss(reference, batch, 0, 0).loss}, params);
    double plain = 0;
    for (const auto& g : without) plain += g.to(at::kDouble).pow(2).sum().item<double>();
    CHECK(std::abs(std::sqrt(plain) - std::sqrt(squares)) > 1e-3);
  }
}

TEST_CASE("fsdp replays a recorded routing bitwise, and a forced routing is what its forward and update use",
          "[fsdp][moe]") {
  TempDir dir;
  const auto config = fsdp_moe_test::moe_config();
  write_tiny_checkpoint(dir.path(), config);
  FsdpOptions options;
  options.optim.lr = 1e-2;
  options.optim.weight_decay = 0;
  FsdpEngine engine(options, context_for(dir));
  REQUIRE(rlcore::supports<rlcore::ReplaysRouting>(engine));
  rlcore::Batch batch = fsdp_moe_test::small_batch(64);

  engine.set_routing_replay(false, true);
  const at::Tensor own_log_prob = engine.forward(batch, rlcore::ForwardOptions{}).log_prob;
  const at::Tensor own = engine.take_routing();
  REQUIRE(own.sizes() == at::IntArrayRef({3, 7, 2, 2}));
  CHECK(own.scalar_type() == at::kShort);
  CHECK_FALSE(engine.take_routing().defined());  // taken

  batch.set(rlcore::columns::kRoutedExperts, own);
  engine.set_routing_replay(true, true);
  CHECK(at::equal(engine.forward(batch, rlcore::ForwardOptions{}).log_prob, own_log_prob));
  CHECK(at::equal(engine.take_routing(), own));

  // Every token of every layer forced to experts 0 and 1: the forward uses them, the log-probs move,
  // and an update trains experts 0 and 1 only.
  at::Tensor forced = own.clone();
  forced.select(3, 0).fill_(0);
  forced.select(3, 1).fill_(1);
  batch.set(rlcore::columns::kRoutedExperts, forced);
  CHECK_FALSE(at::allclose(engine.forward(batch, rlcore::ForwardOptions{}).log_prob, own_log_prob));
  // Packed micro-batches (the default) route only real tokens: padding records -1.
  const at::Tensor padding = batch.tensor("attention_mask").eq(0).view({3, 7, 1, 1});
  CHECK(at::equal(engine.take_routing(), forced.masked_fill(padding, -1)));

  engine.set_routing_replay(true, false);
  std::map<std::string, at::Tensor> before;
  engine.for_each_full_parameter([&](const std::string& name, const at::Tensor& full) { before[name] = full.clone(); });
  engine.train_step(batch, rlcore::ForwardOptions{}, pg_loss);
  engine.for_each_full_parameter([&](const std::string& name, const at::Tensor& full) {
    if (name.find(".experts.") == std::string::npos) return;
    const bool trained = name.find(".experts.0.") != std::string::npos || name.find(".experts.1.") != std::string::npos;
    INFO(name);
    CHECK(at::equal(full, before.at(name)) == !trained);
  });

  batch.set(rlcore::columns::kRoutedExperts, own.slice(2, 0, 1));
  CHECK_THROWS_WITH(engine.forward(batch, rlcore::ForwardOptions{}), Catch::Contains("2 sparse layers"));
  engine.set_routing_replay(false, false);
}

TEST_CASE("a dense model refuses routing replay, naming the key", "[fsdp][moe]") {
  TempDir dir;
  write_tiny_checkpoint(dir.path());
  FsdpEngine engine(FsdpOptions{}, context_for(dir));
  CHECK_THROWS_WITH(engine.set_routing_replay(true, false), Catch::Contains("router_replay") &&
                                                                Catch::Contains("llama") &&
                                                                Catch::Contains("not a mixture of experts"));
}
