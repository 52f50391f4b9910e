// The `custom_function` grader (see custom_function_grader.h): the Python
// adapter, the request it sends per batch and the checks on each reply.
#include "custom_function_grader.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <utility>

#include "common/process/json_lines_process.h"
#include "rlcore/error.h"

namespace rlcore::reward {

// argv: path, function name, reward_kwargs as JSON. The replies go to a
// duplicate of the original stdout; fd 1 and sys.stdout are pointed at stderr,
// so whatever the user's code prints cannot break the protocol.
const char* const kCustomFunctionAdapter = R"PY(
import asyncio, importlib.util, inspect, json, math, os, sys, traceback

replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
os.dup2(2, 1)
sys.stdout = sys.stderr
path, name, reward_kwargs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])

spec = importlib.util.spec_from_file_location("custom_module", path)
if spec is None or spec.loader is None:
    sys.exit(f"rlcore: cannot import {path!r} as a Python module")
module = importlib.util.module_from_spec(spec)
sys.modules["custom_module"] = module
try:
    spec.loader.exec_module(module)
except BaseException:
    traceback.print_exc()
    sys.exit(f"rlcore: importing {path!r} failed (traceback above)")
fn = getattr(module, name, None)
if not callable(fn):
    sys.exit(f"rlcore: reward function {name!r} not found in {path!r}")

def number(value):
    if isinstance(value, bool):
        return float(value)
    if hasattr(value, "item") and callable(value.item):
        try:
            value = value.item()
        except Exception:
            pass
    if isinstance(value, (int, float)):
        value = float(value)
        return value if math.isfinite(value) else repr(value)
    return repr(value)

def result(value):
    if isinstance(value, dict):
        return {str(k): number(v) for k, v in value.items()}
    return number(value)

def call(sample):
    return fn(data_source=sample["data_source"], solution_str=sample["solution_str"],
              ground_truth=sample["ground_truth"], extra_info=sample["extra_info"], **reward_kwargs)

async def gather(samples):
    return await asyncio.gather(*(call(s) for s in samples))

for line in sys.stdin:
    request = json.loads(line)
    try:
        if inspect.iscoroutinefunction(fn):
            scores = asyncio.run(gather(request["samples"]))
        else:
            scores = [call(s) for s in request["samples"]]
        reply = {"id": request["id"], "results": [result(s) for s in scores]}
    except Exception:
        reply = {"id": request["id"], "error": traceback.format_exc()}
    sys.stderr.flush()
    replies.write(json.dumps(reply) + "\n")
    replies.flush()
)PY";

namespace {

constexpr const char* kCustomFunctionGrader = "custom_function";

// The last lines of the child's stderr, for the error message.
std::string stderr_note(const std::string& tail) {
  if (tail.empty()) return "";
  return "\n--- its stderr (last " + std::to_string(tail.size()) + " bytes) ---\n" + tail;
}

std::string clip(const std::string& text, size_t limit = 200) {
  return text.size() <= limit ? text : text.substr(0, limit) + "... (" + std::to_string(text.size()) + " bytes)";
}

}  // namespace

CustomFunctionGrader::CustomFunctionGrader(CustomFunctionOptions options) : options_(std::move(options)) {
  if (!options_.path.empty() && ::access(options_.path.c_str(), R_OK) != 0) {
    throw ValueError("grader " + std::string(kCustomFunctionGrader) + ": reward.custom_reward_function.path '" +
                     options_.path + "' is not a readable file");
  }
}

CustomFunctionGrader::~CustomFunctionGrader() = default;

int CustomFunctionGrader::process_id() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return process_ && process_->running() ? static_cast<int>(process_->pid()) : -1;
}

std::string CustomFunctionGrader::where(int64_t batch) const {
  return "grader " + std::string(kCustomFunctionGrader) + " (" + options_.path + ":" + options_.name + "), batch " +
         std::to_string(batch);
}

GradeResult CustomFunctionGrader::grade(std::string_view response, std::string_view ground_truth,
                                        std::string_view data_source, const nlohmann::json& extra) const {
  return grade_batch({GradeRequest{response, ground_truth, data_source, &extra}}).front();
}

std::vector<GradeResult> CustomFunctionGrader::grade_batch(const std::vector<GradeRequest>& requests) const {
  if (options_.path.empty()) {
    throw ConfigError("grader " + std::string(kCustomFunctionGrader) + " needs reward.custom_reward_function.path");
  }
  if (requests.empty()) return {};
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t batch = next_batch_++;
  nlohmann::json samples = nlohmann::json::array();
  for (const GradeRequest& request : requests) {
    samples.push_back(
        {{"data_source", request.data_source},
         {"solution_str", request.response},
         {"ground_truth", request.ground_truth},
         {"extra_info", request.extra && !request.extra->is_null() ? *request.extra : nlohmann::json::object()}});
  }
  // Invalid UTF-8 in a response is replaced (U+FFFD), as Python would decode it with errors="replace".
  const std::string line = nlohmann::json{{"id", batch}, {"samples", std::move(samples)}}.dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string reply;
  try {
    if (!process_ || !process_->running()) {
      process_ = std::make_unique<process::JsonLinesProcess>(std::vector<std::string>{
          options_.python, "-c", kCustomFunctionAdapter, options_.path, options_.name, options_.reward_kwargs.dump()});
    }
    const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(options_.timeout_s * 1000.0));
    reply = process_->request(line, timeout);
  } catch (const IoError& error) {
    const std::string tail = process_ ? process_->stderr_tail() : "";
    process_.reset();
    throw ValueError(where(batch) + ": the Python process (" + options_.python + ") " + error.what() +
                     stderr_note(tail));
  }
  try {
    return parse_reply(reply, batch, requests.size());
  } catch (const FormatError&) {
    process_.reset();  // out of step with us: the next batch starts afresh
    throw;
  }
}

std::vector<GradeResult> CustomFunctionGrader::parse_reply(const std::string& line, int64_t batch, size_t count) const {
  const nlohmann::json reply = nlohmann::json::parse(line, nullptr, false);
  if (reply.is_discarded() || !reply.is_object()) {
    throw FormatError(where(batch) + ": the reply is not a JSON object: '" + clip(line) + "'");
  }
  if (!reply.contains("id") || reply["id"] != batch) {
    throw FormatError(where(batch) + ": the reply has id " + (reply.contains("id") ? reply["id"].dump() : "(none)") +
                      ", expected " + std::to_string(batch));
  }
  if (reply.contains("error")) {
    const std::string text = reply["error"].is_string() ? reply["error"].get<std::string>() : reply["error"].dump();
    throw ValueError(where(batch) + ": " + options_.name + " raised:\n" + text);
  }
  if (!reply.contains("results") || !reply["results"].is_array() || reply["results"].size() != count) {
    throw FormatError(where(batch) + ": the reply has " +
                      (reply.contains("results") && reply["results"].is_array()
                           ? std::to_string(reply["results"].size()) + " results"
                           : std::string("no results array")) +
                      " for " + std::to_string(count) + " samples");
  }
  std::vector<GradeResult> results;
  results.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    const nlohmann::json& item = reply["results"][i];
    const std::string sample = "sample " + std::to_string(i);
    const nlohmann::json* score = &item;
    GradeResult result;
    if (item.is_object()) {
      if (!item.contains("score")) {
        throw ValueError(where(batch) + ", " + sample + ": " + options_.name +
                         " returned a dict without \"score\": " + clip(item.dump()));
      }
      score = &item["score"];
      for (const auto& [key, value] : item.items()) {
        if (key != "score" && value.is_number() && std::isfinite(value.get<double>())) {
          result.extras[key] = value.get<double>();
        }
      }
    }
    if (!score->is_number() || !std::isfinite(score->get<double>())) {
      throw ValueError(where(batch) + ", " + sample + ": " + options_.name +
                       " returned a score that is not a finite number: " +
                       (score->is_string() ? score->get<std::string>() : score->dump()));
    }
    result.score = score->get<double>();
    results.push_back(std::move(result));
  }
  return results;
}

}  // namespace rlcore::reward
