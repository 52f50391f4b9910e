// Config YAML and command-line overrides: the input is YAML text, then after
// a NUL byte one `key=value` override per line, validated by the whole
// run-config schema.
#include <cstring>

#include "fuzz_input.h"
#include "rlcore/config_node.h"
#include "rlcore/core/run_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view input = rlcore_fuzz::as_text(data, size);
  const auto nul = input.find('\0');
  const std::string yaml(input.substr(0, nul));
  const std::vector<std::string> overrides =
      nul == std::string_view::npos ? std::vector<std::string>{} : rlcore_fuzz::split(input.substr(nul + 1), '\n');
  rlcore_fuzz::expect_only_rlcore_errors("config", [&] {
    rlcore::ConfigNode root = rlcore::ConfigNode::parse(yaml, "fuzz.yaml");
    rlcore::apply_overrides(root, overrides);
    rlcore::run_config_schema().parse(root);
  });
  return 0;
}
