// The trainer's checkpoint directories (see trainer/checkpoint.h).
#include "trainer/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "rlcore/atomic_file.h"
#include "rlcore/error.h"
#include "rlcore/fault_point.h"

namespace fs = std::filesystem;

namespace rlcore::trainer {
namespace {

constexpr const char* kLatestFile = "latest_checkpointed_iteration.txt";
constexpr const char* kStateFile = "trainer_state.json";
constexpr const char* kStepPrefix = "global_step_";

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw IoError("cannot read " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool is_step_name(const std::string& name) {
  if (name.rfind(kStepPrefix, 0) != 0) return false;
  const std::string digits = name.substr(std::string(kStepPrefix).size());
  return !digits.empty() && digits.size() < 19 && std::all_of(digits.begin(), digits.end(), ::isdigit);
}

// Steps whose directory was renamed into place, i.e. completely written.
std::vector<int64_t> complete_steps(const fs::path& root) {
  std::vector<int64_t> steps;
  if (!fs::is_directory(root)) return steps;
  for (const auto& entry : fs::directory_iterator(root)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || !is_step_name(name) || !fs::exists(entry.path() / kStateFile)) continue;
    steps.push_back(std::stoll(name.substr(std::string(kStepPrefix).size())));
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

fs::path step_dir(const fs::path& root, int64_t step) { return root / (kStepPrefix + std::to_string(step)); }

}  // namespace

void check_run_dir_writable(const std::string& run_dir) {
  const fs::path probe = fs::path(run_dir) / ".rlcore_write_probe";
  try {
    std::error_code error;
    fs::create_directories(run_dir, error);
    if (error) throw IoError("cannot create it: " + error.message());
    // A page's worth: on a full disk a few bytes can still fit in a partly used block.
    write_file_atomically(probe, std::string(4096, '\n'));
    fs::remove(probe);
  } catch (const IoError& e) {
    throw IoError("trainer.default_local_dir '" + run_dir +
                  "' is not writable, so no checkpoint or metric could be saved: " + e.what());
  }
}

CheckpointStore::CheckpointStore(std::string run_dir) : run_dir_(std::move(run_dir)) {}

std::string CheckpointStore::root() const { return (fs::path(run_dir_) / "checkpoints").string(); }

std::string CheckpointStore::staging_dir(int64_t step) const {
  // What an interrupted save left is garbage: no resume reads it.
  if (fs::is_directory(root())) {
    for (const auto& entry : fs::directory_iterator(root())) {
      if (entry.path().extension() == ".partial") fs::remove_all(entry.path());
    }
  }
  const fs::path dir = step_dir(root(), step).string() + ".partial";
  fs::create_directories(dir);
  return dir.string();
}

std::string CheckpointStore::commit(int64_t step, const TrainerState& state, int64_t keep) {
  const fs::path final_dir = step_dir(root(), step);
  const fs::path staging = final_dir.string() + ".partial";
  const nlohmann::json json = {{"step", state.step},
                               {"epoch", state.sampler.epoch},
                               {"position", state.sampler.position},
                               {"kl_coef", state.kl_coef}};
  fault_point("checkpoint.commit.engines_saved");
  write_file_atomically(staging / kStateFile, json.dump(2) + "\n");
  fault_point("checkpoint.commit.state_written");
  fs::remove_all(final_dir);  // an older save of this step, before a resume
  fs::rename(staging, final_dir);
  sync_directory(root());
  fault_point("checkpoint.commit.renamed");
  write_file_atomically(fs::path(root()) / kLatestFile, std::to_string(step) + "\n");
  if (keep > 0) {
    const std::vector<int64_t> steps = complete_steps(root());
    for (size_t i = 0; i + static_cast<size_t>(keep) < steps.size(); ++i) {
      fs::remove_all(step_dir(root(), steps[i]));
    }
  }
  return final_dir.string();
}

std::optional<std::string> CheckpointStore::latest() const {
  // The newest complete directory wins over the marker, which lags it when a
  // save was interrupted between the rename and the marker's update.
  const std::vector<int64_t> steps = complete_steps(root());
  if (steps.empty()) return std::nullopt;
  const fs::path marker = fs::path(root()) / kLatestFile;
  const std::string marked = fs::exists(marker) ? read_file(marker) : "";
  if (marked.substr(0, marked.find('\n')) != std::to_string(steps.back())) {
    spdlog::warn("{} names step {}, but the newest complete checkpoint is step {}: resuming from that", marker.string(),
                 marked.empty() ? "none" : marked.substr(0, marked.find('\n')), steps.back());
  }
  return step_dir(root(), steps.back()).string();
}

TrainerState CheckpointStore::read_state(const std::string& checkpoint_dir) {
  const fs::path path = fs::path(checkpoint_dir) / kStateFile;
  try {
    const nlohmann::json json = nlohmann::json::parse(read_file(path));
    TrainerState state;
    state.step = json.at("step").get<int64_t>();
    state.sampler.epoch = json.at("epoch").get<int64_t>();
    state.sampler.position = json.at("position").get<int64_t>();
    state.kl_coef = json.at("kl_coef").get<double>();
    return state;
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(path.string() + ": " + e.what());
  }
}

}  // namespace rlcore::trainer
