// The `calculator` tool: exact arithmetic on integers and decimals, so a model
// that cannot multiply 4-digit numbers in its head can still get them right.
#pragma once

#include <cstdint>
#include <string>

#include "rlcore/tool.h"

namespace rlcore::tools {

struct CalculatorOptions {
  int64_t max_expression_chars = 1000;
  int64_t max_result_digits = 1000;  // past it the result is an error, not a million-digit message
  int64_t decimal_places = 20;       // a quotient that does not terminate is rounded to this many
  double timeout_s = 5.0;
};

// "+ - * / // % ** ^ ( )" over integers and decimals (12, -3.25, 1e3 is not
// accepted: exact decimals only); "/" is exact division. The value of a
// well-formed expression, else throws ValueError saying what is wrong and where.
std::string evaluate_expression(const std::string& expression, const CalculatorOptions& options = {});

class CalculatorTool : public Tool {
 public:
  explicit CalculatorTool(CalculatorOptions options) : options_(options) {}
  ToolSchema schema() const override;
  std::chrono::milliseconds timeout() const override;
  // {"expression": "..."}: the value, or an error result naming the problem.
  ToolResult call(const nlohmann::json& arguments, const ToolCallContext& context) const override;

 private:
  CalculatorOptions options_;
};

}  // namespace rlcore::tools
