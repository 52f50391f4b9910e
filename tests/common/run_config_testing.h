// A run config from YAML text, as the trainer and worker tests build them.
#pragma once

#include <string>

#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include "error_of.h"
#include "rlcore/config_node.h"
#include "rlcore/core/config/run_config.h"

namespace rlcore_test {

inline rlcore::config::RunConfig run_config(const std::string& yaml) {
  return rlcore::config::run_config_schema().parse(rlcore::ConfigNode::parse(yaml, "test"));
}

}  // namespace rlcore_test
