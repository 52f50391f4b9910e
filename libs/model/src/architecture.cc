// The architecture registry: the families rlcore builds (one file each under
// architectures/, listed by the build), found by model_type.
#include "rlcore/model/architecture.h"

#include <algorithm>
#include <set>

#include "architectures/architectures.h"
#include "rlcore/error.h"

namespace rlcore::model {
namespace {

std::vector<Architecture> registered_architectures() {
  std::vector<Architecture> all = architecture_files();
  std::sort(all.begin(), all.end(),
            [](const Architecture& a, const Architecture& b) { return std::string(a.model_type) < b.model_type; });
  std::set<std::string> seen;
  for (const Architecture& a : all) {
    if (!seen.insert(a.model_type).second) {
      throw ValueError(std::string("architecture '") + a.model_type + "' is registered twice (architecture.cc)");
    }
  }
  return all;
}

}  // namespace

const std::vector<Architecture>& architectures() {
  static const std::vector<Architecture> all = registered_architectures();
  return all;
}

const Architecture* lookup_architecture(const std::string& model_type) {
  for (const Architecture& a : architectures()) {
    if (model_type == a.model_type) return &a;
  }
  return nullptr;
}

const Architecture& find_architecture(const std::string& model_type) {
  const Architecture* found = lookup_architecture(model_type);
  if (found == nullptr) {
    throw ConfigError("model_type '" + model_type + "' is not supported (supported: " + architecture_names() + ")");
  }
  return *found;
}

std::string architecture_names(bool (*keep)(const Architecture&), bool and_last) {
  std::vector<std::string> names;
  for (const Architecture& a : architectures()) {
    if (keep == nullptr || keep(a)) names.emplace_back(a.model_type);
  }
  std::string text;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) text += and_last && i + 1 == names.size() ? " and " : ", ";
    text += names[i];
  }
  return text;
}

const Architecture& ModelConfig::architecture() const { return find_architecture(model_type); }

}  // namespace rlcore::model
