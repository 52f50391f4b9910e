#include "chat/jinja_builtins.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace rlcore::chat::jinja {
namespace {

const Json& arg(const Arguments& args, size_t i, int line, const std::string& what) {
  if (i >= args.size()) render_error(line, what + " needs an argument");
  return data_of(args[i], line);
}

const Value* kwarg(const KeywordArguments& kwargs, const std::string& name) {
  for (const auto& [key, value] : kwargs) {
    if (key == name) return &value;
  }
  return nullptr;
}

const std::string& text_of(const Json& value, int line, const std::string& what) {
  if (!value.is_string()) render_error(line, what + " expects a string, got " + type_name(value));
  return value.get_ref<const std::string&>();
}

bool is_number(const Json& value) { return value.is_number(); }

std::string strip_chars(const std::string& text, const std::string& chars, bool left, bool right) {
  size_t begin = 0, end = text.size();
  if (left)
    while (begin < end && chars.find(text[begin]) != std::string::npos) ++begin;
  if (right)
    while (end > begin && chars.find(text[end - 1]) != std::string::npos) --end;
  return text.substr(begin, end - begin);
}

const std::string kWhitespace = " \t\n\r\v\f";

Json split(const std::string& text, const Json* separator, int64_t max_split) {
  Json parts = Json::array();
  if (separator == nullptr || separator->is_null()) {  // runs of whitespace, no empty parts
    size_t at = 0;
    while (true) {
      at = text.find_first_not_of(kWhitespace, at);
      if (at == std::string::npos) break;
      if (max_split >= 0 && static_cast<int64_t>(parts.size()) == max_split) {
        parts.push_back(strip_chars(text.substr(at), kWhitespace, false, true));
        break;
      }
      const size_t end = text.find_first_of(kWhitespace, at);
      parts.push_back(text.substr(at, end == std::string::npos ? std::string::npos : end - at));
      if (end == std::string::npos) break;
      at = end;
    }
    return parts;
  }
  const std::string& sep = separator->get_ref<const std::string&>();
  if (sep.empty()) render_error(0, "empty separator in split()");
  size_t at = 0;
  while (true) {
    const size_t found = text.find(sep, at);
    if (found == std::string::npos || (max_split >= 0 && static_cast<int64_t>(parts.size()) == max_split)) {
      parts.push_back(text.substr(at));
      return parts;
    }
    parts.push_back(text.substr(at, found - at));
    at = found + sep.size();
  }
}

std::string replace_all(std::string text, const std::string& from, const std::string& to, int64_t count) {
  if (from.empty()) return text;
  size_t at = 0;
  for (int64_t done = 0; count < 0 || done < count; ++done) {
    at = text.find(from, at);
    if (at == std::string::npos) break;
    text.replace(at, from.size(), to);
    at += to.size();
  }
  return text;
}

std::string title_case(const std::string& text) {
  std::string out = text;
  bool start = true;
  for (char& c : out) {
    const bool alpha = std::isalpha(static_cast<unsigned char>(c));
    if (alpha)
      c = static_cast<char>(start ? std::toupper(static_cast<unsigned char>(c))
                                  : std::tolower(static_cast<unsigned char>(c)));
    start = !alpha;
  }
  return out;
}

std::string map_chars(std::string text, int (*map)(int)) {
  for (char& c : text) c = static_cast<char>(map(static_cast<unsigned char>(c)));
  return text;
}

bool starts_or_ends(const std::string& text, const Json& affixes, bool starts, int line) {
  const auto one = [&](const Json& affix) {
    const std::string& a = text_of(affix, line, starts ? "startswith" : "endswith");
    return text.size() >= a.size() && text.compare(starts ? 0 : text.size() - a.size(), a.size(), a) == 0;
  };
  if (affixes.is_array()) return std::any_of(affixes.begin(), affixes.end(), one);
  return one(affixes);
}

int compare_values(const Json& a, const Json& b, int line) {
  if (is_number(a) && is_number(b)) {
    const double x = a.get<double>(), y = b.get<double>();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string())
    return a.get<std::string>().compare(b.get<std::string>()) < 0 ? -1 : a == b ? 0 : 1;
  render_error(line, "cannot compare " + type_name(a) + " with " + type_name(b));
}

Json attribute_of(const Json& item, const std::string& path) {
  Json current = item;
  size_t at = 0;
  while (at <= path.size()) {
    const size_t dot = path.find('.', at);
    const std::string key = path.substr(at, dot == std::string::npos ? std::string::npos : dot - at);
    if (!current.is_object() || !current.contains(key)) return nullptr;
    current = current[key];
    if (dot == std::string::npos) break;
    at = dot + 1;
  }
  return current;
}

Value select(const Value& input, const Arguments& args, bool by_attribute, bool keep, int line) {
  const Json& items = data_of(input, line);
  if (!items.is_array()) render_error(line, "select/reject expects a list, got " + type_name(items));
  Json out = Json::array();
  for (const Json& item : items) {
    Value subject = Value::of(item);
    size_t next = 0;
    if (by_attribute) {
      const std::string& path = text_of(arg(args, 0, line, "selectattr"), line, "selectattr");
      const Json found = attribute_of(item, path);
      subject =
          item.is_object() && item.contains(path.substr(0, path.find('.'))) ? Value::of(found) : Value::undefined(path);
      next = 1;
    }
    bool passed = truthy(subject);
    if (args.size() > next) {
      const std::string& test = text_of(data_of(args[next], line), line, "select test");
      passed =
          apply_test(test, subject, Arguments(args.begin() + static_cast<std::ptrdiff_t>(next) + 1, args.end()), line);
    }
    if (passed == keep) out.push_back(item);
  }
  return Value::of(out);
}

}  // namespace

bool values_equal(const Json& a, const Json& b) {
  if (a.is_number() && b.is_number() && !a.is_boolean() && !b.is_boolean()) return a.get<double>() == b.get<double>();
  return a == b;
}

bool contains(const Json& container, const Json& item, int line) {
  if (container.is_string()) {
    return container.get<std::string>().find(text_of(item, line, "'in' on a string")) != std::string::npos;
  }
  if (container.is_array()) {
    return std::any_of(container.begin(), container.end(), [&](const Json& x) { return values_equal(x, item); });
  }
  if (container.is_object()) return item.is_string() && container.contains(item.get<std::string>());
  render_error(line, "'in' needs a string, list or dict, got " + type_name(container));
}

Value index_value(const Value& container_value, const Value& key_value, int line) {
  if (container_value.kind == Value::Kind::kNamespace && key_value.is_data() && key_value.data.is_string()) {
    const Json& attributes = *container_value.attributes;
    const std::string& key = key_value.data.get_ref<const std::string&>();
    return attributes.contains(key) ? Value::of(attributes[key]) : Value::undefined(key);
  }
  const Json& container = data_of(container_value, line);
  const Json& key = data_of(key_value, line);
  if (container.is_object()) {
    if (!key.is_string()) return Value::undefined(key.dump());
    const std::string& name = key.get_ref<const std::string&>();
    return container.contains(name) ? Value::of(container[name]) : Value::undefined(name);
  }
  if ((container.is_array() || container.is_string()) && key.is_number_integer()) {
    const auto size =
        static_cast<int64_t>(container.is_array() ? container.size() : container.get<std::string>().size());
    int64_t i = key.get<int64_t>();
    if (i < 0) i += size;
    if (i < 0 || i >= size) return Value::undefined("index " + key.dump());
    if (container.is_array()) return Value::of(container[static_cast<size_t>(i)]);
    return Value::of(std::string(1, container.get<std::string>()[static_cast<size_t>(i)]));
  }
  return Value::undefined(key.is_string() ? key.get<std::string>() : key.dump());
}

Json slice_value(const Json& container, const Json& start_json, const Json& stop_json, const Json& step_json,
                 int line) {
  const bool is_text = container.is_string();
  if (!is_text && !container.is_array()) render_error(line, "cannot slice a " + type_name(container));
  const auto size = static_cast<int64_t>(is_text ? container.get<std::string>().size() : container.size());
  const int64_t step = step_json.is_null() ? 1 : step_json.get<int64_t>();
  if (step == 0) render_error(line, "slice step cannot be zero");
  const auto bound = [&](const Json& value, int64_t fallback) {
    if (value.is_null()) return fallback;
    int64_t i = value.get<int64_t>();
    if (i < 0) i += size;
    return step > 0 ? std::clamp<int64_t>(i, 0, size) : std::clamp<int64_t>(i, -1, size - 1);
  };
  const int64_t start = bound(start_json, step > 0 ? 0 : size - 1);
  const int64_t stop = bound(stop_json, step > 0 ? size : -1);
  Json out = is_text ? Json("") : Json::array();
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (is_text)
      out.get_ref<std::string&>() += container.get<std::string>()[static_cast<size_t>(i)];
    else
      out.push_back(container[static_cast<size_t>(i)]);
  }
  return out;
}

bool apply_test(const std::string& name, const Value& input, const Arguments& args, int line) {
  if (name == "defined") return !input.is_undefined();
  if (name == "undefined") return input.is_undefined();
  if (input.is_undefined()) return false;
  if (name == "callable")
    return input.kind == Value::Kind::kMacro || input.kind == Value::Kind::kMethod ||
           input.kind == Value::Kind::kFunction;
  if (!input.is_data()) return false;
  const Json& x = input.data;
  if (name == "none") return x.is_null();
  if (name == "string") return x.is_string();
  if (name == "mapping") return x.is_object();
  if (name == "iterable") return x.is_array() || x.is_object() || x.is_string();
  if (name == "sequence") return x.is_array() || x.is_string() || x.is_object();
  if (name == "number") return x.is_number() && !x.is_boolean();
  if (name == "integer") return x.is_number_integer() && !x.is_boolean();
  if (name == "float") return x.is_number_float();
  if (name == "boolean") return x.is_boolean();
  if (name == "true") return x.is_boolean() && x.get<bool>();
  if (name == "false") return x.is_boolean() && !x.get<bool>();
  if (name == "lower") return x.is_string() && map_chars(x.get<std::string>(), ::tolower) == x.get<std::string>();
  if (name == "upper") return x.is_string() && map_chars(x.get<std::string>(), ::toupper) == x.get<std::string>();
  if (name == "even" || name == "odd") {
    if (!x.is_number_integer()) render_error(line, "test '" + name + "' expects an integer");
    return (x.get<int64_t>() % 2 == 0) == (name == "even");
  }
  if (name == "divisibleby") return x.get<int64_t>() % arg(args, 0, line, "divisibleby").get<int64_t>() == 0;
  if (name == "equalto" || name == "eq" || name == "==" || name == "sameas") {
    return values_equal(x, arg(args, 0, line, name));
  }
  if (name == "ne" || name == "!=") return !values_equal(x, arg(args, 0, line, name));
  if (name == "in") return contains(arg(args, 0, line, "in"), x, line);
  if (name == "gt" || name == "lt" || name == "ge" || name == "le") {
    const int c = compare_values(x, arg(args, 0, line, name), line);
    return name == "gt" ? c > 0 : name == "lt" ? c < 0 : name == "ge" ? c >= 0 : c <= 0;
  }
  render_error(line, "test '" + name + "' is not supported");
}

Value apply_filter(const std::string& name, const Value& input, const Arguments& args, const KeywordArguments& kwargs,
                   int line) {
  if (name == "default" || name == "d") {
    const bool boolean = args.size() > 1 && truthy(args[1]);
    const bool use_default = input.is_undefined() || (boolean && !truthy(input));
    if (!use_default) return input;
    return args.empty() ? Value::of("") : args[0];
  }
  if (name == "safe" || name == "escape" || name == "e") return input;  // no autoescaping in chat templates
  if (name == "string") return Value::of(to_output(input));
  const Json& x = data_of(input, line);
  if (name == "tojson") {
    const Value* indent = kwarg(kwargs, "indent");
    if (!indent && !args.empty()) indent = &args[0];
    return Value::of(python_json_dumps(x, indent && indent->is_data() && indent->data.is_number_integer()
                                              ? static_cast<int>(indent->data.get<int64_t>())
                                              : -1));
  }
  if (name == "length" || name == "count") {
    if (x.is_string()) return Value::of(static_cast<int64_t>(x.get<std::string>().size()));
    if (x.is_array() || x.is_object()) return Value::of(static_cast<int64_t>(x.size()));
    render_error(line, "length of a " + type_name(x));
  }
  if (name == "trim")
    return Value::of(strip_chars(text_of(x, line, "trim"),
                                 args.empty() ? kWhitespace : text_of(arg(args, 0, line, "trim"), line, "trim"), true,
                                 true));
  if (name == "upper") return Value::of(map_chars(text_of(x, line, "upper"), ::toupper));
  if (name == "lower") return Value::of(map_chars(text_of(x, line, "lower"), ::tolower));
  if (name == "title") return Value::of(title_case(text_of(x, line, "title")));
  if (name == "capitalize") {
    std::string text = map_chars(text_of(x, line, "capitalize"), ::tolower);
    if (!text.empty()) text[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(text[0])));
    return Value::of(text);
  }
  if (name == "replace") {
    return Value::of(replace_all(text_of(x, line, "replace"), text_of(arg(args, 0, line, "replace"), line, "replace"),
                                 text_of(arg(args, 1, line, "replace"), line, "replace"),
                                 args.size() > 2 ? arg(args, 2, line, "replace").get<int64_t>() : -1));
  }
  if (name == "join") {
    const std::string separator = args.empty() ? "" : text_of(arg(args, 0, line, "join"), line, "join");
    const Value* attribute = kwarg(kwargs, "attribute");
    std::string out;
    bool first = true;
    for (const Json& item : x) {
      out += (first ? "" : separator) +
             to_output(Value::of(attribute ? attribute_of(item, data_of(*attribute, line).get<std::string>()) : item));
      first = false;
    }
    return Value::of(out);
  }
  if (name == "first" || name == "last") {
    if (x.is_string()) {
      const std::string& text = x.get_ref<const std::string&>();
      if (text.empty()) return Value::undefined(name);
      return Value::of(std::string(1, name == "first" ? text.front() : text.back()));
    }
    if (!x.is_array()) render_error(line, name + " of a " + type_name(x));
    if (x.empty()) return Value::undefined(name);
    return Value::of(name == "first" ? x.front() : x.back());
  }
  if (name == "int") {
    if (x.is_number()) return Value::of(static_cast<int64_t>(x.get<double>()));
    if (x.is_string()) {
      try {
        return Value::of(static_cast<int64_t>(std::stoll(x.get<std::string>())));
      } catch (const std::exception&) {
        return Value::of(int64_t{0});
      }
    }
    return Value::of(int64_t{0});
  }
  if (name == "float") {
    if (x.is_number()) return Value::of(x.get<double>());
    try {
      return Value::of(std::stod(text_of(x, line, "float")));
    } catch (const std::exception&) {
      return Value::of(0.0);
    }
  }
  if (name == "abs")
    return Value::of(x.is_number_float() ? Json(std::fabs(x.get<double>())) : Json(std::llabs(x.get<int64_t>())));
  if (name == "round") {
    const int64_t digits = args.empty() ? 0 : arg(args, 0, line, "round").get<int64_t>();
    const double scale = std::pow(10.0, static_cast<double>(digits));
    return Value::of(std::nearbyint(x.get<double>() * scale) / scale);
  }
  if (name == "list") {
    if (x.is_array()) return input;
    Json out = Json::array();
    if (x.is_string())
      for (char c : x.get<std::string>()) out.push_back(std::string(1, c));
    else if (x.is_object())
      for (const auto& [key, item] : x.items()) out.push_back(key);
    else
      render_error(line, "list of a " + type_name(x));
    return Value::of(out);
  }
  if (name == "items" || name == "dictsort") {
    if (!x.is_object()) render_error(line, name + " expects a dict, got " + type_name(x));
    Json out = Json::array();
    for (const auto& [key, item] : x.items()) out.push_back(Json::array({key, item}));
    if (name == "dictsort") {
      std::sort(out.begin(), out.end(),
                [](const Json& a, const Json& b) { return a[0].get<std::string>() < b[0].get<std::string>(); });
    }
    return Value::of(out);
  }
  if (name == "reverse") {
    if (x.is_string()) {
      std::string text = x.get<std::string>();
      std::reverse(text.begin(), text.end());
      return Value::of(text);
    }
    Json out = x;
    std::reverse(out.begin(), out.end());
    return Value::of(out);
  }
  if (name == "sort") {
    Json out = x;
    const bool reverse = kwarg(kwargs, "reverse") && truthy(*kwarg(kwargs, "reverse"));
    const Value* attribute = kwarg(kwargs, "attribute");
    std::stable_sort(out.begin(), out.end(), [&](const Json& a, const Json& b) {
      const Json ka = attribute ? attribute_of(a, data_of(*attribute, line).get<std::string>()) : a;
      const Json kb = attribute ? attribute_of(b, data_of(*attribute, line).get<std::string>()) : b;
      return reverse ? compare_values(kb, ka, line) < 0 : compare_values(ka, kb, line) < 0;
    });
    return Value::of(out);
  }
  if (name == "unique") {
    Json out = Json::array();
    for (const Json& item : x) {
      if (!contains(out, item, line)) out.push_back(item);
    }
    return Value::of(out);
  }
  if (name == "map") {
    Json out = Json::array();
    const Value* attribute = kwarg(kwargs, "attribute");
    for (const Json& item : x) {
      if (attribute) {
        out.push_back(attribute_of(item, data_of(*attribute, line).get<std::string>()));
      } else {
        const std::string& filter = text_of(arg(args, 0, line, "map"), line, "map");
        out.push_back(
            data_of(apply_filter(filter, Value::of(item), Arguments(args.begin() + 1, args.end()), {}, line), line));
      }
    }
    return Value::of(out);
  }
  if (name == "select" || name == "reject") return select(input, args, false, name == "select", line);
  if (name == "selectattr" || name == "rejectattr") return select(input, args, true, name == "selectattr", line);
  if (name == "indent") {
    const int64_t width = args.empty() ? 4 : arg(args, 0, line, "indent").get<int64_t>();
    const bool first = args.size() > 1 ? truthy(args[1]) : (kwarg(kwargs, "first") && truthy(*kwarg(kwargs, "first")));
    const std::string pad(static_cast<size_t>(width), ' ');
    std::string text = text_of(x, line, "indent");
    std::string out;
    size_t at = 0;
    bool line_start = first;
    while (at <= text.size()) {
      const size_t newline = text.find('\n', at);
      const std::string piece = text.substr(at, newline == std::string::npos ? std::string::npos : newline - at);
      if (line_start && !piece.empty()) out += pad;
      out += piece;
      if (newline == std::string::npos) break;
      out += '\n';
      line_start = true;
      at = newline + 1;
    }
    return Value::of(out);
  }
  if (name == "wordcount")
    return Value::of(static_cast<int64_t>(split(text_of(x, line, "wordcount"), nullptr, -1).size()));
  render_error(line, "filter '" + name + "' is not supported");
}

Value call_method(const Value& receiver_value, const std::string& name, const Arguments& args, int line) {
  const Json& receiver = data_of(receiver_value, line);
  if (receiver.is_string()) {
    const std::string& text = receiver.get_ref<const std::string&>();
    const auto chars = [&](size_t i) {
      return args.size() > i && !data_of(args[i], line).is_null() ? text_of(data_of(args[i], line), line, name)
                                                                  : kWhitespace;
    };
    if (name == "strip") return Value::of(strip_chars(text, chars(0), true, true));
    if (name == "lstrip") return Value::of(strip_chars(text, chars(0), true, false));
    if (name == "rstrip") return Value::of(strip_chars(text, chars(0), false, true));
    if (name == "split") {
      const Json* separator = args.empty() ? nullptr : &data_of(args[0], line);
      return Value::of(split(text, separator, args.size() > 1 ? data_of(args[1], line).get<int64_t>() : -1));
    }
    if (name == "startswith") return Value::of(starts_or_ends(text, arg(args, 0, line, name), true, line));
    if (name == "endswith") return Value::of(starts_or_ends(text, arg(args, 0, line, name), false, line));
    if (name == "upper") return Value::of(map_chars(text, ::toupper));
    if (name == "lower") return Value::of(map_chars(text, ::tolower));
    if (name == "title") return Value::of(title_case(text));
    if (name == "capitalize") return apply_filter("capitalize", receiver_value, {}, {}, line);
    if (name == "replace") {
      return Value::of(replace_all(text, text_of(arg(args, 0, line, name), line, name),
                                   text_of(arg(args, 1, line, name), line, name),
                                   args.size() > 2 ? arg(args, 2, line, name).get<int64_t>() : -1));
    }
    if (name == "find") {
      const size_t at = text.find(text_of(arg(args, 0, line, name), line, name));
      return Value::of(at == std::string::npos ? int64_t{-1} : static_cast<int64_t>(at));
    }
    if (name == "count") {
      const std::string& needle = text_of(arg(args, 0, line, name), line, name);
      int64_t count = 0;
      for (size_t at = text.find(needle); !needle.empty() && at != std::string::npos;
           at = text.find(needle, at + needle.size()))
        ++count;
      return Value::of(count);
    }
    if (name == "join") {
      std::string out;
      bool first = true;
      for (const Json& item : arg(args, 0, line, name)) {
        out += (first ? "" : text) + to_output(Value::of(item));
        first = false;
      }
      return Value::of(out);
    }
    if (name == "isdigit") {
      return Value::of(!text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c));
      }));
    }
  }
  if (receiver.is_object()) {
    if (name == "items") return apply_filter("items", receiver_value, {}, {}, line);
    if (name == "keys" || name == "values") {
      Json out = Json::array();
      for (const auto& [key, item] : receiver.items()) out.push_back(name == "keys" ? Json(key) : item);
      return Value::of(out);
    }
    if (name == "get") {
      const std::string& key = text_of(arg(args, 0, line, name), line, name);
      if (receiver.contains(key)) return Value::of(receiver[key]);
      return args.size() > 1 ? args[1] : Value::of(nullptr);
    }
  }
  render_error(line, type_name(receiver) + " method '" + name + "' is not supported");
}

}  // namespace rlcore::chat::jinja
