// Helpers of the end-to-end trainer tests (see e2e_testing.h).
#include "e2e_testing.h"
#include "../common/test_paths.h"
#include "rlcore/core/checkpoint_init.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace fs = std::filesystem;

namespace e2e {
namespace {

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::string shell_quote(const std::string& arg) {
  std::string quoted = "'";
  for (char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

RunResult run_rlcore(const std::vector<std::string>& args, const std::string& shell_prefix) {
  static int counter = 0;
  const fs::path log = fs::temp_directory_path() /
                       ("rlcore_e2e_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + ".log");
  std::string command =
      shell_prefix + (shell_prefix.empty() ? "" : " ") + shell_quote(rlcore_test::rlcore_executable());
  for (const auto& arg : args) command += " " + shell_quote(arg);
  command += " --plugins " + shell_quote(rlcore_test::plugin_build_dir()) + " --plugins " +
             shell_quote(rlcore_test::e2e_plugin_dir());
  command += " > " + shell_quote(log.string()) + " 2>&1";
  RunResult result;
  const int raw = std::system(command.c_str());
  result.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  result.output = read_text(log);
  fs::remove(log);
  return result;
}

std::string make_workspace(const std::string& name, int prompts) {
  const fs::path dir = fs::temp_directory_path() / ("rlcore_e2e_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  // In this process (`rlcore model init` does the same): a process of its own would cost a second of
  // start-up (libtorch and its libraries) for each of the suite's 50-odd workspaces.
  rlcore::ModelInitOptions init;
  init.arch = "qwen2";
  init.size = "tiny";
  init.seed = 3;
  init.out = dir / "model";
  rlcore::init_random_checkpoint(init);
  std::ofstream data(dir / "prompts.jsonl");
  for (int i = 0; i < prompts; ++i) {
    const nlohmann::json record = {{"data_source", "letters"},
                                   {"prompt", "Say something " + std::to_string(i) + ":"},
                                   {"reward_model", {{"ground_truth", ""}}}};
    data << record.dump() << "\n";
  }
  return dir.string();
}

std::string write_config(const std::string& workspace, const std::string& name, const std::string& yaml) {
  const fs::path path = fs::path(workspace) / (name + ".yaml");
  // The model path joins the caller's actor_rollout_ref section (a YAML key may appear once).
  const std::string model_line = "  model: {path: " + (fs::path(workspace) / "model").string() + "}\n";
  std::string body = yaml;
  const std::string section = "actor_rollout_ref:\n";
  const auto at = body.find(section);
  if (at == std::string::npos) {
    body += section + model_line;
  } else {
    body.insert(at + section.size(), model_line);
  }
  std::ofstream(path) << "trainer:\n  default_local_dir: " << (fs::path(workspace) / name).string()
                      << "\n  logger: [jsonl]\n  resume_mode: disable\n  val_before_train: false\n"
                      // The CPU suite: also on a GPU machine, where auto would pick cuda.
                      << "  device: cpu\n"
                      << "data:\n  train_files: " << (fs::path(workspace) / "prompts.jsonl").string()
                      << "\n  prompt_template: plain\n  max_prompt_length: 32\n  max_response_length: 6\n"
                      << "  train_batch_size: 8\n"
                      << "reward: {grader: lowercase_fraction}\nruntime: {n_workers_per_node: 2}\n"
                      << body;
  return path.string();
}

std::map<int64_t, std::map<std::string, double>> read_metrics(const std::string& run_dir) {
  std::map<int64_t, std::map<std::string, double>> steps;
  std::ifstream in(fs::path(run_dir) / "metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json record = nlohmann::json::parse(line);
    auto& metrics = steps[record.at("step").get<int64_t>()];
    for (const auto& [key, value] : record.items()) {
      if (key != "step" && value.is_number()) metrics[key] = value.get<double>();
    }
  }
  return steps;
}

double mean_over_steps(const std::map<int64_t, std::map<std::string, double>>& metrics, const std::string& key,
                       int64_t first, int64_t last) {
  double sum = 0;
  int64_t count = 0;
  for (int64_t step = first; step <= last; ++step) {
    sum += metrics.at(step).at(key);
    ++count;
  }
  return sum / static_cast<double>(count);
}

}  // namespace e2e
