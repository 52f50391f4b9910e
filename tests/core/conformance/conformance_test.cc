// `rlcore conformance` run in-process: the in-tree engines pass every check
// that applies, and each deliberately broken engine (broken_engines.h)
// fails the check that covers its defect, named in the output.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../cli/cli_testing.h"
#include "../../common/server_process.h"
#include "../../common/test_paths.h"

namespace {

const std::string kPluginDir = rlcore_test::plugin_build_dir();
const std::string kBrokenDir = rlcore_test::conformance_plugin_dir();

struct Report {
  int status;
  nlohmann::json json;
  std::string err;
  // check name -> result, for one component
  std::map<std::string, nlohmann::json> by_check;
};

Report run_json(const std::vector<std::string>& args) {
  std::vector<std::string> full = {"conformance", "--format", "json"};
  full.insert(full.end(), args.begin(), args.end());
  const cli_test::CliResult result = cli_test::run(full);
  INFO(result.err);
  Report report{result.status, nlohmann::json::parse(result.out), result.err, {}};
  for (const auto& item : report.json["results"]) report.by_check[item["check"].get<std::string>()] = item;
  return report;
}

std::string status_of(const Report& report, const std::string& check) {
  auto it = report.by_check.find(check);
  if (it == report.by_check.end()) return "(absent)";
  return it->second["status"].get<std::string>();
}

// Every check passes except those listed with their expected status.
void require_statuses(const Report& report, const std::vector<std::string>& checks,
                      const std::map<std::string, std::string>& exceptions) {
  REQUIRE(report.by_check.size() == checks.size());
  for (const auto& check : checks) {
    const auto expected = exceptions.count(check) ? exceptions.at(check) : std::string("pass");
    INFO(check << ": " << report.by_check.at(check).dump());
    CHECK(status_of(report, check) == expected);
  }
}

const std::vector<std::string> kTrainChecks = {
    "create",         "forward_log_prob",  "forward_entropy",       "forward_sum_pi_squared",
    "optimizer_step", "grad_accumulation", "checkpoint_round_trip", "resume_continuity",
    "export_hf",      "offload_reload",    "data_parallel",         "gather_into_buffer"};
// The broken engines wrap fsdp without its optional capabilities.
const char* const kWrapped = "not applicable";
const std::vector<std::string> kInferenceChecks = {"create",
                                                   "greedy_vs_reference",
                                                   "logprobs_teacher_forcing",
                                                   "sampling_n",
                                                   "max_tokens",
                                                   "stop_tokens",
                                                   "seed_reproducible",
                                                   "load_weights",
                                                   "sleep_wake_up",
                                                   "weight_meta",
                                                   "requests_vs_batch",
                                                   "requests_abort",
                                                   "requests_seed_reproducible"};
// An inference engine without the `requests` capability: its checks are not applicable.
std::map<std::string, std::string> without_requests(std::map<std::string, std::string> statuses) {
  for (const char* check : {"requests_vs_batch", "requests_abort", "requests_seed_reproducible"}) {
    statuses[check] = "not applicable";
  }
  return statuses;
}

}  // namespace

TEST_CASE("the in-tree fsdp train engine passes every check that applies", "[conformance]") {
  const Report report = run_json({"--plugins", kPluginDir + "/librlcore-train-fsdp.so"});
  require_statuses(report, kTrainChecks, {});
  CHECK(report.status == 0);
  CHECK(report.json["summary"]["failed"] == 0);
  // Measured checks state their error and tolerance.
  CHECK(report.by_check.at("forward_log_prob")["tolerance"].get<double>() == Approx(2e-5));
  CHECK(report.by_check.at("forward_log_prob")["error"].get<double>() <= 2e-5);
  // Over two ranks every unit of the tiny model (embeddings, 2 layers, head) lands in the caller's buffer.
  CHECK(report.by_check.at("gather_into_buffer")["detail"] == "bit-exact, 4 gathers in the caller's buffers");
}

TEST_CASE("the in-tree native inference engine passes every check", "[conformance]") {
  const Report report = run_json({"--plugins", kPluginDir + "/librlcore-infer-native.so"});
  require_statuses(report, kInferenceChecks, {});
  CHECK(report.status == 0);
}

#ifdef RLCORE_HAVE_MEGATRON
TEST_CASE("the in-tree megatron train engine passes every check that applies", "[conformance]") {
  const Report report = run_json({"--plugins", kPluginDir + "/librlcore-train-megatron.so", "--kind", "train_engine"});
  require_statuses(report, kTrainChecks, {{"gather_into_buffer", "not applicable"}});
  CHECK(report.status == 0);
}
#endif

// Every result of a run, keyed "kind/name check".
std::map<std::string, std::string> all_statuses(const Report& report) {
  std::map<std::string, std::string> out;
  for (const auto& item : report.json["results"]) {
    out[item["kind"].get<std::string>() + "/" + item["name"].get<std::string>() + " " +
        item["check"].get<std::string>()] = item["status"].get<std::string>();
  }
  return out;
}

TEST_CASE("the hybrid engine's managers, adaptors and offloader pass; naive claims no memory bound",
          "[conformance][hybrid]") {
  const Report report = run_json({"--plugins", kPluginDir + "/librlcore-hybrid-engine.so"});
  std::map<std::string, std::string> expected = {{"sharding_manager/bucketed create", "pass"},
                                                 {"sharding_manager/naive create", "pass"},
                                                 {"weight_adaptor/identity create", "pass"},
                                                 {"weight_adaptor/megatron create", "pass"},
                                                 {"offloader/engine create", "pass"},
                                                 {"sharding_manager/bucketed round_trip", "pass"},
                                                 {"sharding_manager/bucketed ledger_bound", "pass"},
                                                 {"sharding_manager/naive round_trip", "pass"},
                                                 // The baseline that keeps redundant copies (docs/hybrid-engine.md).
                                                 {"sharding_manager/naive ledger_bound", "not applicable"},
                                                 {"weight_adaptor/identity round_trip", "pass"},
                                                 {"offloader/engine round_trip", "pass"}};
  // The megatron adaptor's sources are Megatron names: it runs against train-megatron when that is built.
#ifdef RLCORE_HAVE_MEGATRON
  expected["weight_adaptor/megatron round_trip"] = "pass";
#else
  expected["weight_adaptor/megatron round_trip"] = "not applicable";
#endif
  INFO(report.json.dump(1));
  CHECK(all_statuses(report) == expected);
  CHECK(report.status == 0);
}

TEST_CASE("the tools plugin's tools pass the tool contract checks", "[conformance][contracts]") {
  const Report tools = run_json({"--plugins", kPluginDir + "/librlcore-tools.so"});
  INFO(tools.json.dump(1));
  CHECK(tools.status == 0);
  // code_interpreter needs a sandbox's url, python_function a file: their checks are skipped, naming the key.
  for (const auto& item : tools.json["results"]) {
    const bool needs_url = item["name"] == "code_interpreter";
    const bool needs_file = item["name"] == "python_function";
    INFO(item.dump());
    CHECK(item["status"] == (needs_url || needs_file ? "skipped" : "pass"));
    if (needs_url) CHECK_THAT(item["detail"].get<std::string>(), Catch::Contains("tools[code_interpreter].config.url"));
    if (needs_file) CHECK_THAT(item["detail"].get<std::string>(), Catch::Contains("tools[python_function].config"));
  }
  CHECK(tools.json["summary"]["checks"].get<int>() == 4 * 4);
}

TEST_CASE("the reward plugin's graders and the built-in estimators and losses pass their contract checks",
          "[conformance][contracts]") {
  const Report graders = run_json({"--plugins", kPluginDir + "/librlcore-reward.so"});
  INFO(graders.json.dump(1));
  CHECK(graders.status == 0);
  // Every grader passes, except those that need an option (custom_function a path, sandbox_fusion a
  // sandbox's url): their checks are skipped, naming the key.
  for (const auto& item : graders.json["results"]) {
    const bool custom = item["name"] == "custom_function";
    const bool sandbox = item["name"] == "sandbox_fusion";
    CHECK(item["status"] == (custom || sandbox ? "skipped" : "pass"));
    if (custom) CHECK_THAT(item["detail"].get<std::string>(), Catch::Contains("reward.custom_reward_function.path"));
    if (sandbox) CHECK_THAT(item["detail"].get<std::string>(), Catch::Contains("reward.graders.sandbox_fusion.url"));
  }
  CHECK(graders.json["summary"]["checks"].get<int>() >= 4 * 4);
  for (const char* kind : {"advantage_estimator", "policy_loss"}) {
    INFO(kind);
    const Report builtins = run_json({"--kind", kind});
    INFO(builtins.json.dump(1));
    CHECK(builtins.json["summary"]["checks"].get<int>() > 0);
    CHECK(builtins.status == 0);
    // Everything passes except what needs an option without a usable default (dro's dro_beta,
    // gdpo's gdpo_reward_keys): every check of those is skipped, naming the key.
    for (const auto& item : builtins.json["results"]) {
      const std::string name = item["name"];
      const bool needs_options = name == "dro" || name == "gdpo";
      INFO(item.dump());
      CHECK(item["status"] == (needs_options ? "skipped" : "pass"));
      if (needs_options) {
        CHECK_THAT(item["detail"].get<std::string>(), Catch::Contains(name == "dro" ? "dro_beta" : "gdpo_reward_keys"));
      }
    }
  }
  const Report dro = run_json({"--kind", "policy_loss", "--name", "dro", "dro_beta=0.1"});
  CHECK(dro.status == 0);
  CHECK(dro.json["summary"]["passed"].get<int>() == 5);
  const Report gdpo = run_json({"--kind", "advantage_estimator", "--name", "gdpo", "gdpo_reward_keys=[acc]"});
  INFO(gdpo.json.dump(1));
  CHECK(gdpo.json["results"][0]["status"] == "pass");
}

TEST_CASE("wrong log-probs fail forward_log_prob, named, and nothing else", "[conformance][broken]") {
  const Report report = run_json({"--plugins", kBrokenDir + "/broken_log_probs.so"});
  CHECK(report.status == 1);
  require_statuses(report, kTrainChecks,
                   {{"forward_log_prob", "fail"},
                    {"optimizer_step", "fail"},
                    {"forward_sum_pi_squared", kWrapped},
                    {"gather_into_buffer", kWrapped}});
  const auto& failed = report.by_check.at("forward_log_prob");
  CHECK(failed["name"] == "broken_log_probs");
  CHECK(failed["error"].get<double>() == Approx(0.01).margin(1e-4));
  CHECK_THAT(failed["detail"].get<std::string>(), Catch::Contains("log_prob"));
}

TEST_CASE("gathers that land one element past their listed offsets fail gather_into_buffer, named",
          "[conformance][broken]") {
  const Report report = run_json({"--plugins", kBrokenDir + "/broken_gather_into.so"});
  CHECK(report.status == 1);
  require_statuses(report, kTrainChecks, {{"forward_sum_pi_squared", kWrapped}, {"gather_into_buffer", "fail"}});
  const std::string detail = report.by_check.at("gather_into_buffer")["detail"].get<std::string>();
  CHECK_THAT(detail, Catch::Contains("rank 0 of 2") && Catch::Contains("not at its listed offset"));
}

TEST_CASE("a checkpoint that drops a tensor fails the checkpoint checks", "[conformance][broken]") {
  const Report report = run_json({"--plugins", kBrokenDir + "/broken_checkpoint.so"});
  CHECK(report.status == 1);
  require_statuses(report, kTrainChecks,
                   {{"checkpoint_round_trip", "fail"},
                    {"resume_continuity", "fail"},
                    {"forward_sum_pi_squared", kWrapped},
                    {"gather_into_buffer", kWrapped}});
  INFO(report.by_check.at("checkpoint_round_trip").dump());
  CHECK_FALSE(report.by_check.at("checkpoint_round_trip")["detail"].get<std::string>().empty());
}

TEST_CASE("an engine that ignores load_weights fails load_weights", "[conformance][broken]") {
  const Report report = run_json({"--plugins", kBrokenDir + "/broken_load_weights.so"});
  CHECK(report.status == 1);
  require_statuses(report, kInferenceChecks, without_requests({{"load_weights", "fail"}, {"sleep_wake_up", "pass"}}));
  CHECK_THAT(report.by_check.at("load_weights")["detail"].get<std::string>(),
             Catch::Contains("after load_weights") && Catch::Contains("the new weights"));
}

TEST_CASE("an engine whose log-probs change by an ulp across sleep fails sleep_wake_up", "[conformance][broken]") {
  const Report report = run_json({"--plugins", kBrokenDir + "/broken_wake_up.so"});
  CHECK(report.status == 1);
  require_statuses(report, kInferenceChecks, without_requests({{"sleep_wake_up", "fail"}, {"load_weights", "pass"}}));
  CHECK_THAT(report.by_check.at("sleep_wake_up")["detail"].get<std::string>(),
             Catch::Contains("after sleep / wake_up / load_weights vs before") && Catch::Contains("> tolerance 0"));
}

TEST_CASE("a manager that claims bounded_swap_memory but keeps redundant copies fails ledger_bound",
          "[conformance][broken]") {
  const Report report = run_json({"--plugins", kBrokenDir + "/broken_swap_bound.so"});
  INFO(report.json.dump(1));
  CHECK(report.status == 1);
  CHECK(all_statuses(report) ==
        std::map<std::string, std::string>{{"sharding_manager/broken_swap_bound create", "pass"},
                                           {"sharding_manager/broken_swap_bound round_trip", "pass"},
                                           {"sharding_manager/broken_swap_bound ledger_bound", "fail"}});
  const auto& failed = report.by_check.at("ledger_bound");
  CHECK(failed["error"].get<double>() > failed["tolerance"].get<double>());
}

TEST_CASE("the table names the failing check and the exit code says it failed", "[conformance][broken]") {
  const cli_test::CliResult result =
      cli_test::run({"conformance", "--plugins", kBrokenDir + "/broken_log_probs.so", "--name", "broken_log_probs"});
  CHECK(result.status == 1);
  CHECK_THAT(result.out, Catch::Contains("COMPONENT") && Catch::Contains("TOLERANCE"));
  CHECK_THAT(result.out, Catch::Matches("(.|\n)*train_engine/broken_log_probs +forward_log_prob +fail(.|\n)*"));
  CHECK_THAT(result.out, Catch::Contains("1 failed") || Catch::Contains("2 failed"));
}

TEST_CASE("--reference picks the reference; a missing one skips the comparisons, naming it", "[conformance]") {
  const std::string fsdp = kPluginDir + "/librlcore-train-fsdp.so";
  const Report missing = run_json({"--plugins", fsdp, "--reference", "no_such_engine"});
  CHECK(missing.status == 0);
  for (const char* check : {"forward_log_prob", "forward_entropy", "optimizer_step"}) {
    INFO(check);
    CHECK(status_of(missing, check) == "skipped");
    CHECK_THAT(missing.by_check.at(check)["detail"].get<std::string>(), Catch::Contains("'no_such_engine'"));
  }
  // Checks that need no reference still run.
  CHECK(status_of(missing, "checkpoint_round_trip") == "pass");
}

TEST_CASE("key=value options reach the component under test, not the reference", "[conformance]") {
  // fsdp at lr 1e-2 against the reference at the suite's 1e-3: the step differs, the forward does not.
  const Report report = run_json({"--plugins", kPluginDir + "/librlcore-train-fsdp.so", "optim.lr=1e-2"});
  CHECK(report.status == 1);
  CHECK(status_of(report, "forward_log_prob") == "pass");
  CHECK(status_of(report, "optimizer_step") == "fail");
}

TEST_CASE("conformance refuses bad arguments and an empty selection", "[conformance]") {
  auto result = cli_test::run({"conformance", "--format", "xml"});
  CHECK(result.status == 1);
  CHECK_THAT(result.err, Catch::Contains("--format must be table or json"));
  result = cli_test::run({"conformance", "--plugins", kPluginDir + "/librlcore-train-fsdp.so", "--kind", "reward"});
  CHECK(result.status == 1);
  CHECK_THAT(result.err, Catch::Contains("no component matched"));
  result = cli_test::run({"conformance", "--kind", "engine"});
  CHECK(result.status == 1);
  CHECK_THAT(result.err, Catch::Contains("not a component kind"));
}

TEST_CASE("vllm_bridge passes against rlcore serve --dev-mode serving the suite's tiny model",
          "[conformance][vllm_bridge]") {
  const std::string bridge = kPluginDir + "/librlcore-infer-vllm-bridge.so";
  if (!std::filesystem::exists(bridge)) FAIL("infer-vllm-bridge is not built: " << bridge);
  const std::filesystem::path models =
      std::filesystem::temp_directory_path() / ("rlcore_conformance_models_" + std::to_string(::getpid()));
  std::filesystem::remove_all(models);
  // Any quick run with --models writes the suite's tiny models there, for the server to serve.
  REQUIRE(
      run_json({"--plugins", kPluginDir + "/librlcore-reward.so", "--name", "exact_match", "--models", models.string()})
          .status == 0);
  REQUIRE(std::filesystem::exists(models / "tiny_seed1" / "config.json"));
  {
    rlcore_test::ServerProcess server(rlcore_test::rlcore_executable(),
                                      {"--model", (models / "tiny_seed1").string(), "--port", "0", "--dev-mode",
                                       "--plugins", kPluginDir, "--log-level", "warn"});
    const Report report = run_json({"--plugins", bridge, "--models", models.string(), "server_url=" + server.url()});
    INFO(report.json.dump(1));
    require_statuses(report, kInferenceChecks, without_requests({}));
    CHECK(report.status == 0);
  }
  std::filesystem::remove_all(models);
}
