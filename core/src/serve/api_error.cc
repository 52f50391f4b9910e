// ApiError and vLLM's error object.
#include "rlcore/core/serve/api_error.h"

#include <utility>

#include <nlohmann/json.hpp>

namespace rlcore::serve {

ApiError::ApiError(int status, std::string type, const std::string& message, std::string param)
    : ValueError(message), status_(status), type_(std::move(type)), param_(std::move(param)) {}

ApiError::~ApiError() = default;

ApiError bad_request(const std::string& message, const std::string& param) {
  return ApiError(400, "BadRequestError", message, param);
}

nlohmann::json error_body(int status, const std::string& type, const std::string& message, const std::string& param) {
  return {{"object", "error"},
          {"message", message},
          {"type", type},
          {"param", param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param)},
          {"code", status}};
}

nlohmann::json error_body(const ApiError& error) {
  return error_body(error.status(), error.type(), error.what(), error.param());
}

}  // namespace rlcore::serve
