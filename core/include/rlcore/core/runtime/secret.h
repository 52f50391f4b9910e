// The per-run secret that admits workers to a controller: generated from the
// kernel's random source, compared in constant time.
#pragma once

#include <string>

#include "rlcore/export.h"

namespace rlcore::runtime {

// The environment variable through which a worker receives the secret.
inline constexpr const char* kSecretEnv = "RLCORE_SECRET";

// 32 random bytes as 64 hex digits. Throws IoError when no randomness is available.
RLCORE_API std::string generate_secret();

// Equality whose running time does not depend on where the strings differ.
RLCORE_API bool secrets_equal(const std::string& expected, const std::string& offered);

}  // namespace rlcore::runtime
