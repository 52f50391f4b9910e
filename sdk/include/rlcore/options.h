// Typed configuration at the edge: a component declares its keys (name, type,
// default, one-line doc, constraint) bound to the fields of a plain struct; the
// schema validates a config subtree and returns the filled struct. The same
// declarations produce `rlcore config --schema` and docs/config-reference.md.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "rlcore/config_node.h"
#include "rlcore/export.h"

namespace rlcore {

// One declared key, as shown in the schema and the config reference.
struct KeySpec {
  std::string name;  // relative dotted path, e.g. "optim.lr"
  std::string type;  // bool | int | float | string | list[int] | list[float] | list[string]
  std::string default_value;
  std::string doc;
  std::string constraint;  // human-readable, e.g. ">= 0" or "one of: strict, flexible"
};

// Range and choice checks for a key. Numbers use min/max, strings (and list
// elements) use choices.
struct RLCORE_API Check {
  std::optional<double> min;
  std::optional<double> max;
  bool min_exclusive = false;
  std::vector<std::string> choices;

  std::string describe() const;
};

inline Check at_least(double min) { return Check{min, std::nullopt, false, {}}; }
inline Check greater_than(double min) { return Check{min, std::nullopt, true, {}}; }
inline Check in_range(double min, double max) { return Check{min, max, false, {}}; }
inline Check one_of(std::vector<std::string> choices) {
  return Check{std::nullopt, std::nullopt, false, std::move(choices)};
}

namespace detail {

template <class T>
struct NonDeduced {
  using type = T;
};

template <class T>
struct ValueTraits;
template <>
struct ValueTraits<bool> {
  static constexpr const char* kType = "bool";
};
template <>
struct ValueTraits<int64_t> {
  static constexpr const char* kType = "int";
};
template <>
struct ValueTraits<int> {
  static constexpr const char* kType = "int";
};
template <>
struct ValueTraits<double> {
  static constexpr const char* kType = "float";
};
template <>
struct ValueTraits<std::string> {
  static constexpr const char* kType = "string";
};
template <>
struct ValueTraits<std::vector<int64_t>> {
  static constexpr const char* kType = "list[int]";
};
template <>
struct ValueTraits<std::vector<double>> {
  static constexpr const char* kType = "list[float]";
};
template <>
struct ValueTraits<std::vector<std::string>> {
  static constexpr const char* kType = "list[string]";
};

RLCORE_API std::string format_value(bool value);
RLCORE_API std::string format_value(int64_t value);
RLCORE_API std::string format_value(int value);
RLCORE_API std::string format_value(double value);
RLCORE_API std::string format_value(const std::string& value);
RLCORE_API std::string format_value(const std::vector<int64_t>& value);
RLCORE_API std::string format_value(const std::vector<double>& value);
RLCORE_API std::string format_value(const std::vector<std::string>& value);

// Throw ConfigError naming `node` when `value` violates `check`.
RLCORE_API void enforce(const ConfigNode& node, double value, const Check& check);
RLCORE_API void enforce(const ConfigNode& node, const std::string& value, const Check& check);
RLCORE_API void enforce(const ConfigNode& node, bool value, const Check& check);
RLCORE_API void enforce(const ConfigNode& node, const std::vector<std::string>& value, const Check& check);
RLCORE_API void enforce(const ConfigNode& node, const std::vector<int64_t>& value, const Check& check);
RLCORE_API void enforce(const ConfigNode& node, const std::vector<double>& value, const Check& check);

// Throws ConfigError for the first key of `node` not in `known`, suggesting the closest.
RLCORE_API void reject_unknown_keys(const ConfigNode& node, const std::vector<std::string>& known);
RLCORE_API void require_map(const ConfigNode& node);

}  // namespace detail

template <class Options>
class OptionsSchema {
 public:
  // A leaf key bound to `member`; its default is the member's value in a
  // default-constructed Options.
  template <class T>
  OptionsSchema& key(std::string name, T Options::*member, std::string doc, Check check = {}) {
    return key(std::move(name), member, std::move(doc), std::move(check),
               [](const ConfigNode& node) { return node.as<T>(); });
  }

  // As above, with `read` turning the node into a T, for keys that accept more
  // than one shape (e.g. data.train_files: a path or a list of paths).
  template <class T>
  OptionsSchema& key(std::string name, T Options::*member, std::string doc, Check check,
                     std::function<typename detail::NonDeduced<T>::type(const ConfigNode&)> read) {
    static_assert(std::is_default_constructible_v<Options>, "Options must be default-constructible");
    const T default_value = Options{}.*member;
    KeySpec spec{name, detail::ValueTraits<T>::kType, detail::format_value(default_value), std::move(doc),
                 check.describe()};
    fields_.push_back(Field{name, [spec]() { return std::vector<KeySpec>{spec}; },
                            [member, check, read = std::move(read)](Options& options, const ConfigNode& node) {
                              T value = read(node);
                              if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
                                detail::enforce(node, static_cast<double>(value), check);
                              } else {
                                detail::enforce(node, value, check);
                              }
                              options.*member = std::move(value);
                            }});
    return *this;
  }

  // A nested section (a map) bound to a struct member with its own schema.
  template <class Section>
  OptionsSchema& section(std::string name, Section Options::*member, OptionsSchema<Section> schema) {
    fields_.push_back(
        Field{name,
              [name, schema]() {
                std::vector<KeySpec> specs = schema.keys();
                for (auto& spec : specs) spec.name = name + "." + spec.name;
                return specs;
              },
              [member, schema](Options& options, const ConfigNode& node) { options.*member = schema.parse(node); }});
    return *this;
  }

  // A map whose keys another component validates (e.g. per-plugin options);
  // kept as a ConfigNode.
  OptionsSchema& subtree(std::string name, ConfigNode Options::*member, std::string doc) {
    KeySpec spec{name, "map", "{}", std::move(doc), ""};
    fields_.push_back(Field{name, [spec]() { return std::vector<KeySpec>{spec}; },
                            [member](Options& options, const ConfigNode& node) {
                              detail::require_map(node);
                              options.*member = node;
                            }});
    return *this;
  }

  std::vector<KeySpec> keys() const {
    std::vector<KeySpec> result;
    for (const auto& field : fields_) {
      auto specs = field.specs();
      result.insert(result.end(), specs.begin(), specs.end());
    }
    return result;
  }

  std::vector<std::string> names() const {
    std::vector<std::string> result;
    for (const auto& field : fields_) result.push_back(field.name);
    return result;
  }

  // Lets parse() accept keys it does not declare and keep them in `member`,
  // for a section shared with a component that validates them (the actor's
  // keys and its train engine's, say).
  OptionsSchema& other_keys_to(ConfigNode Options::*member) {
    others_ = member;
    return *this;
  }

  // Validates `node` (a map, or absent/null for all defaults) and fills Options.
  Options parse(const ConfigNode& node) const {
    Options options{};
    if (!node.defined() || node.is_null()) return options;
    detail::require_map(node);
    if (others_) {
      ConfigNode others = node.clone();
      for (const auto& name : names()) others.erase(name);
      options.*others_ = std::move(others);
    } else {
      detail::reject_unknown_keys(node, names());
    }
    for (const auto& field : fields_) {
      const ConfigNode child = node[field.name];
      if (child.defined() && !child.is_null()) field.apply(options, child);
    }
    return options;
  }

 private:
  struct Field {
    std::string name;
    std::function<std::vector<KeySpec>()> specs;
    std::function<void(Options&, const ConfigNode&)> apply;
  };
  std::vector<Field> fields_;
  ConfigNode Options::*others_ = nullptr;
};

// The reader for a list-of-strings key that also takes one string, as verl's
// do (`train_files: a.parquet`, `target_modules: all-linear`):
//   schema.key("target_modules", &Options::target_modules, doc, {}, read_one_or_many);
inline std::vector<std::string> read_one_or_many(const ConfigNode& node) {
  if (node.is_scalar()) return {node.as<std::string>()};
  return node.as<std::vector<std::string>>();
}

// For components without options.
struct NoOptions {};

}  // namespace rlcore
