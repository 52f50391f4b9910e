// Helpers shared by the worker-runtime tests. Include it first: it orders ATen
// before Catch (glog's CHECK would replace Catch's).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include <ATen/ATen.h>
#undef CHECK
#include <catch2/catch.hpp>

namespace rlcore_test {

// Polls `done` every 10 ms until it holds or `limit` passes; returns whether it held.
inline bool eventually(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

// The message of the E that f throws; fails the test when f throws nothing.
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

inline std::string rlcore_executable() { return RLCORE_BINARY_DIR "/bin/rlcore"; }

}  // namespace rlcore_test
