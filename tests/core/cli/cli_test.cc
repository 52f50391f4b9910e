// The rlcore command line, run in-process with the in-tree plugins it finds on
// its own (the test binary lives in build/bin, next to build/plugins).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "../../common/reference_python.h"
#include "cli_testing.h"
#include "rlcore/device.h"
#include "../../common/test_paths.h"

using cli_test::read_file;
using cli_test::run;

namespace {

// Each line of `text` parsed as JSON (rlcore grade's output).
std::vector<nlohmann::json> json_lines(const std::string& text) {
  std::istringstream lines(text);
  std::vector<nlohmann::json> records;
  for (std::string line; std::getline(lines, line);) records.push_back(nlohmann::json::parse(line));
  return records;
}

}  // namespace

TEST_CASE("rlcore plugins lists the reward plugin's graders without --plugins", "[cli]") {
  const auto result = run({"plugins"});
  CHECK(result.status == 0);
  for (const char* grader : {"gsm8k", "math", "exact_match", "arithmetic"}) {
    CHECK_THAT(result.out, Catch::Matches("[\\s\\S]*\\breward +" + std::string(grader) + "\\b[\\s\\S]*"));
  }
  CHECK_THAT(result.out, Catch::Contains("librlcore-reward.so"));
}

TEST_CASE("rlcore plugins lists each in-tree engine's capabilities", "[cli]") {
  const auto result = run({"plugins"});
  CHECK(result.status == 0);
  CHECK_THAT(result.out, Catch::Contains("CAPABILITIES"));
  const std::pair<const char*, const char*> expected[] = {
      {"inference_engine +native +infer-native",
       "adopts_weights,tensor_parallel,sleep,requests,generation_stats,records_routing,logprobs"},
      {"inference_engine +vllm_bridge +infer-vllm-bridge", "sleep,remote"},
      {"train_engine +fsdp +train-fsdp",
       "data_parallel,offload,sum_pi_squared,low_rank_adapters,gather_into_buffer,routing_replay"},
      {"train_engine +megatron +train-megatron",
       "data_parallel,tensor_parallel,pipeline_parallel,offload,sum_pi_squared,routing_replay"},
      {"sharding_manager +bucketed +hybrid-engine", "bounded_swap_memory"},
      {"sharding_manager +naive +hybrid-engine", "-"},
      {"reward +gsm8k +reward", "-"},
      {"tool +calculator +tools", "-"},
      {"tool +python +tools", "-"}};
  for (const auto& [row, capabilities] : expected) {
    if (!std::regex_search(result.out, std::regex(row))) continue;  // plugin not built here
    CHECK_THAT(result.out,
               Catch::Matches("[\\s\\S]*" + std::string(row) + " +[0-9.]+ +" + capabilities + " [\\s\\S]*"));
  }
}

TEST_CASE("rlcore plugins reports refused files with their reasons", "[cli]") {
  const auto result = run({"plugins", "--plugins", rlcore_test::fixture_plugin_dir() + "/abi_major.so"});
  CHECK(result.status == 0);
  CHECK_THAT(result.out, Catch::Contains("abi_major.so") && Catch::Contains("incompatible SDK ABI major"));
}

TEST_CASE("rlcore config prints the resolved config with overrides and defaults", "[cli]") {
  const auto result = run({"config", "trainer.project_name=demo", "trainer.logger=[console,jsonl]"});
  REQUIRE(result.status == 0);
  CHECK_THAT(result.out, Catch::Contains("project_name: demo"));
  CHECK_THAT(result.out, Catch::Contains("log_level: info"));
  CHECK_THAT(result.out, Catch::Contains("jsonl"));
}

TEST_CASE("rlcore config errors name the key and where it came from", "[cli]") {
  auto result = run({"config", "trainer.projet_name=x"});
  CHECK(result.status == 1);
  CHECK_THAT(result.err,
             Catch::Contains("unknown key 'trainer.projet_name'") && Catch::Contains("did you mean 'project_name'"));
  result = run({"config", "reward.grader=nope"});
  CHECK(result.status == 1);
  CHECK_THAT(result.err, Catch::Contains("no reward named 'nope'") && Catch::Contains("gsm8k"));
  result = run({"config", "reward.graders.gsm8k.method=fuzzy"});
  CHECK(result.status == 1);
  CHECK_THAT(result.err, Catch::Contains("'reward.graders.gsm8k.method'") && Catch::Contains("strict, flexible"));
  result = run({"config", "--config", "/nonexistent.yaml"});
  CHECK(result.status == 1);
  CHECK_THAT(result.err, Catch::Contains("cannot read config file '/nonexistent.yaml'"));
}

TEST_CASE("serve and export check --device before loading anything", "[cli]") {
  for (const char* command : {"serve", "export"}) {
    INFO(command);
    std::vector<std::string> args = {command, "--model", "/nonexistent", "--device", "gpu"};
    if (std::string(command) == "export") args.insert(args.end(), {"--checkpoint", "/nonexistent", "--out", "/tmp/x"});
    auto result = run(args);
    CHECK(result.status == 1);
    CHECK_THAT(result.err, Catch::Contains("key --device: unknown device 'gpu'"));
    if (rlcore::cuda_build()) continue;
    args[4] = "cuda";
    result = run(args);
    CHECK(result.status == 1);
    CHECK_THAT(result.err, Catch::Contains("key --device=cuda: this rlcore build has no CUDA"));
  }
}

TEST_CASE("docs/config-reference.md is up to date", "[cli]") {
  const auto result = run({"config", "--schema", "--format", "markdown"});
  REQUIRE(result.status == 0);
  CHECK_THAT(result.out, Catch::Contains("reward.graders.gsm8k.format_score"));
  INFO("regenerate with: build/bin/rlcore config --schema --format markdown > docs/config-reference.md");
  CHECK(read_file(rlcore_test::source_dir() + "/docs/config-reference.md") == result.out);
}

TEST_CASE("a sharding manager's keys are read where the config reference lists them", "[cli]") {
  const auto reference = run({"config", "--schema", "--format", "markdown"});
  REQUIRE_THAT(reference.out, Catch::Contains("`actor_rollout_ref.hybrid_engine.offload_train_param`"));
  const std::string config = rlcore_test::source_dir() + "/configs/quickstart.yaml";
  CHECK(run({"config", "--config", config, "actor_rollout_ref.hybrid_engine.offload_train_param=true"}).status == 0);
  const auto refused =
      run({"config", "--config", config, "plugins.sharding_manager.bucketed.offload_train_param=true"});
  CHECK(refused.status != 0);
  CHECK_THAT(refused.err, Catch::Contains("plugins"));
}

TEST_CASE("rlcore grade scores JSONL lines and prints a summary", "[cli]") {
  const std::string input = R"({"response": "6 * 7 = 42 #### 42", "ground_truth": "42", "data_source": "openai/gsm8k"})"
                            "\n"
                            R"({"response": "I think 41", "ground_truth": "42", "data_source": "openai/gsm8k"})"
                            "\n"
                            R"({"response": "#### 41", "ground_truth": 42, "data_source": "openai/gsm8k"})"
                            "\n";
  auto result = run({"grade", "--grader", "gsm8k", "format_score=0.1"}, input);
  REQUIRE(result.status == 0);
  const std::vector<nlohmann::json> records = json_lines(result.out);
  REQUIRE(records.size() == 4);
  CHECK(records[0]["score"] == 1.0);
  CHECK(records[1]["score"] == 0.0);
  CHECK(records[2]["score"] == 0.1);
  CHECK(records[3]["summary"]["count"] == 3);
  CHECK(records[3]["summary"]["score/mean"].get<double>() == Approx(1.1 / 3));

  result = run({"grade", "--grader", "gsm8k", "method=flexible"}, input);
  REQUIRE(result.status == 0);
  CHECK_THAT(result.out, Catch::Contains(R"("score/mean":0.3333)"));
}

TEST_CASE("rlcore grade picks graders by data_source and rejects bad input lines", "[cli]") {
  auto result =
      run({"grade"}, R"({"response": "\\boxed{0.5}", "ground_truth": "\\frac{1}{2}", "data_source": "lighteval/MATH"})"
                     "\n");
  REQUIRE(result.status == 0);
  CHECK_THAT(result.out, Catch::StartsWith(R"({"acc":1.0)"));

  result = run({"grade"}, R"({"response": "x", "ground_truth": "y", "data_source": "unknown/source"})"
                          "\n");
  CHECK(result.status == 1);
  CHECK_THAT(result.err, Catch::Contains("no grader handles data_source 'unknown/source'"));

  result = run({"grade", "--grader", "exact_match"}, "{\"response\": \"a\", \"ground_truth\": \"a\"}\nnot json\n");
  CHECK(result.status == 1);
  CHECK_THAT(result.err, Catch::Contains("line 2 of stdin is not a JSON object"));

  result = run({"grade", "--grader", "exact_match"}, "{\"ground_truth\": \"a\"}\n");
  CHECK(result.status == 1);
  CHECK_THAT(result.err, Catch::Contains("line 1: missing field \"response\" or \"output\""));
}

TEST_CASE("rlcore grade re-scores the trainer's dumps and verl data rows as they are", "[cli]") {
  // A validation_data_dir line (output, gts) and a verl row with reward_model.ground_truth.
  const std::string input =
      R"({"input": "q", "output": "<answer>The Paris</answer>", "gts": "{\"target\": [\"paris\"]}", "score": 0, "step": 3})"
      "\n"
      R"({"response": "<answer>Lyon</answer>", "data_source": "searchR1_nq", "reward_model": {"ground_truth": {"target": ["Paris"]}}})"
      "\n";
  const auto result = run({"grade", "--grader", "search_r1_like_qa_em"}, input);
  INFO(result.err);
  REQUIRE(result.status == 0);
  const std::vector<nlohmann::json> records = json_lines(result.out);
  REQUIRE(records.size() == 3);
  CHECK(records[0]["score"] == 1.0);
  CHECK(records[1]["score"] == 0.0);
  CHECK(records[1]["format_ok"] == 1.0);
}

TEST_CASE("rlcore grade runs verl's custom reward function for every sample", "[cli]") {
  const std::string key = "reward.custom_reward_function.";
  const std::string file = rlcore_test::source_dir() + "/tests/plugins/reward/fixtures/custom_reward.py";
  // openai/gsm8k would pick the gsm8k grader; the custom function replaces it.
  const std::string input = R"({"response": "right", "ground_truth": "right", "data_source": "openai/gsm8k",)"
                            R"( "extra_info": {"weight": 2.0, "nested": {"index": 3}}})"
                            "\n"
                            R"({"response": "wrong", "ground_truth": "right", "data_source": "openai/gsm8k",)"
                            R"( "extra_info": {"nested": {"index": 4}}})"
                            "\n";
  auto result = run({"grade", key + "path=" + file, key + "name=with_extras", key + "reward_kwargs.bonus=0.5",
                     key + "python=" + rlcore_test::reference_python()},
                    input);
  INFO(result.err);
  REQUIRE(result.status == 0);
  const std::vector<nlohmann::json> records = json_lines(result.out);
  REQUIRE(records.size() == 3);
  CHECK(records[0]["score"] == 2.5);
  CHECK(records[0]["nested_index"] == 3.0);
  CHECK(records[1]["score"] == 0.5);
  CHECK(records[1]["acc"] == 0.0);
  CHECK(records[2]["summary"]["count"] == 2);

  result = run({"grade", key + "path=/nonexistent/reward.py"}, input);
  CHECK(result.status == 1);
  CHECK_THAT(result.err, Catch::Contains("'/nonexistent/reward.py' is not a readable file"));
  result = run({"grade", key + "path=" + file, key + "timeout_s=0"}, input);
  CHECK(result.status == 1);
  CHECK_THAT(result.err, Catch::Contains("timeout_s"));
}

TEST_CASE("unknown commands and options are reported", "[cli]") {
  auto result = run({"frobnicate"});
  CHECK(result.status == 2);
  CHECK_THAT(result.err, Catch::Contains("unknown command 'frobnicate'"));
  result = run({"plugins", "--bogus"});
  CHECK(result.status == 1);
  CHECK_THAT(result.err, Catch::Contains("unrecognised option '--bogus'"));
}

TEST_CASE("every command's --help prints its usage and exits 0, as the top-level usage promises", "[cli]") {
  const std::vector<std::string> commands = {"plugins", "config", "conformance", "export", "data",  "grade",
                                             "model",   "report", "serve",       "sft",    "worker"};
  for (const std::string& command : commands) {
    for (const std::string& flag : {"--help", "-h"}) {
      INFO(command << " " << flag);
      const auto result = run({command, flag});
      CHECK(result.status == 0);
      CHECK(result.err.empty());
      CHECK_THAT(result.out, Catch::Contains("rlcore " + command));
    }
  }
  const auto train = run({"--config", "run.yaml", "--help"});  // the trainer: no command word
  CHECK(train.status == 0);
  CHECK_THAT(train.out, Catch::Contains("--config"));
}

TEST_CASE("rlcore data make writes either task and refuses options of the other", "[cli]") {
  const auto dir = std::filesystem::temp_directory_path() / ("rlcore_cli_data_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto result = run({"data", "make", "--task", "gsm8k-style", "--out", dir.string(), "--train", "5", "--test", "2"});
  INFO(result.err);
  REQUIRE(result.status == 0);
  CHECK_THAT(result.out, Catch::Contains((dir / "train.parquet").string() + "  5 records") &&
                             Catch::Contains((dir / "test.parquet").string() + "  2 records (none in train)"));
  CHECK(std::filesystem::file_size(dir / "train.parquet") > 0);

  result = run({"data", "make", "--task", "gsm8k-style", "--out", dir.string(), "--digits", "3"});
  CHECK(result.status == 1);
  CHECK_THAT(result.err, Catch::Contains("--digits does not apply to --task gsm8k-style"));
  result = run({"data", "make", "--task", "arithmetic", "--out", dir.string(), "--test", "3"});
  CHECK(result.status == 1);
  CHECK_THAT(result.err, Catch::Contains("--test does not apply to --task arithmetic"));
  result = run({"data", "make", "--task", "repeated-addition", "--out", (dir / "long").string(), "--train", "7",
                "--val", "3", "--max-terms", "4"});
  CHECK(result.status == 0);
  CHECK_THAT(result.out, Catch::Contains("multipliers 1 to 4") && Catch::Contains("7 RL records") &&
                             Catch::Contains("3 RL records (none in train)"));
  result = run({"data", "make", "--task", "repeated-addition", "--out", dir.string(), "--ops", "*"});
  CHECK_THAT(result.err, Catch::Contains("--ops does not apply to --task repeated-addition"));
  result = run({"data", "make", "--task", "gsm8k", "--out", dir.string()});
  CHECK(result.status == 1);
  CHECK_THAT(
      result.err,
      Catch::Contains("unknown task 'gsm8k'; tasks: arithmetic, arithmetic-tool, repeated-addition, gsm8k-style"));
  std::filesystem::remove_all(dir);
}
