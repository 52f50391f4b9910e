// The dev-mode routes: vLLM's and SGLang's bodies and answers (as recorded in
// tests/fixtures/vllm_bridge/), over the engine's sleep / wake_up /
// load_weights. A reload reads and checks the whole directory before the
// engine sees any of it, so a bad directory leaves the old weights serving.
#include "rlcore/core/serve/dev_mode.h"

#include <cctype>
#include <utility>

#include <nlohmann/json.hpp>

#include "rlcore/core/serve/disk_weights.h"
#include "rlcore/core/serve/requests.h"
#include "serve/answer.h"

namespace rlcore::serve {
namespace {

using nlohmann::json;

// The string field `name` of `body`; absent or null gives `fallback`, another type is a 400.
std::string string_field(const json& body, const char* name, const std::string& fallback) {
  const auto it = body.find(name);
  if (it == body.end() || it->is_null()) return fallback;
  if (!it->is_string()) throw bad_request(std::string(name) + " must be a string", name);
  return it->get<std::string>();
}

// SGLang's {"tags": null | ["weights", "kv_cache"]}: which parts; none means both.
std::pair<bool, bool> tags_of(const std::vector<std::string>& tags) {
  if (tags.empty()) return {true, true};
  bool weights = false;
  bool kv_cache = false;
  for (const std::string& tag : tags) {
    if (tag == "weights") {
      weights = true;
    } else if (tag == "kv_cache") {
      kv_cache = true;
    } else {
      throw bad_request("unknown tag '" + tag.substr(0, 40) + "' (expected weights or kv_cache)", "tags");
    }
  }
  return {weights, kv_cache};
}

// A boolean query parameter as FastAPI reads one (vLLM's routes): true/false,
// 1/0, yes/no, on/off in any case; anything else is a 400 naming it.
bool query_flag(const std::string& text, const char* name) {
  std::string value;
  for (char c : text.substr(0, 8)) value.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (value == "true" || value == "1" || value == "yes" || value == "on") return true;
  if (value == "false" || value == "0" || value == "no" || value == "off") return false;
  throw bad_request(std::string(name) + " must be a boolean (true or false), got '" + text.substr(0, 40) + "'", name);
}

std::vector<std::string> body_tags(const std::string& body) {
  if (body.empty()) return {};
  const json parsed = parse_json_object(body);
  const auto it = parsed.find("tags");
  if (it == parsed.end() || it->is_null()) return {};
  if (!it->is_array()) throw bad_request("tags must be a list of strings or null", "tags");
  std::vector<std::string> tags;
  for (const json& tag : *it) {
    if (!tag.is_string()) throw bad_request("tags must be a list of strings or null", "tags");
    tags.push_back(tag.get<std::string>());
  }
  return tags;
}

}  // namespace

DevModeApi::DevModeApi(std::shared_ptr<OpenAiApi> api, std::string model_dir)
    : api_(std::move(api)), weights_dir_(std::move(model_dir)) {
  if (!api_) throw ValueError("rlcore serve: DevModeApi needs an OpenAiApi");
}

void DevModeApi::load_directory(const std::string& dir) {
  if (dir.empty() || dir.front() != '/')
    throw bad_request("the weights directory must be an absolute path, got '" + dir + "'");
  api_->with_engine([&](InferenceEngine& engine) {
    const NamedTensorList weights = read_weights_like(dir, engine.weight_meta());
    engine.load_weights(weights, engine.weight_version() + 1);
  });
  std::lock_guard<std::mutex> lock(mutex_);
  weights_dir_ = dir;
}

void DevModeApi::sleep_engine(int64_t level) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!weights_asleep_ && !kv_cache_asleep_) api_->with_engine([](InferenceEngine& engine) { engine.sleep(); });
  weights_asleep_ = kv_cache_asleep_ = true;
  sleep_level_ = level;
}

void DevModeApi::wake_engine(bool weights, bool kv_cache) {
  std::string reload;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // The engine holds weights and KV cache together: it wakes with the first part asked for.
    if ((weights && weights_asleep_) || (kv_cache && kv_cache_asleep_)) {
      if (weights_asleep_ && kv_cache_asleep_) api_->with_engine([](InferenceEngine& engine) { engine.wake_up(); });
      // Level 1 keeps the weights (vLLM offloads them to the host); level 2 drops them.
      if (weights && weights_asleep_ && sleep_level_ == 1) reload = weights_dir_;
    }
    if (weights) weights_asleep_ = false;
    if (kv_cache) kv_cache_asleep_ = false;
  }
  if (!reload.empty()) load_directory(reload);
}

ApiResponse DevModeApi::sleep(const std::string& level) {
  return answer("/sleep", [&] {
    if (level != "1" && level != "2")
      throw bad_request("level must be 1 or 2, got '" + level.substr(0, 20) + "'", "level");
    const int64_t value = level == "1" ? 1 : 2;
    sleep_engine(value);
    return ok({{"status", "sleeping"}, {"level", value}});
  });
}

ApiResponse DevModeApi::wake_up(const std::vector<std::string>& tags) {
  return answer("/wake_up", [&] {
    const auto [weights, kv_cache] = tags_of(tags);
    wake_engine(weights, kv_cache);
    std::lock_guard<std::mutex> lock(mutex_);
    const bool asleep = weights_asleep_ || kv_cache_asleep_;
    return ok({{"status", asleep ? "sleeping" : "awake"}, {"tags", tags.empty() ? json(nullptr) : json(tags)}});
  });
}

ApiResponse DevModeApi::is_sleeping() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ok({{"is_sleeping", weights_asleep_ || kv_cache_asleep_}});
}

ApiResponse DevModeApi::reset_prefix_cache() const { return ok({{"success", true}}); }  // no prefix cache here

ApiResponse DevModeApi::pause(const std::string& mode, const std::string& clear_cache) {
  return answer("/pause", [&] {
    const bool recompute = query_flag(clear_cache, "clear_cache");
    bool recompute_frozen = recompute;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      std::swap(recompute_at_resume_, recompute_frozen);
    }
    // Requests frozen by an earlier keep would never finish: they go on, then wait or abort applies.
    if (mode != "keep") api_->thaw_generations(recompute_frozen);
    api_->gate().pause(mode, {[this] { api_->abort_generations(); }, [this] { return api_->freeze_generations(); }});
    return ok({{"status", "paused"}});
  });
}

ApiResponse DevModeApi::abort_request(const std::string& body) {
  return answer("/abort_request", [&] {
    const json fields = parse_json_object(body.empty() ? "{}" : body);
    const json rid = fields.value("rid", json(""));
    const json all = fields.value("abort_all", json(false));
    if (!rid.is_string()) throw bad_request("rid must be a string", "rid");
    if (!all.is_boolean()) throw bad_request("abort_all must be a boolean", "abort_all");
    if (all.get<bool>()) {
      api_->abort_generations();
    } else if (!rid.get<std::string>().empty()) {
      api_->abort_generation(rid.get<std::string>());
    }
    return ApiResponse{200, ""};
  });
}

ApiResponse DevModeApi::resume() {
  bool recompute = true;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    recompute = recompute_at_resume_;
  }
  api_->thaw_generations(recompute);  // before new requests come in
  api_->gate().resume();
  return ok({{"status", "resumed"}});
}

ApiResponse DevModeApi::is_paused() const { return ok({{"is_paused", api_->gate().paused()}}); }

ApiResponse DevModeApi::collective_rpc(const std::string& body) {
  return answer("/collective_rpc", [&] {
    const json request = parse_json_object(body);
    const std::string method = string_field(request, "method", "");
    if (method.empty()) throw bad_request("Missing 'method' in request body", "method");
    if (method != "reload_weights") {
      throw bad_request("method '" + method.substr(0, 60) + "' is not supported by rlcore serve (only reload_weights)",
                        "method");
    }
    const auto kwargs_it = request.find("kwargs");
    const json kwargs = kwargs_it == request.end() || kwargs_it->is_null() ? json::object() : *kwargs_it;
    if (!kwargs.is_object()) throw bad_request("kwargs must be an object", "kwargs");
    if (kwargs.contains("is_checkpoint_format") && kwargs["is_checkpoint_format"] != true) {
      throw bad_request("only is_checkpoint_format=true (HF checkpoint directories) is supported", "kwargs");
    }
    std::string dir;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      dir = weights_dir_;
    }
    load_directory(string_field(kwargs, "weights_path", dir));
    return ok({{"results", json::array({nullptr})}});  // one entry per worker; this server has one
  });
}

ApiResponse DevModeApi::update_weight_version(const std::string& body) {
  return answer("/update_weight_version", [&] {
    const json request = parse_json_object(body);
    const std::string version = string_field(request, "new_version", "");
    if (version.empty()) throw bad_request("new_version must be a non-empty string", "new_version");
    std::lock_guard<std::mutex> lock(mutex_);
    weight_version_ = version;
    return ok({{"success", true}, {"message", "Weight version updated to " + version}, {"new_version", version}});
  });
}

ApiResponse DevModeApi::weight_info() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ok({{"weight_version", weight_version_}});
}

ApiResponse DevModeApi::update_weights_from_disk(const std::string& body) {
  // SGLang answers failures as {"success": false, "message"} with 400, not as an error object.
  const auto failed = [](const std::string& message) {
    return ApiResponse{400, json_text(json{{"success", false}, {"message", message}, {"num_paused_requests", 0}})};
  };
  try {
    const json request = parse_json_object(body);
    const std::string dir = string_field(request, "model_path", "");
    if (dir.empty()) return failed("model_path must be a non-empty string");
    const std::string version = string_field(request, "weight_version", "");
    load_directory(dir);
    std::lock_guard<std::mutex> lock(mutex_);
    if (!version.empty()) weight_version_ = version;
    return ok({{"success", true}, {"message", "Succeeded to update model weights."}, {"num_paused_requests", 0}});
  } catch (const std::exception& e) {
    return failed(e.what());
  }
}

ApiResponse DevModeApi::release_memory_occupation(const std::string& body) {
  return answer("/release_memory_occupation", [&] {
    tags_of(body_tags(body));  // validated; the engine releases weights and KV cache together
    sleep_engine(1);           // SGLang's memory saver keeps the weights on the host
    return ok(nullptr);
  });
}

ApiResponse DevModeApi::resume_memory_occupation(const std::string& body) {
  return answer("/resume_memory_occupation", [&] {
    const auto [weights, kv_cache] = tags_of(body_tags(body));
    wake_engine(weights, kv_cache);
    return ok(nullptr);
  });
}

ApiResponse DevModeApi::model_info() const {
  std::lock_guard<std::mutex> lock(mutex_);
  const ServedModel& model = api_->model();
  return ok({{"model_path", weights_dir_},
             {"served_model_name", model.name},
             {"tokenizer_path", weights_dir_},
             {"is_generation", true},
             {"weight_version", weight_version_}});
}

}  // namespace rlcore::serve
