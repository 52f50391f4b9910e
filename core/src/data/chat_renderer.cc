// The checkpoint's chat template as the dataset's ChatRenderer.
#include <memory>

#include "rlcore/core/chat/chat_template.h"
#include "rlcore/core/data/dataset.h"

namespace rlcore::data {
namespace {

// YAML scalars as the JSON a template compares with: booleans, numbers, else strings.
nlohmann::ordered_json yaml_to_json(const ConfigNode& node) {
  if (node.is_map()) {
    nlohmann::ordered_json object = nlohmann::ordered_json::object();
    for (const auto& key : node.keys()) object[key] = yaml_to_json(node[key]);
    return object;
  }
  if (node.is_sequence()) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& item : node.items()) list.push_back(yaml_to_json(item));
    return list;
  }
  if (!node.defined() || node.is_null()) return nullptr;
  const std::string text = node.as<std::string>();
  if (text == "true" || text == "True") return true;
  if (text == "false" || text == "False") return false;
  try {
    size_t used = 0;
    const long long integer = std::stoll(text, &used);
    if (used == text.size()) return integer;
    const double number = std::stod(text, &used);
    if (used == text.size()) return number;
  } catch (const std::exception&) {
  }
  return text;
}

}  // namespace

chat::ChatTemplateOptions data_chat_template_options(const config::DataConfig& config) {
  chat::ChatTemplateOptions options;
  options.add_generation_prompt = true;
  if (config.apply_chat_template_kwargs.defined() && !config.apply_chat_template_kwargs.is_null()) {
    options.extra = yaml_to_json(config.apply_chat_template_kwargs);
    if (!options.extra.is_object()) {
      throw ConfigError("key " + config.apply_chat_template_kwargs.describe() +
                        ": data.apply_chat_template_kwargs must be a map of template variables");
    }
  }
  return options;
}

ChatRenderer checkpoint_chat_renderer(const std::string& model_dir, const config::DataConfig& config,
                                      const nlohmann::ordered_json& tools) {
  std::optional<chat::ChatTemplate> chat_template = chat::ChatTemplate::from_checkpoint(model_dir);
  if (!chat_template) return {};
  chat::ChatTemplateOptions options = data_chat_template_options(config);
  options.tools = tools;
  auto shared = std::make_shared<const chat::ChatTemplate>(std::move(*chat_template));
  return [shared, options](const nlohmann::json& messages) {
    return shared->render(nlohmann::ordered_json::parse(messages.dump()), options);
  };
}

}  // namespace rlcore::data
