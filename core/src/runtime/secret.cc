// Per-run secret generation (getrandom) and constant-time comparison.
#include "rlcore/core/runtime/secret.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "rlcore/error.h"

namespace rlcore::runtime {

std::string generate_secret() {
  unsigned char bytes[32];
  std::size_t filled = 0;
  while (filled < sizeof(bytes)) {
    const ssize_t got = getrandom(bytes + filled, sizeof(bytes) - filled, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw IoError(std::string("getrandom failed while generating the run secret: ") + std::strerror(errno));
    }
    filled += static_cast<std::size_t>(got);
  }
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char byte : bytes) {
    hex += kHex[byte >> 4];
    hex += kHex[byte & 15];
  }
  return hex;
}

bool secrets_equal(const std::string& expected, const std::string& offered) {
  // Length is not secret (always 64 hex digits); content is.
  if (expected.empty() || expected.size() != offered.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    diff |= static_cast<unsigned char>(expected[i] ^ offered[i]);
  }
  return diff == 0;
}

}  // namespace rlcore::runtime
