// Template text -> syntax tree: tags and whitespace control (with transformers'
// trim_blocks and lstrip_blocks), then expressions by recursive descent in
// Jinja's precedence order, then statements nested by their end tags.
#include <cctype>
#include <cstdlib>

#include "chat/jinja_ast.h"
#include "rlcore/core/chat/chat_template.h"

namespace rlcore::chat::jinja {
namespace {

[[noreturn]] void syntax_error(int line, const std::string& what) {
  throw ChatTemplateError("chat template: " + what + " (line " + std::to_string(line) + ")");
}

// ---- tags ----------------------------------------------------------------

struct Segment {
  enum class Kind { kText, kOutput, kBlock, kComment } kind;
  std::string content;
  int line = 0;
  bool strip_before = false;  // {{- {%- {#-
  bool keep_before = false;   // {%+ : no lstrip_blocks
  bool strip_after = false;   // -}} -%} -#}
};

int line_at(const std::string& source, size_t position) {
  int line = 1;
  for (size_t i = 0; i < position && i < source.size(); ++i) line += source[i] == '\n' ? 1 : 0;
  return line;
}

// Where the tag opened at `open` ends (the index of its closing delimiter),
// skipping string literals inside expressions.
size_t find_close(const std::string& source, size_t from, const std::string& close, bool strings) {
  char quote = 0;
  for (size_t i = from; i + close.size() <= source.size(); ++i) {
    const char c = source[i];
    if (quote) {
      if (c == '\\')
        ++i;
      else if (c == quote)
        quote = 0;
      continue;
    }
    if (strings && (c == '\'' || c == '"')) {
      quote = c;
      continue;
    }
    if (source.compare(i, close.size(), close) == 0) return i;
  }
  return std::string::npos;
}

std::vector<Segment> split_tags(const std::string& source) {
  std::vector<Segment> segments;
  size_t at = 0;
  while (at < source.size()) {
    size_t open = std::string::npos;
    for (size_t i = at; i + 1 < source.size(); ++i) {
      if (source[i] == '{' && (source[i + 1] == '{' || source[i + 1] == '%' || source[i + 1] == '#')) {
        open = i;
        break;
      }
    }
    if (open == std::string::npos) {
      segments.push_back({Segment::Kind::kText, source.substr(at), line_at(source, at)});
      break;
    }
    if (open > at) segments.push_back({Segment::Kind::kText, source.substr(at, open - at), line_at(source, at)});
    const char type = source[open + 1];
    Segment tag{type == '{'   ? Segment::Kind::kOutput
                : type == '%' ? Segment::Kind::kBlock
                              : Segment::Kind::kComment,
                "", line_at(source, open)};
    size_t begin = open + 2;
    if (begin < source.size() && source[begin] == '-')
      tag.strip_before = true, ++begin;
    else if (begin < source.size() && source[begin] == '+')
      tag.keep_before = true, ++begin;
    const std::string close = type == '{' ? "}}" : type == '%' ? "%}" : "#}";
    const size_t end = find_close(source, begin, close, tag.kind != Segment::Kind::kComment);
    if (end == std::string::npos) syntax_error(tag.line, "unclosed tag '" + source.substr(open, 2) + "'");
    size_t content_end = end;
    if (content_end > begin && source[content_end - 1] == '-') tag.strip_after = true, --content_end;
    tag.content = source.substr(begin, content_end - begin);
    segments.push_back(tag);
    at = end + 2;
  }
  return segments;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// Whitespace control: '-' strips all whitespace on that side; block and comment
// tags also get lstrip_blocks (the spaces and tabs before them on their line)
// and trim_blocks (the one newline after them).
void apply_whitespace_control(std::vector<Segment>& segments) {
  for (size_t i = 0; i < segments.size(); ++i) {
    Segment& tag = segments[i];
    if (tag.kind == Segment::Kind::kText) continue;
    const bool block_like = tag.kind != Segment::Kind::kOutput;
    if (i > 0 && segments[i - 1].kind == Segment::Kind::kText) {
      std::string& before = segments[i - 1].content;
      if (tag.strip_before) {
        while (!before.empty() && is_space(before.back())) before.pop_back();
      } else if (block_like && !tag.keep_before) {
        const size_t newline = before.rfind('\n');
        const size_t line_start = newline == std::string::npos ? 0 : newline + 1;
        const bool at_line_start = newline != std::string::npos || i == 1;
        if (at_line_start && before.find_first_not_of(" \t", line_start) == std::string::npos)
          before.resize(line_start);
      }
    }
    if (i + 1 < segments.size() && segments[i + 1].kind == Segment::Kind::kText) {
      std::string& after = segments[i + 1].content;
      if (tag.strip_after) {
        size_t n = 0;
        while (n < after.size() && is_space(after[n])) ++n;
        after.erase(0, n);
      } else if (block_like) {
        if (after.compare(0, 1, "\n") == 0)
          after.erase(0, 1);
        else if (after.compare(0, 2, "\r\n") == 0)
          after.erase(0, 2);
      }
    }
  }
}

// ---- expressions -------------------------------------------------------

struct Token {
  enum class Kind { kName, kNumber, kString, kOperator, kEnd } kind;
  std::string text;
  Json value;
};

std::vector<Token> tokenize(const std::string& text, int line) {
  static const char* kOperators[] = {"**", "//", "==", "!=", "<=", ">=", "(", ")", "[", "]", "{", "}", ".",
                                     ",",  ":",  "|",  "~",  "+",  "-",  "*", "/", "%", "<", ">", "="};
  std::vector<Token> tokens;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (is_space(c)) {
      ++i;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t end = i;
      while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_')) ++end;
      tokens.push_back({Token::Kind::kName, text.substr(i, end - i), nullptr});
      i = end;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t end = i;
      bool is_float = false;
      while (end < text.size() &&
             (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '_' ||
              (text[end] == '.' && end + 1 < text.size() && std::isdigit(static_cast<unsigned char>(text[end + 1]))) ||
              text[end] == 'e' || text[end] == 'E')) {
        is_float = is_float || text[end] == '.' || text[end] == 'e' || text[end] == 'E';
        const bool exponent = text[end] == 'e' || text[end] == 'E';
        ++end;
        if (exponent && end < text.size() && (text[end] == '-' || text[end] == '+')) ++end;
      }
      std::string digits;
      for (size_t k = i; k < end; ++k)
        if (text[k] != '_') digits += text[k];
      tokens.push_back({Token::Kind::kNumber, digits,
                        is_float ? Json(std::strtod(digits.c_str(), nullptr)) : Json(std::stoll(digits))});
      i = end;
    } else if (c == '\'' || c == '"') {
      std::string value;
      size_t k = i + 1;
      for (; k < text.size() && text[k] != c; ++k) {
        if (text[k] != '\\' || k + 1 >= text.size()) {
          value += text[k];
          continue;
        }
        const char escaped = text[++k];
        switch (escaped) {
          case 'n':
            value += '\n';
            break;
          case 't':
            value += '\t';
            break;
          case 'r':
            value += '\r';
            break;
          case '\\':
            value += '\\';
            break;
          case '\'':
            value += '\'';
            break;
          case '"':
            value += '"';
            break;
          default:
            value += '\\', value += escaped;
        }
      }
      if (k >= text.size()) syntax_error(line, "unterminated string literal");
      tokens.push_back({Token::Kind::kString, value, value});
      i = k + 1;
    } else {
      bool matched = false;
      for (const char* op : kOperators) {
        const size_t n = std::char_traits<char>::length(op);
        if (text.compare(i, n, op) == 0) {
          tokens.push_back({Token::Kind::kOperator, op, nullptr});
          i += n;
          matched = true;
          break;
        }
      }
      if (!matched) syntax_error(line, std::string("unexpected character '") + c + "'");
    }
  }
  tokens.push_back({Token::Kind::kEnd, "", nullptr});
  return tokens;
}

class ExprParser {
 public:
  ExprParser(const std::string& text, int line) : tokens_(tokenize(text, line)), line_(line) {}

  ExprPtr parse_expression() { return ternary(); }

  bool at_end() const { return peek().kind == Token::Kind::kEnd; }
  bool accept_name(const std::string& word) {
    if (peek().kind != Token::Kind::kName || peek().text != word) return false;
    ++at_;
    return true;
  }
  bool accept(const std::string& op) {
    if (peek().kind != Token::Kind::kOperator || peek().text != op) return false;
    ++at_;
    return true;
  }
  void expect(const std::string& op) {
    if (!accept(op)) syntax_error(line_, "expected '" + op + "', got '" + peek().text + "'");
  }
  std::string name() {
    if (peek().kind != Token::Kind::kName) syntax_error(line_, "expected a name, got '" + peek().text + "'");
    return tokens_[at_++].text;
  }
  void expect_end() {
    if (!at_end()) syntax_error(line_, "unexpected '" + peek().text + "'");
  }
  // Below the ternary: `for x in y if c` must not read `if c` as a ternary.
  ExprPtr parse_or() { return or_expr(); }

 private:
  const Token& peek() const { return tokens_[at_]; }

  std::shared_ptr<Expr> node(Expr::Kind kind) {
    auto expr = std::make_shared<Expr>();
    expr->kind = kind;
    expr->line = line_;
    return expr;
  }

  ExprPtr binary(const std::string& op, ExprPtr left, ExprPtr right) {
    auto expr = node(Expr::Kind::kBinary);
    expr->name = op;
    expr->items = {std::move(left), std::move(right)};
    return expr;
  }

  ExprPtr ternary() {
    ExprPtr value = or_expr();
    while (accept_name("if")) {
      auto expr = node(Expr::Kind::kTernary);
      expr->items = {value, or_expr(), nullptr};
      if (accept_name("else")) expr->items[2] = ternary();
      value = expr;
    }
    return value;
  }

  ExprPtr or_expr() {
    ExprPtr left = and_expr();
    while (accept_name("or")) left = binary("or", left, and_expr());
    return left;
  }

  ExprPtr and_expr() {
    ExprPtr left = not_expr();
    while (accept_name("and")) left = binary("and", left, not_expr());
    return left;
  }

  ExprPtr not_expr() {
    if (accept_name("not")) {
      auto expr = node(Expr::Kind::kUnary);
      expr->name = "not";
      expr->items = {not_expr()};
      return expr;
    }
    return compare();
  }

  ExprPtr compare() {
    ExprPtr left = math1();
    while (true) {
      std::string op;
      for (const char* candidate : {"==", "!=", "<=", ">=", "<", ">"}) {
        if (accept(candidate)) {
          op = candidate;
          break;
        }
      }
      if (op.empty() && accept_name("in")) op = "in";
      if (op.empty() && peek().kind == Token::Kind::kName && peek().text == "not" &&
          tokens_[at_ + 1].kind == Token::Kind::kName && tokens_[at_ + 1].text == "in") {
        at_ += 2;
        op = "not in";
      }
      if (op.empty()) return left;
      left = binary(op, left, math1());
    }
  }

  ExprPtr math1() {
    ExprPtr left = concat();
    while (true) {
      if (accept("+"))
        left = binary("+", left, concat());
      else if (accept("-"))
        left = binary("-", left, concat());
      else
        return left;
    }
  }

  ExprPtr concat() {
    ExprPtr left = math2();
    while (accept("~")) left = binary("~", left, math2());
    return left;
  }

  ExprPtr math2() {
    ExprPtr left = power();
    while (true) {
      std::string op;
      for (const char* candidate : {"//", "*", "/", "%"}) {
        if (accept(candidate)) {
          op = candidate;
          break;
        }
      }
      if (op.empty()) return left;
      left = binary(op, left, power());
    }
  }

  ExprPtr power() {
    ExprPtr left = unary();
    while (accept("**")) left = binary("**", left, unary());
    return left;
  }

  ExprPtr unary() {
    for (const char* sign : {"-", "+"}) {
      if (accept(sign)) {
        auto expr = node(Expr::Kind::kUnary);
        expr->name = sign;
        expr->items = {unary()};
        return expr;
      }
    }
    return filters(postfix(primary()));
  }

  void call_arguments(Expr& expr) {
    if (accept(")")) return;
    do {
      if (peek().kind == Token::Kind::kName && tokens_[at_ + 1].kind == Token::Kind::kOperator &&
          tokens_[at_ + 1].text == "=") {
        std::string key = name();
        expect("=");
        expr.kwargs.emplace_back(std::move(key), ternary());
      } else {
        expr.items.push_back(ternary());
      }
    } while (accept(","));
    expect(")");
  }

  ExprPtr postfix(ExprPtr value) {
    while (true) {
      if (accept(".")) {
        auto expr = node(Expr::Kind::kAttribute);
        expr->name = name();
        expr->items = {value};
        value = expr;
      } else if (accept("[")) {
        value = subscript(value);
      } else if (accept("(")) {
        auto expr = node(Expr::Kind::kCall);
        expr->items = {value};
        call_arguments(*expr);
        value = expr;
      } else {
        return value;
      }
    }
  }

  ExprPtr subscript(ExprPtr value) {
    ExprPtr parts[3] = {nullptr, nullptr, nullptr};
    int part = 0;
    bool is_slice = false;
    while (!accept("]")) {
      if (accept(":")) {
        is_slice = true;
        if (++part > 2) syntax_error(line_, "a slice has at most three parts");
        continue;
      }
      if (parts[part]) syntax_error(line_, "unexpected '" + peek().text + "' in a subscript");
      parts[part] = ternary();
    }
    if (!is_slice) {
      if (!parts[0]) syntax_error(line_, "empty subscript");
      auto expr = node(Expr::Kind::kIndex);
      expr->items = {value, parts[0]};
      return expr;
    }
    auto expr = node(Expr::Kind::kSlice);
    expr->items = {value, parts[0], parts[1], parts[2]};
    return expr;
  }

  ExprPtr filters(ExprPtr value) {
    while (true) {
      if (accept("|")) {
        auto expr = node(Expr::Kind::kFilter);
        expr->name = name();
        expr->items = {value};
        if (accept("(")) call_arguments(*expr);
        value = postfix(expr);
      } else if (accept_name("is")) {
        auto expr = node(Expr::Kind::kTest);
        expr->negated = accept_name("not");
        expr->name = name();
        expr->items = {value};
        if (accept("(")) {
          call_arguments(*expr);
        } else if (peek().kind == Token::Kind::kNumber || peek().kind == Token::Kind::kString ||
                   (peek().kind == Token::Kind::kName && peek().text != "and" && peek().text != "or" &&
                    peek().text != "else" && peek().text != "if")) {
          expr->items.push_back(postfix(primary()));  // `is divisibleby 3`, `is sameas none`
        }
        value = expr;
      } else {
        return value;
      }
    }
  }

  ExprPtr primary() {
    const Token token = peek();
    if (token.kind == Token::Kind::kNumber || token.kind == Token::Kind::kString) {
      ++at_;
      auto expr = node(Expr::Kind::kLiteral);
      expr->value = token.value;
      // Adjacent string literals concatenate, as in Python.
      while (token.kind == Token::Kind::kString && peek().kind == Token::Kind::kString) {
        expr->value = expr->value.get<std::string>() + tokens_[at_++].value.get<std::string>();
      }
      return expr;
    }
    if (token.kind == Token::Kind::kName) {
      ++at_;
      auto expr = node(Expr::Kind::kLiteral);
      if (token.text == "true" || token.text == "True")
        expr->value = true;
      else if (token.text == "false" || token.text == "False")
        expr->value = false;
      else if (token.text == "none" || token.text == "None")
        expr->value = nullptr;
      else {
        expr->kind = Expr::Kind::kName;
        expr->name = token.text;
      }
      return expr;
    }
    if (accept("(")) {
      ExprPtr first = ternary();
      if (accept(")")) return first;
      auto list = node(Expr::Kind::kList);  // a tuple
      list->items = {first};
      while (accept(",")) {
        if (accept(")")) return list;
        list->items.push_back(ternary());
      }
      expect(")");
      return list;
    }
    if (accept("[")) {
      auto list = node(Expr::Kind::kList);
      while (!accept("]")) {
        list->items.push_back(ternary());
        if (!accept(",")) {
          expect("]");
          break;
        }
      }
      return list;
    }
    if (accept("{")) {
      auto dict = node(Expr::Kind::kDict);
      while (!accept("}")) {
        dict->items.push_back(ternary());
        expect(":");
        dict->items.push_back(ternary());
        if (!accept(",")) {
          expect("}");
          break;
        }
      }
      return dict;
    }
    syntax_error(line_, "unexpected '" + token.text + "'" + (token.kind == Token::Kind::kEnd ? " (end of tag)" : ""));
  }

  std::vector<Token> tokens_;
  size_t at_ = 0;
  int line_;
};

// ---- statements --------------------------------------------------------

class TemplateParser {
 public:
  explicit TemplateParser(std::vector<Segment> segments) : segments_(std::move(segments)) {}

  Body parse_all() {
    Body body = parse_until({});
    if (at_ < segments_.size()) syntax_error(segments_[at_].line, "unexpected '" + keyword(segments_[at_]) + "'");
    return body;
  }

 private:
  static std::string keyword(const Segment& segment) {
    size_t begin = 0;
    while (begin < segment.content.size() && is_space(segment.content[begin])) ++begin;
    size_t end = begin;
    while (end < segment.content.size() &&
           (std::isalnum(static_cast<unsigned char>(segment.content[end])) || segment.content[end] == '_')) {
      ++end;
    }
    return segment.content.substr(begin, end - begin);
  }

  static std::string rest(const Segment& segment) {
    const std::string word = keyword(segment);
    return segment.content.substr(segment.content.find(word) + word.size());
  }

  // Statements until a block tag whose keyword is one of `stops` (left unconsumed).
  Body parse_until(const std::vector<std::string>& stops) {
    Body body;
    while (at_ < segments_.size()) {
      const Segment& segment = segments_[at_];
      if (segment.kind == Segment::Kind::kComment) {
        ++at_;
        continue;
      }
      if (segment.kind == Segment::Kind::kText) {
        if (!segment.content.empty()) {
          auto stmt = std::make_shared<Stmt>();
          stmt->kind = Stmt::Kind::kText;
          stmt->text = segment.content;
          body.push_back(stmt);
        }
        ++at_;
        continue;
      }
      if (segment.kind == Segment::Kind::kOutput) {
        auto stmt = std::make_shared<Stmt>();
        stmt->kind = Stmt::Kind::kOutput;
        stmt->line = segment.line;
        ExprParser parser(segment.content, segment.line);
        stmt->expr = parser.parse_expression();
        parser.expect_end();
        body.push_back(stmt);
        ++at_;
        continue;
      }
      const std::string word = keyword(segment);
      for (const auto& stop : stops) {
        if (word == stop) return body;
      }
      body.push_back(statement(word, segment));
    }
    if (!stops.empty()) {
      syntax_error(segments_.empty() ? 1 : segments_.back().line, "missing '{% " + stops.back() + " %}'");
    }
    return body;
  }

  void expect_block(const std::string& word) {
    if (at_ >= segments_.size() || keyword(segments_[at_]) != word) {
      syntax_error(at_ < segments_.size() ? segments_[at_].line : 0, "missing '{% " + word + " %}'");
    }
    ++at_;
  }

  std::shared_ptr<const Stmt> statement(const std::string& word, const Segment& segment) {
    const int line = segment.line;
    auto stmt = std::make_shared<Stmt>();
    stmt->line = line;
    ExprParser parser(rest(segment), line);
    ++at_;
    if (word == "if") {
      stmt->kind = Stmt::Kind::kIf;
      ExprPtr condition = parser.parse_expression();
      parser.expect_end();
      while (true) {
        Body branch = parse_until({"elif", "else", "endif"});
        stmt->branches.emplace_back(condition, std::move(branch));
        const Segment& next = segments_[at_];
        const std::string next_word = keyword(next);
        ++at_;
        if (next_word == "elif") {
          ExprParser elif (rest(next), next.line);
          condition = elif.parse_expression();
          elif.expect_end();
          continue;
        }
        if (next_word == "else") {
          stmt->else_body = parse_until({"endif"});
          expect_block("endif");
        }
        break;
      }
    } else if (word == "for") {
      stmt->kind = Stmt::Kind::kFor;
      do stmt->targets.push_back(parser.name());
      while (parser.accept(","));
      if (!parser.accept_name("in")) syntax_error(line, "expected 'in' in a for loop");
      stmt->expr = parser.parse_or();
      if (parser.accept_name("if")) stmt->condition = parser.parse_or();
      if (parser.accept_name("recursive")) syntax_error(line, "recursive loops are not supported");
      parser.expect_end();
      stmt->body = parse_until({"else", "endfor"});
      if (keyword(segments_[at_]) == "else") {
        ++at_;
        stmt->else_body = parse_until({"endfor"});
      }
      expect_block("endfor");
    } else if (word == "set") {
      stmt->kind = Stmt::Kind::kSet;
      do {
        std::string target = parser.name();
        if (parser.accept(".")) target += "." + parser.name();
        stmt->targets.push_back(target);
      } while (parser.accept(","));
      if (!parser.accept("=")) syntax_error(line, "block assignments ({% set x %}...{% endset %}) are not supported");
      stmt->expr = parser.parse_expression();
      parser.expect_end();
    } else if (word == "macro") {
      stmt->kind = Stmt::Kind::kMacro;
      stmt->name = parser.name();
      parser.expect("(");
      if (!parser.accept(")")) {
        do {
          std::string param = parser.name();
          ExprPtr default_value = parser.accept("=") ? parser.parse_expression() : nullptr;
          stmt->params.emplace_back(std::move(param), default_value);
        } while (parser.accept(","));
        parser.expect(")");
      }
      parser.expect_end();
      stmt->body = parse_until({"endmacro"});
      expect_block("endmacro");
    } else if (word == "break" || word == "continue") {
      stmt->kind = word == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
      parser.expect_end();
    } else if (word == "generation") {
      // transformers' AssistantTracker marks assistant text; the text renders unchanged.
      parser.expect_end();
      stmt->kind = Stmt::Kind::kIf;
      auto always = std::make_shared<Expr>();
      always->kind = Expr::Kind::kLiteral;
      always->value = true;
      stmt->branches.emplace_back(always, parse_until({"endgeneration"}));
      expect_block("endgeneration");
    } else {
      syntax_error(line, "statement '" + word + "' is not supported");
    }
    return stmt;
  }

  std::vector<Segment> segments_;
  size_t at_ = 0;
};

}  // namespace

Body parse_template(const std::string& source) {
  std::vector<Segment> segments = split_tags(source);
  apply_whitespace_control(segments);
  return TemplateParser(std::move(segments)).parse_all();
}

}  // namespace rlcore::chat::jinja
