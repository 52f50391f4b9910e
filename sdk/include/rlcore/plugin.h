// What a plugin's plugin.cc includes: the registrar and the RLCORE_PLUGIN macro
// that exports the plugin's single C entry point.
//
//   void register_my_plugin(rlcore::PluginRegistrar& registrar) { registrar.add<...>(...); }
//   RLCORE_PLUGIN("my-plugin", "0.1.0", register_my_plugin)
#pragma once

#include <cstdio>
#include <exception>

#include "rlcore/plugin_abi.h"
#include "rlcore/registry.h"

namespace rlcore::detail {

// Runs a plugin's register function; no exception crosses the C boundary.
template <class RegisterFn>
int invoke_register(RegisterFn register_fn, void* registrar, rlcore_register_error* error) noexcept {
  try {
    register_fn(*static_cast<PluginRegistrar*>(registrar));
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(error->message, sizeof(error->message), "%s", e.what());
  } catch (...) {
    std::snprintf(error->message, sizeof(error->message), "unknown exception");
  }
  return 1;
}

}  // namespace rlcore::detail

#define RLCORE_PLUGIN(plugin_name, plugin_version, register_function)                                               \
  static int rlcore_plugin_register_trampoline(void* registrar, rlcore_register_error* error) noexcept {            \
    return ::rlcore::detail::invoke_register(register_function, registrar, error);                                  \
  }                                                                                                                 \
  extern "C" __attribute__((visibility("default"))) const rlcore_plugin_descriptor_v1* rlcore_plugin_descriptor() { \
    static const rlcore_plugin_descriptor_v1 descriptor = {sizeof(rlcore_plugin_descriptor_v1),                     \
                                                           RLCORE_SDK_ABI_MAJOR,                                    \
                                                           RLCORE_SDK_TARGET_ABI_MINOR,                             \
                                                           plugin_name,                                             \
                                                           plugin_version,                                          \
                                                           RLCORE_COMPILER_ID,                                      \
                                                           RLCORE_CXX11_ABI,                                        \
                                                           RLCORE_TORCH_VERSION,                                    \
                                                           &rlcore_plugin_register_trampoline};                     \
    return &descriptor;                                                                                             \
  }
