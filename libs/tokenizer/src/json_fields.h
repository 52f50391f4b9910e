// Readers of tokenizer.json fields that every stage (normalizer, pre-tokenizer,
// decoder, post-processor) needs; each error names the JSON path at fault.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

namespace rlcore::tokenizer_json {

// The string "type" of the stage object at `where` ("normalizer", "decoder.decoders[1]", ...).
std::string type_of(const nlohmann::json& config, const std::string& where);

}  // namespace rlcore::tokenizer_json
