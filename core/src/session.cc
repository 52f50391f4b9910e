// Session: registry + loaded plugins.
#include "rlcore/core/session.h"

#include <spdlog/spdlog.h>

namespace rlcore {

Session::Session(const std::vector<std::string>& plugin_paths) : loader_(std::make_unique<PluginLoader>(registry_)) {
  loader_->load_paths(plugin_search_path(plugin_paths));
  for (const auto& plugin : loader_->loaded()) {
    spdlog::debug("loaded plugin '{}' {} from {}", plugin.name, plugin.version, plugin.file);
  }
  for (const auto& refused : loader_->refused()) spdlog::debug("refused {}: {}", refused.file, refused.reason);
}

}  // namespace rlcore
