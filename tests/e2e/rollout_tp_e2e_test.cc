// The actor role with a tensor-parallel rollout over real `rlcore worker`
// processes: 4 workers, rollout tp=2 dp=2 (an fsdp actor sharded over all 4).
// Greedy generate of prompts of different lengths: row i of the result must be
// prompt i's greedy continuation (a whole-model reference, in this process),
// each row exactly once. And GRPO through `rlcore train` with
// tensor_model_parallel_size=2: the trainer derives the rollout mesh, and the
// rollout's token probabilities match the trainer's.
#include "e2e_testing.h"

#include <filesystem>
#include <fstream>

#include <ATen/core/grad_mode.h>
#include <nlohmann/json.hpp>

#include "rlcore/batch.h"
#include "rlcore/core/runtime/cluster.h"
#include "rlcore/core/workers/roles.h"
#include "rlcore/inference_engine.h"
#include "rlcore/model/config.h"
#include "rlcore/model/transformer.h"
#include "rlcore/safetensors/safetensors.h"
#include "rlcore/train_engine.h"
#include "workers/worker_contract.h"
#include "../common/test_paths.h"

using namespace std::chrono_literals;

namespace {

constexpr int64_t kMaxTokens = 5;
constexpr int64_t kPad = 0;

const std::vector<std::vector<int64_t>> kPrompts = {
    {5, 17, 42}, {100, 7, 250, 33, 9, 61, 2}, {12, 13}, {77}, {8, 9, 10, 11, 12, 13, 14, 15, 16}};

// Greedy decoding by re-running the whole sequence (no cache, one process, whole model).
std::vector<int64_t> reference_greedy(const rlcore::model::Transformer& model, std::vector<int64_t> ids) {
  at::NoGradGuard no_grad;
  std::vector<int64_t> out;
  for (int64_t s = 0; s < kMaxTokens; ++s) {
    const at::Tensor logits = model.forward(at::tensor(ids, at::kLong).unsqueeze(0)).select(0, 0).select(0, -1);
    out.push_back(logits.argmax().item<int64_t>());
    ids.push_back(out.back());
  }
  return out;
}

// Left-padded prompt_ids / prompt_mask, as the trainer sends them.
rlcore::Batch prompt_batch() {
  int64_t longest = 0;
  for (const auto& p : kPrompts) longest = std::max<int64_t>(longest, static_cast<int64_t>(p.size()));
  const auto rows = static_cast<int64_t>(kPrompts.size());
  at::Tensor ids = at::full({rows, longest}, kPad, at::kLong);
  at::Tensor mask = at::zeros({rows, longest}, at::kLong);
  for (int64_t r = 0; r < rows; ++r) {
    const auto length = static_cast<int64_t>(kPrompts[r].size());
    ids[r].slice(0, longest - length).copy_(at::tensor(kPrompts[r], at::kLong));
    mask[r].slice(0, longest - length).fill_(1);
  }
  rlcore::Batch batch(rows);
  batch.set("prompt_ids", ids);
  batch.set("prompt_mask", mask);
  return batch;
}

}  // namespace

TEST_CASE("actor.generate with rollout tp=2 dp=2 returns row i for prompt i, each once") {
  const std::string workspace = e2e::make_workspace("rollout_tp", 1);
  const std::string model_dir = (std::filesystem::path(workspace) / "model").string();
  const std::string config = "actor_rollout_ref:\n  model: {path: " + model_dir +
                             "}\n  rollout: {name: native, dtype: float32, tensor_model_parallel_size: 2}\n";

  rlcore::runtime::ClusterOptions options;
  options.worker_executable = rlcore_test::rlcore_executable();
  options.worker_args = {"--plugins", rlcore_test::plugin_build_dir(), "--log-level", "warn"};
  options.connect_timeout = 120s;
  options.call_timeout = 300s;
  rlcore::runtime::PoolSpec pool;
  pool.name = "actor";
  pool.nodes = {4};
  pool.threads_per_worker = 1;
  pool.mesh = {{"rollout_dp", 2}, {rlcore::kRolloutTpGroup, 2}};  // what the trainer derives for tp=2
  pool.roles = {rlcore::runtime::RoleSpec{
      "actor",
      "actor_rollout_ref",
      {{rlcore::workers::role_options::kConfig, config}, {rlcore::workers::role_options::kWithRollout, true}}}};
  options.pools = {pool};
  rlcore::runtime::Cluster cluster(options);

  rlcore::workers::GenerateArgs args;
  args.sampling.greedy = true;
  args.limits = {kMaxTokens, {}, kPad};
  const rlcore::runtime::CallOutput out =
      rlcore::workers::call(cluster.group("actor"), rlcore::workers::actor_methods::kGenerate, prompt_batch(), args)
          .get();
  REQUIRE(out.batch.size() == static_cast<int64_t>(kPrompts.size()));  // 5 rows over 2 dp ranks: padding removed
  const at::Tensor prompt_ids = prompt_batch().tensor("prompt_ids");
  CHECK(at::equal(out.batch.tensor(rlcore::columns::kInputIds).slice(1, 0, prompt_ids.size(1)), prompt_ids));

  const rlcore::model::ModelConfig model_config = rlcore::model::ModelConfig::from_file(model_dir + "/config.json");
  rlcore::model::Transformer model(model_config, rlcore::model::ModelHead::kCausalLm,
                                   at::TensorOptions().dtype(at::kFloat));
  const rlcore::SafetensorsCheckpoint checkpoint(model_dir);
  rlcore::model::NamedTensors weights;
  for (const std::string& name : checkpoint.names()) weights.emplace_back(name, checkpoint.view(name));
  model.load(weights);
  const at::Tensor responses = out.batch.tensor(rlcore::columns::kResponses).to(at::kLong);
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    INFO("row " << i);
    const std::vector<int64_t> expected = reference_greedy(model, kPrompts[i]);
    CHECK(at::equal(responses[static_cast<int64_t>(i)].slice(0, 0, kMaxTokens), at::tensor(expected, at::kLong)));
  }
  std::filesystem::remove_all(workspace);
}

TEST_CASE("GRPO with rollout tensor_model_parallel_size=2 over 4 workers: rollout and trainer probabilities agree") {
  const std::string workspace = e2e::make_workspace("grpo_tp", 16);
  const std::string config = e2e::write_config(workspace, "grpo_tp", R"(
actor_rollout_ref:
  actor: {ppo_mini_batch_size: 8, ppo_micro_batch_size_per_gpu: 8}
  rollout: {n: 4, tensor_model_parallel_size: 2}
algorithm: {adv_estimator: grpo}
)");
  const e2e::RunResult run =
      e2e::run_rlcore({"--config", config, "runtime.n_workers_per_node=4", "trainer.total_training_steps=2"});
  INFO(run.output);
  REQUIRE(run.status == 0);
  const auto metrics = e2e::read_metrics(workspace + "/grpo_tp");
  REQUIRE(metrics.size() == 2);
  for (const auto& [step, values] : metrics) {
    INFO("step " << step);
    REQUIRE(values.count("training/rollout_probs_diff_max") == 1);
    CHECK(values.at("training/rollout_probs_diff_max") < 1e-4);  // fp32 model: only reduction order differs
    CHECK(values.at("memory/peak_swap_bytes") > 0);
  }
  std::filesystem::remove_all(workspace);
}
