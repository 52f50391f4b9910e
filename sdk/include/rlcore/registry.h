// The registry of components, keyed by (kind, name). Plugins add factories
// through a PluginRegistrar; the core creates components by the names a config
// selects. Duplicate names are errors naming both files.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "rlcore/capabilities.h"
#include "rlcore/config_node.h"
#include "rlcore/export.h"
#include "rlcore/options.h"
#include "rlcore/parallel_sizes.h"
#include "rlcore/plugin_abi.h"

namespace rlcore {

class CommContext;

// Every kind of component a plugin can provide.
RLCORE_API const std::vector<std::string>& component_kinds();

// What a component may need besides its options, supplied by whoever creates it.
struct ComponentContext {
  std::string device = "cpu";  // torch device string
  std::string model_path;      // HF checkpoint directory, for components that serve a model
  // The worker's process groups (dp, tp, ...); null outside a worker or when the run has none.
  const CommContext* comm = nullptr;
  // Train engines: "lm" (log-probs of the causal LM head) or "value" (a critic's scalar head).
  std::string model_head = "lm";
  // Train engines: false for a frozen model (the reference policy): no optimizer, no gradients.
  bool trainable = true;
  // Train engines: optimizer steps the run will take (learning-rate schedules need it); 0: unknown.
  int64_t total_training_steps = 0;
};

// Which plugin and file a component came from.
struct PluginOrigin {
  std::string plugin;   // plugin name from its descriptor ("builtin" for the core)
  std::string version;  // plugin semver
  std::string file;     // shared library path ("" for the core)
};

struct ComponentEntry {
  std::string kind;
  std::string name;
  std::string doc;
  std::vector<KeySpec> keys;
  // For graders: the data_source values this grader handles by default.
  std::vector<std::string> data_sources;
  PluginOrigin origin;
  // Validates `options` (throws ConfigError naming the key) without making anything.
  std::function<void(const ConfigNode& options)> validate;
  // Validates `options` and makes the component (type-erased; see Registry::create).
  std::function<std::shared_ptr<void>(const ConfigNode& options, const ComponentContext& context)> factory;
};

// An engine's parallel sizes for its options (validated by its schema first).
using ParallelSizesOf = std::function<ParallelSizes(const ConfigNode& options)>;

class RLCORE_API Registry {
 public:
  // Throws PluginError on an unknown kind or a duplicate (kind, name), naming both origins.
  void add(ComponentEntry entry);

  const ComponentEntry* find(const std::string& kind, const std::string& name) const;
  // Throws PluginError listing the registered names of `kind` when absent.
  const ComponentEntry& get(const std::string& kind, const std::string& name) const;
  std::vector<const ComponentEntry*> entries(const std::string& kind) const;
  std::vector<const ComponentEntry*> all() const;
  std::vector<std::string> names(const std::string& kind) const;

  // The capabilities (rlcore/capabilities.h) a registered component's type declares
  // (empty when it declares none).
  void set_capabilities(const std::string& kind, const std::string& name, std::vector<std::string> capabilities);
  std::vector<std::string> capabilities(const std::string& kind, const std::string& name) const;

  // SDK 6.2: the parallel sizes a registered component declares for `options` (every
  // size 1 when it declares none, as a plugin built against 6.1 does).
  void set_parallel_sizes(const std::string& kind, const std::string& name, ParallelSizesOf sizes);
  ParallelSizes parallel_sizes(const std::string& kind, const std::string& name, const ConfigNode& options) const;

  // Creates the (Interface::kKind, name) component from its options subtree.
  template <class Interface>
  std::shared_ptr<Interface> create(const std::string& name, const ConfigNode& options = ConfigNode(),
                                    const ComponentContext& context = ComponentContext()) const {
    return std::static_pointer_cast<Interface>(get(Interface::kKind, name).factory(options, context));
  }

 private:
  std::map<std::pair<std::string, std::string>, ComponentEntry> entries_;
  // Beside the entries, not in ComponentEntry: plugins built against SDK 4.0
  // construct ComponentEntry with its 4.0 layout (see docs/plugin-abi.md).
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> capabilities_;
  std::map<std::pair<std::string, std::string>, ParallelSizesOf> parallel_sizes_;  // likewise (6.2)
};

// What a plugin's register function receives: adds typed factories, all
// stamped with the plugin's origin.
class RLCORE_API PluginRegistrar {
 public:
  PluginRegistrar(Registry& registry, PluginOrigin origin);

  // `make(const Options&)` or `make(const Options&, const ComponentContext&)` returns
  // std::unique_ptr<Interface> or std::shared_ptr<Interface>.
  template <class Interface, class Options, class Make>
  void add(std::string name, std::string doc, OptionsSchema<Options> schema, Make make,
           std::vector<std::string> data_sources = {}) {
    using Made = std::conditional_t<std::is_invocable_v<Make, const Options&, const ComponentContext&>,
                                    std::invoke_result<Make, const Options&, const ComponentContext&>,
                                    std::invoke_result<Make, const Options&>>;
    ComponentEntry entry;
    entry.kind = Interface::kKind;
    entry.name = std::move(name);
    entry.doc = std::move(doc);
    entry.keys = schema.keys();
    entry.data_sources = std::move(data_sources);
    entry.validate = [schema](const ConfigNode& options) { schema.parse(options); };
    entry.factory = [schema = std::move(schema), make = std::move(make)](const ConfigNode& options,
                                                                         const ComponentContext& context) {
      std::shared_ptr<Interface> made;
      if constexpr (std::is_invocable_v<Make, const Options&, const ComponentContext&>) {
        made = make(schema.parse(options), context);
      } else {
        made = make(schema.parse(options));
      }
      return std::static_pointer_cast<void>(made);
    };
    const std::string kind = entry.kind, entry_name = entry.name;
    add_entry(std::move(entry));
    add_capabilities(kind, entry_name, capabilities_of<typename std::decay_t<typename Made::type>::element_type>());
  }

#if RLCORE_SDK_TARGET_ABI_MINOR >= 2
  // Declares how the (Interface::kKind, name) component, added above, splits its model
  // over ranks: `sizes(const Options&)` returns its ParallelSizes, read from the options
  // `schema` parses (the core asks before any worker starts; rlcore/parallel_sizes.h).
  template <class Interface, class Options, class Sizes>
  void add_parallel_sizes(const std::string& name, OptionsSchema<Options> schema, Sizes sizes) {
    set_parallel_sizes(Interface::kKind, name,
                       [schema = std::move(schema), sizes = std::move(sizes)](const ConfigNode& options) {
                         return sizes(schema.parse(options));
                       });
  }
#endif

  const PluginOrigin& origin() const { return origin_; }

 private:
  void add_entry(ComponentEntry entry);
  void add_capabilities(const std::string& kind, const std::string& name, std::vector<std::string> capabilities);
  void set_parallel_sizes(const std::string& kind, const std::string& name, ParallelSizesOf sizes);
  Registry& registry_;
  PluginOrigin origin_;
};

}  // namespace rlcore
