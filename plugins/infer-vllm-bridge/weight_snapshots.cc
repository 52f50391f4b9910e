#include "weight_snapshots.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

#include "rlcore/error.h"
#include "rlcore/safetensors/safetensors.h"

namespace rlcore::infer_vllm_bridge {
namespace fs = std::filesystem;
namespace {

constexpr const char* kPrefix = "weights-v";
constexpr std::uint64_t kShardBytes = 5'000'000'000;  // transformers' default max_shard_size

// What a server needs beside the weights to load the directory as a model.
constexpr const char* kModelFiles[] = {"config.json",
                                       "generation_config.json",
                                       "tokenizer.json",
                                       "tokenizer_config.json",
                                       "special_tokens_map.json",
                                       "vocab.json",
                                       "merges.txt",
                                       "tokenizer.model"};

void fsync_path(const fs::path& path, bool directory) {
  const int fd = ::open(path.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (fd < 0 || ::fsync(fd) != 0) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    throw IoError("vllm_bridge: cannot fsync " + path.string() + ": " + why);
  }
  ::close(fd);
}

}  // namespace

WeightSnapshots::WeightSnapshots(fs::path root, fs::path model_path)
    : root_(fs::absolute(std::move(root)).lexically_normal()), model_path_(std::move(model_path)) {
  std::error_code error;
  fs::create_directories(root_, error);
  if (error) throw IoError("vllm_bridge: cannot create weights_dir " + root_.string() + ": " + error.message());
}

fs::path WeightSnapshots::write(const NamedTensorList& weights, int64_t version, const fs::path& complete_from) const {
  const fs::path final_dir = root_ / (kPrefix + std::to_string(version));
  const fs::path partial = root_ / ("." + final_dir.filename().string() + ".partial");
  std::error_code error;
  fs::remove_all(partial, error);
  fs::create_directories(partial, error);
  if (error) throw IoError("vllm_bridge: cannot create " + partial.string() + ": " + error.message());

  NamedTensors tensors(weights.begin(), weights.end());
  const SafetensorsCheckpoint previous(complete_from);
  for (const std::string& name : previous.names()) {
    const bool given = std::any_of(weights.begin(), weights.end(), [&](const auto& w) { return w.first == name; });
    if (!given) tensors.emplace_back(name, previous.load(name));
  }
  save_safetensors_checkpoint(partial, tensors, kShardBytes);
  for (const char* name : kModelFiles) {
    const fs::path source = model_path_ / name;
    if (!fs::exists(source)) continue;
    fs::copy_file(source, partial / name, fs::copy_options::overwrite_existing, error);
    if (error)
      throw IoError("vllm_bridge: cannot copy " + source.string() + " into " + partial.string() + ": " +
                    error.message());
    fsync_path(partial / name, false);
  }
  fsync_path(partial, true);
  fs::remove_all(final_dir, error);
  fs::rename(partial, final_dir, error);
  if (error)
    throw IoError("vllm_bridge: cannot rename " + partial.string() + " to " + final_dir.string() + ": " +
                  error.message());
  fsync_path(root_, true);
  return final_dir;
}

void WeightSnapshots::remove_all_but(const std::vector<fs::path>& keep) const {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(root_, error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kPrefix, 0) != 0) continue;  // only ever our own snapshots
    if (std::find(keep.begin(), keep.end(), entry.path()) != keep.end()) continue;
    fs::remove_all(entry.path(), error);
  }
}

}  // namespace rlcore::infer_vllm_bridge
