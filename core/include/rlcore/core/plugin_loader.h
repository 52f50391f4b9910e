// Finds and loads plugin shared libraries (Boost.DLL, RTLD_NOW | RTLD_LOCAL),
// checks each descriptor before touching any C++ type, and records what was
// loaded and what was refused, with the reason. Libraries are never unloaded.
#pragma once

#include <string>
#include <vector>

#include "rlcore/export.h"
#include "rlcore/registry.h"

namespace rlcore {

struct LoadedPlugin {
  std::string name;
  std::string version;
  std::string file;
};

struct RefusedPlugin {
  std::string file;
  std::string reason;
};

class RLCORE_API PluginLoader {
 public:
  explicit PluginLoader(Registry& registry);

  // A directory (its *.so files, sorted) or a file (loaded whatever its name).
  // A bad file is recorded as refused, never thrown.
  void load_path(const std::string& path);
  void load_paths(const std::vector<std::string>& paths);

  const std::vector<LoadedPlugin>& loaded() const { return loaded_; }
  const std::vector<RefusedPlugin>& refused() const { return refused_; }

 private:
  void load_file(const std::string& path);
  Registry& registry_;
  std::vector<std::string> seen_files_;  // canonical paths already considered
  std::vector<LoadedPlugin> loaded_;
  std::vector<RefusedPlugin> refused_;
};

// Where rlcore looks for plugins, in order: the paths given on the command line,
// then RLCORE_PLUGIN_PATH (colon-separated), then its own plugins: next to the
// executable, in the build tree and in the install prefix (those that exist).
RLCORE_API std::vector<std::string> plugin_search_path(const std::vector<std::string>& command_line_paths);

// The expected descriptor fields of this build, for messages and tests.
RLCORE_API std::string host_fingerprint();

}  // namespace rlcore
