// Tensor-parallel infer-native over real processes (gloo): two ranks serving
// one model split two ways generate what one process serving the whole
// model generates, every rank of the group returns the same output, and bad
// TP settings are clear errors.
#include "engine_testing.h"
#include "../train-fsdp/fsdp_testing.h"  // its rank spawner and 4-head tiny checkpoint

#include "native_engine.h"
#include "rlcore/error.h"
#include "rlcore/inference_engine.h"
#include "../../common/test_paths.h"

using namespace infer_native_test;
using rlcore::infer_native::NativeEngine;
using rlcore::infer_native::NativeEngineOptions;

namespace {

// A tiny random checkpoint (fsdp_test::tiny_config: 4 heads, 2 kv heads) in a temp dir.
struct Checkpoint {
  Checkpoint() { fsdp_test::write_tiny_checkpoint(dir.path()); }
  TempDir dir;
};

std::string tp_runner() { return rlcore_test::built_executable("native_tp_rank_runner"); }

// The runner's prompts (native_tp_rank_runner.cc).
const std::vector<std::vector<int32_t>> kPrompts = {
    {5, 17, 42}, {10, 7, 25, 33, 9, 61, 2}, {12, 22, 13, 14, 30, 15, 8, 16, 17, 18, 23, 19}, {7}};

struct TpRun {
  TpRun() {
    result = fsdp_test::run_ranks(2, work.path(), {"--model", checkpoint.dir.str(), "--tp", "2"},
                                  std::chrono::seconds(120), tp_runner());
  }
  Checkpoint checkpoint;
  TempDir work;
  std::vector<nlohmann::json> result;
};

const TpRun& tp_run() {
  static TpRun run;
  return run;
}

std::vector<std::vector<float>> logprobs_of(const nlohmann::json& output) {
  return output["logprobs"].get<std::vector<std::vector<float>>>();
}

}  // namespace

TEST_CASE("native tp=2 greedy tokens equal tp=1's, log-probs within 1e-5 (fp32, prompts of different lengths)",
          "[infer_native][tp]") {
  const TpRun& run = tp_run();
  NativeEngineOptions options;
  options.dtype = "float32";
  options.max_num_seqs = 3;
  auto whole = make_engine(run.checkpoint.dir.path(), options);
  rlcore::SamplingParams greedy;
  greedy.temperature = 0;
  greedy.max_tokens = 8;
  const rlcore::GenerationOutput expected = whole.generate(kPrompts, greedy);
  for (const nlohmann::json& rank : run.result) {
    INFO("tp rank " << rank["tp_rank"]);
    const nlohmann::json& got = rank["greedy"];
    CHECK(got["token_ids"].get<std::vector<std::vector<int32_t>>>() == expected.token_ids);
    const auto logprobs = logprobs_of(got);
    REQUIRE(logprobs.size() == expected.logprobs.size());
    for (size_t i = 0; i < logprobs.size(); ++i) CHECK(max_abs_diff(logprobs[i], expected.logprobs[i]) < 1e-5f);
  }
}

TEST_CASE("every rank of a TP group returns the same tokens and log-probs, greedy and sampled", "[infer_native][tp]") {
  const TpRun& run = tp_run();
  REQUIRE(run.result.size() == 2);
  CHECK(run.result[0]["tp_rank"] == 0);
  CHECK(run.result[1]["tp_rank"] == 1);
  for (const char* mode : {"greedy", "sampled"}) {
    INFO(mode);
    CHECK(run.result[0][mode] == run.result[1][mode]);
  }
  CHECK(run.result[0]["sampled"]["token_ids"].size() == 2 * kPrompts.size());
}

TEST_CASE("a TP rank holds only its shard: column layers split dim 0, row layers dim 1, the rest whole",
          "[infer_native][tp]") {
  const rlcore::model::ModelConfig config = fsdp_test::tiny_config();
  const int64_t q_dim = config.num_attention_heads * config.head_dim;
  const int64_t kv_dim = config.num_key_value_heads * config.head_dim;
  for (const nlohmann::json& rank : tp_run().result) {
    const nlohmann::json& shapes = rank["shapes"];
    const std::string layer = "model.layers.1.";
    CHECK(shapes[layer + "self_attn.q_proj.weight"] == nlohmann::json({q_dim / 2, config.hidden_size}));
    CHECK(shapes[layer + "self_attn.k_proj.weight"] == nlohmann::json({kv_dim / 2, config.hidden_size}));
    CHECK(shapes[layer + "self_attn.o_proj.weight"] == nlohmann::json({config.hidden_size, q_dim / 2}));
    CHECK(shapes[layer + "mlp.up_proj.weight"] == nlohmann::json({config.intermediate_size / 2, config.hidden_size}));
    CHECK(shapes[layer + "mlp.down_proj.weight"] == nlohmann::json({config.hidden_size, config.intermediate_size / 2}));
    CHECK(shapes[layer + "input_layernorm.weight"] == nlohmann::json({config.hidden_size}));
    CHECK(shapes["model.embed_tokens.weight"] == nlohmann::json({config.vocab_size, config.hidden_size}));
  }
}

TEST_CASE("TP ranks asked for different requests refuse on every rank instead of hanging", "[infer_native][tp]") {
  const Checkpoint checkpoint;
  const TempDir work;
  const auto result =
      fsdp_test::run_ranks(2, work.path(), {"--model", checkpoint.dir.str(), "--tp", "2", "--skew", "1"},
                           std::chrono::seconds(120), tp_runner());
  for (const nlohmann::json& rank : result) {
    REQUIRE(rank.contains("skew_error"));
    CHECK(rank["skew_error"].get<std::string>().find("different prompts or sampling params") != std::string::npos);
  }
}

TEST_CASE("a TP size that does not divide the heads, or no rollout_tp group, is a ConfigError naming the key",
          "[infer_native][tp]") {
  const Checkpoint checkpoint;
  NativeEngineOptions options;
  options.tensor_model_parallel_size = 3;
  const std::string bad_size = error_of<rlcore::ConfigError>([&] { make_engine(checkpoint.dir.path(), options); });
  CHECK(bad_size.find("tensor_model_parallel_size 3") != std::string::npos);
  CHECK(bad_size.find("num_attention_heads (4)") != std::string::npos);
  options.tensor_model_parallel_size = 2;
  const std::string no_group = error_of<rlcore::ConfigError>([&] { make_engine(checkpoint.dir.path(), options); });
  CHECK(no_group.find(std::string("'") + rlcore::kRolloutTpGroup + "'") != std::string::npos);
}
