// The post_processor of tokenizer.json, reduced to what it does to the ids of
// one sequence: TemplateProcessing's tokens around it (Llama-3's BOS).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace rlcore {

class PostProcessor {
 public:
  // `config`: null, ByteLevel (it only moves offsets), TemplateProcessing, or a
  // Sequence of those. Throws FormatError naming the field for anything else.
  static PostProcessor from_json(const nlohmann::json& config);

  std::vector<std::int32_t> apply(std::vector<std::int32_t> ids) const;

 private:
  void add_template(const nlohmann::json& config, const std::string& where);

  std::vector<std::int32_t> prefix_;
  std::vector<std::int32_t> suffix_;
};

}  // namespace rlcore
