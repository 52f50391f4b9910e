// Session: registry + loaded plugins.
#include "rlcore/core/session.h"

#include <spdlog/spdlog.h>

#include "rlcore/core/builtin_algorithms.h"

namespace rlcore {

Session::Session(const std::vector<std::string>& plugin_paths) : loader_(std::make_unique<PluginLoader>(registry_)) {
  // First, so a plugin reusing a built-in name is refused with both origins named.
  register_builtin_algorithms(registry_);
  loader_->load_paths(plugin_search_path(plugin_paths));
  for (const auto& plugin : loader_->loaded()) {
    spdlog::debug("loaded plugin '{}' {} from {}", plugin.name, plugin.version, plugin.file);
  }
  for (const auto& refused : loader_->refused()) spdlog::debug("refused {}: {}", refused.file, refused.reason);
}

}  // namespace rlcore
