// fsdp mixed precision (verl's fsdp_config.mixed_precision): key resolution and
// the dtype alias, bf16 compute against fp32 (forward and one optimizer step)
// with fp32 masters, and the reduce dtype honoured over 2 ranks.
#include "fsdp_engine_testing.h"

#include <torch/version.h>

#include "fsdp_engine.h"
#include "fsdp_options.h"
#include "fsdp_reduce_input.h"
#include "mixed_precision.h"
#include "rlcore/config_node.h"
#include "rlcore/error.h"
#include "../../common/train_batch.h"

using namespace fsdp_test;
using rlcore::train_fsdp::FsdpEngine;
using rlcore::train_fsdp::FsdpOptions;

namespace {

// bf16 keeps 8 significant bits (relative rounding <= 2^-9 per op). On the tiny
// model (2 layers, initializer_range 0.2) the log-probs (magnitude ~4) moved by
// 0.027 at most and 0.013 on average over response tokens (libtorch 1.13, CPU):
// the tolerances leave ~3x room.
constexpr double kBf16LogProbMaxDiff = 0.08;
constexpr double kBf16LogProbMeanDiff = 0.04;

rlcore::train_fsdp::MixedPrecision resolve(const std::string& yaml) {
  const FsdpOptions options = rlcore::train_fsdp::fsdp_options_schema().parse(rlcore::ConfigNode::parse(yaml, "test"));
  return rlcore::train_fsdp::resolve_mixed_precision(options.fsdp_config);
}

FsdpOptions with_param_dtype(const std::string& dtype) {
  FsdpOptions options;
  options.optim.lr = 1e-2;
  options.fsdp_config.mixed_precision.param_dtype = dtype;
  return options;
}

at::Tensor flat(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> parts;
  for (const auto& t : tensors) parts.push_back(t.reshape(-1).to(at::kDouble));
  return at::cat(parts);
}

}  // namespace

TEST_CASE("mixed_precision keys: verl's names, dtype as the alias of param_dtype", "[fsdp][mixed]") {
  const auto defaults = resolve("{}");
  CHECK(defaults.param == at::kFloat);
  CHECK(defaults.reduce == at::kFloat);
  CHECK(resolve("fsdp_config: {mixed_precision: {param_dtype: bf16}}").param == at::kBFloat16);
  CHECK(resolve("fsdp_config: {dtype: bfloat16}").param == at::kBFloat16);
  CHECK(resolve("fsdp_config: {dtype: bfloat16, mixed_precision: {param_dtype: bf16}}").param == at::kBFloat16);
  CHECK(resolve("fsdp_config: {dtype: fp16}").param == at::kHalf);
  const auto verl =
      resolve("fsdp_config: {mixed_precision: {param_dtype: bf16, reduce_dtype: fp32, buffer_dtype: fp32}}");
  CHECK(verl.param == at::kBFloat16);
  CHECK(verl.reduce == at::kFloat);
  CHECK(resolve("fsdp_config: {mixed_precision: {reduce_dtype: bf16}}").reduce == at::kBFloat16);

  const std::string conflict = error_of<rlcore::ConfigError>(
      [] { resolve("fsdp_config: {dtype: float32, mixed_precision: {param_dtype: bf16}}"); });
  CHECK_THAT(conflict, Catch::Contains("fsdp_config.dtype") && Catch::Contains("mixed_precision.param_dtype"));
  CHECK_THAT(error_of<rlcore::ConfigError>([] { resolve("fsdp_config: {mixed_precision: {buffer_dtype: bf16}}"); }),
             Catch::Contains("buffer_dtype"));
  CHECK_THAT(error_of<rlcore::ConfigError>([] { resolve("fsdp_config: {mixed_precision: {param_dtype: int8}}"); }),
             Catch::Contains("param_dtype"));
  CHECK_THAT(error_of<rlcore::ConfigError>([] { resolve("fsdp_config: {mixed_precision: {reduce: fp32}}"); }),
             Catch::Contains("mixed_precision.reduce"));
  // A struct filled in code skips the schema: resolution still refuses a 16-bit buffer dtype.
  rlcore::train_fsdp::FsdpConfigOptions direct;
  direct.mixed_precision.buffer_dtype = "bf16";
  CHECK_THROWS_AS(rlcore::train_fsdp::resolve_mixed_precision(direct), rlcore::ConfigError);
}

TEST_CASE("bf16 mixed precision: log-probs and one AdamW step close to fp32, masters fp32", "[fsdp][mixed]") {
  TempDir dir;
  write_tiny_checkpoint(dir.path());
  FsdpEngine fp32(with_param_dtype("fp32"), context_for(dir));
  FsdpEngine bf16(with_param_dtype("bf16"), context_for(dir));
  const rlcore::Batch batch = rlcore::testing::train_batch(tiny_config().vocab_size);
  const at::Tensor mask = batch.tensor("response_mask");

  const at::Tensor a = fp32.forward(batch, {}).log_prob;
  const at::Tensor b = bf16.forward(batch, {}).log_prob;
  CHECK(b.scalar_type() == at::kFloat);
  const at::Tensor diff = ((a - b) * mask).abs();
  INFO("bf16 vs fp32 log-prob: max " << diff.max().item<double>() << ", mean "
                                     << (diff.sum() / mask.sum()).item<double>());
  CHECK(diff.max().item<double>() < kBf16LogProbMaxDiff);
  CHECK((diff.sum() / mask.sum()).item<double>() < kBf16LogProbMeanDiff);
  CHECK(diff.max().item<double>() > 0);  // bf16 really ran

  const std::vector<at::Tensor> before = full_parameters(fp32);
  const auto m32 = fp32.train_step(batch, {}, rlcore::testing::train_loss).metrics;
  const auto m16 = bf16.train_step(batch, {}, rlcore::testing::train_loss).metrics;
  // The gradient itself: its global norm within 2% (bf16 rounding of activations and weights).
  CHECK(m16.at("grad_norm") == Approx(m32.at("grad_norm")).epsilon(0.02));
  CHECK(m16.at("loss") == Approx(m32.at("loss")).epsilon(0.02).margin(1e-3));
  // AdamW's first step is ~lr * sign(grad): the two updates point the same way.
  const at::Tensor start = flat(before);
  const at::Tensor u32 = flat(full_parameters(fp32)) - start;
  const at::Tensor u16 = flat(full_parameters(bf16)) - start;
  const double cosine = (u32 * u16).sum().item<double>() / (u32.norm() * u16.norm()).item<double>();
  INFO("cosine of the bf16 and fp32 updates " << cosine);
  CHECK(cosine > 0.95);
  CHECK((u16 - u32).abs().max().item<double>() <= 2.0 * 1e-2 * 1.001);

  // Masters, gradients and AdamW state stay fp32: 4 bytes each per parameter, as with fp32 compute.
  for (const auto& shard : bf16.parameter_shards()) CHECK(shard.local.scalar_type() == at::kFloat);
  CHECK(bf16.memory().param_bytes == fp32.memory().param_bytes);
  CHECK(bf16.memory().grad_bytes == fp32.memory().grad_bytes);
  CHECK(bf16.memory().optimizer_bytes == fp32.memory().optimizer_bytes);
}

TEST_CASE("fp16 compute: refused naming the key on libtorch 1.x's CPU, close to fp32 on libtorch 2.x",
          "[fsdp][mixed]") {
  // fp16 matmul on the CPU came with libtorch 2.1 ("addmm_impl_cpu_" not implemented
  // for 'Half' before). The two flavours: Debian's 1.13 refuses it, the wheel's 2.11 has it.
  constexpr bool kCpuHalfMatmul = TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1);
  TempDir dir;
  write_tiny_checkpoint(dir.path());
  if (!kCpuHalfMatmul) {
    CHECK_THROWS_WITH(FsdpEngine(with_param_dtype("fp16"), context_for(dir)),
                      Catch::Contains("mixed_precision.param_dtype") && Catch::Contains("Half") &&
                          Catch::Contains("not available on cpu"));
    return;
  }
  FsdpEngine fp16(with_param_dtype("fp16"), context_for(dir));
  FsdpEngine fp32(with_param_dtype("fp32"), context_for(dir));
  const rlcore::Batch batch = rlcore::testing::train_batch(tiny_config().vocab_size);
  const at::Tensor diff =
      ((fp32.forward(batch, {}).log_prob - fp16.forward(batch, {}).log_prob) * batch.tensor("response_mask")).abs();
  CHECK(diff.max().item<double>() < kBf16LogProbMaxDiff);  // fp16 has 3 more bits than bf16
  CHECK(diff.max().item<double>() > 0);                    // fp16 really ran
}

TEST_CASE("the reduce dtype is honoured over 2 ranks", "[fsdp][mixed][parallel]") {
  TempDir model;
  write_tiny_checkpoint(model.path());
  TempDir work;

  SECTION("DpComm::all_reduce_mean: fp32 exact, bf16 rounded before and after the sum") {
    run_ranks(2, work.path() / "reduce", {"--model", model.str(), "--scenario", "reduce", "--steps", "0"});
    const auto rank0 = load_tensors(work.path() / "reduce" / "reduce_0.safetensors");
    const auto rank1 = load_tensors(work.path() / "reduce" / "reduce_1.safetensors");
    const at::Tensor x0 = rlcore::testing::reduce_input(0);
    const at::Tensor x1 = rlcore::testing::reduce_input(1);
    CHECK(at::equal(rank0[0].second, x0));
    const at::Tensor mean32 = (x0 + x1) / 2;
    const at::Tensor mean16 =
        (x0.to(at::kBFloat16).to(at::kFloat) + x1.to(at::kBFloat16).to(at::kFloat)).to(at::kBFloat16).to(at::kFloat) /
        2;
    for (const auto* rank : {&rank0, &rank1}) {
      REQUIRE((*rank)[1].first == "float32");
      REQUIRE((*rank)[2].first == "bfloat16");
      CHECK(at::equal((*rank)[1].second, mean32));
      CHECK(at::equal((*rank)[2].second, mean16));
    }
    CHECK_FALSE(at::equal(mean16, mean32));  // the inputs were chosen so that bf16 shows
  }

  SECTION("bf16 shards gathered over 2 ranks (as fp16 bits over Gloo) give the 1-rank bf16 log-probs") {
    const std::vector<std::string> args = {"--model", model.str(), "--scenario", "train",
                                           "--steps", "0",         "--dtype",    "bfloat16"};
    run_ranks(1, work.path() / "gather1", args);
    run_ranks(2, work.path() / "gather2", args);
    const at::Tensor one = gathered_outputs(work.path() / "gather1", 1);
    const at::Tensor two = gathered_outputs(work.path() / "gather2", 2);
    REQUIRE(one.sizes() == two.sizes());
    // Same bf16 weights; only the rows per matmul differ. A wrong gather would move log-probs by O(1).
    CHECK((one - two).abs().max().item<double>() < 1e-2);
  }

  SECTION("training: fp32 reduce matches one rank, bf16 reduce moves the gradient by bf16 rounding") {
    // fp32 compute, so that the gradients reaching the reduction are not bf16 values already.
    const std::vector<std::string> common = {"--model", model.str(), "--scenario", "train",
                                             "--steps", "1",         "--dtype",    "float32"};
    auto with = [&](std::vector<std::string> extra) {
      extra.insert(extra.begin(), common.begin(), common.end());
      return extra;
    };
    const auto one = run_ranks(1, work.path() / "one", with({"--reduce-dtype", "float32"}));
    const auto fp32 = run_ranks(2, work.path() / "fp32", with({"--reduce-dtype", "float32"}));
    const auto bf16 = run_ranks(2, work.path() / "bf16", with({"--reduce-dtype", "bfloat16"}));
    const double norm_one = one[0]["metrics"][0]["grad_norm"].get<double>();
    const double norm32 = fp32[0]["metrics"][0]["grad_norm"].get<double>();
    const double norm16 = bf16[0]["metrics"][0]["grad_norm"].get<double>();
    INFO("grad norms: 1 rank " << norm_one << ", 2 ranks fp32 reduce " << norm32 << ", bf16 reduce " << norm16);
    CHECK(norm32 == Approx(norm_one).epsilon(1e-5));
    CHECK(norm16 != norm32);
    CHECK(norm16 == Approx(norm32).epsilon(1e-2));
    CHECK(bf16[1]["metrics"][0]["grad_norm"].get<double>() == norm16);  // every rank sees the same gradient
  }
}
