// Files that appear whole or not at all: written to a unique sibling, fsynced,
// then renamed over the target, so a crash or a full disk at any point leaves
// the previous file (or none), never a truncated one.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string_view>

#include "rlcore/export.h"

namespace rlcore {

class RLCORE_API AtomicFile {
 public:
  // Throws IoError naming the file and the system's reason.
  explicit AtomicFile(std::filesystem::path target);
  // Without commit(), the sibling is removed and the target is untouched.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, std::size_t size);
  // fsync, rename over the target, then fsync the directory.
  void commit();

 private:
  std::filesystem::path target_;
  std::filesystem::path temp_;
  int fd_ = -1;
  bool committed_ = false;
};

RLCORE_API void write_file_atomically(const std::filesystem::path& path, std::string_view text);

// fsync of a directory, so the renames into it survive a power loss. Best
// effort: some file systems refuse fsync on directories.
RLCORE_API void sync_directory(const std::filesystem::path& dir);

}  // namespace rlcore
