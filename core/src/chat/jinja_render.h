// Runs a parsed template: statements in order, expressions with Jinja's
// scoping (a for loop's body and a macro call have their own scope; namespace()
// objects carry values out), and the globals transformers provides.
#pragma once

#include <string>

#include "chat/jinja_ast.h"

namespace rlcore::chat::jinja {

// `variables`: the template's top-level names (an object). Throws ChatTemplateError.
std::string render(const Body& body, const Json& variables);

}  // namespace rlcore::chat::jinja
