#include "chat/jinja_render.h"

#include <cmath>
#include <ctime>
#include <unordered_map>

#include "chat/jinja_builtins.h"
#include "rlcore/core/chat/chat_template.h"

namespace rlcore::chat::jinja {
namespace {

constexpr size_t kMaxOutputBytes = size_t{64} << 20;  // templates are untrusted: bound what they can make
constexpr int kMaxCallDepth = 64;

bool is_dict_method(const std::string& name) {
  return name == "items" || name == "keys" || name == "values" || name == "get";
}

bool is_integer(const Json& x) { return x.is_number_integer() && !x.is_boolean(); }

Json arithmetic(const std::string& op, const Json& a, const Json& b, int line) {
  if (op == "+" && a.is_string() && b.is_string()) return a.get<std::string>() + b.get<std::string>();
  if (op == "+" && a.is_array() && b.is_array()) {
    Json out = a;
    for (const Json& item : b) out.push_back(item);
    return out;
  }
  if (op == "*" && a.is_string() && is_integer(b)) {
    std::string out;
    for (int64_t i = 0; i < b.get<int64_t>(); ++i) out += a.get<std::string>();
    return out;
  }
  if (!a.is_number() || !b.is_number()) {
    render_error(line, "unsupported operand types for " + op + ": " + type_name(a) + " and " + type_name(b));
  }
  const bool integers = is_integer(a) && is_integer(b);
  if (integers && op != "/" && op != "**") {
    const int64_t x = a.get<int64_t>(), y = b.get<int64_t>();
    if (op == "+") return x + y;
    if (op == "-") return x - y;
    if (op == "*") return x * y;
    if (y == 0) render_error(line, "division by zero");
    const int64_t floor_div = x / y - ((x % y != 0 && ((x < 0) != (y < 0))) ? 1 : 0);
    if (op == "//") return floor_div;
    if (op == "%") return x - floor_div * y;
  }
  const double x = a.get<double>(), y = b.get<double>();
  if (op == "+") return x + y;
  if (op == "-") return x - y;
  if (op == "*") return x * y;
  if (op == "**") {
    if (integers && b.get<int64_t>() >= 0) return static_cast<int64_t>(std::llround(std::pow(x, y)));
    return std::pow(x, y);
  }
  if (y == 0) render_error(line, "division by zero");
  if (op == "/") return x / y;
  if (op == "//") return std::floor(x / y);
  return x - std::floor(x / y) * y;  // %
}

class Renderer {
 public:
  explicit Renderer(const Json& variables) : variables_(variables) { scopes_.emplace_back(); }

  std::string run(const Body& body) {
    std::string out;
    execute(body, out);
    return out;
  }

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  using Scope = std::unordered_map<std::string, Value>;

  Value lookup(const std::string& name) const {
    for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope) {
      const auto it = scope->find(name);
      if (it != scope->end()) return it->second;
    }
    if (variables_.contains(name)) return Value::of(variables_[name]);
    for (const char* global : {"raise_exception", "strftime_now", "namespace", "range", "dict"}) {
      if (name == global) return Value::function(name);
    }
    return Value::undefined(name);
  }

  Flow execute(const Body& body, std::string& out) {
    for (const auto& stmt : body) {
      const Flow flow = execute(*stmt, out);
      if (flow != Flow::kNormal) return flow;
      if (out.size() > kMaxOutputBytes) render_error(stmt->line, "output larger than 64 MB");
    }
    return Flow::kNormal;
  }

  Flow execute(const Stmt& stmt, std::string& out) {
    switch (stmt.kind) {
      case Stmt::Kind::kText:
        out += stmt.text;
        return Flow::kNormal;
      case Stmt::Kind::kOutput:
        out += to_output(eval(*stmt.expr));
        return Flow::kNormal;
      case Stmt::Kind::kIf:
        for (const auto& [condition, branch] : stmt.branches) {
          if (truthy(eval(*condition))) return execute(branch, out);
        }
        return execute(stmt.else_body, out);
      case Stmt::Kind::kFor:
        return execute_for(stmt, out);
      case Stmt::Kind::kSet:
        assign(stmt);
        return Flow::kNormal;
      case Stmt::Kind::kMacro: {
        Value macro;
        macro.kind = Value::Kind::kMacro;
        macro.name = stmt.name;
        macro.macro = std::shared_ptr<const Stmt>(std::shared_ptr<const Stmt>{}, &stmt);
        scopes_.back()[stmt.name] = macro;
        return Flow::kNormal;
      }
      case Stmt::Kind::kBreak:
        return Flow::kBreak;
      case Stmt::Kind::kContinue:
        return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  void bind(const std::vector<std::string>& targets, const Json& item, int line) {
    if (targets.size() == 1) {
      scopes_.back()[targets[0]] = Value::of(item);
      return;
    }
    if (!item.is_array() || item.size() != targets.size()) {
      render_error(line, "cannot unpack " + type_name(item) + " into " + std::to_string(targets.size()) + " names");
    }
    for (size_t i = 0; i < targets.size(); ++i) scopes_.back()[targets[i]] = Value::of(item[i]);
  }

  Flow execute_for(const Stmt& stmt, std::string& out) {
    const Value source = eval(*stmt.expr);
    Json items = Json::array();
    if (!source.is_undefined()) {
      const Json& data = data_of(source, stmt.line);
      if (data.is_array())
        items = data;
      else if (data.is_object())
        for (const auto& [key, value] : data.items()) items.push_back(key);
      else if (data.is_string())
        for (char c : data.get<std::string>()) items.push_back(std::string(1, c));
      else if (!data.is_null())
        render_error(stmt.line, "cannot loop over a " + type_name(data));
    }
    if (stmt.condition) {
      Json kept = Json::array();
      for (const Json& item : items) {
        scopes_.emplace_back();
        bind(stmt.targets, item, stmt.line);
        if (truthy(eval(*stmt.condition))) kept.push_back(item);
        scopes_.pop_back();
      }
      items = std::move(kept);
    }
    const auto length = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < length; ++i) {
      scopes_.emplace_back();
      Json loop = {{"index", i + 1},         {"index0", i},
                   {"revindex", length - i}, {"revindex0", length - i - 1},
                   {"first", i == 0},        {"last", i == length - 1},
                   {"length", length}};
      if (i > 0) loop["previtem"] = items[static_cast<size_t>(i - 1)];
      if (i + 1 < length) loop["nextitem"] = items[static_cast<size_t>(i + 1)];
      scopes_.back()["loop"] = Value::of(std::move(loop));
      bind(stmt.targets, items[static_cast<size_t>(i)], stmt.line);
      const Flow flow = execute(stmt.body, out);
      scopes_.pop_back();
      if (flow == Flow::kBreak) break;
    }
    if (length == 0) return execute(stmt.else_body, out);
    return Flow::kNormal;
  }

  void assign(const Stmt& stmt) {
    const Value value = eval(*stmt.expr);
    if (stmt.targets.size() > 1) {
      bind(stmt.targets, data_of(value, stmt.line), stmt.line);
      return;
    }
    const std::string& target = stmt.targets[0];
    const size_t dot = target.find('.');
    if (dot == std::string::npos) {
      scopes_.back()[target] = value;
      return;
    }
    const Value holder = lookup(target.substr(0, dot));
    if (holder.kind != Value::Kind::kNamespace) {
      render_error(stmt.line, "'" + target.substr(0, dot) + "' is not a namespace(); only namespaces take attributes");
    }
    (*holder.attributes)[target.substr(dot + 1)] = data_of(value, stmt.line);
  }

  Value attribute(const Value& base, const std::string& name, int line) {
    if (base.kind == Value::Kind::kNamespace) {
      return base.attributes->contains(name) ? Value::of((*base.attributes)[name]) : Value::undefined(name);
    }
    const Json& data = data_of(base, line);
    if (data.is_object() && data.contains(name) && !is_dict_method(name)) return Value::of(data[name]);
    if (data.is_string() || (data.is_object() && is_dict_method(name))) {
      Value method;
      method.kind = Value::Kind::kMethod;
      method.name = name;
      method.receiver = std::make_shared<const Value>(base);
      return method;
    }
    return Value::undefined(name);
  }

  Value call(const Value& callee, const Arguments& args, const KeywordArguments& kwargs, int line) {
    switch (callee.kind) {
      case Value::Kind::kMethod:
        return call_method(*callee.receiver, callee.name, args, line);
      case Value::Kind::kMacro:
        return call_macro(*callee.macro, args, kwargs, line);
      case Value::Kind::kFunction:
        return call_global(callee.name, args, kwargs, line);
      case Value::Kind::kUndefined:
        render_error(line, "'" + callee.name + "' is undefined");
      default:
        render_error(line, "a " + type_name(callee.data) + " is not callable");
    }
  }

  Value call_macro(const Stmt& macro, const Arguments& args, const KeywordArguments& kwargs, int line) {
    if (++depth_ > kMaxCallDepth) render_error(line, "macro calls nested deeper than 64");
    scopes_.emplace_back();
    for (size_t i = 0; i < macro.params.size(); ++i) {
      const auto& [name, default_value] = macro.params[i];
      Value value = i < args.size() ? args[i] : Value::undefined(name);
      for (const auto& [key, given] : kwargs) {
        if (key == name) value = given;
      }
      if (value.is_undefined() && default_value) value = eval(*default_value);
      scopes_.back()[name] = value;
    }
    std::string out;
    execute(macro.body, out);
    scopes_.pop_back();
    --depth_;
    return Value::of(out);
  }

  Value call_global(const std::string& name, const Arguments& args, const KeywordArguments& kwargs, int line) {
    if (name == "raise_exception") {
      throw ChatTemplateError(args.empty() ? std::string("raise_exception") : to_output(args[0]));
    }
    if (name == "strftime_now") {
      const std::time_t now = std::time(nullptr);
      std::tm local{};
      localtime_r(&now, &local);
      char text[256];
      const std::string format = args.empty() ? "%Y-%m-%d" : to_output(args[0]);
      return Value::of(std::string(text, std::strftime(text, sizeof(text), format.c_str(), &local)));
    }
    if (name == "namespace" || name == "dict") {
      Json attributes = Json::object();
      if (!args.empty()) attributes = data_of(args[0], line);
      for (const auto& [key, value] : kwargs) attributes[key] = data_of(value, line);
      if (name == "dict") return Value::of(attributes);
      Value ns;
      ns.kind = Value::Kind::kNamespace;
      ns.name = "namespace";
      ns.attributes = std::make_shared<Json>(std::move(attributes));
      return ns;
    }
    // range
    int64_t start = 0, stop = 0, step = 1;
    if (args.size() == 1) stop = data_of(args[0], line).get<int64_t>();
    if (args.size() >= 2) start = data_of(args[0], line).get<int64_t>(), stop = data_of(args[1], line).get<int64_t>();
    if (args.size() == 3) step = data_of(args[2], line).get<int64_t>();
    if (step == 0) render_error(line, "range() step must not be zero");
    Json out = Json::array();
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (out.size() > 1000000) render_error(line, "range() longer than 1000000");
      out.push_back(i);
    }
    return Value::of(out);
  }

  void evaluate_arguments(const Expr& expr, size_t first, Arguments& args, KeywordArguments& kwargs) {
    for (size_t i = first; i < expr.items.size(); ++i) args.push_back(eval(*expr.items[i]));
    for (const auto& [key, value] : expr.kwargs) kwargs.emplace_back(key, eval(*value));
  }

  Value eval(const Expr& expr) {
    const int line = expr.line;
    switch (expr.kind) {
      case Expr::Kind::kLiteral:
        return Value::of(expr.value);
      case Expr::Kind::kName:
        return lookup(expr.name);
      case Expr::Kind::kList: {
        Json list = Json::array();
        for (const auto& item : expr.items) list.push_back(data_of(eval(*item), line));
        return Value::of(list);
      }
      case Expr::Kind::kDict: {
        Json dict = Json::object();
        for (size_t i = 0; i + 1 < expr.items.size(); i += 2) {
          dict[to_output(eval(*expr.items[i]))] = data_of(eval(*expr.items[i + 1]), line);
        }
        return Value::of(dict);
      }
      case Expr::Kind::kAttribute:
        return attribute(eval(*expr.items[0]), expr.name, line);
      case Expr::Kind::kIndex:
        return index_value(eval(*expr.items[0]), eval(*expr.items[1]), line);
      case Expr::Kind::kSlice: {
        const auto part = [&](size_t i) { return expr.items[i] ? data_of(eval(*expr.items[i]), line) : Json(nullptr); };
        return Value::of(slice_value(data_of(eval(*expr.items[0]), line), part(1), part(2), part(3), line));
      }
      case Expr::Kind::kCall: {
        const Value callee = eval(*expr.items[0]);
        Arguments args;
        KeywordArguments kwargs;
        evaluate_arguments(expr, 1, args, kwargs);
        return call(callee, args, kwargs, line);
      }
      case Expr::Kind::kFilter: {
        Arguments args;
        KeywordArguments kwargs;
        evaluate_arguments(expr, 1, args, kwargs);
        return apply_filter(expr.name, eval(*expr.items[0]), args, kwargs, line);
      }
      case Expr::Kind::kTest: {
        Arguments args;
        KeywordArguments kwargs;
        evaluate_arguments(expr, 1, args, kwargs);
        return Value::of(apply_test(expr.name, eval(*expr.items[0]), args, line) != expr.negated);
      }
      case Expr::Kind::kUnary: {
        const Value operand = eval(*expr.items[0]);
        if (expr.name == "not") return Value::of(!truthy(operand));
        const Json& x = data_of(operand, line);
        if (!x.is_number()) render_error(line, "bad operand type for unary " + expr.name + ": " + type_name(x));
        if (expr.name == "+") return operand;
        return Value::of(is_integer(x) ? Json(-x.get<int64_t>()) : Json(-x.get<double>()));
      }
      case Expr::Kind::kBinary:
        return binary(expr);
      case Expr::Kind::kTernary:
        if (truthy(eval(*expr.items[1]))) return eval(*expr.items[0]);
        return expr.items[2] ? eval(*expr.items[2]) : Value::undefined("else");
    }
    render_error(line, "unknown expression");
  }

  Value binary(const Expr& expr) {
    const int line = expr.line;
    const std::string& op = expr.name;
    const Value left = eval(*expr.items[0]);
    if (op == "and") return truthy(left) ? eval(*expr.items[1]) : left;
    if (op == "or") return truthy(left) ? left : eval(*expr.items[1]);
    const Value right = eval(*expr.items[1]);
    if (op == "~") return Value::of(to_output(left) + to_output(right));
    if (op == "==" || op == "!=") {
      bool equal = left.is_undefined() || right.is_undefined()
                       ? left.is_undefined() && right.is_undefined()
                       : left.is_data() && right.is_data() && values_equal(left.data, right.data);
      return Value::of(equal == (op == "=="));
    }
    const Json& a = data_of(left, line);
    const Json& b = data_of(right, line);
    if (op == "in") return Value::of(contains(b, a, line));
    if (op == "not in") return Value::of(!contains(b, a, line));
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      bool result;
      if (a.is_number() && b.is_number()) {
        const double x = a.get<double>(), y = b.get<double>();
        result = op == "<" ? x < y : op == ">" ? x > y : op == "<=" ? x <= y : x >= y;
      } else if (a.is_string() && b.is_string()) {
        const int c = a.get<std::string>().compare(b.get<std::string>());
        result = op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0;
      } else {
        render_error(line, "'" + op + "' not supported between " + type_name(a) + " and " + type_name(b));
      }
      return Value::of(result);
    }
    return Value::of(arithmetic(op, a, b, line));
  }

  const Json& variables_;
  std::vector<Scope> scopes_;
  int depth_ = 0;
};

}  // namespace

std::string render(const Body& body, const Json& variables) { return Renderer(variables).run(body); }

}  // namespace rlcore::chat::jinja
