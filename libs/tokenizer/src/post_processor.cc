// Reads TemplateProcessing's "single" template: the special tokens before and
// after sequence A.
#include "post_processor.h"

#include <string>

#include <nlohmann/json.hpp>

#include "rlcore/error.h"
#include "json_fields.h"

namespace rlcore {
namespace {

using tokenizer_json::type_of;

// The ids of one template item {"SpecialToken": {"id": name}}, from "special_tokens".
std::vector<std::int32_t> special_ids(const nlohmann::json& config, const nlohmann::json& item,
                                      const std::string& where) {
  const auto name = item.find("id");
  if (name == item.end() || !name->is_string()) throw FormatError(where + ".id: missing");
  const auto specials = config.find("special_tokens");
  const auto entry = specials == config.end() ? specials : specials->find(name->get<std::string>());
  if (specials == config.end() || entry == specials->end() || !entry->contains("ids") || !(*entry)["ids"].is_array()) {
    throw FormatError(where + ".id: " + name->dump() + " has no ids in special_tokens");
  }
  std::vector<std::int32_t> ids;
  for (const auto& id : (*entry)["ids"]) {
    if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::int64_t>() > INT32_MAX) {
      throw FormatError(where + ": special_tokens[" + name->dump() + "].ids holds " + id.dump());
    }
    ids.push_back(id.get<std::int32_t>());
  }
  return ids;
}

}  // namespace

PostProcessor PostProcessor::from_json(const nlohmann::json& config) {
  PostProcessor result;
  if (config.is_null()) return result;
  const std::string root = "post_processor";
  const std::string type = type_of(config, root);
  if (type == "Sequence") {
    const auto children = config.find("processors");
    if (children == config.end() || !children->is_array()) {
      throw FormatError(root + ".processors: missing; a Sequence needs a list");
    }
    for (std::size_t i = 0; i < children->size(); ++i) {
      const std::string where = root + ".processors[" + std::to_string(i) + "]";
      const std::string child_type = type_of((*children)[i], where);
      if (child_type == "TemplateProcessing") {
        result.add_template((*children)[i], where);
      } else if (child_type != "ByteLevel") {
        throw FormatError(where + ".type: unsupported post-processor \"" + child_type +
                          "\" (supported: ByteLevel, TemplateProcessing, Sequence)");
      }
    }
  } else if (type == "TemplateProcessing") {
    result.add_template(config, root);
  } else if (type != "ByteLevel") {
    throw FormatError(root + ".type: unsupported post-processor \"" + type +
                      "\" (supported: ByteLevel, TemplateProcessing, Sequence)");
  }
  return result;
}

void PostProcessor::add_template(const nlohmann::json& config, const std::string& where) {
  const auto single = config.find("single");
  if (single == config.end() || !single->is_array()) {
    throw FormatError(where + ".single: missing; expected a list of template items");
  }
  bool seen_sequence = false;
  for (std::size_t i = 0; i < single->size(); ++i) {
    const std::string item_where = where + ".single[" + std::to_string(i) + "]";
    const nlohmann::json& item = (*single)[i];
    const auto is_object_at = [&](const char* key) {
      return item.is_object() && item.contains(key) && item[key].is_object();
    };
    if (is_object_at("Sequence") && item["Sequence"].value("id", "") == "A" && !seen_sequence) {
      seen_sequence = true;
    } else if (is_object_at("SpecialToken")) {
      const auto ids = special_ids(config, item["SpecialToken"], item_where + ".SpecialToken");
      auto& side = seen_sequence ? suffix_ : prefix_;
      side.insert(side.end(), ids.begin(), ids.end());
    } else {
      throw FormatError(item_where +
                        ": expected {\"SpecialToken\": ...} or one "
                        "{\"Sequence\": {\"id\": \"A\"}}, got " +
                        item.dump());
    }
  }
  if (!seen_sequence) throw FormatError(where + ".single: has no {\"Sequence\": {\"id\": \"A\"}}");
}

std::vector<std::int32_t> PostProcessor::apply(std::vector<std::int32_t> ids) const {
  if (prefix_.empty() && suffix_.empty()) return ids;
  std::vector<std::int32_t> out;
  out.reserve(prefix_.size() + ids.size() + suffix_.size());
  out.insert(out.end(), prefix_.begin(), prefix_.end());
  out.insert(out.end(), ids.begin(), ids.end());
  out.insert(out.end(), suffix_.begin(), suffix_.end());
  return out;
}

}  // namespace rlcore
