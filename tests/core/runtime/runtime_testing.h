// Helpers shared by the worker-runtime tests.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include <ATen/ATen.h>
#include <catch2/catch.hpp>
#include "../../common/error_of.h"
#include "../../common/test_paths.h"

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

}  // namespace rlcore_test
