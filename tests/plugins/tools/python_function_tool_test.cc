// Python functions as tools (verl's function_tool_path): the schema from the
// signature and docstring, calls through the subprocess (what the function
// prints cannot break the protocol), its exceptions and hangs as error results,
// and a fresh subprocess after a kill.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "../../common/error_of.h"
#include "python_function_tool.h"
#include "rlcore/error.h"

using rlcore::tools::PythonFunctionOptions;
using rlcore::tools::PythonFunctionTool;

namespace python_function_tool_test {

std::string functions_file() {
  const auto path =
      std::filesystem::temp_directory_path() / ("rlcore_function_tools_" + std::to_string(::getpid()) + ".py");
  std::ofstream(path) << R"PY(
def multiply(a: int, b: int, note: str = "") -> int:
    """Multiply two integers.

    Args:
        a (int): the first factor
        b: the second factor
    """
    print("noise on stdout")
    return a * b


def describe(values: list):
    """Summarise a list."""
    return {"count": len(values), "sum": sum(values)}


def slow(seconds: float = 10):
    """Sleep a while."""
    import time
    time.sleep(seconds)
    return "done"


def boom(x: str):
    raise RuntimeError("kaput " + x)


def _private():
    pass
)PY";
  return path.string();
}

PythonFunctionOptions options_for(const std::string& function, double timeout_s = 10) {
  PythonFunctionOptions options;
  options.path = functions_file();
  options.function = function;
  options.timeout_s = timeout_s;
  return options;
}

}  // namespace python_function_tool_test

using namespace python_function_tool_test;

TEST_CASE("a function's schema comes from its signature and docstring", "[python_function]") {
  const PythonFunctionTool tool(options_for("multiply"));
  const rlcore::ToolSchema schema = tool.schema();
  CHECK(schema.name == "multiply");
  CHECK(schema.description == "Multiply two integers.");
  CHECK(schema.parameters["properties"]["a"] ==
        nlohmann::json({{"type", "integer"}, {"description", "the first factor"}}));
  CHECK(schema.parameters["properties"]["b"]["description"] == "the second factor");
  CHECK(schema.parameters["properties"]["note"]["type"] == "string");
  CHECK(schema.parameters["required"] == nlohmann::json::array({"a", "b"}));
  CHECK(PythonFunctionTool(options_for("describe")).schema().parameters["properties"]["values"]["type"] == "array");
}

TEST_CASE("calls return the value; prints, exceptions and hangs do not break the tool", "[python_function]") {
  const PythonFunctionTool multiply(options_for("multiply"));
  const rlcore::ToolResult product = multiply.call({{"a", 6}, {"b", 7}}, {});
  CHECK_FALSE(product.error);
  CHECK(product.text == "42");
  CHECK(multiply.call({{"a", 2}, {"b", 3}}, {}).text == "6");  // the same subprocess, still in step
  const rlcore::ToolResult missing = multiply.call({{"a", 1}}, {});
  CHECK(missing.error);
  CHECK_THAT(missing.text, Catch::Contains("TypeError"));
  CHECK(PythonFunctionTool(options_for("describe")).call({{"values", {1, 2, 3}}}, {}).text ==
        R"({"count": 3, "sum": 6})");

  const rlcore::ToolResult raised = PythonFunctionTool(options_for("boom")).call({{"x", "now"}}, {});
  CHECK(raised.error);
  CHECK(raised.text == "error: RuntimeError: kaput now");

  const PythonFunctionTool slow(options_for("slow", 1));
  const rlcore::ToolResult hung = slow.call({{"seconds", 30}}, {});
  CHECK(hung.error);
  CHECK_THAT(hung.text, Catch::Contains("no reply within 1 s"));
  CHECK(slow.call({{"seconds", 0}}, {}).text == "done");  // a fresh subprocess after the kill
}

TEST_CASE("a function that is not there is an error naming it and the file", "[python_function]") {
  CHECK_THAT(rlcore_test::error_of<rlcore::ConfigError>([] { PythonFunctionTool tool(options_for("absent")); }),
             Catch::Contains("'absent'") && Catch::Contains("rlcore_function_tools_"));
  CHECK_THAT(rlcore_test::error_of<rlcore::ConfigError>([] { PythonFunctionTool tool(PythonFunctionOptions{}); }),
             Catch::Contains("path") && Catch::Contains("function"));
}
