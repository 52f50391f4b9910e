// ConfigNode: a read-mostly view of one node of the resolved YAML config that
// remembers its key path and source location, so every error can name both.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rlcore/export.h"

namespace rlcore {

class RLCORE_API ConfigNode {
 public:
  // An empty map at the root.
  ConfigNode();
  ~ConfigNode();
  ConfigNode(const ConfigNode&);
  ConfigNode& operator=(const ConfigNode&);
  ConfigNode(ConfigNode&&) noexcept;
  ConfigNode& operator=(ConfigNode&&) noexcept;

  // `source` names the text in errors (a file path, "command line", ...).
  static ConfigNode parse(const std::string& yaml_text, const std::string& source);
  static ConfigNode load_file(const std::string& path);

  bool defined() const;
  bool is_map() const;
  bool is_sequence() const;
  bool is_scalar() const;
  bool is_null() const;

  // Dotted key path from the root ("trainer.logger"); "" for the root.
  const std::string& path() const;
  // "file:line:column" where the node came from, or its source name alone.
  std::string location() const;
  // "'trainer.logger' (configs/x.yaml:3:11)": how errors refer to this node.
  std::string describe() const;

  std::vector<std::string> keys() const;  // map keys in document order
  bool has(const std::string& key) const;
  ConfigNode operator[](const std::string& key) const;  // undefined node when absent
  // A dotted path below this node ("a.b.c").
  ConfigNode at_path(const std::string& dotted_path) const;
  std::vector<ConfigNode> items() const;  // sequence elements

  // Typed reads. Throw ConfigError naming the key, location, expected type and
  // the text found. Supported: bool, int64_t, int, double, std::string and
  // std::vector of int64_t, double, std::string.
  template <class T>
  T as() const;

  // Sets a dotted path below this node from a YAML value text, creating maps as
  // needed; the new value's location is `source`.
  void set(const std::string& dotted_path, const std::string& value_text, const std::string& source);
  // Deep-merges `other` into this node: maps merge key by key, anything else replaces.
  void merge(const ConfigNode& other);
  // Removes a key of this map (no-op when absent).
  void erase(const std::string& key);

  std::string to_yaml() const;
  ConfigNode clone() const;

 private:
  struct Impl;
  explicit ConfigNode(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Applies "a.b.c=value" overrides to `root`, in order. Throws ConfigError for
// text without '=' or with an empty key.
RLCORE_API void apply_overrides(ConfigNode& root, const std::vector<std::string>& overrides);

}  // namespace rlcore
