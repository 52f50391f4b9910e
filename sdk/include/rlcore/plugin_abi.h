// The plugin boundary: one exported C function per plugin returns a POD
// descriptor that the loader checks before touching any C++ type.
#pragma once

#include <cstddef>
#include <cstdint>

#include <torch/version.h>

// When to bump which: docs/plugin-abi.md; what each version changed: sdk/CHANGELOG.md.
#define RLCORE_SDK_ABI_MAJOR 6  // 6: the model, tokenizer and safetensors libraries left the SDK (libs/)
#define RLCORE_SDK_ABI_MINOR 4  // 6.4: the collective ledger (which collective each group last started)

// A plugin may target an older minor of this major: define
// RLCORE_SDK_TARGET_ABI_MINOR before any rlcore header and the headers' inline
// code uses only what that minor had, and RLCORE_PLUGIN's descriptor says that
// minor, so any host of that minor or newer loads it.
#ifndef RLCORE_SDK_TARGET_ABI_MINOR
#define RLCORE_SDK_TARGET_ABI_MINOR RLCORE_SDK_ABI_MINOR
#endif
#if RLCORE_SDK_TARGET_ABI_MINOR > RLCORE_SDK_ABI_MINOR
#error "RLCORE_SDK_TARGET_ABI_MINOR is newer than this SDK"
#endif

// The one symbol every plugin exports (see RLCORE_PLUGIN in rlcore/plugin.h).
#define RLCORE_PLUGIN_ENTRY_SYMBOL "rlcore_plugin_descriptor"

#define RLCORE_STRINGIFY_IMPL(x) #x
#define RLCORE_STRINGIFY(x) RLCORE_STRINGIFY_IMPL(x)

// Compiler id and major version: the part of the toolchain that fixes the C++ ABI.
#if defined(__clang__)
#define RLCORE_COMPILER_ID "clang-" RLCORE_STRINGIFY(__clang_major__)
#elif defined(__GNUC__)
#define RLCORE_COMPILER_ID "gcc-" RLCORE_STRINGIFY(__GNUC__)
#else
#define RLCORE_COMPILER_ID "unknown"
#endif

#if defined(_GLIBCXX_USE_CXX11_ABI)
#define RLCORE_CXX11_ABI _GLIBCXX_USE_CXX11_ABI
#else
#define RLCORE_CXX11_ABI -1
#endif

#define RLCORE_TORCH_VERSION RLCORE_STRINGIFY(TORCH_VERSION_MAJOR) "." RLCORE_STRINGIFY(TORCH_VERSION_MINOR)

extern "C" {

// Why a plugin's register function failed; filled by the plugin, read by the loader.
struct rlcore_register_error {
  char message[1024];
};

// Adds the plugin's factories to the registrar (an rlcore::PluginRegistrar*).
// Returns 0 on success; otherwise fills `error`. Never throws.
typedef int (*rlcore_register_fn)(void* registrar, rlcore_register_error* error);

struct rlcore_plugin_descriptor_v1 {
  uint32_t struct_size;  // sizeof(rlcore_plugin_descriptor_v1) as the plugin saw it
  uint32_t abi_major;
  uint32_t abi_minor;
  const char* name;
  const char* version;        // semver of the plugin itself
  const char* compiler;       // RLCORE_COMPILER_ID
  int32_t cxx11_abi;          // RLCORE_CXX11_ABI
  const char* torch_version;  // "major.minor" of the libtorch it was built against
  rlcore_register_fn register_fn;
};

typedef const rlcore_plugin_descriptor_v1* (*rlcore_plugin_entry_fn)();

}  // extern "C"
