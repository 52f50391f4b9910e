#include "server_control.h"

#include <utility>
#include <vector>

#include "rlcore/error.h"

namespace rlcore::infer_vllm_bridge {
namespace {

using nlohmann::json;

std::string string_or(const json& object, const char* key, std::string fallback) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::move(fallback);
}

bool answers(const HttpJsonClient& http, const std::string& path) { return http.get(path, Retry::kYes).status == 200; }

// SGLang's /model_info, or /get_model_info (its older name, kept as an alias); "" when neither answers.
std::string sglang_model_info_route(const HttpJsonClient& http) {
  for (const char* route : {"/model_info", "/get_model_info"}) {
    if (answers(http, route)) return route;
  }
  return "";
}

ServerKind detect_kind(const HttpJsonClient& http, const std::string& requested) {
  const bool vllm_dev = answers(http, "/is_sleeping");
  if (requested == "vllm" || (requested == "auto" && vllm_dev)) {
    if (!vllm_dev) {
      throw ConfigError("vllm_bridge: " + http.base_url() +
                        " has no vLLM dev-mode routes (GET /is_sleeping is not 200): start vLLM with "
                        "VLLM_SERVER_DEV_MODE=1 so that it can reload weights (docs/vllm-bridge.md)");
    }
    return ServerKind::kVllm;
  }
  const bool sglang = !sglang_model_info_route(http).empty();
  if (requested == "sglang" || sglang) {
    if (!sglang) {
      throw ConfigError("vllm_bridge: " + http.base_url() + " does not answer SGLang's GET /model_info");
    }
    return ServerKind::kSglang;
  }
  throw ConfigError("vllm_bridge: " + http.base_url() +
                    " cannot reload weights: it has neither vLLM's dev-mode routes (start vLLM with "
                    "VLLM_SERVER_DEV_MODE=1) nor SGLang's /model_info (docs/vllm-bridge.md)");
}

}  // namespace

const char* server_kind_name(ServerKind kind) { return kind == ServerKind::kVllm ? "vllm" : "sglang"; }

ServerInfo probe_server(const HttpJsonClient& http, const ServerExpectations& expected) {
  const HttpReply health = http.get("/health", Retry::kYes);
  if (health.status != 200) {
    throw IoError("vllm_bridge: the server is not healthy: " + http.describe("GET", "/health", health));
  }
  ServerInfo info;
  const json models = http.get_ok("/v1/models", Retry::kYes);
  if (!models.is_object() || !models.contains("data") || !models["data"].is_array() || models["data"].empty()) {
    throw FormatError("vllm_bridge: GET " + http.base_url() +
                      "/v1/models lists no models: " + models.dump().substr(0, 200));
  }
  std::vector<std::string> served;
  const json* chosen = nullptr;
  for (const json& model : models["data"]) {
    const std::string id = model.is_object() ? string_or(model, "id", "") : "";
    served.push_back(id);
    if (id == expected.served_model_name) chosen = &model;
  }
  if (expected.served_model_name.empty()) {
    if (served.size() != 1) {
      throw ConfigError("vllm_bridge: " + http.base_url() + " serves " + std::to_string(served.size()) +
                        " models; set served_model_name to one of them");
    }
    chosen = &models["data"][0];
  }
  if (chosen == nullptr) {
    std::string list;
    for (const std::string& id : served) list += (list.empty() ? "'" : ", '") + id + "'";
    throw ConfigError("vllm_bridge: served_model_name '" + expected.served_model_name + "' is not served by " +
                      http.base_url() + " (it serves " + list + ")");
  }
  info.model = (*chosen)["id"].get<std::string>();
  const auto limit = chosen->find("max_model_len");
  if (limit != chosen->end() && limit->is_number_integer()) info.max_model_len = limit->get<int64_t>();
  if (expected.max_model_len > 0 && info.max_model_len > 0 && info.max_model_len < expected.max_model_len) {
    throw ConfigError("vllm_bridge: max_model_len " + std::to_string(expected.max_model_len) + " exceeds the " +
                      std::to_string(info.max_model_len) + " that model '" + info.model + "' at " + http.base_url() +
                      " allows (start the server with a larger --max-model-len, or lower the config's)");
  }
  const HttpReply version = http.get("/version", Retry::kYes);
  info.version =
      version.status == 200 && version.json.is_object() ? string_or(version.json, "version", "unknown") : "unknown";
  info.kind = detect_kind(http, expected.kind);
  return info;
}

ServerControl::ServerControl(const HttpJsonClient& http, ServerKind kind, double reload_timeout_s)
    : http_(http), kind_(kind), reload_timeout_s_(reload_timeout_s) {
  // vLLM >= 0.33: /weight_info; SGLang: the weight_version field of /model_info. Found once.
  version_route_ = kind_ == ServerKind::kVllm ? (answers(http_, "/weight_info") ? "/weight_info" : "")
                                              : sglang_model_info_route(http_);
}

void ServerControl::sleep(int64_t level) const {
  if (kind_ == ServerKind::kVllm) {
    http_.post_ok("/sleep?level=" + std::to_string(level), nullptr, Retry::kNo);
  } else {
    http_.post_ok("/release_memory_occupation", json::object(), Retry::kNo);
  }
}

void ServerControl::wake_weights() const {
  if (kind_ == ServerKind::kVllm) {
    http_.post_ok("/wake_up?tags=weights", nullptr, Retry::kNo);
  } else {
    http_.post_ok("/resume_memory_occupation", {{"tags", {"weights"}}}, Retry::kNo);
  }
}

void ServerControl::wake_kv_cache() const {
  if (kind_ == ServerKind::kVllm) {
    http_.post_ok("/wake_up?tags=kv_cache", nullptr, Retry::kNo);
  } else {
    http_.post_ok("/resume_memory_occupation", {{"tags", {"kv_cache"}}}, Retry::kNo);
  }
}

void ServerControl::load_weights(const std::filesystem::path& dir, int64_t version) const {
  if (kind_ == ServerKind::kVllm) {
    load_weights_vllm(dir, version);
  } else {
    load_weights_sglang(dir, version);
  }
}

void ServerControl::load_weights_vllm(const std::filesystem::path& dir, int64_t version) const {
  http_.post_ok("/pause?mode=wait", nullptr, Retry::kNo);
  std::string failure;
  try {
    const json request = {{"method", "reload_weights"},
                          {"kwargs", {{"weights_path", dir.string()}, {"is_checkpoint_format", true}}},
                          {"timeout", reload_timeout_s_}};
    const json reply = http_.post_ok("/collective_rpc", request, Retry::kNo, reload_timeout_s_ + 30);
    if (!reply.is_object() || !reply.contains("results") || !reply["results"].is_array() || reply["results"].empty()) {
      failure = "POST " + http_.base_url() +
                "/collective_rpc: expected {\"results\": [...]} with one entry per worker, got " +
                reply.dump().substr(0, 200);
    } else {
      http_.post_ok("/reset_prefix_cache", nullptr, Retry::kNo);
      // vLLM >= 0.33 keeps a weights version; older servers answer 404 and keep none.
      const HttpReply versioned =
          http_.post("/update_weight_version", {{"new_version", std::to_string(version)}}, Retry::kNo);
      if (versioned.status != 200 && versioned.status != 404) {
        failure = http_.describe("POST", "/update_weight_version", versioned);
      }
    }
  } catch (const std::exception& e) {
    failure = e.what();
  }
  http_.post_ok("/resume", nullptr, Retry::kNo);  // a failed reload must not leave the server paused
  if (!failure.empty()) throw IoError("vllm_bridge: reloading weights from " + dir.string() + " failed: " + failure);
}

void ServerControl::load_weights_sglang(const std::filesystem::path& dir, int64_t version) const {
  const json request = {{"model_path", dir.string()}, {"weight_version", std::to_string(version)}};
  const HttpReply reply = http_.post("/update_weights_from_disk", request, Retry::kNo, reload_timeout_s_);
  const bool success = reply.json.is_object() && reply.json.contains("success") && reply.json["success"].is_boolean() &&
                       reply.json["success"].get<bool>();
  if (reply.status != 200 || !success) {
    throw IoError("vllm_bridge: reloading weights from " + dir.string() +
                  " failed: " + http_.describe("POST", "/update_weights_from_disk", reply));
  }
}

std::optional<std::string> ServerControl::weight_version() const {
  if (version_route_.empty()) return std::nullopt;
  const HttpReply reply = http_.get(version_route_, Retry::kYes);
  if (reply.status != 200 || !reply.json.is_object() || !reply.json.contains("weight_version")) return std::nullopt;
  return string_or(reply.json, "weight_version", "");
}

}  // namespace rlcore::infer_vllm_bridge
