// The fsdp engine in one process: 1-rank training equals a plain libtorch
// Transformer with torch::optim::AdamW; bf16 compute; lr schedules,
// micro-batch cutting, the options schema and checkpoint error messages.
#include "fsdp_engine_testing.h"

#include <map>

#include <torch/optim/adamw.h>

#include "fsdp_engine.h"
#include "fsdp_options.h"
#include "train-common/lr_schedule.h"
#include "train-common/micro_batches.h"
#include "rlcore/config_node.h"
#include "rlcore/error.h"
#include "rlcore/rl_functional.h"

using namespace fsdp_test;
using rlcore::train_fsdp::FsdpEngine;
using rlcore::train_fsdp::FsdpOptions;

namespace {

rlcore::Batch small_batch(int64_t vocab) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(5);
  at::Tensor ids = at::randint(1, vocab, {3, 7}, generator, at::kLong);
  at::Tensor mask = at::ones({3, 7}, at::kLong);
  mask[0][0] = 0;  // left-padded prompt
  mask[2][6] = 0;  // right-padded response
  ids = ids * mask;
  rlcore::Batch batch(3);
  batch.set("input_ids", ids);
  batch.set("attention_mask", mask);
  batch.set("responses", ids.slice(1, 4).clone());
  batch.set("response_mask", mask.slice(1, 4).to(at::kFloat));
  batch.set("advantages", at::randn({3, 3}, generator));
  return batch;
}

// The same quantities from an unsharded Transformer: log_softmax at position P + t - 1.
at::Tensor reference_log_prob(const rlcore::model::Transformer& model, const rlcore::Batch& batch, double temperature) {
  const at::Tensor logits = model.forward(batch.tensor("input_ids"), batch.tensor("attention_mask")) / temperature;
  const int64_t response = batch.tensor("responses").size(1);
  const int64_t prompt = batch.tensor("input_ids").size(1) - response;
  return at::log_softmax(logits.slice(1, prompt - 1, prompt - 1 + response), -1)
      .gather(-1, batch.tensor("responses").unsqueeze(-1))
      .squeeze(-1);
}

}  // namespace

TEST_CASE("1-rank fsdp equals a plain Transformer with torch AdamW and grad clipping", "[fsdp][reference]") {
  TempDir dir;
  write_tiny_checkpoint(dir.path());
  // Packed micro-batches (the default) and padded ones.
  const bool packed = GENERATE(true, false);
  INFO("use_remove_padding " << packed);
  FsdpOptions options;
  options.use_remove_padding = packed;
  options.optim.lr = 3e-2;
  options.optim.weight_decay = 0.1;
  options.grad_clip = 0.05;  // small enough to clip every step
  FsdpEngine engine(options, context_for(dir));

  const auto config = tiny_config();
  rlcore::model::Transformer reference(config);
  {
    rlcore::SafetensorsCheckpoint checkpoint(dir.path());
    rlcore::NamedTensors tensors;
    for (const auto& name : checkpoint.names()) tensors.emplace_back(name, checkpoint.load(name));
    reference.load(tensors);
  }
  reference.set_requires_grad(true);
  std::vector<at::Tensor> params;
  for (const auto& entry : reference.named_parameters()) params.push_back(entry.second);
  torch::optim::AdamW adamw(params, torch::optim::AdamWOptions(3e-2).weight_decay(0.1));

  const rlcore::Batch batch = small_batch(config.vocab_size);
  rlcore::ForwardOptions forward;
  forward.temperature = 0.7;
  forward.entropy = true;
  {
    at::NoGradGuard no_grad;
    const rlcore::ModelOutput out = engine.forward(batch, forward);
    const at::Tensor real = batch.tensor("response_mask");
    CHECK(((out.log_prob - reference_log_prob(reference, batch, 0.7)) * real).abs().max().item<double>() < 1e-5);
    // Packed, the response's padding has no prediction: 0 there, as verl pads its outputs back.
    if (packed) CHECK((out.log_prob * (1 - real)).abs().max().item<double>() == 0);
    REQUIRE(out.entropy.defined());
    CHECK(out.entropy.sizes() == out.log_prob.sizes());
  }
  forward.micro_batching.micro_batch_size = 2;
  for (int step = 0; step < 2; ++step) {
    const auto metrics = engine.train_step(batch, forward, pg_loss).metrics;
    adamw.zero_grad();
    const at::Tensor logp = reference_log_prob(reference, batch, 0.7);
    const at::Tensor mask = batch.tensor("response_mask");
    const at::Tensor loss = -(logp * batch.tensor("advantages") * mask).sum() / mask.sum();
    loss.backward();
    // torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6) when that is below 1.
    double squares = 0;
    for (const auto& p : params) squares += p.grad().to(at::kDouble).pow(2).sum().item<double>();
    const double norm = std::sqrt(squares);
    for (auto& p : params) p.mutable_grad().mul_(std::min(1.0, 0.05 / (norm + 1e-6)));
    adamw.step();
    INFO("step " << step);
    CHECK(metrics.at("grad_norm") == Approx(norm).epsilon(1e-4));
    CHECK(norm > 0.05);
    CHECK(metrics.at("lr") == 3e-2);
  }
  at::NoGradGuard no_grad;
  double worst = 0;
  size_t i = 0;
  engine.for_each_full_parameter([&](const std::string& name, const at::Tensor& full) {
    REQUIRE(name == reference.named_parameters()[i].first);
    worst = std::max(worst, (full - params[i]).abs().max().item<double>());
    ++i;
  });
  CHECK(i == params.size());
  // Adam divides by sqrt(v): fp32 summation-order noise in tiny gradients shows at ~1e-5.
  CHECK(worst < 1e-4);
  CHECK(engine.step() == 2);
}

TEST_CASE("bf16 compute stays close to fp32 and keeps fp32 masters", "[fsdp][bf16]") {
  TempDir dir;
  write_tiny_checkpoint(dir.path());
  FsdpOptions fp32_options;
  FsdpOptions bf16_options;
  bf16_options.fsdp_config.dtype = "bfloat16";
  FsdpEngine fp32(fp32_options, context_for(dir));
  FsdpEngine bf16(bf16_options, context_for(dir));
  const rlcore::Batch batch = small_batch(tiny_config().vocab_size);
  const auto a = fp32.forward(batch, {}).log_prob;
  const auto b = bf16.forward(batch, {}).log_prob;
  CHECK(b.scalar_type() == at::kFloat);
  CHECK((a - b).abs().max().item<double>() < 0.1);
  CHECK((a - b).abs().max().item<double>() > 0);
  bf16.train_step(batch, {}, pg_loss);
  for (const auto& shard : bf16.parameter_shards()) CHECK(shard.local.scalar_type() == at::kFloat);
}

TEST_CASE("parameter_shards of a single rank are every full parameter in model order", "[fsdp][shards]") {
  TempDir dir;
  write_tiny_checkpoint(dir.path());
  FsdpEngine engine(FsdpOptions{}, context_for(dir));
  const auto specs = rlcore::model::parameter_specs(tiny_config());
  const auto shards = engine.parameter_shards();
  REQUIRE(shards.size() == specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    CHECK(shards[i].name == specs[i].name);
    CHECK(shards[i].shape == specs[i].shape);
    CHECK(shards[i].offset == 0);
    int64_t numel = 1;
    for (int64_t d : specs[i].shape) numel *= d;
    CHECK(shards[i].local.numel() == numel);
  }
}

// Over several ranks the units land in the caller's buffers: hybrid_swap_test's dp=2 runs.
TEST_CASE("one rank visits its own full parameters whatever buffers the caller offers, and checks them",
          "[fsdp][gather_into]") {
  const int64_t lora_rank = GENERATE(0, 2);
  INFO("lora_rank " << lora_rank);
  TempDir dir;
  write_tiny_checkpoint(dir.path());
  FsdpOptions options;
  options.lora.lora_rank = lora_rank;
  options.lora.target_modules = {"o_proj"};
  FsdpEngine engine(options, context_for(dir));
  rlcore::NamedTensors expected;
  engine.for_each_full_parameter(
      [&](const std::string& name, const at::Tensor& t) { expected.emplace_back(name, t.to(at::kBFloat16)); });
  const auto gathers = engine.full_parameter_gathers();
  REQUIRE(gathers.size() == static_cast<size_t>(tiny_config().num_hidden_layers + 2));  // embeddings, layers, head
  std::vector<at::Tensor> buffers;
  std::map<std::string, size_t> unit_of;
  for (const auto& gather : gathers) {
    REQUIRE(gather.names.size() == gather.offsets.size());
    for (const std::string& name : gather.names) unit_of[name] = buffers.size();
    buffers.push_back(at::full({gather.numel}, 7.0, at::kBFloat16));
  }
  size_t asked = 0;
  size_t visited = 0;
  engine.for_each_full_parameter_into(
      [&](size_t gather) {
        CHECK(gather == asked++);
        return gather == 0 ? at::Tensor() : buffers[gather];  // the embeddings: the engine's own memory
      },
      [&](const std::string& name, const at::Tensor& t) {
        REQUIRE(visited < expected.size());
        INFO(name);
        CHECK(name == expected[visited].first);
        CHECK(at::equal(t.to(at::kBFloat16), expected[visited].second));
        const size_t unit = unit_of.at(name);
        const char* begin = static_cast<const char*>(buffers[unit].data_ptr());
        const char* at = static_cast<const char*>(t.data_ptr());
        CHECK_FALSE((at >= begin && at < begin + buffers[unit].nbytes()));
        ++visited;
      });
  CHECK(asked == gathers.size());
  CHECK(visited == expected.size());
  CHECK_THAT(error_of<rlcore::ValueError>([&] {
               engine.for_each_full_parameter_into(
                   [&](size_t gather) { return at::empty({gathers[gather].numel - 1}, at::kBFloat16); },
                   [](const std::string&, const at::Tensor&) {});
             }),
             Catch::Contains("the destination of unit") &&
                 Catch::Contains("must be a contiguous 1-D floating tensor of " + std::to_string(gathers[0].numel)));
}

TEST_CASE("learning-rate schedules follow transformers' warmup, constant and cosine", "[fsdp][lr]") {
  const rlcore::train_common::LrSchedule constant(1.0, "constant", 4, 0, 0.0, 0.5);
  CHECK(constant.lr(0) == 0.0);
  CHECK(constant.lr(2) == 0.5);
  CHECK(constant.lr(4) == 1.0);
  CHECK(constant.lr(100) == 1.0);
  const rlcore::train_common::LrSchedule cosine(2.0, "cosine", 2, 12, 0.1, 0.5);
  CHECK(cosine.lr(1) == 1.0);
  CHECK(cosine.lr(2) == Approx(2.0));
  CHECK(cosine.lr(7) == Approx(2.0 * 0.55));  // halfway: (1 + min) / 2
  CHECK(cosine.lr(12) == Approx(0.2));
  CHECK_THROWS_AS(rlcore::train_common::LrSchedule(1.0, "cosine", 0, 0, 0.0, 0.5), rlcore::ConfigError);
}

TEST_CASE("micro-batches: fixed sizes and token-budget packing keep row order", "[fsdp][micro]") {
  at::Tensor mask = at::zeros({5, 10}, at::kLong);
  const int64_t lengths[] = {4, 4, 9, 2, 3};
  for (int64_t r = 0; r < 5; ++r) mask[r].slice(0, 0, lengths[r]).fill_(1);
  auto as_pairs = [](const std::vector<rlcore::train_common::RowRange>& ranges) {
    std::vector<std::pair<int64_t, int64_t>> out;
    for (const auto& r : ranges) out.emplace_back(r.begin, r.end);
    return out;
  };
  rlcore::MicroBatching fixed;
  fixed.micro_batch_size = 2;
  CHECK(as_pairs(rlcore::train_common::micro_batch_rows(mask, fixed)) ==
        std::vector<std::pair<int64_t, int64_t>>{{0, 2}, {2, 4}, {4, 5}});
  CHECK(as_pairs(rlcore::train_common::micro_batch_rows(mask, {})) == std::vector<std::pair<int64_t, int64_t>>{{0, 5}});
  rlcore::MicroBatching dynamic;
  dynamic.dynamic = true;
  dynamic.max_token_len = 8;  // the 9-token row exceeds it and goes alone
  CHECK(as_pairs(rlcore::train_common::micro_batch_rows(mask, dynamic)) ==
        std::vector<std::pair<int64_t, int64_t>>{{0, 2}, {2, 3}, {3, 5}});
  dynamic.max_token_len = 0;
  CHECK_THROWS_AS(rlcore::train_common::micro_batch_rows(mask, dynamic), rlcore::ValueError);
}

TEST_CASE("packed micro-batches: real tokens back to back, positions restarting, indices back to the rows",
          "[fsdp][micro][packing]") {
  // Prompt 3 (left-padded), response 3 (right-padded); row 2 holds padding only.
  rlcore::Batch batch(3);
  batch.set("input_ids",
            at::tensor({0, 11, 12, 13, 14, 0, 21, 22, 23, 24, 25, 26, 0, 0, 0, 0, 0, 0}, at::kLong).view({3, 6}));
  batch.set("attention_mask",
            at::tensor({0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0}, at::kLong).view({3, 6}));
  batch.set("responses", batch.tensor("input_ids").slice(1, 3).clone());
  const rlcore::model::Transformer model(tiny_config());
  const auto micro = rlcore::train_common::make_micro_batches(batch, {}, model, at::kCPU, "test", {true});
  REQUIRE(micro.size() == 1);
  const auto& m = micro.front();
  REQUIRE(m.packing.has_value());
  CHECK(m.packing->lengths == std::vector<int64_t>{4, 6});
  CHECK(m.input_ids.equal(at::tensor({11, 12, 13, 14, 21, 22, 23, 24, 25, 26}, at::kLong).unsqueeze(0)));
  CHECK(m.position_ids.equal(at::tensor({0, 1, 2, 3, 0, 1, 2, 3, 4, 5}, at::kLong).unsqueeze(0)));
  CHECK(m.ctx.segment_offsets == std::vector<int64_t>{0, 4, 10});
  // Row 0's responses 13, 14 are predicted from 12, 13 (slots 1, 2); row 1's 24, 25, 26 from slots 6, 7, 8.
  CHECK(m.packing->predictor_index.equal(at::tensor({1, 2, 6, 7, 8}, at::kLong)));
  CHECK(m.packing->response_index.equal(at::tensor({0, 1, 3, 4, 5}, at::kLong)));
  CHECK(rlcore::train_common::response_tokens(m).equal(at::tensor({13, 14, 24, 25, 26}, at::kLong)));
  CHECK(rlcore::train_common::response_rows(m, at::tensor({1.0F, 2.0F, 3.0F, 4.0F, 5.0F}))
            .equal(at::tensor({1.0F, 2.0F, 0.0F, 3.0F, 4.0F, 5.0F, 0.0F, 0.0F, 0.0F}).view({3, 3})));
}

TEST_CASE("ulysses_sequence_parallel_size refuses, by key, a layout it cannot split", "[fsdp][sp]") {
  using rlcore::train_fsdp::make_ulysses;
  const auto config = tiny_config();
  CHECK(make_ulysses(1, false, nullptr, config) == nullptr);
  CHECK_THAT(error_of<rlcore::ConfigError>([&] { make_ulysses(2, false, nullptr, config); }),
             Catch::Contains("ulysses_sequence_parallel_size = 2") && Catch::Contains("needs use_remove_padding"));
  CHECK_THAT(error_of<rlcore::ConfigError>([&] { make_ulysses(2, true, nullptr, config); }),
             Catch::Contains("'sp' mesh dimension") && Catch::Contains("has none"));
}

TEST_CASE("the options schema has verl's keys and defaults and rejects unknown keys by path", "[fsdp][options]") {
  const auto schema = rlcore::train_fsdp::fsdp_options_schema();
  const FsdpOptions defaults = schema.parse(rlcore::ConfigNode());
  CHECK(defaults.use_remove_padding);
  CHECK(defaults.ulysses_sequence_parallel_size == 1);
  CHECK(defaults.optim.lr == 1e-6);
  CHECK(defaults.optim.betas == std::vector<double>{0.9, 0.999});
  CHECK(defaults.optim.weight_decay == 0.01);
  CHECK(defaults.optim.lr_warmup_steps == -1);
  CHECK(defaults.grad_clip == 1.0);
  CHECK(defaults.fsdp_config.dtype.empty());  // unset: mixed_precision.param_dtype, else float32
  CHECK(defaults.fsdp_config.mixed_precision.reduce_dtype == "float32");
  const FsdpOptions set = schema.parse(rlcore::ConfigNode::parse(
      "optim: {lr: 1.0e-5, warmup_style: cosine, min_lr_ratio: 0.1}\nfsdp_config: {dtype: bfloat16}\ngrad_clip: 0.5",
      "test"));
  CHECK(set.optim.lr == 1e-5);
  CHECK(rlcore::train_common::scheduler_type(set.optim) == "cosine");
  CHECK(set.fsdp_config.dtype == "bfloat16");
  CHECK_THAT(error_of<rlcore::ConfigError>([&] { schema.parse(rlcore::ConfigNode::parse("optim: {lrr: 1}", "test")); }),
             Catch::Contains("optim.lrr"));
  CHECK_THROWS_AS(schema.parse(rlcore::ConfigNode::parse("fsdp_config: {dtype: int8}", "test")), rlcore::ConfigError);
  CHECK(rlcore::train_common::scheduler_type(defaults.optim) == "constant");
  const FsdpOptions bad = schema.parse(rlcore::ConfigNode::parse("optim: {warmup_style: linear}", "test"));
  CHECK_THAT(error_of<rlcore::ConfigError>([&] { rlcore::train_common::scheduler_type(bad.optim); }),
             Catch::Contains("optim.warmup_style"));
}

TEST_CASE("a missing or corrupt checkpoint file is an error naming the file", "[fsdp][checkpoint]") {
  TempDir dir;
  write_tiny_checkpoint(dir.path());
  FsdpEngine engine(FsdpOptions{}, context_for(dir));
  TempDir ckpt;
  CHECK_THAT(error_of<rlcore::IoError>([&] { engine.load_checkpoint(ckpt.str()); }),
             Catch::Contains("fsdp_checkpoint.json"));
  engine.save_checkpoint(ckpt.str());
  engine.load_checkpoint(ckpt.str());  // a good one loads
  std::ofstream(ckpt.path() / "rank_0.safetensors", std::ios::trunc) << "garbage";
  CHECK_THAT(error_of<rlcore::Error>([&] { engine.load_checkpoint(ckpt.str()); }),
             Catch::Contains("rank_0.safetensors"));
  fs::remove(ckpt.path() / "rank_0.safetensors");
  CHECK_THAT(error_of<rlcore::IoError>([&] { engine.load_checkpoint(ckpt.str()); }),
             Catch::Contains("rank_0.safetensors"));
  std::ofstream(ckpt.path() / "fsdp_checkpoint.json", std::ios::trunc) << "{not json";
  CHECK_THAT(error_of<rlcore::FormatError>([&] { engine.load_checkpoint(ckpt.str()); }),
             Catch::Contains("fsdp_checkpoint.json"));
}
