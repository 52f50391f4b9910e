// A test-only grader whose reward a policy can certainly learn: the fraction
// of the response's bytes that are lowercase ASCII letters.
#include <string_view>

#include "rlcore/grader.h"
#include "rlcore/plugin.h"

namespace {

class LowercaseFractionGrader final : public rlcore::Grader {
 public:
  rlcore::GradeResult grade(std::string_view response, std::string_view, std::string_view,
                            const nlohmann::json&) const override {
    if (response.empty()) return {0.0, {}};
    double letters = 0;
    for (char c : response) letters += (c >= 'a' && c <= 'z') ? 1 : 0;
    return {letters / static_cast<double>(response.size()), {}};
  }
};

void register_plugin(rlcore::PluginRegistrar& registrar) {
  registrar.add<rlcore::Grader>("lowercase_fraction", "fraction of lowercase ASCII letters (tests only)",
                                rlcore::OptionsSchema<rlcore::NoOptions>(),
                                [](const rlcore::NoOptions&) { return std::make_unique<LowercaseFractionGrader>(); });
}

}  // namespace

RLCORE_PLUGIN("e2e-lowercase-reward", "0.0.1", register_plugin)
