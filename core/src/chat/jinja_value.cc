#include "chat/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "rlcore/core/chat/chat_template.h"
#include "rlcore/string_join.h"

namespace rlcore::chat::jinja {
namespace {

std::string python_string_repr(const std::string& text) {
  const bool use_double = text.find('\'') != std::string::npos && text.find('"') == std::string::npos;
  const char quote = use_double ? '"' : '\'';
  std::string out(1, quote);
  for (const char c : text) {
    if (c == quote || c == '\\')
      out += '\\', out += c;
    else if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c == '\r')
      out += "\\r";
    else
      out += c;
  }
  return out + quote;
}

std::string python_repr(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "None";
    case Json::value_t::boolean:
      return value.get<bool>() ? "True" : "False";
    case Json::value_t::number_float:
      return python_float(value.get<double>());
    case Json::value_t::string:
      return python_string_repr(value.get<std::string>());
    case Json::value_t::array: {
      return "[" + join(value, ", ", [](const Json& item) { return python_repr(item); }) + "]";
    }
    case Json::value_t::object: {
      std::string out = "{";
      bool first = true;
      for (const auto& [key, item] : value.items()) {
        out += (first ? "" : ", ") + python_string_repr(key) + ": " + python_repr(item);
        first = false;
      }
      return out + "}";
    }
    default:
      return value.dump();
  }
}

void json_string(const std::string& text, std::string& out) {
  out += '"';
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned char>(c));
          out += escaped;
        } else {
          out += c;  // ensure_ascii=False: UTF-8 as is
        }
    }
  }
  out += '"';
}

void dumps(const Json& value, int indent, int depth, std::string& out) {
  const bool pretty = indent >= 0;
  const auto newline = [&](int level) {
    out += '\n';
    out.append(static_cast<size_t>(indent * level), ' ');
  };
  switch (value.type()) {
    case Json::value_t::null:
      out += "null";
      return;
    case Json::value_t::boolean:
      out += value.get<bool>() ? "true" : "false";
      return;
    case Json::value_t::number_float: {
      const double x = value.get<double>();
      out += std::isnan(x) ? "NaN" : std::isinf(x) ? (x > 0 ? "Infinity" : "-Infinity") : python_float(x);
      return;
    }
    case Json::value_t::string:
      json_string(value.get<std::string>(), out);
      return;
    case Json::value_t::array: {
      if (value.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < value.size(); ++i) {
        if (i) out += pretty ? "," : ", ";
        if (pretty) newline(depth + 1);
        dumps(value[i], indent, depth + 1, out);
      }
      if (pretty) newline(depth);
      out += ']';
      return;
    }
    case Json::value_t::object: {
      if (value.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      bool first = true;
      for (const auto& [key, item] : value.items()) {
        if (!first) out += pretty ? "," : ", ";
        first = false;
        if (pretty) newline(depth + 1);
        json_string(key, out);
        out += ": ";
        dumps(item, indent, depth + 1, out);
      }
      if (pretty) newline(depth);
      out += '}';
      return;
    }
    default:
      out += value.dump();
      return;  // integers
  }
}

}  // namespace

Value Value::of(Json data) {
  Value value;
  value.kind = Kind::kData;
  value.data = std::move(data);
  return value;
}

Value Value::undefined(std::string name) {
  Value value;
  value.name = std::move(name);
  return value;
}

Value Value::function(std::string name) {
  Value value;
  value.kind = Kind::kFunction;
  value.name = std::move(name);
  return value;
}

void render_error(int line, const std::string& what) {
  throw ChatTemplateError("chat template: " + what + " (line " + std::to_string(line) + ")");
}

const Json& data_of(const Value& value, int line) {
  if (value.is_undefined()) render_error(line, "'" + value.name + "' is undefined");
  if (!value.is_data())
    render_error(line, "a " + std::string(value.kind == Value::Kind::kNamespace ? "namespace" : "callable") +
                           " is used as a value");
  return value.data;
}

bool truthy(const Value& value) {
  if (value.is_undefined()) return false;
  if (!value.is_data()) return true;
  const Json& data = value.data;
  switch (data.type()) {
    case Json::value_t::null:
      return false;
    case Json::value_t::boolean:
      return data.get<bool>();
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return data.get<int64_t>() != 0;
    case Json::value_t::number_float:
      return data.get<double>() != 0.0;
    case Json::value_t::string:
      return !data.get_ref<const std::string&>().empty();  // json::empty() is false for strings
    case Json::value_t::array:
    case Json::value_t::object:
      return !data.empty();
    default:
      return true;
  }
}

std::string to_output(const Value& value) {
  if (value.is_undefined()) return "";
  if (!value.is_data()) return "<" + value.name + ">";
  if (value.data.is_string()) return value.data.get<std::string>();
  return python_repr(value.data);
}

std::string python_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
  const std::string scientific(buffer, result.ptr);  // d.ddde[+-]XX, shortest round trip
  const size_t e = scientific.find('e');
  std::string digits = scientific.substr(0, e);
  const bool negative = digits[0] == '-';
  if (negative) digits.erase(0, 1);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exponent = std::stoi(scientific.substr(e + 1));
  std::string out;
  if (exponent >= -5 + 1 && exponent < 16) {  // Python repr: fixed for 1e-4 <= |x| < 1e16
    if (exponent < 0) {
      out = "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exponent + 1) {
      out = digits + std::string(static_cast<size_t>(exponent + 1) - digits.size(), '0') + ".0";
    } else {
      out =
          digits.substr(0, static_cast<size_t>(exponent + 1)) + "." + digits.substr(static_cast<size_t>(exponent + 1));
    }
  } else {
    out = digits.substr(0, 1) + (digits.size() > 1 ? "." + digits.substr(1) : "");
    char exponent_text[8];
    std::snprintf(exponent_text, sizeof(exponent_text), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += exponent_text;
  }
  return negative ? "-" + out : out;
}

std::string python_json_dumps(const Json& value, int indent) {
  std::string out;
  dumps(value, indent, 0, out);
  return out;
}

std::string type_name(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "NoneType";
    case Json::value_t::boolean:
      return "bool";
    case Json::value_t::number_float:
      return "float";
    case Json::value_t::string:
      return "str";
    case Json::value_t::array:
      return "list";
    case Json::value_t::object:
      return "dict";
    default:
      return "int";
  }
}

}  // namespace rlcore::chat::jinja
