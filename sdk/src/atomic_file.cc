// Whole-or-nothing file writes (see atomic_file.h).
#include "rlcore/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <random>
#include <system_error>

#include "rlcore/error.h"

namespace fs = std::filesystem;

namespace rlcore {
namespace {

std::string errno_text() { return std::system_category().message(errno); }

}  // namespace

AtomicFile::AtomicFile(fs::path target) : target_(std::move(target)) {
  std::random_device random;
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, ".tmp.%08x%08x", random(), random());
  temp_ = target_;
  temp_ += suffix;
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw IoError(target_.string() + ": cannot create " + temp_.filename().string() + " beside it: " + errno_text());
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_.c_str());
}

void AtomicFile::write(const void* data, std::size_t size) {
  const auto* bytes = static_cast<const char*>(data);
  while (size > 0) {
    // Linux writes at most ~2 GiB per call.
    const ssize_t written = ::write(fd_, bytes, std::min<std::size_t>(size, 1u << 30));
    if (written < 0 && errno == EINTR) continue;
    if (written < 0) throw IoError(target_.string() + ": write failed: " + errno_text());
    bytes += written;
    size -= static_cast<std::size_t>(written);
  }
}

void AtomicFile::commit() {
  if (::fsync(fd_) != 0) throw IoError(target_.string() + ": fsync failed: " + errno_text());
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) throw IoError(target_.string() + ": close failed: " + errno_text());
  if (::rename(temp_.c_str(), target_.c_str()) != 0) {
    throw IoError(target_.string() + ": cannot rename " + temp_.string() + " over it: " + errno_text());
  }
  committed_ = true;
  sync_directory(target_.parent_path().empty() ? fs::path(".") : target_.parent_path());
}

void write_file_atomically(const fs::path& path, std::string_view text) {
  AtomicFile file(path);
  file.write(text.data(), text.size());
  file.commit();
}

void sync_directory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace rlcore
