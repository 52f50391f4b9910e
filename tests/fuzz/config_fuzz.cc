// Config YAML and command-line overrides: the input is a config file's YAML,
// then after a NUL byte one `key=value` override per line, resolved as
// `rlcore --config FILE key=value...` resolves them (the whole run-config
// schema and its cross-key rules; no plugins are loaded, so an engine named by
// the config is refused as unknown, as it is when its plugin is missing).
#include "fuzz_input.h"
#include "rlcore/core/algorithms/builtin_algorithms.h"
#include "rlcore/core/config/run_config.h"
#include "rlcore/registry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  static const rlcore::Registry registry = [] {
    rlcore::Registry r;
    rlcore::algorithms::register_builtin_algorithms(r);
    return r;
  }();
  const std::string_view input = rlcore_fuzz::as_text(data, size);
  const auto nul = input.find('\0');
  const std::string path = rlcore_fuzz::write_temp_file("config.yaml", input.substr(0, nul));
  const std::vector<std::string> overrides =
      nul == std::string_view::npos ? std::vector<std::string>{} : rlcore_fuzz::split(input.substr(nul + 1), '\n');
  rlcore_fuzz::expect_only_rlcore_errors("config",
                                         [&] { (void)rlcore::config::resolve_config(registry, path, overrides); });
  return 0;
}
