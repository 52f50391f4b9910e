// ApiError: a request `rlcore serve` refuses, with the HTTP status and the
// fields of vLLM's error object ({"object": "error", "message", "type", "param", "code"}).
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "rlcore/error.h"
#include "rlcore/export.h"

namespace rlcore::serve {

class RLCORE_API ApiError : public ValueError {
 public:
  // `param` names the request field at fault; "" is sent as null.
  ApiError(int status, std::string type, const std::string& message, std::string param = "");
  ~ApiError() override;

  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }

 private:
  int status_;
  std::string type_;
  std::string param_;
};

// 400 BadRequestError, the answer to anything wrong with a request's content.
RLCORE_API ApiError bad_request(const std::string& message, const std::string& param = "");

// {"object": "error", "message", "type", "param", "code"}.
RLCORE_API nlohmann::json error_body(int status, const std::string& type, const std::string& message,
                                     const std::string& param = "");
RLCORE_API nlohmann::json error_body(const ApiError& error);

}  // namespace rlcore::serve
