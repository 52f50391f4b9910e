// The `python_function` tool (see python_function_tool.h): the Python adapter
// and the JSON lines it speaks.
#include "python_function_tool.h"

#include "common/process/json_lines_process.h"
#include "rlcore/error.h"

namespace rlcore::tools {
namespace {

// argv: path, function. First line out: {"schema": {...}}; then per line in
// {"arguments": {...}}, one line out {"result": str} or {"error": str}. Replies
// go to a duplicate of the original stdout; what the function prints goes to stderr.
const char* const kFunctionAdapter = R"PY(
import importlib.util, inspect, json, os, re, sys, traceback

replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
os.dup2(2, 1)
sys.stdout = sys.stderr
path, name = sys.argv[1], sys.argv[2]
spec = importlib.util.spec_from_file_location("rlcore_function_tools", path)
if spec is None or spec.loader is None:
    sys.exit(f"rlcore: cannot import {path!r} as a Python module")
module = importlib.util.module_from_spec(spec)
try:
    spec.loader.exec_module(module)
except BaseException:
    traceback.print_exc()
    sys.exit(f"rlcore: importing {path!r} failed (traceback above)")
fn = getattr(module, name, None)
if not callable(fn):
    sys.exit(f"rlcore: function {name!r} not found in {path!r}")

TYPES = {int: "integer", float: "number", str: "string", bool: "boolean", list: "array", dict: "object"}
doc = inspect.getdoc(fn) or ""
summary = doc.split("\n\n")[0].strip()
described = {}
in_args = False
for line in doc.splitlines():
    if re.match(r"^(Args|Arguments|Parameters):\s*$", line.strip()):
        in_args = True
        continue
    if in_args:
        m = re.match(r"^\s+(\w+)\s*(\([^)]*\))?\s*:\s*(.+)$", line)
        if m:
            described[m.group(1)] = m.group(3).strip()
        elif line.strip() and not line.startswith(" "):
            in_args = False
properties, required = {}, []
for param in inspect.signature(fn).parameters.values():
    if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
        continue
    annotation = param.annotation
    kind = TYPES.get(getattr(annotation, "__origin__", annotation), "string")
    entry = {"type": kind}
    if param.name in described:
        entry["description"] = described[param.name]
    properties[param.name] = entry
    if param.default is param.empty:
        required.append(param.name)
schema = {"name": name, "description": summary,
          "parameters": {"type": "object", "properties": properties, "required": required}}
replies.write(json.dumps({"schema": schema}) + "\n")
replies.flush()

for line in sys.stdin:
    if not line.strip():
        continue  # the host's wake-up line before the schema
    try:
        arguments = json.loads(line)["arguments"]
        value = fn(**arguments)
        reply = {"result": value if isinstance(value, str) else json.dumps(value, default=repr)}
    except BaseException as e:
        reply = {"error": f"{type(e).__name__}: {e}"}
    replies.write(json.dumps(reply) + "\n")
    replies.flush()
)PY";

constexpr auto kStartTimeout = std::chrono::seconds(60);

}  // namespace

PythonFunctionTool::PythonFunctionTool(PythonFunctionOptions options) : options_(std::move(options)) {
  if (options_.path.empty() || options_.function.empty()) {
    throw ConfigError("tools[python_function].config needs path (the Python file) and function (its name)");
  }
  process_ = start();
  nlohmann::json first;
  try {
    first = nlohmann::json::parse(process_->request("", kStartTimeout));
  } catch (const std::exception& e) {
    throw ConfigError("function tool '" + options_.function + "' from " + options_.path +
                      " did not start: " + e.what());
  }
  const nlohmann::json& schema = first.at("schema");
  schema_.name = schema.at("name").get<std::string>();
  schema_.description = schema.value("description", "");
  schema_.parameters = schema.at("parameters");
}

PythonFunctionTool::~PythonFunctionTool() = default;

std::unique_ptr<process::JsonLinesProcess> PythonFunctionTool::start() const {
  return std::make_unique<process::JsonLinesProcess>(
      std::vector<std::string>{options_.python, "-c", kFunctionAdapter, options_.path, options_.function});
}

std::chrono::milliseconds PythonFunctionTool::timeout() const {
  return std::chrono::milliseconds(static_cast<int64_t>(options_.timeout_s * 1000) + 5000);
}

ToolResult PythonFunctionTool::call(const nlohmann::json& arguments, const ToolCallContext&) const {
  if (!arguments.is_object()) return {"error: the arguments must be a JSON object", true, 0.0};
  const std::lock_guard<std::mutex> lock(mutex_);
  try {
    if (!process_ || !process_->running()) {
      process_ = start();
      process_->request("", kStartTimeout);  // the schema line
    }
    const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(options_.timeout_s * 1000));
    const nlohmann::json reply =
        nlohmann::json::parse(process_->request(nlohmann::json{{"arguments", arguments}}.dump(), timeout));
    if (reply.contains("error")) return {"error: " + reply["error"].get<std::string>(), true, 0.0};
    return {reply.at("result").get<std::string>(), false, 0.0};
  } catch (const std::exception& e) {
    process_.reset();  // killed (timeout, crash): the next call starts a fresh one
    return {std::string("error: the function tool failed: ") + e.what(), true, 0.0};
  }
}

}  // namespace rlcore::tools
