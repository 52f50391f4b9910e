// Shared by the fuzz targets (see fuzz_input.h).
#include "fuzz_input.h"

#include <unistd.h>

#include <fstream>

namespace rlcore_fuzz {

std::string write_temp_file(const std::string& name, std::string_view bytes) {
  const std::string path = "/tmp/rlcore_fuzz_" + std::to_string(::getpid()) + "_" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

}  // namespace rlcore_fuzz
