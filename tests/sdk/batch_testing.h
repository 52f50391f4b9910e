// Helpers shared by the Batch and wire-format tests. Include it first: it
// orders ATen before Catch (see below).
#pragma once

#include <string>
#include <vector>

// Debian's libtorch pulls in glog, whose CHECK macro would replace Catch's.
#include <ATen/ATen.h>
#undef CHECK
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

namespace rlcore_test {

// The message of the E that f throws; fails the test when f throws nothing.
// Any other exception type escapes and fails the test too.
template <class E, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  FAIL("expected an exception, none was thrown");
  return {};
}

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
