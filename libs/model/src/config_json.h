// Reading HF config.json fields with the errors ModelConfig::from_json gives: shared by
// config.cc and the architectures' own keys (architectures/*.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlcore/error.h"

namespace rlcore::model::config_json {

using nlohmann::json;

[[noreturn]] inline void fail(const std::string& source, const std::string& field, const std::string& what) {
  throw ConfigError(source + ": field '" + field + "' " + what);
}

// HF writes null for "use the default", so null counts as absent.
inline const json* find(const json& object, const std::string& key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

inline int64_t get_int(const json& object, const std::string& key, const std::string& source,
                       std::optional<int64_t> fallback = std::nullopt) {
  const json* value = find(object, key);
  if (value == nullptr) {
    if (fallback) return *fallback;
    fail(source, key, "is required but missing");
  }
  if (!value->is_number_integer()) fail(source, key, "must be an integer, got " + value->dump());
  return value->get<int64_t>();
}

inline double get_double(const json& object, const std::string& key, const std::string& source, double fallback) {
  const json* value = find(object, key);
  if (value == nullptr) return fallback;
  if (!value->is_number()) fail(source, key, "must be a number, got " + value->dump());
  return value->get<double>();
}

inline bool get_bool(const json& object, const std::string& key, const std::string& source, bool fallback) {
  const json* value = find(object, key);
  if (value == nullptr) return fallback;
  if (!value->is_boolean()) fail(source, key, "must be true or false, got " + value->dump());
  return value->get<bool>();
}

inline std::string get_string(const json& object, const std::string& key, const std::string& source,
                              std::optional<std::string> fallback = std::nullopt) {
  const json* value = find(object, key);
  if (value == nullptr) {
    if (fallback) return *fallback;
    fail(source, key, "is required but missing");
  }
  if (!value->is_string()) fail(source, key, "must be a string, got " + value->dump());
  return value->get<std::string>();
}

inline std::optional<int64_t> get_optional_int(const json& object, const std::string& key, const std::string& source) {
  if (find(object, key) == nullptr) return std::nullopt;
  return get_int(object, key, source);
}

// HF config fields whose null means "off" while absence means the class
// default (MistralConfig.sliding_window, Gemma2Config's softcapping).
inline std::optional<double> get_nullable_double(const json& object, const std::string& key, const std::string& source,
                                                 std::optional<double> absent) {
  const auto it = object.find(key);
  if (it == object.end()) return absent;
  if (it->is_null()) return std::nullopt;
  return get_double(object, key, source, 0.0);
}

inline std::vector<int64_t> get_int_list(const json& object, const std::string& key, const std::string& source) {
  const json* value = find(object, key);
  if (value == nullptr) return {};
  if (value->is_number_integer()) return {value->get<int64_t>()};
  std::vector<int64_t> out;
  if (!value->is_array()) fail(source, key, "must be an integer or a list of integers");
  for (const json& item : *value) {
    if (!item.is_number_integer()) fail(source, key, "must be an integer or a list of integers");
    out.push_back(item.get<int64_t>());
  }
  return out;
}

inline void check_positive(const std::string& source, const std::string& field, double value) {
  if (!(value > 0)) {
    std::ostringstream text;
    text << "must be positive, got " << value;
    fail(source, field, text.str());
  }
}

}  // namespace rlcore::model::config_json
