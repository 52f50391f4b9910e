#include "serve/answer.h"

#include <spdlog/spdlog.h>

namespace rlcore::serve {

ApiResponse internal_error(const char* route, const std::string& what) {
  spdlog::error("{}: {}", route, what);
  return {500, error_text(500, "InternalServerError", what)};
}

}  // namespace rlcore::serve
