// What the safetensors tests share: a fresh scratch directory and raw bytes in
// and out of files, to build (and break) .safetensors files by hand.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "../../common/test_paths.h"

namespace safetensors_test {

namespace fs = std::filesystem;

// build/test_tmp/<suite>/<name>, emptied.
inline fs::path fresh_dir(const std::string& suite, const std::string& name) {
  fs::path dir = fs::path(rlcore_test::binary_dir()) / "test_tmp" / suite / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

inline std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// `value` as 8 little-endian bytes (the header-length prefix of a .safetensors file).
inline std::string u64_le(std::uint64_t value) {
  std::string bytes;
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>(value >> (8 * i)));
  return bytes;
}

}  // namespace safetensors_test
