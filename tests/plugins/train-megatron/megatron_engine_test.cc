// The `megatron` train engine over real processes (gloo): tp=2, pp=2,
// tp=2 x pp=2 and dp=2 x tp=2 give the same log-probs, losses, gradient norms
// and updated weights as one process; one process equals the fsdp engine
// (itself tested against torch AdamW), for a dense model and for DeepSeek-V3
// (whose tp=2, pp=2 and ep=2 runs equal one process too); checkpoints load into another layout;
// bad layouts are errors that name the key.
#include "../train-fsdp/fsdp_testing.h"

#include <map>

#include "fsdp_engine.h"
#include "megatron_engine.h"
#include "../../common/train_batch.h"
#include "rlcore/error.h"
#include "rlcore/model/megatron_layout.h"
#include "../../common/test_paths.h"

using namespace fsdp_test;
namespace mg = rlcore::model::megatron;

namespace {

// qwen2 (q/k/v biases), tied embeddings (the pipeline's embedding group), 4 layers for pp = 2.
rlcore::model::ModelConfig test_config() {
  rlcore::model::ModelConfig c = tiny_config();
  c.model_type = "qwen2";
  c.qkv_bias = true;
  c.num_hidden_layers = 4;
  c.validate("megatron test config");
  return c;
}

std::string megatron_runner() { return rlcore_test::built_executable("megatron_rank_runner"); }

// A tiny Qwen3-MoE: 4 experts of width 16, 2 per token, 3 layers of which
// layer 1 is dense (mlp_only_layers), so pp = 2 has a sparse layer per stage.
rlcore::model::ModelConfig moe_config() {
  rlcore::model::ModelConfig c = rlcore::model::preset("qwen3_moe", "tiny", 64);
  c.hidden_size = 32;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.intermediate_size = 64;
  c.num_hidden_layers = 3;
  c.num_experts = 4;
  c.num_experts_per_tok = 2;
  c.moe_intermediate_size = 16;
  c.mlp_only_layers = {1};
  c.validate("megatron moe test config");
  return c;
}

// A tiny DeepSeek-V3 (the preset's proportions at width 32): latent attention
// with a low-rank query, 8 experts in 4 groups (2 searched), 2 per token, a
// shared expert, layer 0 dense, yarn's attention scale.
rlcore::model::ModelConfig deepseek_config() {
  rlcore::model::ModelConfig c = rlcore::model::preset("deepseek_v3", "tiny", 64);
  c.hidden_size = 32;
  c.num_attention_heads = c.num_key_value_heads = 4;
  c.head_dim = 4;
  c.qk_nope_head_dim = c.v_head_dim = 8;
  c.kv_lora_rank = 16;
  c.q_lora_rank = 24;
  c.intermediate_size = 64;
  c.moe_intermediate_size = 16;
  c.num_hidden_layers = 3;
  c.rope_scaling.rope_type = "yarn";
  c.rope_scaling.factor = 4.0;
  c.rope_scaling.original_max_position_embeddings = 512;
  c.rope_scaling.mscale_all_dim = 1.0;
  c.validate("megatron deepseek test config");
  return c;
}

// write_tiny_checkpoint with a non-zero score-correction bias (HF initialises it
// to 0), so the bias changes which experts are chosen.
void write_deepseek_checkpoint(const fs::path& dir, const rlcore::model::ModelConfig& config) {
  rlcore::model::Transformer model(config, rlcore::model::ModelHead::kCausalLm, at::TensorOptions().dtype(at::kFloat));
  model.init_random(7);
  at::manual_seed(11);
  for (const auto& [name, tensor] : model.named_parameters()) {
    if (name.find("e_score_correction_bias") != std::string::npos) tensor.copy_(at::randn_like(tensor) * 0.05);
  }
  rlcore::write_hf_checkpoint(dir, config, model.named_parameters(), rlcore::builtin_tokenizer_files());
}

struct Layout {
  int64_t tp, pp, world, ep = 1;
};

struct Run {
  fs::path out;
  std::vector<nlohmann::json> ranks;
  Layout layout;
};

struct Suite {
  explicit Suite(const rlcore::model::ModelConfig& config = test_config()) : config(config) {
    if (config.model_type == "deepseek_v3") {
      write_deepseek_checkpoint(model.path(), config);
    } else {
      write_tiny_checkpoint(model.path(), config);
    }
  }
  Run run(const Layout& layout, std::vector<std::string> extra = {}) {
    Run result;
    result.layout = layout;
    result.out = work.path() / ("run_" + std::to_string(counter++));
    std::vector<std::string> args = {"--model", model.str(),
                                     "--tp",    std::to_string(layout.tp),
                                     "--pp",    std::to_string(layout.pp),
                                     "--ep",    std::to_string(layout.ep)};
    args.insert(args.end(), extra.begin(), extra.end());
    result.ranks = run_ranks(layout.world, result.out, args, std::chrono::seconds(180), megatron_runner());
    return result;
  }
  rlcore::model::ModelConfig config;
  TempDir model;
  TempDir work;
  int counter = 0;
};

Suite& suite() {
  static Suite instance;
  return instance;
}

Suite& moe_suite() {
  static Suite instance(moe_config());
  return instance;
}

Suite& deepseek_suite() {
  static Suite instance(deepseek_config());
  return instance;
}

std::map<std::string, at::Tensor> by_name(const rlcore::NamedTensors& list) {
  return std::map<std::string, at::Tensor>(list.begin(), list.end());
}

// The run's output `name` for the whole batch: dp ranks' rows in order (from each replica's rank 0).
at::Tensor whole_batch(const Run& run, const std::string& name) {
  const int64_t replica = run.layout.tp * run.layout.pp;
  std::vector<at::Tensor> parts;
  for (int64_t rank = 0; rank < run.layout.world; rank += replica) {
    parts.push_back(by_name(load_tensors(run.out / ("outputs_" + std::to_string(rank) + ".safetensors"))).at(name));
  }
  return at::cat(parts, 0);
}

double max_diff(const at::Tensor& a, const at::Tensor& b) {
  REQUIRE(a.sizes() == b.sizes());
  return (a - b).abs().max().item<double>();
}

// Before any update outputs agree to 2e-5; after AdamW steps (which turn
// reduction-order noise in small gradients into full-size steps) to 1e-4.
constexpr double kBeforeTolerance = 2e-5;
constexpr double kAfterTolerance = 1e-4;

// A key bias adds the same amount to every score of a query, which softmax ignores: its
// gradient is zero up to rounding, and Adam turns that rounding noise into steps of up to
// lr (1e-2) whose size depends on the kernels' summation order (libtorch 1.13 and 2.x
// differ here). So parameters holding a key bias (HF k_proj.bias, Megatron's fused
// linear_qkv.bias) get 10x the tolerance.
double after_tolerance(const std::string& name) {
  const bool key_bias =
      name.find("k_proj.bias") != std::string::npos || name.find("linear_qkv.bias") != std::string::npos;
  return key_bias ? 10 * kAfterTolerance : kAfterTolerance;
}

void require_same_training(const Run& run, const Run& reference) {
  CHECK(max_diff(whole_batch(run, "log_prob_before"), whole_batch(reference, "log_prob_before")) < kBeforeTolerance);
  CHECK(max_diff(whole_batch(run, "entropy_before"), whole_batch(reference, "entropy_before")) < kBeforeTolerance);
  CHECK(max_diff(whole_batch(run, "log_prob_after"), whole_batch(reference, "log_prob_after")) < kAfterTolerance);
  // Every rank of every replica reports the same step metrics as one process.
  for (const nlohmann::json& rank : run.ranks) {
    INFO("rank " << rank["rank"]);
    REQUIRE(rank["metrics"].size() == reference.ranks[0]["metrics"].size());
    for (size_t step = 0; step < rank["metrics"].size(); ++step) {
      std::vector<std::string> keys = {"loss", "grad_norm", "entropy"};
      if (reference.ranks[0]["metrics"][step].contains("moe_aux_loss"))
        keys.insert(keys.end(), {"moe_aux_loss", "moe_z_loss"});
      for (const std::string& key : keys) {
        INFO("step " << step << " " << key);
        // The test loss is scaled by dp_size (gradients are averaged over dp), and so is its metric.
        const double dp = static_cast<double>(run.layout.world / (run.layout.tp * run.layout.pp));
        const double expected = reference.ranks[0]["metrics"][step][key].get<double>() * (key == "loss" ? dp : 1.0);
        const double tolerance = step == 0 ? kBeforeTolerance : kAfterTolerance;
        CHECK(std::abs(rank["metrics"][step][key].get<double>() - expected) <=
              tolerance * std::max(1.0, std::abs(expected)));
      }
    }
  }
  const auto params = by_name(load_tensors(run.out / "params.safetensors"));
  const auto expected = by_name(load_tensors(reference.out / "params.safetensors"));
  REQUIRE(params.size() == expected.size());
  for (const auto& [name, tensor] : expected) {
    INFO(name);
    CHECK(max_diff(params.at(name), tensor) < after_tolerance(name));
  }
}

}  // namespace

TEST_CASE("megatron tp=2, pp=2, tp=2 x pp=2 and dp=2 x tp=2 train exactly like one process", "[megatron]") {
  static const Run reference = suite().run({1, 1, 1}, {"--micro", "2"});
  const Layout layout = GENERATE(Layout{2, 1, 2}, Layout{1, 2, 2}, Layout{2, 2, 4}, Layout{2, 1, 4});
  INFO("tp " << layout.tp << " pp " << layout.pp << " world " << layout.world);
  require_same_training(suite().run(layout, {"--micro", "2"}), reference);
}

TEST_CASE("megatron packed micro-batches train like padded ones, one process and tp=2 x pp=2, dense and MoE",
          "[megatron][packing]") {
  const bool moe = GENERATE(false, true);
  Suite& s = moe ? moe_suite() : suite();
  static std::map<bool, Run> padded_runs;  // once per model, not per layout
  if (padded_runs.count(moe) == 0)
    padded_runs.emplace(moe, s.run({1, 1, 1}, {"--micro", "2", "--remove-padding", "0"}));
  const Run& padded = padded_runs.at(moe);
  const Layout layout = GENERATE(Layout{1, 1, 1}, Layout{2, 2, 4});
  INFO("moe " << moe << " tp " << layout.tp << " pp " << layout.pp);
  const Run packed = s.run(layout, {"--micro", "2"});
  // The responses' padding differs by design (packed: 0).
  const at::Tensor real = rlcore::testing::train_batch(s.config.vocab_size).tensor("response_mask");
  for (const char* name : {"log_prob_before", "entropy_before"})
    CHECK(max_diff(whole_batch(packed, name) * real, whole_batch(padded, name) * real) < kBeforeTolerance);
  CHECK(max_diff(whole_batch(packed, "log_prob_after") * real, whole_batch(padded, "log_prob_after") * real) <
        kAfterTolerance);
  CHECK(max_diff(whole_batch(packed, "log_prob_before") * (1 - real), at::zeros_like(real)) == 0);
  for (size_t step = 0; step < 2; ++step) {
    INFO("step " << step);
    const double expected = padded.ranks[0]["metrics"][step]["grad_norm"].get<double>();
    CHECK(std::abs(packed.ranks[0]["metrics"][step]["grad_norm"].get<double>() - expected) <
          (step == 0 ? kBeforeTolerance : kAfterTolerance));
  }
  const auto params = by_name(load_tensors(packed.out / "params.safetensors"));
  for (const auto& [name, tensor] : by_name(load_tensors(padded.out / "params.safetensors"))) {
    INFO(name);
    CHECK(max_diff(params.at(name), tensor) < after_tolerance(name));
  }
}

// Megatron in one process (the suite's run `run`) against the fsdp engine on the
// same checkpoint, batch, loss and steps: outputs, metrics, updated weights.
void require_equal_to_fsdp(Suite& suite, const Run& run) {
  rlcore::ComponentContext context;
  context.model_path = suite.model.str();
  context.total_training_steps = 10;
  rlcore::train_fsdp::FsdpOptions options;
  options.optim.lr = 1e-2;
  options.optim.lr_warmup_steps = 1;
  options.optim.lr_scheduler_type = "cosine";
  options.optim.min_lr_ratio = 0.1;
  rlcore::train_fsdp::FsdpEngine fsdp(options, context);
  // The runner's batch, loss and steps (megatron_rank_runner.cc), run here through fsdp.
  const rlcore::model::ModelConfig& config = suite.config;
  const rlcore::Batch batch = rlcore::testing::train_batch(config.vocab_size);
  rlcore::ForwardOptions forward;
  forward.entropy = true;
  CHECK(max_diff(fsdp.forward(batch, forward).log_prob, whole_batch(run, "log_prob_before")) < kBeforeTolerance);
  for (size_t step = 0; step < 2; ++step) {
    const auto metrics = fsdp.train_step(batch, forward, rlcore::testing::train_loss).metrics;
    INFO("step " << step);
    const double tolerance = step == 0 ? kBeforeTolerance : kAfterTolerance;
    CHECK(std::abs(metrics.at("grad_norm") - run.ranks[0]["metrics"][step]["grad_norm"].get<double>()) < tolerance);
    CHECK(std::abs(metrics.at("loss") - run.ranks[0]["metrics"][step]["loss"].get<double>()) < tolerance);
  }
  const auto megatron = by_name(load_tensors(run.out / "params.safetensors"));
  int64_t compared = 0;
  fsdp.for_each_full_parameter([&](const std::string& name, const at::Tensor& full) {
    INFO(name);
    CHECK(max_diff(mg::to_hf(config, name, megatron.at(mg::megatron_source(config, name))), full) <
          after_tolerance(name));
    ++compared;
  });
  CHECK(compared == static_cast<int64_t>(rlcore::model::parameter_specs(config).size()));
}

TEST_CASE("megatron in one process equals the fsdp engine: outputs, metrics, updated weights", "[megatron]") {
  require_equal_to_fsdp(suite(), suite().run({1, 1, 1}));
}

TEST_CASE("a megatron checkpoint saved at tp=2 resumes at tp=1 and at tp=2 x pp=2 exactly", "[megatron][checkpoint]") {
  const Run uninterrupted = suite().run({1, 1, 1}, {"--steps", "2"});
  const fs::path ckpt = suite().work.path() / "tp2_ckpt";
  suite().run({2, 1, 2}, {"--steps", "1", "--save", ckpt.string()});
  for (const Layout& layout : {Layout{1, 1, 1}, Layout{2, 2, 4}}) {
    INFO("resume at tp " << layout.tp << " pp " << layout.pp);
    const Run resumed = suite().run(layout, {"--steps", "1", "--load", ckpt.string()});
    CHECK(resumed.ranks[0]["step_at_start"].get<int64_t>() == 1);
    CHECK(max_diff(whole_batch(resumed, "log_prob_after"), whole_batch(uninterrupted, "log_prob_after")) <
          kAfterTolerance);
    CHECK(std::abs(resumed.ranks[0]["metrics"][0]["grad_norm"].get<double>() -
                   uninterrupted.ranks[0]["metrics"][1]["grad_norm"].get<double>()) < kAfterTolerance);
  }
  // A checkpoint that is not one names the missing file.
  rlcore::ComponentContext context;
  context.model_path = suite().model.str();
  rlcore::train_megatron::MegatronEngine engine({}, context);
  CHECK_THAT(error_of<rlcore::IoError>([&] { engine.load_checkpoint((suite().work.path() / "nothing").string()); }),
             Catch::Contains("megatron_checkpoint.json"));
}

TEST_CASE("megatron layouts the workers cannot hold are errors naming the key", "[megatron][config]") {
  rlcore::ComponentContext context;
  context.model_path = suite().model.str();
  rlcore::train_megatron::MegatronOptions options;
  options.megatron.tensor_model_parallel_size = 2;  // one process: no "tp" group of size 2
  CHECK_THAT(error_of<rlcore::ConfigError>([&] { rlcore::train_megatron::MegatronEngine(options, context); }),
             Catch::Contains("megatron.tensor_model_parallel_size = 2") && Catch::Contains("'tp' process group"));
  options.megatron.tensor_model_parallel_size = 1;
  options.megatron.pipeline_model_parallel_size = 9;
  CHECK_THAT(error_of<rlcore::ConfigError>([&] { rlcore::train_megatron::MegatronEngine(options, context); }),
             Catch::Contains("pipeline_model_parallel_size"));
  options.megatron.pipeline_model_parallel_size = 1;
  context.model_head = "value";
  CHECK_THAT(error_of<rlcore::ConfigError>([&] { rlcore::train_megatron::MegatronEngine(options, context); }),
             Catch::Contains("model_head 'value'"));

  // Gemma 2's sandwich norms and per-layer windows have no place in the Megatron layout.
  context.model_head = "lm";
  TempDir gemma2;
  write_tiny_checkpoint(gemma2.path(), rlcore::model::ModelConfig::from_json_text(R"({"model_type": "gemma2",
      "vocab_size": 64, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
      "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16})"));
  context.model_path = gemma2.str();
  CHECK_THAT(error_of<rlcore::ConfigError>([&] { rlcore::train_megatron::MegatronEngine(options, context); }),
             Catch::Contains("model_type 'gemma2'") && Catch::Contains("fsdp"));
}

TEST_CASE("megatron in bf16 compute trains close to fp32 and keeps fp32 masters", "[megatron][bf16]") {
  const Run fp32 = suite().run({2, 1, 2});
  const Run bf16 = suite().run({2, 1, 2}, {"--dtype", "bfloat16"});
  CHECK(max_diff(whole_batch(bf16, "log_prob_before"), whole_batch(fp32, "log_prob_before")) < 0.1);
  const auto params = by_name(load_tensors(bf16.out / "params.safetensors"));
  for (const auto& [name, tensor] : params) CHECK(tensor.scalar_type() == at::kFloat);
  CHECK(bf16.ranks[0]["metrics"][1]["grad_norm"].get<double>() > 0);
}

TEST_CASE("megatron trains a mixture of experts like one process: tp=2, pp=2, ep=2 (with tp=2 or pp=2)",
          "[megatron][moe]") {
  static const Run reference = moe_suite().run({1, 1, 1}, {"--micro", "2"});
  REQUIRE(reference.ranks[0]["metrics"][0].contains("moe_aux_loss"));
  CHECK(reference.ranks[0]["metrics"][0]["moe_aux_loss"].get<double>() > 1.0);  // top_k (2) when balanced
  CHECK(reference.ranks[0]["metrics"][0]["moe_z_loss"].get<double>() > 0);
  const Layout layout =
      GENERATE(Layout{2, 1, 2}, Layout{1, 2, 2}, Layout{1, 1, 2, 2}, Layout{2, 1, 4, 2}, Layout{1, 2, 4, 2});
  INFO("tp " << layout.tp << " pp " << layout.pp << " world " << layout.world << " ep " << layout.ep);
  const Run run = moe_suite().run(layout, {"--micro", "2"});
  require_same_training(run, reference);
  // Every expert of the full parameters, gathered from the ep rank holding it.
  const auto params = by_name(load_tensors(run.out / "params.safetensors"));
  CHECK(params.count("decoder.layers.2.mlp.experts.local_experts.3.linear_fc1.weight") == 1);
  CHECK(params.count("decoder.layers.1.mlp.linear_fc1.weight") == 1);
}

TEST_CASE("megatron's router losses (load balancing, z-loss) train the same at ep=2 x pp=2 as one process",
          "[megatron][moe]") {
  const std::vector<std::string> coeffs = {"--micro", "2", "--aux", "0.5", "--z", "0.1"};
  const Run reference = moe_suite().run({1, 1, 1}, coeffs);
  require_same_training(moe_suite().run({1, 2, 4, 2}, coeffs), reference);
  // The coefficients change the router's update; the experts see it only through routing.
  const Run without = moe_suite().run({1, 1, 1}, {"--micro", "2"});
  const auto with_losses = by_name(load_tensors(reference.out / "params.safetensors"));
  const auto plain = by_name(load_tensors(without.out / "params.safetensors"));
  CHECK(max_diff(with_losses.at("decoder.layers.0.mlp.router.weight"), plain.at("decoder.layers.0.mlp.router.weight")) >
        1e-4);
  CHECK(reference.ranks[0]["metrics"][0]["moe_aux_loss"].get<double>() ==
        Approx(without.ranks[0]["metrics"][0]["moe_aux_loss"].get<double>()).epsilon(1e-6));
}

TEST_CASE("megatron replays a routing at ep=2 with pp=2 or tp=2 as one process does, and records it whole",
          "[megatron][moe]") {
  const Run plain = moe_suite().run({1, 1, 1}, {"--micro", "2"});
  const Run reference = moe_suite().run({1, 1, 1}, {"--micro", "2", "--replay", "1"});
  // Layer 0 forced to experts 0 and 1 moves the outputs.
  CHECK(max_diff(whole_batch(reference, "log_prob_before"), whole_batch(plain, "log_prob_before")) > 1e-3);
  for (const Layout layout : {Layout{1, 2, 4, 2}, Layout{2, 1, 4, 2}}) {
    INFO("tp " << layout.tp << " pp " << layout.pp << " world " << layout.world << " ep " << layout.ep);
    const Run run = moe_suite().run(layout, {"--micro", "2", "--replay", "1"});
    require_same_training(run, reference);
    CHECK(at::equal(whole_batch(run, "routing_recorded"), whole_batch(reference, "routing_recorded")));
  }
}

TEST_CASE("a megatron checkpoint of a mixture of experts saved at ep=2 resumes at ep=1, and back", "[megatron][moe]") {
  const Run uninterrupted = moe_suite().run({1, 1, 1}, {"--steps", "2"});
  const fs::path ep2 = moe_suite().work.path() / "ep2_ckpt";
  moe_suite().run({1, 1, 2, 2}, {"--steps", "1", "--save", ep2.string()});
  const fs::path ep1 = moe_suite().work.path() / "ep1_ckpt";
  moe_suite().run({1, 1, 1}, {"--steps", "1", "--save", ep1.string()});
  for (const auto& [layout, ckpt] : {std::pair{Layout{1, 1, 1}, ep2}, std::pair{Layout{1, 1, 2, 2}, ep1}}) {
    INFO("resume at ep " << layout.ep << " from " << ckpt);
    const Run resumed = moe_suite().run(layout, {"--steps", "1", "--load", ckpt.string()});
    CHECK(resumed.ranks[0]["step_at_start"].get<int64_t>() == 1);
    CHECK(max_diff(whole_batch(resumed, "log_prob_after"), whole_batch(uninterrupted, "log_prob_after")) <
          kAfterTolerance);
    CHECK(std::abs(resumed.ranks[0]["metrics"][0]["grad_norm"].get<double>() -
                   uninterrupted.ranks[0]["metrics"][1]["grad_norm"].get<double>()) < kAfterTolerance);
  }
}

TEST_CASE("megatron expert parallel sizes that do not fit are errors naming the key", "[megatron][moe][config]") {
  rlcore::ComponentContext context;
  context.model_path = moe_suite().model.str();
  rlcore::train_megatron::MegatronOptions options;
  options.megatron.expert_model_parallel_size = 3;
  CHECK_THAT(error_of<rlcore::ConfigError>([&] { rlcore::train_megatron::MegatronEngine(options, context); }),
             Catch::Contains("megatron.expert_model_parallel_size = 3 must divide num_experts (4)"));
  options.megatron.expert_model_parallel_size = 2;  // one process: dp = 1
  CHECK_THAT(error_of<rlcore::ConfigError>([&] { rlcore::train_megatron::MegatronEngine(options, context); }),
             Catch::Contains("megatron.expert_model_parallel_size = 2 must divide the data-parallel size (1)"));
  context.model_path = suite().model.str();  // a dense model has no experts to split
  CHECK_THAT(error_of<rlcore::ConfigError>([&] { rlcore::train_megatron::MegatronEngine(options, context); }),
             Catch::Contains("has no experts"));
}

TEST_CASE("megatron trains DeepSeek-V3 (latent attention, grouped routing, shared experts) as the fsdp engine does",
          "[megatron][moe][deepseek]") {
  require_equal_to_fsdp(deepseek_suite(), deepseek_suite().run({1, 1, 1}));
}

TEST_CASE("megatron trains DeepSeek-V3 like one process: tp=2, pp=2, ep=2 (with tp=2)", "[megatron][moe][deepseek]") {
  static const Run reference = deepseek_suite().run({1, 1, 1}, {"--micro", "2"});
  const Layout layout = GENERATE(Layout{2, 1, 2}, Layout{1, 2, 2}, Layout{1, 1, 2, 2}, Layout{2, 1, 4, 2});
  INFO("tp " << layout.tp << " pp " << layout.pp << " world " << layout.world << " ep " << layout.ep);
  const Run run = deepseek_suite().run(layout, {"--micro", "2"});
  require_same_training(run, reference);
  const auto params = by_name(load_tensors(run.out / "params.safetensors"));
  CHECK(params.count("decoder.layers.2.self_attention.linear_kv_up_proj.weight") == 1);
  CHECK(params.count("decoder.layers.2.mlp.shared_experts.linear_fc1.weight") == 1);
  CHECK(params.count("decoder.layers.0.mlp.linear_fc1.weight") == 1);
}
