// Unit grouping by HF name prefix, shard arithmetic and the JSON form of a layout.
#include "unit_layout.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "rlcore/error.h"

namespace rlcore::train_fsdp {
namespace {

std::string unit_of(const std::string& name) {
  static const std::string kLayers = "model.layers.";
  if (name.rfind("model.embed_tokens.", 0) == 0) return "embed";
  if (name.rfind(kLayers, 0) == 0) {
    const size_t dot = name.find('.', kLayers.size());
    return "layer." + name.substr(kLayers.size(), dot - kLayers.size());
  }
  return "head";
}

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

bool UnitLayout::operator==(const UnitLayout& other) const {
  if (name != other.name || numel != other.numel || params.size() != other.params.size()) return false;
  for (size_t i = 0; i < params.size(); ++i) {
    const UnitParam& a = params[i];
    const UnitParam& b = other.params[i];
    if (a.name != b.name || a.shape != b.shape || a.offset != b.offset) return false;
  }
  return true;
}

std::vector<UnitLayout> build_unit_layouts(const std::vector<model::ParameterSpec>& specs, int64_t dp_size) {
  std::vector<UnitLayout> units;
  for (const model::ParameterSpec& spec : specs) {
    const std::string unit = unit_of(spec.name);
    if (units.empty() || units.back().name != unit) {
      for (const UnitLayout& seen : units) {
        if (seen.name == unit)
          throw ValueError("parameter '" + spec.name + "' of unit '" + unit + "' is out of model order");
      }
      units.push_back(UnitLayout{unit, {}, 0, dp_size, 0});
    }
    UnitLayout& layout = units.back();
    const int64_t n = numel_of(spec.shape);
    layout.params.push_back(UnitParam{spec.name, spec.shape, layout.numel, n});
    layout.numel += n;
  }
  for (UnitLayout& layout : units) layout.shard_size = (layout.numel + dp_size - 1) / dp_size;
  return units;
}

ElementRange owned_range(const UnitLayout& layout, int64_t rank) {
  const int64_t begin = rank * layout.shard_size;
  return ElementRange{std::min(begin, layout.numel), std::min(begin + layout.shard_size, layout.numel)};
}

ElementRange intersect(const ElementRange& a, const ElementRange& b) {
  return ElementRange{std::max(a.begin, b.begin), std::min(a.end, b.end)};
}

nlohmann::json unit_layout_to_json(const UnitLayout& layout) {
  nlohmann::json params = nlohmann::json::array();
  for (const UnitParam& p : layout.params)
    params.push_back({{"name", p.name}, {"shape", p.shape}, {"offset", p.offset}});
  return {{"name", layout.name}, {"numel", layout.numel}, {"params", params}};
}

UnitLayout unit_layout_from_json(const nlohmann::json& json, int64_t dp_size) {
  UnitLayout layout;
  layout.name = json.at("name").get<std::string>();
  layout.numel = json.at("numel").get<int64_t>();
  for (const auto& p : json.at("params")) {
    const auto shape = p.at("shape").get<std::vector<int64_t>>();
    layout.params.push_back(
        UnitParam{p.at("name").get<std::string>(), shape, p.at("offset").get<int64_t>(), numel_of(shape)});
  }
  layout.dp_size = dp_size;
  layout.shard_size = (layout.numel + dp_size - 1) / dp_size;
  return layout;
}

}  // namespace rlcore::train_fsdp
