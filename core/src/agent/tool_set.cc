// Calling tools safely (see rlcore/core/agent/tool_set.h).
#include "rlcore/core/agent/tool_set.h"

#include <condition_variable>
#include <fstream>
#include <regex>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "rlcore/config_node.h"
#include "rlcore/elapsed_seconds.h"
#include "rlcore/error.h"

namespace rlcore::agent {
namespace {

// What the calling thread and an abandoned tool thread share.
struct ToolCallState {
  std::mutex mutex;
  std::condition_variable done;
  std::optional<ToolResult> result;
};

ToolResult call_guarded(const Tool& tool, const nlohmann::json& arguments, const ToolCallContext& context) {
  try {
    return tool.call(arguments, context);
  } catch (const std::exception& error) {
    return {"error: the tool failed: " + std::string(error.what()), true, 0.0};
  } catch (...) {
    return {"error: the tool failed", true, 0.0};
  }
}

size_t utf8_sequence_length(const std::string& text, size_t at) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(at);
  if (lead < 0x80) return 1;
  size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // the second byte's range (Unicode table 3-7)
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (at + length > text.size()) return 0;
  if (byte(at + 1) < low || byte(at + 1) > high) return 0;
  for (size_t i = 2; i < length; ++i) {
    if (byte(at + i) < 0x80 || byte(at + i) > 0xBF) return 0;
  }
  return length;
}

}  // namespace

std::string to_valid_utf8(const std::string& bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t at = 0; at < bytes.size();) {
    const size_t length = utf8_sequence_length(bytes, at);
    if (length == 0) {
      out += "\xEF\xBF\xBD";
      ++at;
    } else {
      out.append(bytes, at, length);
      at += length;
    }
  }
  return out;
}

std::string truncate_tool_text(const std::string& text, int64_t max_chars, const std::string& side) {
  const auto limit = static_cast<size_t>(std::max<int64_t>(max_chars, 0));
  if (text.size() <= limit) return text;
  // Back off to a character boundary (the text is valid UTF-8).
  const auto boundary = [&text](size_t at) {
    while (at > 0 && at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) --at;
    return at;
  };
  if (side == "left") return text.substr(0, boundary(limit)) + "...(truncated)";
  if (side == "right") {
    size_t start = text.size() - limit;
    while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) ++start;
    return "(truncated)..." + text.substr(start);
  }
  const size_t head = boundary(limit / 2);
  size_t tail = text.size() - limit / 2;
  while (tail < text.size() && (static_cast<unsigned char>(text[tail]) & 0xC0) == 0x80) ++tail;
  return text.substr(0, head) + "...(truncated)..." + text.substr(tail);
}

void add_function_tools(const Registry& registry, const std::string& path, ToolSet& tools) {
  const std::string key = "actor_rollout_ref.rollout.multi_turn.function_tool_path";
  if (registry.find(Tool::kKind, "python_function") == nullptr) {
    throw ConfigError(key + " needs the python_function tool of the tools plugin; it is not loaded (--plugins)");
  }
  std::ifstream file(path);
  if (!file) throw IoError("cannot read '" + path + "' (" + key + ")");
  static const std::regex definition(R"(^(?:async\s+)?def\s+([A-Za-z][A-Za-z0-9_]*)\s*\()");
  int64_t added = 0;
  for (std::string line; std::getline(file, line);) {
    std::smatch match;
    if (!std::regex_search(line, match, definition)) continue;
    const nlohmann::json options = {{"path", path}, {"function", match[1].str()}};
    tools.add(registry.create<Tool>("python_function", ConfigNode::parse(options.dump(), key)));
    ++added;
  }
  if (added == 0) throw ConfigError(key + ": " + path + " defines no public top-level function");
}

ToolSet ToolSet::from_file(const Registry& registry, const std::string& path) {
  const ConfigNode root = ConfigNode::load_file(path);
  const ConfigNode list = root["tools"];
  if (!list.is_sequence()) {
    throw ConfigError(path + ": expected 'tools:' with a list of {name, config} (multi_turn.tool_config_path)");
  }
  ToolSet tools;
  for (const ConfigNode& entry : list.items()) {
    if (entry.has("class_name")) {
      throw ConfigError(entry["class_name"].describe() +
                        ": verl's Python tool classes do not run in rlcore; name a registered tool "
                        "(rlcore plugins lists them) or use multi_turn.function_tool_path");
    }
    if (!entry.has("name")) throw ConfigError(entry.describe() + ": a tool entry needs 'name' (a registered tool)");
    const std::string name = entry["name"].as<std::string>();
    if (registry.find(Tool::kKind, name) == nullptr) {
      throw ConfigError(entry["name"].describe() + ": unknown tool '" + name + "'; registered tools: " + [&] {
        std::string names;
        for (const auto& known : registry.names(Tool::kKind)) names += (names.empty() ? "" : ", ") + known;
        return names.empty() ? std::string("none (load the tools plugin with --plugins)") : names;
      }());
    }
    tools.add(registry.create<Tool>(name, entry["config"]));
  }
  if (tools.empty()) throw ConfigError(path + ": the tool list is empty");
  return tools;
}

void ToolSet::add(std::shared_ptr<const Tool> tool) {
  const std::string name = tool->schema().name;
  if (name.empty()) throw ConfigError("a tool's schema has an empty name");
  if (!by_name_.emplace(name, tools_.size()).second) throw ConfigError("two tools are named '" + name + "'");
  tools_.push_back(std::move(tool));
}

std::vector<std::string> ToolSet::names() const {
  std::vector<std::string> names;
  for (const auto& tool : tools_) names.push_back(tool->schema().name);
  return names;
}

nlohmann::ordered_json ToolSet::schemas() const {
  nlohmann::ordered_json schemas = nlohmann::ordered_json::array();
  for (const auto& tool : tools_) schemas.push_back(nlohmann::ordered_json::parse(tool->schema().to_json().dump()));
  return schemas;
}

ToolOutcome ToolSet::call(const ToolCall& call, const ToolCallContext& context) const {
  ToolOutcome outcome;
  const auto found = by_name_.find(call.name);
  if (found == by_name_.end()) {
    std::string names;
    for (const auto& [name, index] : by_name_) names += (names.empty() ? "" : ", ") + name;
    outcome.result = {"error: no tool named '" + call.name + "'; tools: " + names, true, 0.0};
    return outcome;
  }
  const std::shared_ptr<const Tool> tool = tools_[found->second];
  const auto start = std::chrono::steady_clock::now();
  auto pending = std::make_shared<ToolCallState>();
  // The call runs on its own thread so a hang costs the trajectory its timeout, not the run.
  std::thread worker([tool, pending, arguments = call.arguments, context] {
    ToolResult result = call_guarded(*tool, arguments, context);
    const std::lock_guard<std::mutex> lock(pending->mutex);
    pending->result = std::move(result);
    pending->done.notify_all();
  });
  const std::chrono::milliseconds timeout = tool->timeout();
  std::unique_lock<std::mutex> lock(pending->mutex);
  if (pending->done.wait_for(lock, timeout, [&] { return pending->result.has_value(); })) {
    outcome.result = std::move(*pending->result);
    lock.unlock();
    worker.join();  // it may hold the last reference to the tool, whose code a plugin unload would take away
  } else {
    lock.unlock();
    worker.detach();  // left to finish on its own; the tool stays alive through its reference
    outcome.timed_out = true;
    std::ostringstream limit;
    limit << static_cast<double>(timeout.count()) / 1000.0;
    outcome.result = {"error: tool '" + call.name + "' timed out after " + limit.str() + " s", true, 0.0};
  }
  outcome.seconds = seconds_since(start);
  outcome.result.text = to_valid_utf8(outcome.result.text);
  return outcome;
}

}  // namespace rlcore::agent
