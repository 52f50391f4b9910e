// error_of<E>(f): the message of the E that f throws; fails the test when f
// throws nothing. Include after catch.hpp.
#pragma once

#include <string>

namespace rlcore_test {

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

}  // namespace rlcore_test
