// safetensors files and sharded checkpoints: the first byte picks what the
// rest is: a .safetensors file (header and data), or the index
// (model.safetensors.index.json) of a checkpoint whose shard is a valid file.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <ATen/ATen.h>

#include "fuzz_input.h"
#include "rlcore/safetensors/safetensors.h"

namespace fs = std::filesystem;

namespace {

// Every tensor of the file viewed and summed: the reads a loader makes.
void read_all(const rlcore::SafetensorsFile& file) {
  for (const auto& name : file.names()) {
    const at::Tensor view = file.view(name);
    if (view.numel() > 0 && view.is_floating_point()) (void)view.to(at::kDouble).sum().item<double>();
  }
}

fs::path checkpoint_with_shard() {
  const fs::path dir = fs::temp_directory_path() / ("rlcore_fuzz_checkpoint_" + std::to_string(::getpid()));
  if (!fs::exists(dir / "model-00001-of-00001.safetensors")) {
    fs::create_directories(dir);
    rlcore::save_safetensors(dir / "model-00001-of-00001.safetensors",
                             {{"w", at::arange(6, at::kFloat).reshape({2, 3})}, {"b", at::ones({3}, at::kHalf)}});
  }
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view rest = rlcore_fuzz::as_text(data + 1, size - 1);
  if (data[0] % 2 == 0) {
    const std::string path = rlcore_fuzz::write_temp_file("model.safetensors", rest);
    rlcore_fuzz::expect_only_rlcore_errors("safetensors file", [&] { read_all(rlcore::SafetensorsFile(path)); });
  } else {
    const fs::path dir = checkpoint_with_shard();
    std::ofstream(dir / rlcore::kSafetensorsIndexFile, std::ios::binary | std::ios::trunc)
        .write(rest.data(), static_cast<std::streamsize>(rest.size()));
    rlcore_fuzz::expect_only_rlcore_errors("safetensors index", [&] {
      const rlcore::SafetensorsCheckpoint checkpoint(dir);
      for (const auto& name : checkpoint.names()) (void)checkpoint.view(name);
    });
  }
  return 0;
}
