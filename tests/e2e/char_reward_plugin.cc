// Test-only graders whose rewards a policy can certainly learn: the fraction
// of the response's bytes that are lowercase ASCII letters, and (multi-turn
// rollouts) whether the trajectory had a tool turn, read from verl's
// extra_info.__num_turns__ as a reward function sees it.
#include <string_view>

#include <nlohmann/json.hpp>

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

class ToolTurnGrader final : public rlcore::Grader {
 public:
  rlcore::GradeResult grade(std::string_view, std::string_view, std::string_view,
                            const nlohmann::json& extra) const override {
    const bool called = extra.is_object() && extra.contains("__num_turns__") && extra["__num_turns__"].is_number() &&
                        extra["__num_turns__"].get<int64_t>() > 2;
    return {called ? 1.0 : 0.0, {}};
  }
};

void register_plugin(rlcore::PluginRegistrar& registrar) {
  registrar.add<rlcore::Grader>("tool_turn", "1 when the trajectory had a tool turn (__num_turns__ > 2; tests only)",
                                rlcore::OptionsSchema<rlcore::NoOptions>(),
                                [](const rlcore::NoOptions&) { return std::make_unique<ToolTurnGrader>(); });
  registrar.add<rlcore::Grader>("lowercase_fraction", "fraction of lowercase ASCII letters (tests only)",
                                rlcore::OptionsSchema<rlcore::NoOptions>(),
                                [](const rlcore::NoOptions&) { return std::make_unique<LowercaseFractionGrader>(); });
}

}  // namespace

RLCORE_PLUGIN("e2e-lowercase-reward", "0.0.1", register_plugin)
