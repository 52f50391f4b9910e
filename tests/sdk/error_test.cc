#include <catch2/catch.hpp>

#include "rlcore/error.h"

TEST_CASE("errors derive from rlcore::Error and keep their message") {
  try {
    throw rlcore::ConfigError("unknown key 'trainer.foo'");
  } catch (const rlcore::Error& e) {
    CHECK(std::string(e.what()) == "unknown key 'trainer.foo'");
  }
}
