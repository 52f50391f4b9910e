// Readers of tokenizer.json fields shared by the tokenizer's stages.
#include "json_fields.h"

#include <nlohmann/json.hpp>

#include "rlcore/error.h"

namespace rlcore::tokenizer_json {

std::string type_of(const nlohmann::json& config, const std::string& where) {
  const auto type = config.is_object() ? config.find("type") : config.end();
  if (type == config.end() || !type->is_string()) {
    throw FormatError(where + ".type: missing; expected an object with a string \"type\"");
  }
  return type->get<std::string>();
}

}  // namespace rlcore::tokenizer_json
