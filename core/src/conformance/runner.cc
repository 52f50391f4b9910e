// Picks the components under test, finds each one's reference, and runs the
// checks of its kind, each timed, in a scratch directory of its own.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <filesystem>
#include <optional>
#include <sstream>

#include "conformance/conformance.h"
#include "conformance/tiny_model.h"
#include "rlcore/elapsed_seconds.h"
#include "rlcore/error.h"

namespace rlcore::conformance {
namespace {

namespace fs = std::filesystem;

// A fresh directory under the system temp dir, removed with the object.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag) {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("rlcore_conformance_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + "_" + tag);
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// True when `file` is `path` or lies under the directory `path`.
bool from_path(const std::string& file, const std::string& path) {
  std::error_code error;
  const fs::path f = fs::weakly_canonical(file, error);
  const fs::path p = fs::weakly_canonical(path, error);
  if (f == p) return true;
  const auto [mismatch, unused] = std::mismatch(p.begin(), p.end(), f.begin(), f.end());
  return mismatch == p.end();
}

}  // namespace

const char* status_name(Status status) {
  switch (status) {
    case Status::kPass:
      return "pass";
    case Status::kFail:
      return "fail";
    case Status::kNotApplicable:
      return "not applicable";
    case Status::kSkipped:
      return "skipped";
  }
  return "?";
}

Outcome Outcome::measured(double error, double tolerance, const std::string& what) {
  Outcome outcome;
  outcome.error = error;
  outcome.tolerance = tolerance;
  // Written so that a NaN error fails.
  outcome.status = error <= tolerance ? Status::kPass : Status::kFail;
  if (outcome.status == Status::kFail) {
    std::ostringstream detail;
    detail << what << ": error " << error << " > tolerance " << tolerance;
    outcome.detail = detail.str();
  }
  return outcome;
}

std::string default_reference(const std::string& kind) {
  if (kind == "train_engine") return "fsdp";
  if (kind == "inference_engine") return "native";
  return "";
}

std::vector<Check> checks_for(const std::string& kind) {
  if (kind == "train_engine") return train_engine_checks();
  if (kind == "inference_engine") return inference_engine_checks();
  if (kind == "weight_adaptor") return weight_adaptor_checks();
  if (kind == "offloader") return offloader_checks();
  if (kind == "sharding_manager") return sharding_manager_checks();
  if (kind == "reward") return grader_checks();
  if (kind == "tool") return tool_checks();
  if (kind == "advantage_estimator") return advantage_estimator_checks();
  if (kind == "policy_loss") return policy_loss_checks();
  return {};
}

std::vector<const ComponentEntry*> select_candidates(const Registry& registry, const RunOptions& options) {
  std::vector<const ComponentEntry*> out;
  for (const ComponentEntry* entry : registry.all()) {
    if (!options.kind.empty() && entry->kind != options.kind) continue;
    if (!options.name.empty() && entry->name != options.name) continue;
    bool given = options.plugin_paths.empty();
    for (const auto& path : options.plugin_paths)
      given = given || (!entry->origin.file.empty() && from_path(entry->origin.file, path));
    if (given) out.push_back(entry);
  }
  return out;
}

std::vector<CheckResult> run_checks(const Registry& registry, const std::vector<const ComponentEntry*>& candidates,
                                    const RunOptions& options,
                                    const std::function<void(const CheckResult&)>& progress) {
  ConfigNode overrides;
  apply_overrides(overrides, options.overrides);
  std::optional<ScratchDir> scratch;
  if (options.models_dir.empty()) scratch.emplace("models");
  const fs::path models = options.models_dir.empty() ? scratch->path() : fs::path(options.models_dir);
  const fs::path tiny_model = models / "tiny_seed1";
  const fs::path tiny_model_alt = models / "tiny_seed2";
  // The models are deterministic: ones already in --models are the same bytes (a server may be serving them).
  if (!fs::exists(tiny_model / "config.json")) write_tiny_model(tiny_model, 1);
  if (!fs::exists(tiny_model_alt / "config.json")) write_tiny_model(tiny_model_alt, 2);

  std::vector<CheckResult> results;
  for (const ComponentEntry* candidate : candidates) {
    const std::string reference_name =
        options.reference.empty() ? default_reference(candidate->kind) : options.reference;
    const ComponentEntry* reference = reference_name.empty() ? nullptr : registry.find(candidate->kind, reference_name);
    auto record = [&](CheckResult result) {
      if (progress) progress(result);
      results.push_back(std::move(result));
    };
    CheckResult base;
    base.kind = candidate->kind;
    base.name = candidate->name;
    base.plugin = candidate->origin.plugin;
    const std::vector<Check> checks = checks_for(candidate->kind);
    if (checks.empty()) {
      CheckResult result = base;
      result.check = "(all)";
      result.status = Status::kSkipped;
      result.detail = "the suite has no checks for the kind " + candidate->kind + " yet";
      record(result);
      continue;
    }
    std::string create_failed;
    for (const Check& check : checks) {
      CheckResult result = base;
      result.check = check.name;
      if (!create_failed.empty()) {
        result.status = Status::kSkipped;
        result.detail = "the component could not be created: " + create_failed;
        record(result);
        continue;
      }
      ScratchDir workdir(candidate->name + "_" + check.name);
      CheckEnv env{registry,       *candidate,     overrides.clone(), reference,
                   reference_name, workdir.path(), tiny_model,        tiny_model_alt};
      const auto start = std::chrono::steady_clock::now();
      Outcome outcome;
      try {
        outcome = check.run(env);
      } catch (const ConfigError& e) {
        // Options the suite cannot invent (a key without a usable default) are the user's to give.
        outcome = check.name == "create" ? Outcome::skipped(std::string("needs options the suite cannot choose: ") +
                                                            e.what() + " (give them as key=value)")
                                         : Outcome::fail(std::string("threw: ") + e.what());
      } catch (const std::exception& e) {
        outcome = Outcome::fail(std::string("threw: ") + e.what());
      } catch (...) {
        outcome = Outcome::fail("threw a non-standard exception");
      }
      result.seconds = seconds_since(start);
      result.status = outcome.status;
      result.error = outcome.error;
      result.tolerance = outcome.tolerance;
      result.detail = outcome.detail;
      if (check.name == "create" && (outcome.status == Status::kFail || outcome.status == Status::kSkipped)) {
        create_failed = outcome.detail;
      }
      record(result);
    }
  }
  return results;
}

}  // namespace rlcore::conformance
