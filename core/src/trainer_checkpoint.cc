// The trainer's checkpoint directories (see trainer_checkpoint.h).
#include "trainer_checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlcore/error.h"

namespace fs = std::filesystem;

namespace rlcore::trainer {
namespace {

constexpr const char* kLatestFile = "latest_checkpointed_iteration.txt";
constexpr const char* kStateFile = "trainer_state.json";
constexpr const char* kStepPrefix = "global_step_";

void write_atomically(const fs::path& path, const std::string& text) {
  const fs::path temp = path.string() + ".tmp";
  {
    std::ofstream out(temp, std::ios::trunc);
    out << text;
    if (!out.flush()) throw IoError("cannot write " + temp.string());
  }
  fs::rename(temp, path);
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw IoError("cannot read " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<int64_t> complete_steps(const fs::path& root) {
  std::vector<int64_t> steps;
  if (!fs::is_directory(root)) return steps;
  for (const auto& entry : fs::directory_iterator(root)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || name.rfind(kStepPrefix, 0) != 0) continue;
    const std::string digits = name.substr(std::string(kStepPrefix).size());
    if (digits.empty() || !std::all_of(digits.begin(), digits.end(), ::isdigit)) continue;
    steps.push_back(std::stoll(digits));
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

}  // namespace

CheckpointStore::CheckpointStore(std::string run_dir) : run_dir_(std::move(run_dir)) {}

std::string CheckpointStore::root() const { return (fs::path(run_dir_) / "checkpoints").string(); }

std::string CheckpointStore::staging_dir(int64_t step) const {
  const fs::path dir = fs::path(root()) / (kStepPrefix + std::to_string(step) + ".partial");
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

std::string CheckpointStore::commit(int64_t step, const TrainerState& state, int64_t keep) {
  const fs::path staging = fs::path(root()) / (kStepPrefix + std::to_string(step) + ".partial");
  const fs::path final_dir = fs::path(root()) / (kStepPrefix + std::to_string(step));
  const nlohmann::json json = {{"step", state.step},
                               {"epoch", state.sampler.epoch},
                               {"position", state.sampler.position},
                               {"kl_coef", state.kl_coef}};
  write_atomically(staging / kStateFile, json.dump(2) + "\n");
  fs::remove_all(final_dir);
  fs::rename(staging, final_dir);
  write_atomically(fs::path(root()) / kLatestFile, std::to_string(step) + "\n");
  if (keep > 0) {
    const std::vector<int64_t> steps = complete_steps(root());
    for (size_t i = 0; i + static_cast<size_t>(keep) < steps.size(); ++i) {
      fs::remove_all(fs::path(root()) / (kStepPrefix + std::to_string(steps[i])));
    }
  }
  return final_dir.string();
}

std::optional<std::string> CheckpointStore::latest() const {
  const fs::path marker = fs::path(root()) / kLatestFile;
  if (!fs::exists(marker)) return std::nullopt;
  const std::string text = read_file(marker);
  const fs::path dir = fs::path(root()) / (kStepPrefix + std::to_string(std::stoll(text)));
  if (!fs::exists(dir / kStateFile)) {
    throw IoError(marker.string() + " names step " + text.substr(0, text.find('\n')) + ", but " +
                  (dir / kStateFile).string() + " does not exist");
  }
  return dir.string();
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
