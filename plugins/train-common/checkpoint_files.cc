// Checkpoint file helpers shared by the train engines.
#include "checkpoint_files.h"

#include <fstream>
#include <sstream>

#include "rlcore/atomic_file.h"
#include "rlcore/error.h"

namespace rlcore::train_common {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kExportShardBytes = 2'000'000'000;

}  // namespace

nlohmann::json read_json(const fs::path& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path.string() + ": cannot open (missing file of " + what + "?)");
  std::stringstream text;
  text << in.rdbuf();
  try {
    return nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(path.string() + ": not valid JSON: " + e.what());
  }
}

void write_hf_export(const fs::path& dir, const nlohmann::json& config, const NamedTensors& tensors,
                     const fs::path& source_dir) {
  fs::create_directories(dir);
  save_safetensors_checkpoint(dir, tensors, kExportShardBytes);
  write_file_atomically(dir / "config.json", config.dump(2) + "\n");
  for (const auto& entry : fs::directory_iterator(source_dir)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file() || name == "config.json" || name == kSafetensorsIndexFile ||
        entry.path().extension() == ".safetensors")
      continue;
    fs::copy_file(entry.path(), dir / name, fs::copy_options::overwrite_existing);
  }
}

}  // namespace rlcore::train_common
