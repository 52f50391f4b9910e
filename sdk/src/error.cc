// Out-of-line destructors anchor the error classes' type info in librlcore_sdk.
#include "rlcore/error.h"

namespace rlcore {

Error::Error(const std::string& message) : std::runtime_error(message) {}
Error::~Error() = default;
ConfigError::~ConfigError() = default;
PluginError::~PluginError() = default;
FormatError::~FormatError() = default;
IoError::~IoError() = default;
ValueError::~ValueError() = default;
OverloadedError::~OverloadedError() = default;

}  // namespace rlcore
