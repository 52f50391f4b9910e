// The `tools` plugin: the built-in tools of the agent loop (docs/agent-loop.md).
#include "rlcore/plugin.h"

#include "calculator.h"

namespace rlcore::tools {
namespace {

void register_tools(PluginRegistrar& registrar) {
  registrar.add<Tool>(
      "calculator", "Exact integer and decimal arithmetic: {\"expression\": \"1234 * 5678\"} -> \"7006652\"",
      OptionsSchema<CalculatorOptions>()
          .key("max_expression_chars", &CalculatorOptions::max_expression_chars,
               "Longer expressions are an error result.", at_least(1))
          .key("max_result_digits", &CalculatorOptions::max_result_digits,
               "Numbers and results with more digits are an error result.", at_least(1))
          .key("decimal_places", &CalculatorOptions::decimal_places,
               "A quotient that does not terminate is rounded to this many places.", at_least(0))
          .key("timeout_s", &CalculatorOptions::timeout_s, "Seconds one call may take.", greater_than(0)),
      [](const CalculatorOptions& options) { return std::make_unique<CalculatorTool>(options); });
}

}  // namespace
}  // namespace rlcore::tools

RLCORE_PLUGIN("tools", "0.1.0", rlcore::tools::register_tools)
