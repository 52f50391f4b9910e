// The RL trainer end to end: real worker processes (2 per run), the fsdp
// engine, the native rollout engine and a reward a policy can certainly learn.
#include "e2e_testing.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

namespace fs = std::filesystem;

namespace {

const char* const kGrpo = e2e::kLearningGrpo;

// SFT pairs that always answer "hello" (ws/sft.jsonl) and the SFT config; returns the config path.
std::string write_sft_workspace(const std::string& ws) {
  std::ofstream data(ws + "/sft.jsonl");
  for (int i = 0; i < 32; ++i) {
    data << R"({"prompt": "Say something )" << i << R"(:", "response": "hello", "data_source": "letters"})"
         << "\n";
  }
  return e2e::write_config(ws, "sft", R"(
actor_rollout_ref:
  actor:
    optim: {lr: 0.01, weight_decay: 0.0}
)");
}

}  // namespace

TEST_CASE("GRPO raises a learnable reward with two workers") {
  const std::string ws = e2e::make_workspace("grpo");
  const std::string config = e2e::write_config(ws, "grpo", kGrpo);
  const e2e::RunResult run = e2e::run_rlcore({"--config", config, "trainer.total_training_steps=12"});
  INFO(run.output);
  REQUIRE(run.status == 0);
  const auto metrics = e2e::read_metrics(ws + "/grpo");
  REQUIRE(metrics.size() == 12);
  for (const char* key : {"critic/score/mean",
                          "actor/pg_loss",
                          "actor/entropy",
                          "actor/grad_norm",
                          "response_length/mean",
                          "timing_s/gen",
                          "timing_s/old_log_prob",
                          "timing_s/adv",
                          "timing_s/update_actor",
                          "timing_s/step",
                          "perf/throughput",
                          "timing_s/reshard_to_rollout",
                          "timing_s/reshard_to_train",
                          "perf/swap_GBps",
                          "memory/peak_swap_bytes",
                          "memory/planned_peak_swap_bytes",
                          "memory/allocated_bytes",
                          "memory/reserved_bytes",
                          "memory/worker_rss_bytes/max",
                          "memory/worker_rss_bytes/min",
                          "memory/worker_rss_bytes/mean",
                          "memory/worker_rss_bytes/rank_0",
                          "memory/worker_rss_bytes/rank_1",
                          "memory/controller_rss_bytes",
                          "perf/cpu_memory_used_gb",
                          "rollout/response_tokens",
                          "perf/rollout_tokens_per_s",
                          "rollout/decode_steps",
                          "rollout/running_mean",
                          "rollout/running_max",
                          "rollout/waiting_max",
                          "rollout/prefill_rows",
                          "rollout/joins"}) {
    CHECK(metrics.at(1).count(key) == 1);
  }
  // The rollout's queueing line (infer-native reports it): the batch never
  // holds more than its mean's worth less than its fullest, and the tokens per
  // second are the step's response tokens over its generation time.
  const auto& first_step = metrics.at(1);
  CHECK(first_step.at("rollout/decode_steps") > 0);
  CHECK(first_step.at("rollout/running_mean") > 0);
  CHECK(first_step.at("rollout/running_mean") <= first_step.at("rollout/running_max"));
  CHECK(first_step.at("rollout/prefill_rows") > 0);
  CHECK(first_step.at("perf/rollout_tokens_per_s") ==
        Approx(first_step.at("rollout/response_tokens") / first_step.at("timing_s/gen")));
  // The bucketed hybrid engine swaps around every generate: real bytes, real
  // time, real memory (measured on each worker; the bounds are checked in
  // tests/plugins/hybrid-engine).
  CHECK(metrics.at(1).at("memory/peak_swap_bytes") > 0);
  CHECK(metrics.at(1).at("memory/planned_peak_swap_bytes") > 0);
  CHECK(metrics.at(1).at("memory/allocated_bytes") > 0);
  CHECK(metrics.at(1).at("memory/reserved_bytes") >= metrics.at(1).at("memory/allocated_bytes"));
  CHECK(metrics.at(1).at("perf/swap_GBps") > 0);
  // Host memory of every process: a worker holds at least libtorch and the model.
  CHECK(metrics.at(1).at("memory/worker_rss_bytes/min") > 50e6);
  CHECK(metrics.at(1).at("memory/worker_rss_bytes/max") >= metrics.at(1).at("memory/worker_rss_bytes/mean"));
  CHECK(metrics.at(1).at("memory/worker_rss_bytes/mean") >= metrics.at(1).at("memory/worker_rss_bytes/min"));
  CHECK(std::min(metrics.at(1).at("memory/worker_rss_bytes/rank_0"),
                 metrics.at(1).at("memory/worker_rss_bytes/rank_1")) ==
        metrics.at(1).at("memory/worker_rss_bytes/min"));
  CHECK(metrics.at(1).at("memory/controller_rss_bytes") > 10e6);
  CHECK(metrics.at(1).at("perf/cpu_memory_used_gb") * (1 << 30) >
        metrics.at(1).at("memory/controller_rss_bytes") + 2 * metrics.at(1).at("memory/worker_rss_bytes/min"));
  // trainer.balance_batch (verl's default, on): each step's rows reordered so the two ranks get even
  // work; balanced by workload, so the token spread between ranks may stay but never exceeds the batch's.
  for (const auto& [step, m] : metrics) {
    INFO("step " << step);
    CHECK(m.at("global_seqlen/mean") > 0);
    CHECK(m.at("global_seqlen/balanced_min") <= m.at("global_seqlen/mean"));
    CHECK(m.at("global_seqlen/balanced_max") >= m.at("global_seqlen/mean"));
    CHECK(m.at("global_seqlen/balanced_min") + m.at("global_seqlen/balanced_max") ==
          Approx(2 * m.at("global_seqlen/mean")));
  }
  const double first = e2e::mean_over_steps(metrics, "critic/score/mean", 1, 3);
  const double last = e2e::mean_over_steps(metrics, "critic/score/mean", 10, 12);
  CHECK(last > first + 0.1);
  fs::remove_all(ws);
}

TEST_CASE("GRPO with Ulysses sequence parallelism (sp=2) matches the data-parallel run on step 1") {
  // Two workers either way: dp=2, or one replica whose two ranks split every packed micro-batch (the
  // pool's mesh {dp, sp}). The same samples (the rollout splits rows by worker in both), the same
  // update: the gradient norm and the old-log-prob pass's entropy agree; the reference policy (KL loss)
  // takes the actor's sp size; rollout and trainer probabilities agree at every step.
  const std::string ws = e2e::make_workspace("grpo_sp");
  const char* const kGrpoKl = R"(
actor_rollout_ref:
  actor: {ppo_mini_batch_size: 8, ppo_micro_batch_size_per_gpu: 4, use_kl_loss: true%s}
  rollout: {n: 4}
algorithm: {adv_estimator: grpo}
)";
  const auto run_grpo = [&](const std::string& name, const std::string& actor) {
    std::string yaml = kGrpoKl;
    yaml.replace(yaml.find("%s"), 2, actor);
    const e2e::RunResult run =
        e2e::run_rlcore({"--config", e2e::write_config(ws, name, yaml), "trainer.total_training_steps=2"});
    INFO(run.output);
    REQUIRE(run.status == 0);
    return e2e::read_metrics(ws + "/" + name);
  };
  const auto dp = run_grpo("dp", "");
  const auto sp = run_grpo("sp", ", ulysses_sequence_parallel_size: 2");
  REQUIRE(sp.size() == 2);
  for (const char* key : {"critic/score/mean", "actor/grad_norm", "actor/entropy"}) {
    INFO(key);
    const double a = dp.at(1).at(key), b = sp.at(1).at(key);
    CHECK(std::abs(a - b) <= 1e-4 * std::max(1.0, std::abs(a)));
  }
  CHECK(sp.at(1).count("actor/kl_loss") == 1);
  CHECK(sp.at(1).count("global_seqlen/mean") == 0);  // one data-parallel replica: nothing to balance
  for (const auto& [step, values] : sp) {
    INFO("step " << step);
    CHECK(values.at("training/rollout_probs_diff_max") < 1e-4);
  }
  fs::remove_all(ws);
}

TEST_CASE("PPO trains a critic next to the actor") {
  const std::string ws = e2e::make_workspace("ppo");
  const std::string config = e2e::write_config(ws, "ppo", R"(
actor_rollout_ref:
  actor:
    ppo_mini_batch_size: 4
    optim: {lr: 0.003, weight_decay: 0.0}
  rollout: {n: 4}
critic:
  optim: {lr: 0.002}
algorithm: {adv_estimator: gae, gamma: 1.0, lam: 0.95}
)");
  const e2e::RunResult run = e2e::run_rlcore({"--config", config, "trainer.total_training_steps=10"});
  INFO(run.output);
  REQUIRE(run.status == 0);
  const auto metrics = e2e::read_metrics(ws + "/ppo");
  REQUIRE(metrics.size() == 10);
  CHECK(metrics.at(1).count("critic/vf_loss") == 1);
  CHECK(metrics.at(1).count("critic/values/mean") == 1);
  // Each role's optimizer reports under its own name (verl's critic/lr, critic/grad_norm).
  CHECK(metrics.at(1).at("actor/lr") == Approx(0.003));
  CHECK(metrics.at(1).at("critic/lr") == Approx(0.002));
  CHECK(metrics.at(1).at("critic/grad_norm") > 0);
  CHECK(metrics.at(1).at("actor/grad_norm") != metrics.at(1).at("critic/grad_norm"));
  // The value head starts at random and learns the returns.
  CHECK(e2e::mean_over_steps(metrics, "critic/vf_loss", 8, 10) < e2e::mean_over_steps(metrics, "critic/vf_loss", 1, 3));
  fs::remove_all(ws);
}

TEST_CASE("resuming from a checkpoint continues exactly as the uninterrupted run") {
  const std::string ws = e2e::make_workspace("resume");
  const std::string config = e2e::write_config(ws, "full", kGrpo);
  const e2e::RunResult full =
      e2e::run_rlcore({"--config", config, "trainer.total_training_steps=4", "trainer.save_freq=2"});
  INFO(full.output);
  REQUIRE(full.status == 0);
  const std::string checkpoint = ws + "/full/checkpoints/global_step_2";
  REQUIRE(fs::exists(checkpoint + "/trainer_state.json"));
  const e2e::RunResult resumed = e2e::run_rlcore(
      {"--config", config, "trainer.total_training_steps=4", "trainer.default_local_dir=" + ws + "/resumed",
       "trainer.resume_mode=resume_path", "trainer.resume_from_path=" + checkpoint});
  INFO(resumed.output);
  REQUIRE(resumed.status == 0);
  CHECK_THAT(resumed.output, Catch::Contains("resumed from"));
  const auto a = e2e::read_metrics(ws + "/full");
  const auto b = e2e::read_metrics(ws + "/resumed");
  REQUIRE(b.count(3) == 1);
  REQUIRE(b.count(4) == 1);
  CHECK(b.count(1) == 0);
  for (int64_t step : {3, 4}) {
    for (const char* key : {"critic/score/mean", "actor/pg_loss", "actor/grad_norm", "actor/entropy"}) {
      INFO("step " << step << " " << key);
      CHECK(b.at(step).at(key) == Approx(a.at(step).at(key)).epsilon(1e-5).margin(1e-7));
    }
  }
  fs::remove_all(ws);
}

TEST_CASE("bad trainer configs fail before any worker starts, naming the keys") {
  const std::string ws = e2e::make_workspace("bad", 8);
  const std::string config = e2e::write_config(ws, "bad", kGrpo);
  auto error_of = [&](std::vector<std::string> overrides) {
    std::vector<std::string> args = {"--config", config};
    args.insert(args.end(), overrides.begin(), overrides.end());
    const e2e::RunResult run = e2e::run_rlcore(args);
    CHECK(run.status != 0);
    return run.output;
  };
  CHECK_THAT(error_of({"actor_rollout_ref.actor.ppo_mini_batch_size=3"}),
             Catch::Contains(
                 "data.train_batch_size (8) must be a multiple of actor_rollout_ref.actor.ppo_mini_batch_size (3)"));
  CHECK_THAT(error_of({"algorithm.adv_estimator=grpoo"}), Catch::Contains("grpoo"));
  CHECK_THAT(error_of({"actor_rollout_ref.rollout.n=0"}), Catch::Contains("actor_rollout_ref.rollout.n"));
  CHECK_THAT(error_of({"data.train_files=" + ws + "/missing.jsonl"}), Catch::Contains("missing.jsonl"));
  CHECK_THAT(error_of({"data.train_batch_size=16"}), Catch::Contains("larger than the training set (8 prompts"));
  CHECK_THAT(error_of({"actor_rollout_ref.actor.optim.lrr=1"}), Catch::Contains("optim.lrr"));
  CHECK_THAT(error_of({"trainer.stop_at_val_reward=0.5"}),
             Catch::Contains("trainer.stop_at_val_reward (0.500000) needs data.val_files"));
  CHECK_THAT(error_of({"trainer.val_only=true"}), Catch::Contains("trainer.val_only needs data.val_files"));
  CHECK_THAT(error_of({"actor_rollout_ref.rollout.ignore_eos=true", "actor_rollout_ref.rollout.name=vllm_bridge",
                       "actor_rollout_ref.rollout.server_url=http://127.0.0.1:9"}),
             Catch::Contains("key actor_rollout_ref.rollout.ignore_eos: the inference engine 'vllm_bridge'"));
  fs::remove_all(ws);
}

// verl's rollout.ignore_eos: no response stops at EOS, every one runs to max_response_length (the same
// seeded run without it has responses that stop early).
TEST_CASE("rollout.ignore_eos runs every response to max_response_length") {
  const std::string ws = e2e::make_workspace("ignore_eos", 8);
  const std::string config = e2e::write_config(ws, "ignore_eos", e2e::kQuickGrpo);
  auto clip_ratio = [&](const std::string& ignore_eos) {
    const e2e::RunResult run =
        e2e::run_rlcore({"--config", config, "trainer.total_training_steps=1", "data.max_response_length=48",
                         "actor_rollout_ref.rollout.ignore_eos=" + ignore_eos});
    INFO(run.output);
    REQUIRE(run.status == 0);
    const auto step = e2e::read_metrics(ws + "/ignore_eos").at(1);
    if (ignore_eos == "true") CHECK(step.at("response_length/min") == 48);
    return step.at("response_length/clip_ratio");
  };
  CHECK(clip_ratio("false") < 1.0);
  CHECK(clip_ratio("true") == 1.0);
  fs::remove_all(ws);
}

TEST_CASE("trainer.val_only validates once and trains no step") {
  const std::string ws = e2e::make_workspace("val_only", 8);
  const std::string config = e2e::write_config(ws, "val_only", kGrpo);
  // val_before_train is false in the workspace's config: val_only validates anyway.
  const std::vector<std::string> args = {"--config", config, "trainer.val_only=true",
                                         "data.val_files=" + ws + "/prompts.jsonl",
                                         "trainer.validation_data_dir=" + ws + "/val"};
  const e2e::RunResult run = e2e::run_rlcore(args);
  INFO(run.output);
  REQUIRE(run.status == 0);
  const auto metrics = e2e::read_metrics(ws + "/val_only");
  REQUIRE(metrics.size() == 1);
  CHECK(metrics.begin()->first == 0);
  CHECK(metrics.at(0).count("val-core/letters/reward/mean@1") == 1);

  // verl's trainer.validation_data_dir: every validation response, scored, as <dir>/<step>.jsonl.
  std::ifstream dump(ws + "/val/0.jsonl");
  REQUIRE(dump);
  double score_sum = 0;
  int lines = 0;
  for (std::string line; std::getline(dump, line); ++lines) {
    const nlohmann::json record = nlohmann::json::parse(line);
    CHECK(record.at("step") == 0);
    CHECK(record.at("input").get<std::string>().size() > 0);
    CHECK(record.contains("output"));
    CHECK(record.contains("gts"));
    score_sum += record.at("score").get<double>();
  }
  CHECK(lines == 8);
  CHECK(score_sum / lines == Approx(metrics.at(0).at("val-core/letters/reward/mean@1")));

  // A second fresh run in the same run directory: the first run's metrics are set aside, not appended to.
  const e2e::RunResult again = e2e::run_rlcore(args);
  INFO(again.output);
  REQUIRE(again.status == 0);
  CHECK_THAT(again.output, Catch::Contains("metrics.1.jsonl"));
  const auto line_count = [](const std::string& file) {
    std::ifstream in(file);
    int count = 0;
    for (std::string line; std::getline(in, line);) ++count;
    return count;
  };
  CHECK(line_count(ws + "/val_only/metrics.jsonl") == 1);
  CHECK(line_count(ws + "/val_only/metrics.1.jsonl") == 1);
  fs::remove_all(ws);
}

TEST_CASE("SFT lowers the loss and writes an HF checkpoint an RL run starts from") {
  const std::string ws = e2e::make_workspace("sft");
  const std::string config = write_sft_workspace(ws);
  const e2e::RunResult sft = e2e::run_rlcore(
      {"sft", "--config", config, "data.train_files=" + ws + "/sft.jsonl", "trainer.total_training_steps=20"});
  INFO(sft.output);
  REQUIRE(sft.status == 0);
  const auto metrics = e2e::read_metrics(ws + "/sft");
  REQUIRE(metrics.size() == 20);
  CHECK(metrics.at(20).at("sft/loss") < 0.5 * metrics.at(1).at("sft/loss"));
  REQUIRE(fs::exists(ws + "/sft/hf/config.json"));
  REQUIRE(fs::exists(ws + "/sft/hf/model.safetensors"));
  REQUIRE(fs::exists(ws + "/sft/hf/tokenizer.json"));

  // The fine-tuned model answers "hello": a lowercase-letter reward starts high from it.
  const std::string rl = e2e::write_config(ws, "rl", kGrpo);
  const e2e::RunResult run = e2e::run_rlcore(
      {"--config", rl, "trainer.total_training_steps=1", "actor_rollout_ref.model.path=" + ws + "/sft/hf"});
  INFO(run.output);
  REQUIRE(run.status == 0);
  CHECK(e2e::read_metrics(ws + "/rl").at(1).at("critic/score/mean") > 0.6);
  fs::remove_all(ws);
}

TEST_CASE("SFT validates by generation and stops at trainer.stop_at_val_reward") {
  const std::string ws = e2e::make_workspace("sft_val");
  const std::string config = write_sft_workspace(ws);
  const double stop_at = 0.9;
  const e2e::RunResult sft =
      e2e::run_rlcore({"sft", "--config", config, "data.train_files=" + ws + "/sft.jsonl",
                       "data.val_files=" + ws + "/prompts.jsonl", "trainer.total_training_steps=60",
                       "trainer.test_freq=5", "trainer.stop_at_val_reward=" + std::to_string(stop_at)});
  INFO(sft.output);
  REQUIRE(sft.status == 0);
  const auto metrics = e2e::read_metrics(ws + "/sft");
  const std::string key = "val-core/letters/reward/mean@1";
  // Every 5th step is validated; the run ends at the first validation that reaches the threshold.
  const int64_t last = metrics.rbegin()->first;
  CHECK(last < 60);
  CHECK(last % 5 == 0);
  for (const auto& [step, values] : metrics) {
    INFO("step " << step);
    CHECK(values.count(key) == (step % 5 == 0 ? 1u : 0u));
    if (step % 5 == 0 && step < last) CHECK(values.at(key) < stop_at);
  }
  CHECK(metrics.at(last).at(key) >= stop_at);
  CHECK_THAT(sft.output, Catch::Contains("stopped at trainer.stop_at_val_reward"));
  CHECK(fs::exists(ws + "/sft/hf/model.safetensors"));
  fs::remove_all(ws);
}
