// A Session is what every command starts from: the registry with the core's
// built-in components and every plugin found on the search path.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "rlcore/core/plugin_loader.h"
#include "rlcore/export.h"
#include "rlcore/registry.h"

namespace rlcore {

class RLCORE_API Session {
 public:
  // `plugin_paths` come from --plugins; RLCORE_PLUGIN_PATH and the in-tree
  // plugin directories are added (see plugin_search_path).
  explicit Session(const std::vector<std::string>& plugin_paths);

  Registry& registry() { return registry_; }
  const Registry& registry() const { return registry_; }
  const PluginLoader& loader() const { return *loader_; }

 private:
  Registry registry_;
  std::unique_ptr<PluginLoader> loader_;
};

}  // namespace rlcore
