// Shared by the data tests: a scratch directory removed at the end of a test.
// Include after catch.hpp.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "../../common/error_of.h"

namespace rlcore::testing {

class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name)
      : path_(std::filesystem::temp_directory_path() /
              ("rlcore_" + name + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

  // Writes `text` to <dir>/<name> and returns the file's path.
  std::string write(const std::string& name, const std::string& text) const {
    const auto file = path_ / name;
    std::ofstream(file) << text;
    return file.string();
  }

 private:
  static int& counter() {
    static int value = 0;
    return value;
  }
  std::filesystem::path path_;
};

}  // namespace rlcore::testing
