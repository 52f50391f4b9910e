// The code_interpreter tool against the stand-in SandboxFusion server the
// sandbox_fusion grader's tests use: the program's output comes back, a
// failure or a time limit is an error result with what it printed, and a
// sandbox that misbehaves or cannot be reached is an error result naming it.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "../../common/error_of.h"
#include "../../common/reference_python.h"
#include "../../common/server_process.h"
#include "rlcore/error.h"
#include "sandbox_fusion_tool.h"

using rlcore::tools::SandboxFusionTool;
using rlcore::tools::SandboxFusionToolOptions;

namespace sandbox_fusion_tool_test {

rlcore_test::ServerProcess& sandbox() {
  static rlcore_test::ServerProcess process{
      {rlcore_test::reference_python(), rlcore_test::reference_script("plugins/reward/fixtures/sandbox_server.py")}};
  return process;
}

rlcore::ToolResult run(const std::string& path, const std::string& code, double timeout_s = 5) {
  SandboxFusionToolOptions options;
  options.url = sandbox().url() + path;
  options.timeout_s = timeout_s;
  return SandboxFusionTool(options).call({{"code", code}}, rlcore::ToolCallContext{});
}

}  // namespace sandbox_fusion_tool_test

using namespace sandbox_fusion_tool_test;

TEST_CASE("code_interpreter: the sandbox's output, its failures and its time limit", "[code_interpreter]") {
  const rlcore::ToolResult ok = run("/run_code", "print(6 * 7)");
  CHECK_FALSE(ok.error);
  CHECK(ok.text == "42\n");
  const rlcore::ToolResult raised = run("/run_code", "print('before')\nraise ValueError('no')");
  CHECK(raised.error);
  CHECK_THAT(raised.text,
             Catch::StartsWith("before\n") && Catch::Contains("ValueError: no") && Catch::Contains("status Finished"));
  const rlcore::ToolResult slow = run("/run_code", "import time\ntime.sleep(30)", 1);
  CHECK(slow.error);
  CHECK_THAT(slow.text, Catch::Contains("over its time limit"));
}

TEST_CASE("code_interpreter: a sandbox that misbehaves or is not there is an error result naming it",
          "[code_interpreter]") {
  for (const char* path : {"/garbage", "/list", "/nested", "/status/500", "/sandbox_error"}) {
    INFO(path);
    const rlcore::ToolResult result = run(path, "print(1)");
    CHECK(result.error);
    CHECK_THAT(result.text, Catch::StartsWith("error: "));
  }
  SandboxFusionToolOptions nowhere;
  nowhere.url = "http://127.0.0.1:1/run_code";
  nowhere.timeout_s = 1;
  const rlcore::ToolResult unreachable = SandboxFusionTool(nowhere).call({{"code", "print(1)"}}, {});
  CHECK(unreachable.error);
  CHECK_THAT(unreachable.text, Catch::Contains("cannot be asked") && Catch::Contains("127.0.0.1:1"));
  CHECK_THAT(rlcore_test::error_of<rlcore::ConfigError>([] { SandboxFusionTool tool{SandboxFusionToolOptions{}}; }),
             Catch::Contains("tools[code_interpreter].config.url"));
  CHECK(SandboxFusionTool(nowhere).call({{"program", "x"}}, {}).error);
}
