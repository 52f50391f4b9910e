// What Jinja expressions evaluate to: JSON data (with Python's printing and
// truthiness), undefined, namespaces, macros and bound methods.
#pragma once

#include <memory>
#include <string>

#include "chat/jinja_ast.h"

namespace rlcore::chat::jinja {

struct Value {
  enum class Kind {
    kUndefined,  // name: what was looked up
    kData,       // data
    kNamespace,  // attributes: shared, so `set ns.x = ...` is seen by every holder
    kMacro,      // macro
    kMethod,     // receiver.name(...)
    kFunction,   // a global: name
  };
  Kind kind = Kind::kUndefined;
  Json data;
  std::shared_ptr<Json> attributes;
  std::shared_ptr<const Stmt> macro;
  std::shared_ptr<const Value> receiver;
  std::string name;

  static Value of(Json data);
  static Value undefined(std::string name);
  static Value function(std::string name);

  bool is_undefined() const { return kind == Kind::kUndefined; }
  bool is_data() const { return kind == Kind::kData; }
};

[[noreturn]] void render_error(int line, const std::string& what);

// The value as data: undefined is an error naming what was undefined.
const Json& data_of(const Value& value, int line);

// Python's truthiness (undefined is false).
bool truthy(const Value& value);

// What {{ value }} prints: Python's str() (True, None, 1.0, ['a'], {'k': 1}); undefined prints "".
std::string to_output(const Value& value);

// Python's repr() of a float: the shortest round-trip digits, 1.0, 1e-05, 1e+16.
std::string python_float(double value);

// json.dumps(value, ensure_ascii=False, indent=indent) as transformers' tojson
// filter calls it (indent < 0: none; separators ', ' and ': ', or ',' with an indent).
std::string python_json_dumps(const Json& value, int indent);

// A JSON value's Python type name, for error messages.
std::string type_name(const Json& value);

}  // namespace rlcore::chat::jinja
