// A fresh directory under the system temp dir, removed with the object: the
// scratch space of the tests that write files.
#pragma once

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

namespace rlcore_test {

class ScratchDir {
 public:
  // <temp>/rlcore_<name>_<pid>_<n>: distinct per process and per object.
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
  std::string str() const { return path_.string(); }

  // Writes `text` to <dir>/<name> and returns the file's path.
  std::string write(const std::string& name, const std::string& text) const {
    const auto file = path_ / name;
    std::ofstream(file) << text;
    return file.string();
  }

 private:
  static std::atomic<int>& counter() {
    static std::atomic<int> value{0};
    return value;
  }
  std::filesystem::path path_;
};

}  // namespace rlcore_test
