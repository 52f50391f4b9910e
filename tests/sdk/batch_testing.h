// Helpers shared by the Batch and wire-format tests.
#pragma once

#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <catch2/catch.hpp>
#include "../common/error_of.h"
#include <nlohmann/json.hpp>

namespace rlcore_test {

inline std::vector<int64_t> values(const at::Tensor& tensor) {
  const at::Tensor flat = tensor.to(at::kLong).contiguous();
  const int64_t* data = flat.data_ptr<int64_t>();
  return {data, data + flat.numel()};
}

inline std::vector<std::string> strings(const std::vector<nlohmann::json>& column) {
  std::vector<std::string> out;
  for (const auto& value : column) out.push_back(value.get<std::string>());
  return out;
}

}  // namespace rlcore_test
