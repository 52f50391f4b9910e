// `rlcore conformance`: the checks that run unchanged against every plugin
// component of a kind and compare it with the in-tree reference of that kind
// (ggml's test-backend-ops idea). Each kind's checks live in their own file;
// runner.cc picks the components and report.cc prints the results.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "rlcore/batch.h"
#include "rlcore/config_node.h"
#include "rlcore/inference_engine.h"
#include "rlcore/registry.h"
#include "rlcore/train_engine.h"

namespace rlcore::conformance {

enum class Status { kPass, kFail, kNotApplicable, kSkipped };
const char* status_name(Status status);  // "pass" | "fail" | "not applicable" | "skipped"

// What one check found. `error` and `tolerance` are set by checks that measure
// a difference; `detail` says why anything is not a pass.
struct CheckResult {
  std::string kind;
  std::string name;    // the component's registered name
  std::string plugin;  // the plugin it came from
  std::string check;
  Status status = Status::kPass;
  std::optional<double> error;
  std::optional<double> tolerance;
  double seconds = 0;
  std::string detail;
};

// The outcome a check function returns; a thrown exception is a failure whose
// detail is the exception's message.
struct Outcome {
  Status status = Status::kPass;
  std::optional<double> error;
  std::optional<double> tolerance;
  std::string detail;

  static Outcome pass(std::string detail = "") { return {Status::kPass, {}, {}, std::move(detail)}; }
  static Outcome fail(std::string detail) { return {Status::kFail, {}, {}, std::move(detail)}; }
  static Outcome not_applicable(std::string why) { return {Status::kNotApplicable, {}, {}, std::move(why)}; }
  static Outcome skipped(std::string why) { return {Status::kSkipped, {}, {}, std::move(why)}; }
  // Passes when error <= tolerance (a NaN error fails); `what` names the quantity compared.
  static Outcome measured(double error, double tolerance, const std::string& what);
};

// Everything a check needs: the component under test, its reference and a
// scratch directory of its own.
struct CheckEnv {
  const Registry& registry;
  const ComponentEntry& candidate;
  ConfigNode candidate_options;               // from --set; the checks may add keys they need
  const ComponentEntry* reference = nullptr;  // null when the reference is not loaded
  std::string reference_name;
  std::filesystem::path workdir;                // empty directory, removed after the check
  const std::filesystem::path& tiny_model;      // a tiny random HF checkpoint (seed 1), shared by the checks
  const std::filesystem::path& tiny_model_alt;  // the same shapes, other weights (seed 2)
};

struct Check {
  std::string name;
  std::function<Outcome(CheckEnv&)> run;
};

// The checks for each kind, in the order they run (and are documented).
std::vector<Check> train_engine_checks();
std::vector<Check> inference_engine_checks();
std::vector<Check> request_checks();  // inference engines with GeneratesRequests (the rest: not applicable)
std::vector<Check> weight_adaptor_checks();
std::vector<Check> offloader_checks();
std::vector<Check> sharding_manager_checks();
std::vector<Check> grader_checks();
std::vector<Check> tool_checks();
std::vector<Check> advantage_estimator_checks();
std::vector<Check> policy_loss_checks();
// The checks for `kind`; empty for a kind without any.
std::vector<Check> checks_for(const std::string& kind);

// Shared by the checks of several kinds (defined with the engine checks).
// Engines are made on the cpu from `model` with the suite's options (train
// engines that declare optim.lr get 1e-3); the test batch and loss of the train checks.
std::shared_ptr<TrainEngine> make_train_engine(const ComponentEntry& entry, const ConfigNode& options,
                                               const std::filesystem::path& model);
std::shared_ptr<InferenceEngine> make_inference_engine(const ComponentEntry& entry, const ConfigNode& options,
                                                       const std::filesystem::path& model);
Batch train_batch(uint64_t seed);
LossOutput pg_loss(const Batch& micro, const ModelOutput& out, const GlobalBatchInfo& global);
ForwardOptions forward_options(double temperature, bool entropy);
// Prompts of 3, 7 and 8 tokens, and greedy sampling of `max_tokens`.
const std::vector<std::vector<int32_t>>& test_prompts();
SamplingParams greedy(int64_t max_tokens = 8);
std::string show_tokens(const std::vector<int32_t>& tokens);  // "[5 17 42]"

// The in-tree reference of each kind ("fsdp", "native"); "" when the kind has none.
std::string default_reference(const std::string& kind);

struct RunOptions {
  std::vector<std::string> plugin_paths;  // candidates: components from these files / directories
  std::string kind;                       // only this kind ("" = all)
  std::string name;                       // only this component ("" = all)
  std::string reference;                  // "" = the kind's default reference
  std::vector<std::string> overrides;     // key=value options of the candidate
  // Where the tiny models go ("" = a scratch directory removed afterwards); kept, and
  // reused when already there, so a server can serve the same model (vllm_bridge).
  std::string models_dir;
};

// Components from `plugin_paths` (every component when empty), filtered by kind and name.
std::vector<const ComponentEntry*> select_candidates(const Registry& registry, const RunOptions& options);

// Runs every check of every candidate; `progress` (may be null) gets each result as it is made.
std::vector<CheckResult> run_checks(const Registry& registry, const std::vector<const ComponentEntry*>& candidates,
                                    const RunOptions& options,
                                    const std::function<void(const CheckResult&)>& progress = nullptr);

void print_table(std::ostream& out, const std::vector<CheckResult>& results);
void print_json(std::ostream& out, const std::vector<CheckResult>& results);

}  // namespace rlcore::conformance
