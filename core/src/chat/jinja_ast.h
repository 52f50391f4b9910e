// The syntax tree of a Jinja template: expressions and statements, each with
// the template line it came from (for error messages).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace rlcore::chat::jinja {

using Json = nlohmann::ordered_json;

struct Expr;
using ExprPtr = std::shared_ptr<const Expr>;

struct Expr {
  enum class Kind {
    kLiteral,    // value
    kName,       // name
    kList,       // items
    kDict,       // items as key, value pairs
    kAttribute,  // items[0].name
    kIndex,      // items[0][items[1]]
    kSlice,      // items[0][items[1]:items[2]:items[3]] (null parts: nullptr)
    kCall,       // items[0](items[1..], kwargs)
    kFilter,     // items[0] | name(items[1..], kwargs)
    kTest,       // items[0] is [not] name(items[1..])
    kUnary,      // name ("not", "-", "+") items[0]
    kBinary,     // items[0] name items[1]
    kTernary,    // items[0] if items[1] else items[2] (items[2] may be nullptr)
  };
  Kind kind;
  int line = 0;
  Json value;
  std::string name;
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;  // kTest: "is not"
};

struct Stmt;
using Body = std::vector<std::shared_ptr<const Stmt>>;

struct Stmt {
  enum class Kind {
    kText,    // text
    kOutput,  // {{ expr }}
    kIf,      // branches: (condition, body)...; else_body
    kFor,     // targets in expr [if condition]: body; else_body
    kSet,     // targets (name or ns.attr) = expr
    kMacro,   // name(params with defaults): body
    kBreak,
    kContinue,
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr condition;
  std::vector<std::string> targets;  // for: loop names; set: "name" or "ns.attr"
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // macro parameters and defaults (nullptr: none)
};

// Parses `source` with transformers' settings (trim_blocks, lstrip_blocks).
// Throws ChatTemplateError naming the line for a syntax error or a statement
// the renderer does not support.
Body parse_template(const std::string& source);

}  // namespace rlcore::chat::jinja
