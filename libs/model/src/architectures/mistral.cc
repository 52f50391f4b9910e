// Mistral (MistralConfig): Llama without attention bias, every layer sliding.
#include <nlohmann/json.hpp>

#include "architectures.h"
#include "../config_json.h"

namespace rlcore::model {

void read_mistral_sliding_window(const nlohmann::json& j, const std::string& source, std::optional<int64_t> absent,
                                 ModelConfig& c) {
  const auto window = j.find("sliding_window");
  if (window == j.end()) {
    c.sliding_window = absent;
  } else if (!window->is_null()) {
    c.sliding_window = config_json::get_int(j, "sliding_window", source);
  }
}

void write_mistral_keys(const ModelConfig& c, nlohmann::json& j) {
  j["sliding_window"] = c.sliding_window ? nlohmann::json(*c.sliding_window) : nlohmann::json(nullptr);
}

namespace {

void parse_mistral(const nlohmann::json& j, const std::string& source, ModelConfig& c) {
  read_mistral_sliding_window(j, source, 4096, c);
}

}  // namespace

Architecture mistral_architecture() {
  Architecture a{"mistral", "Mistral"};
  a.default_max_position_embeddings = 4096 * 32;
  a.layers.attention_bias = AttentionBias::kNone;
  a.layers.sliding_window = true;
  a.parse = parse_mistral;
  a.write = write_mistral_keys;
  return a;
}

}  // namespace rlcore::model
