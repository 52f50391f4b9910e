// The text that new messages add to a conversation under a checkpoint's chat
// template: the template applied with and without them, the difference. The
// agent loop tokenizes only this delta and appends it to the trajectory's ids,
// so the model's own tokens are never decoded and encoded again (verl found
// that re-templating the history breaks convergence).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "rlcore/core/chat/chat_template.h"
#include "rlcore/export.h"

namespace rlcore::agent {

// render(history + added, options) without render(history, options with no
// generation prompt), which must be its prefix: a template that renders the
// earlier turns differently once more messages follow is a chat::ChatTemplateError
// naming where the two renderings part.
RLCORE_API std::string chat_delta_text(const chat::ChatTemplate& chat_template, const nlohmann::ordered_json& history,
                                       const nlohmann::ordered_json& added,
                                       const chat::ChatTemplateOptions& options = {});

}  // namespace rlcore::agent
