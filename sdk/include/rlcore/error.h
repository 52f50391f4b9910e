// The rlcore error hierarchy. Defined in librlcore_sdk so every plugin and the
// core share one copy of the type info; messages name the key, file, rank or
// tensor at fault.
#pragma once

#include <stdexcept>
#include <string>

#include "rlcore/export.h"

namespace rlcore {

class RLCORE_API Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message);
  ~Error() override;
};

// A configuration key is unknown, has the wrong type or is out of range.
class RLCORE_API ConfigError : public Error {
 public:
  using Error::Error;
  ~ConfigError() override;
};

// A plugin could not be loaded or registered, or a (kind, name) is unknown.
class RLCORE_API PluginError : public Error {
 public:
  using Error::Error;
  ~PluginError() override;
};

// Bytes from outside (a file, a socket) do not follow the expected format.
class RLCORE_API FormatError : public Error {
 public:
  using Error::Error;
  ~FormatError() override;
};

// A file or directory could not be read or written.
class RLCORE_API IoError : public Error {
 public:
  using Error::Error;
  ~IoError() override;
};

// An argument or tensor violates a documented precondition.
class RLCORE_API ValueError : public Error {
 public:
  using Error::Error;
  ~ValueError() override;
};

// A bounded queue is full: retry later (HTTP 503). SDK 5.1.
class RLCORE_API OverloadedError : public Error {
 public:
  using Error::Error;
  ~OverloadedError() override;
};

}  // namespace rlcore
