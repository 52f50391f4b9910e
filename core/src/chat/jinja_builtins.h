// Jinja's filters, tests and the methods of str / dict that chat templates
// call, with Python's semantics. An unknown one is a ChatTemplateError naming it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_value.h"

namespace rlcore::chat::jinja {

using Arguments = std::vector<Value>;
using KeywordArguments = std::vector<std::pair<std::string, Value>>;

Value apply_filter(const std::string& name, const Value& input, const Arguments& args, const KeywordArguments& kwargs,
                   int line);
bool apply_test(const std::string& name, const Value& input, const Arguments& args, int line);
Value call_method(const Value& receiver, const std::string& name, const Arguments& args, int line);

// Python indexing and slicing of lists and strings (negative indices, steps).
Value index_value(const Value& container, const Value& key, int line);
Json slice_value(const Json& container, const Json& start, const Json& stop, const Json& step, int line);

// ==, in, < ... with Python's rules for numbers, strings, lists and dicts.
bool values_equal(const Json& a, const Json& b);
bool contains(const Json& container, const Json& item, int line);

}  // namespace rlcore::chat::jinja
