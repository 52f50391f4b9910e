// The calculator tool: exact results where a float would round, Python's
// meaning of // and %, and every bad expression an error result naming where.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "../../common/error_of.h"
#include "calculator.h"
#include "rlcore/error.h"

using rlcore::tools::CalculatorOptions;
using rlcore::tools::CalculatorTool;
using rlcore::tools::evaluate_expression;

TEST_CASE("integers: exact at any size, with Python's precedence", "[calculator]") {
  CHECK(evaluate_expression("1234 * 5678") == "7006652");
  CHECK(evaluate_expression("123456789123456789 * 987654321987654321") == "121932631356500531347203169112635269");
  CHECK(evaluate_expression("2 + 3 * 4") == "14");
  CHECK(evaluate_expression("(2 + 3) * 4") == "20");
  CHECK(evaluate_expression("-2 ** 2") == "-4");
  CHECK(evaluate_expression("2 ** 3 ** 2") == "512");
  CHECK(evaluate_expression("2 ^ 10") == "1024");
  CHECK(evaluate_expression("2 ** -2") == "0.25");
  CHECK(evaluate_expression("1,000 + 1_000") == "2000");
}

TEST_CASE("division is exact; // and % floor as Python's", "[calculator]") {
  CHECK(evaluate_expression("7 / 2") == "3.5");
  CHECK(evaluate_expression("1 / 8") == "0.125");
  CHECK(evaluate_expression("1 / 3") == "0.33333333333333333333");
  CHECK(evaluate_expression("2 / 3") == "0.66666666666666666667");
  CHECK(evaluate_expression("-7 // 2") == "-4");
  CHECK(evaluate_expression("7 // 2") == "3");
  CHECK(evaluate_expression("-7 % 3") == "2");
  CHECK(evaluate_expression("7 % -3") == "-2");
  CHECK(evaluate_expression("0.1 + 0.2") == "0.3");
  CHECK(evaluate_expression("1.5 * 1.5") == "2.25");
  CHECK(evaluate_expression("-1 / 3") == "-0.33333333333333333333");
}

TEST_CASE("a bad expression is an error naming what and where", "[calculator]") {
  using rlcore_test::error_of;
  CHECK_THAT(error_of<rlcore::ValueError>([] { evaluate_expression("1 / 0"); }), Catch::Contains("division by zero"));
  CHECK_THAT(error_of<rlcore::ValueError>([] { evaluate_expression("2 + x"); }),
             Catch::Contains("expected a number, found 'x'") && Catch::Contains("character 5"));
  CHECK_THAT(error_of<rlcore::ValueError>([] { evaluate_expression("(1 + 2"); }), Catch::Contains("expected ')'"));
  CHECK_THAT(error_of<rlcore::ValueError>([] { evaluate_expression("1 +"); }), Catch::Contains("ends where a number"));
  CHECK_THAT(error_of<rlcore::ValueError>([] { evaluate_expression(""); }), Catch::Contains("empty"));
  CHECK_THAT(error_of<rlcore::ValueError>([] { evaluate_expression("2 ** 0.5"); }), Catch::Contains("integer"));
  CHECK_THAT(error_of<rlcore::ValueError>([] { evaluate_expression("9 ** 99999"); }), Catch::Contains("digits"));
  CHECK_THAT(
      error_of<rlcore::ValueError>([] { evaluate_expression(std::string(300, '(') + "1" + std::string(300, ')')); }),
      Catch::Contains("nested too deeply"));
  CalculatorOptions short_input;
  short_input.max_expression_chars = 5;
  CHECK_THAT(error_of<rlcore::ValueError>([&] { evaluate_expression("1 + 2 + 3", short_input); }),
             Catch::Contains("longer than 5"));
}

TEST_CASE("the tool: its schema, a result, and errors as error results", "[calculator]") {
  const CalculatorTool tool{CalculatorOptions{}};
  const rlcore::ToolSchema schema = tool.schema();
  CHECK(schema.name == "calculator");
  CHECK(schema.parameters["required"] == nlohmann::json::array({"expression"}));
  CHECK(schema.to_json()["function"]["name"] == "calculator");
  const rlcore::ToolCallContext context;
  const rlcore::ToolResult ok = tool.call({{"expression", "12*12"}}, context);
  CHECK(ok.text == "144");
  CHECK_FALSE(ok.error);
  const rlcore::ToolResult bad = tool.call({{"expression", "12*"}}, context);
  CHECK(bad.error);
  CHECK_THAT(bad.text, Catch::StartsWith("error: "));
  CHECK(tool.call({{"expr", "1"}}, context).error);
  CHECK(tool.call(nlohmann::json::array(), context).error);
}
