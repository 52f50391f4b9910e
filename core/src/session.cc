// Session: registry + loaded plugins.
#include "rlcore/core/session.h"

#include <mutex>

#include <spdlog/spdlog.h>

#include "rlcore/core/algorithms/builtin_algorithms.h"
#include "rlcore/model/cpu_kernels.h"

namespace rlcore {

Session::Session(const std::vector<std::string>& plugin_paths) : loader_(std::make_unique<PluginLoader>(registry_)) {
  // First, so a plugin reusing a built-in name is refused with both origins named.
  algorithms::register_builtin_algorithms(registry_);
  loader_->load_paths(plugin_search_path(plugin_paths));
  for (const auto& plugin : loader_->loaded()) {
    spdlog::debug("loaded plugin '{}' {} from {}", plugin.name, plugin.version, plugin.file);
  }
  for (const auto& refused : loader_->refused()) spdlog::debug("refused {}: {}", refused.file, refused.reason);
  // Once per process; a bad RLCORE_CPU_KERNELS fails here, before any model runs.
  static std::once_flag logged;
  std::call_once(logged, [] { spdlog::debug("CPU decode kernels: {}", model::describe_cpu_kernels()); });
}

}  // namespace rlcore
