// ConfigNode over yaml-cpp. Location tracking: parsed nodes carry yaml-cpp
// marks; nodes set by overrides are recorded by key path in a table shared by
// the whole tree.
#include "rlcore/config_node.h"

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "rlcore/error.h"

namespace rlcore {
namespace {

std::string join_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

std::vector<std::string> split_path(const std::string& dotted) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(dotted);
  while (std::getline(in, part, '.')) parts.push_back(part);
  return parts;
}

std::string scalar_text(const YAML::Node& node) {
  if (node.IsScalar()) return node.Scalar();
  if (node.IsMap()) return "a map";
  if (node.IsSequence()) return "a list";
  if (node.IsNull()) return "null";
  return "nothing";
}

}  // namespace

// Note: yaml-cpp nodes are references; `node = other` writes through to the
// shared node, so rebinding a handle must use reset().
struct ConfigNode::Impl {
  YAML::Node node;
  std::string path;
  std::string source;
  // Key path -> source of values set after parsing (command-line overrides).
  std::shared_ptr<std::map<std::string, std::string>> set_by;
};

ConfigNode::ConfigNode() : impl_(std::make_unique<Impl>()) {
  impl_->node = YAML::Node(YAML::NodeType::Map);
  impl_->set_by = std::make_shared<std::map<std::string, std::string>>();
}
ConfigNode::~ConfigNode() = default;
ConfigNode::ConfigNode(const ConfigNode& other) : impl_(std::make_unique<Impl>(*other.impl_)) {}
ConfigNode& ConfigNode::operator=(const ConfigNode& other) {
  if (this != &other) impl_ = std::make_unique<Impl>(*other.impl_);
  return *this;
}
ConfigNode::ConfigNode(ConfigNode&&) noexcept = default;
ConfigNode& ConfigNode::operator=(ConfigNode&&) noexcept = default;
ConfigNode::ConfigNode(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

namespace {

std::string position(const std::string& source, const YAML::Mark& mark) {
  return source + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

// Every key must be a plain name (YAML allows `? {a: 1}: x`, a mapping as a key,
// which no config key is). yaml-cpp also keeps every entry of a map with a
// repeated key and lookups see only the first, so a second
// `actor_rollout_ref:` block would be silently ignored.
void check_keys(const YAML::Node& node, const std::string& source) {
  if (node.IsMap()) {
    std::set<std::string> seen;
    for (const auto& entry : node) {
      if (!entry.first.IsScalar()) {
        throw ConfigError(position(source, entry.first.Mark()) +
                          ": a key must be a plain name, not a YAML mapping or list");
      }
      const std::string key = entry.first.Scalar();
      if (!seen.insert(key).second) {
        throw ConfigError(position(source, entry.first.Mark()) + ": key '" + key +
                          "' appears twice in the same map; merge the two");
      }
      check_keys(entry.second, source);
    }
  } else if (node.IsSequence()) {
    for (const auto& item : node) check_keys(item, source);
  }
}

}  // namespace

ConfigNode ConfigNode::parse(const std::string& yaml_text, const std::string& source) {
  auto impl = std::make_unique<Impl>();
  try {
    impl->node = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(source + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                      ": invalid YAML: " + e.msg);
  }
  if (impl->node.IsNull() || !impl->node.IsDefined()) impl->node = YAML::Node(YAML::NodeType::Map);
  if (!impl->node.IsMap()) throw ConfigError(source + ": the top level of a config must be a map of keys");
  check_keys(impl->node, source);
  impl->source = source;
  impl->set_by = std::make_shared<std::map<std::string, std::string>>();
  return ConfigNode(std::move(impl));
}

ConfigNode ConfigNode::load_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw IoError("cannot read config file '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return parse(text.str(), path);
}

bool ConfigNode::defined() const { return impl_->node.IsDefined(); }
bool ConfigNode::is_map() const { return impl_->node.IsMap(); }
bool ConfigNode::is_sequence() const { return impl_->node.IsSequence(); }
bool ConfigNode::is_scalar() const { return impl_->node.IsScalar(); }
bool ConfigNode::is_null() const { return impl_->node.IsNull(); }
const std::string& ConfigNode::path() const { return impl_->path; }

std::string ConfigNode::location() const {
  for (std::string prefix = impl_->path;;) {
    auto it = impl_->set_by->find(prefix);
    if (it != impl_->set_by->end()) return it->second;
    auto dot = prefix.rfind('.');
    if (dot == std::string::npos) break;
    prefix.resize(dot);
  }
  const YAML::Mark mark = impl_->node.IsDefined() ? impl_->node.Mark() : YAML::Mark::null_mark();
  if (mark.is_null()) return impl_->source;
  return impl_->source + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

std::string ConfigNode::describe() const {
  const std::string where = location();
  const std::string name = impl_->path.empty() ? "<root>" : impl_->path;
  return "'" + name + "'" + (where.empty() ? "" : " (" + where + ")");
}

std::vector<std::string> ConfigNode::keys() const {
  std::vector<std::string> result;
  if (!impl_->node.IsMap()) return result;
  for (const auto& item : impl_->node) result.push_back(item.first.as<std::string>());
  return result;
}

bool ConfigNode::has(const std::string& key) const {
  if (!impl_->node.IsMap()) return false;
  const YAML::Node& node = impl_->node;
  return static_cast<bool>(node[key]);
}

ConfigNode ConfigNode::operator[](const std::string& key) const {
  auto child = std::make_unique<Impl>(*impl_);
  const YAML::Node& node = impl_->node;
  // A missing key yields an invalid "zombie" node in yaml-cpp; keep a plain undefined one.
  const YAML::Node found = node.IsMap() ? node[key] : YAML::Node(YAML::NodeType::Undefined);
  child->node.reset(found.IsDefined() ? found : YAML::Node(YAML::NodeType::Undefined));
  child->path = join_path(impl_->path, key);
  return ConfigNode(std::move(child));
}

ConfigNode ConfigNode::at_path(const std::string& dotted_path) const {
  ConfigNode current = *this;
  for (const auto& key : split_path(dotted_path)) current = current[key];
  return current;
}

std::vector<ConfigNode> ConfigNode::items() const {
  std::vector<ConfigNode> result;
  if (!impl_->node.IsSequence()) return result;
  for (std::size_t i = 0; i < impl_->node.size(); ++i) {
    auto child = std::make_unique<Impl>(*impl_);
    child->node.reset(impl_->node[i]);
    child->path = impl_->path + "[" + std::to_string(i) + "]";
    result.push_back(ConfigNode(std::move(child)));
  }
  return result;
}

namespace {

template <class T>
const char* type_name();
template <>
const char* type_name<bool>() {
  return "bool";
}
template <>
const char* type_name<int64_t>() {
  return "int";
}
template <>
const char* type_name<int>() {
  return "int";
}
template <>
const char* type_name<double>() {
  return "float";
}
template <>
const char* type_name<std::string>() {
  return "string";
}

template <class T>
T scalar_as(const ConfigNode& self, const YAML::Node& node) {
  if (!node.IsDefined()) throw ConfigError("missing key " + self.describe());
  if (!node.IsScalar()) {
    throw ConfigError("key " + self.describe() + ": expected " + type_name<T>() + ", got " + scalar_text(node));
  }
  try {
    return node.as<T>();
  } catch (const YAML::Exception&) {
    throw ConfigError("key " + self.describe() + ": expected " + type_name<T>() + ", got '" + node.Scalar() + "'");
  }
}

template <class T>
std::vector<T> list_as(const ConfigNode& self, const YAML::Node& node) {
  if (!node.IsDefined()) throw ConfigError("missing key " + self.describe());
  if (!node.IsSequence()) {
    throw ConfigError("key " + self.describe() + ": expected a list of " + type_name<T>() + ", got " +
                      scalar_text(node));
  }
  std::vector<T> result;
  for (const auto& item : self.items()) result.push_back(item.as<T>());
  return result;
}

}  // namespace

template <>
bool ConfigNode::as<bool>() const {
  return scalar_as<bool>(*this, impl_->node);
}
template <>
int64_t ConfigNode::as<int64_t>() const {
  return scalar_as<int64_t>(*this, impl_->node);
}
template <>
int ConfigNode::as<int>() const {
  return scalar_as<int>(*this, impl_->node);
}
template <>
double ConfigNode::as<double>() const {
  return scalar_as<double>(*this, impl_->node);
}
template <>
std::string ConfigNode::as<std::string>() const {
  return scalar_as<std::string>(*this, impl_->node);
}
template <>
std::vector<int64_t> ConfigNode::as<std::vector<int64_t>>() const {
  return list_as<int64_t>(*this, impl_->node);
}
template <>
std::vector<double> ConfigNode::as<std::vector<double>>() const {
  return list_as<double>(*this, impl_->node);
}
template <>
std::vector<std::string> ConfigNode::as<std::vector<std::string>>() const {
  return list_as<std::string>(*this, impl_->node);
}

void ConfigNode::set(const std::string& dotted_path, const std::string& value_text, const std::string& source) {
  const auto parts = split_path(dotted_path);
  for (const auto& part : parts) {
    if (part.empty()) throw ConfigError("override '" + dotted_path + "': empty key segment");
  }
  YAML::Node value;
  try {
    value = YAML::Load(value_text);
  } catch (const YAML::Exception& e) {
    throw ConfigError("override '" + dotted_path + "=" + value_text + "': invalid value: " + e.msg);
  }
  check_keys(value, "override '" + dotted_path + "'");
  // yaml-cpp's operator= on a node rebinds shared identity, so walk with reset().
  YAML::Node current;
  current.reset(impl_->node);
  std::string walked = impl_->path;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    walked = join_path(walked, parts[i]);
    YAML::Node next = current[parts[i]];
    if (next.IsDefined() && !next.IsNull() && !next.IsMap()) {
      throw ConfigError("override '" + dotted_path + "': '" + walked + "' is not a map");
    }
    if (!next.IsDefined() || next.IsNull()) next = YAML::Node(YAML::NodeType::Map);
    current[parts[i]] = next;
    YAML::Node child = current[parts[i]];
    current.reset(child);
  }
  current[parts.back()] = value.IsDefined() ? value : YAML::Node(YAML::NodeType::Null);
  (*impl_->set_by)[join_path(impl_->path, dotted_path)] = source;
}

namespace {
void merge_into(YAML::Node target, const YAML::Node& source) {
  for (const auto& item : source) {
    const auto key = item.first.as<std::string>();
    YAML::Node existing = target[key];
    if (existing.IsMap() && item.second.IsMap()) {
      merge_into(existing, item.second);
    } else {
      target[key] = YAML::Clone(item.second);
    }
  }
}
}  // namespace

void ConfigNode::merge(const ConfigNode& other) {
  if (!other.impl_->node.IsMap()) return;
  if (!impl_->node.IsMap()) impl_->node = YAML::Node(YAML::NodeType::Map);
  merge_into(impl_->node, other.impl_->node);
}

void ConfigNode::erase(const std::string& key) {
  if (impl_->node.IsMap()) impl_->node.remove(key);
}

std::string ConfigNode::to_yaml() const {
  YAML::Emitter out;
  out << impl_->node;
  return out.c_str();
}

ConfigNode ConfigNode::clone() const {
  auto copy = std::make_unique<Impl>(*impl_);
  copy->node.reset(YAML::Clone(impl_->node));
  copy->set_by = std::make_shared<std::map<std::string, std::string>>(*impl_->set_by);
  return ConfigNode(std::move(copy));
}

void apply_overrides(ConfigNode& root, const std::vector<std::string>& overrides) {
  for (const auto& text : overrides) {
    const auto eq = text.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw ConfigError("override '" + text + "' must have the form key.path=value");
    }
    root.set(text.substr(0, eq), text.substr(eq + 1), "command line '" + text + "'");
  }
}

}  // namespace rlcore
