// Plugin loading: open, check the descriptor, stage the registration, commit.
#include "rlcore/core/plugin_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <sstream>

#define BOOST_DLL_USE_STD_FS
#include <boost/dll/shared_library.hpp>

#include "rlcore/error.h"
#include "rlcore/plugin_abi.h"

namespace fs = std::filesystem;

namespace rlcore {
namespace {

// Libraries stay mapped for the life of the process (RTLD_NODELETE): objects
// made by a plugin may outlive every handle to it.
constexpr int kLoadMode = RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE;

std::string canonical_or_self(const fs::path& path) {
  std::error_code error;
  auto canonical = fs::canonical(path, error);
  return error ? path.string() : canonical.string();
}

// Returns the reason the descriptor is unusable, or "" when it can be used.
std::string check_descriptor(const rlcore_plugin_descriptor_v1& d) {
  std::ostringstream why;
  if (d.struct_size < sizeof(rlcore_plugin_descriptor_v1)) {
    why << "descriptor too small (" << d.struct_size << " bytes, expected " << sizeof(rlcore_plugin_descriptor_v1)
        << ")";
  } else if (d.abi_major != RLCORE_SDK_ABI_MAJOR) {
    why << "incompatible SDK ABI major (plugin: " << d.abi_major << ", rlcore: " << RLCORE_SDK_ABI_MAJOR << ")";
  } else if (d.abi_minor > RLCORE_SDK_ABI_MINOR) {
    why << "built against a newer SDK (plugin: " << d.abi_major << "." << d.abi_minor
        << ", rlcore: " << RLCORE_SDK_ABI_MAJOR << "." << RLCORE_SDK_ABI_MINOR << ")";
  } else if (!d.name || !*d.name || !d.version || !d.compiler || !d.torch_version || !d.register_fn) {
    why << "descriptor has an empty name, version, fingerprint or register function";
  } else if (std::strcmp(d.torch_version, RLCORE_TORCH_VERSION) != 0) {
    why << "fingerprint mismatch: libtorch version (plugin: " << d.torch_version << ", rlcore: " << RLCORE_TORCH_VERSION
        << ")";
  } else if (d.cxx11_abi != RLCORE_CXX11_ABI) {
    why << "fingerprint mismatch: _GLIBCXX_USE_CXX11_ABI (plugin: " << d.cxx11_abi << ", rlcore: " << RLCORE_CXX11_ABI
        << ")";
  } else if (std::strcmp(d.compiler, RLCORE_COMPILER_ID) != 0) {
    why << "fingerprint mismatch: compiler (plugin: " << d.compiler << ", rlcore: " << RLCORE_COMPILER_ID << ")";
  }
  return why.str();
}

// Boost.DLL reports a failed dlopen as a bare errno; ask the loader itself why.
std::string dlopen_failure(const std::string& path) {
  if (void* handle = dlopen(path.c_str(), kLoadMode)) {
    dlclose(handle);
    return "unknown error";
  }
  const char* detail = dlerror();
  return detail ? detail : "unknown error";
}

bool looks_like_plugin_file(const fs::path& path) { return path.extension() == ".so" && fs::is_regular_file(path); }

}  // namespace

std::string host_fingerprint() {
  std::ostringstream out;
  out << "sdk abi " << RLCORE_SDK_ABI_MAJOR << "." << RLCORE_SDK_ABI_MINOR << ", " << RLCORE_COMPILER_ID
      << ", cxx11 abi " << RLCORE_CXX11_ABI << ", libtorch " << RLCORE_TORCH_VERSION;
  return out.str();
}

PluginLoader::PluginLoader(Registry& registry) : registry_(registry) {}

void PluginLoader::load_paths(const std::vector<std::string>& paths) {
  for (const auto& path : paths) load_path(path);
}

void PluginLoader::load_path(const std::string& path) {
  std::error_code error;
  if (fs::is_directory(path, error)) {
    std::vector<fs::path> files;
    for (const auto& item : fs::directory_iterator(path, error)) {
      if (looks_like_plugin_file(item.path())) files.push_back(item.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& file : files) load_file(file.string());
  } else if (fs::exists(path, error)) {
    load_file(path);
  } else {
    refused_.push_back({path, "no such file or directory"});
  }
}

void PluginLoader::load_file(const std::string& path) {
  const std::string canonical = canonical_or_self(path);
  if (std::find(seen_files_.begin(), seen_files_.end(), canonical) != seen_files_.end()) return;
  seen_files_.push_back(canonical);

  boost::dll::shared_library library;
  boost::dll::fs::error_code open_error;
  library.load(canonical, static_cast<boost::dll::load_mode::type>(kLoadMode), open_error);
  if (open_error) {
    refused_.push_back({path, "not a loadable shared library: " + dlopen_failure(canonical)});
    return;
  }
  if (!library.has(RLCORE_PLUGIN_ENTRY_SYMBOL)) {
    refused_.push_back({path, "not an rlcore plugin: no '" RLCORE_PLUGIN_ENTRY_SYMBOL "' symbol"});
    return;
  }
  auto entry = library.get<const rlcore_plugin_descriptor_v1*()>(RLCORE_PLUGIN_ENTRY_SYMBOL);
  const rlcore_plugin_descriptor_v1* descriptor = entry();
  if (descriptor == nullptr) {
    refused_.push_back({path, "entry point returned no descriptor"});
    return;
  }
  if (std::string why = check_descriptor(*descriptor); !why.empty()) {
    refused_.push_back({path, why});
    return;
  }
  for (const auto& other : loaded_) {
    if (other.name == descriptor->name) {
      refused_.push_back(
          {path, std::string("duplicate plugin '") + descriptor->name + "': already loaded from " + other.file});
      return;
    }
  }

  // Stage the registration so a plugin that fails halfway leaves nothing behind.
  PluginOrigin origin{descriptor->name, descriptor->version, path};
  // Shared: the parallel sizes it declares stay its staging registry's to answer (below).
  const auto staged_registry = std::make_shared<Registry>();
  Registry& staging = *staged_registry;
  PluginRegistrar registrar(staging, origin);
  rlcore_register_error register_error{};
  if (descriptor->register_fn(&registrar, &register_error) != 0) {
    register_error.message[sizeof(register_error.message) - 1] = '\0';
    refused_.push_back({path, std::string("register function failed: ") + register_error.message});
    return;
  }
  for (const ComponentEntry* staged : staging.all()) {
    if (const ComponentEntry* existing = registry_.find(staged->kind, staged->name)) {
      refused_.push_back({path, "duplicate " + staged->kind + " '" + staged->name +
                                    "': already registered by plugin '" + existing->origin.plugin + "' (" +
                                    existing->origin.file + ")"});
      return;
    }
  }
  for (const ComponentEntry* staged : staging.all()) {
    registry_.add(*staged);
    registry_.set_capabilities(staged->kind, staged->name, staging.capabilities(staged->kind, staged->name));
    registry_.set_parallel_sizes(
        staged->kind, staged->name,
        [staged_registry, kind = staged->kind, name = staged->name](const ConfigNode& options) {
          return staged_registry->parallel_sizes(kind, name, options);
        });
  }
  loaded_.push_back({descriptor->name, descriptor->version, path});
}

std::vector<std::string> plugin_search_path(const std::vector<std::string>& command_line_paths) {
  std::vector<std::string> paths = command_line_paths;
  if (const char* env = std::getenv("RLCORE_PLUGIN_PATH")) {
    std::stringstream entries(env);
    std::string entry;
    while (std::getline(entries, entry, ':')) {
      if (!entry.empty()) paths.push_back(entry);
    }
  }
  std::error_code error;
  const fs::path exe_dir = fs::read_symlink("/proc/self/exe", error).parent_path();
  if (!error) {
    for (const fs::path& candidate : {exe_dir / "plugins",                // next to the executable
                                      exe_dir.parent_path() / "plugins",  // build tree: build/bin/rlcore
                                      exe_dir.parent_path() / RLCORE_INSTALL_PLUGIN_DIR}) {  // install prefix
      if (fs::is_directory(candidate, error)) paths.push_back(candidate.string());
    }
  }
  return paths;
}

}  // namespace rlcore
