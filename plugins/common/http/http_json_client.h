// JSON over HTTP to one server (an inference server, a code sandbox): timeouts
// on every request, bounded retries with backoff for calls that are safe to
// repeat, an optional Bearer key, and errors that name the URL and quote the
// server's own error object.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace rlcore::http {

struct HttpSettings {
  std::string base_url;              // scheme://host:port, no trailing slash
  std::string client_name = "http";  // prefix of every error message, e.g. "vllm_bridge"
  std::string api_key;               // empty: no Authorization header
  double connect_timeout_s = 10;
  double request_timeout_s = 600;
  int64_t max_retries = 3;       // extra attempts after the first, for retryable calls
  double retry_backoff_s = 0.5;  // doubles after each failed attempt
};

// Whether a call may be sent again after a connection failure or a 5xx.
enum class Retry { kNo, kYes };

struct HttpReply {
  int status = 0;
  std::string body;
  // The body as JSON; null when it is empty or not JSON.
  nlohmann::json json;
};

class HttpJsonClient {
 public:
  explicit HttpJsonClient(HttpSettings settings);

  // Any status comes back (callers decide what 404 means); IoError when the
  // server cannot be reached within the retries.
  HttpReply get(const std::string& path, Retry retry) const;
  HttpReply post(const std::string& path, const nlohmann::json& body, Retry retry,
                 std::optional<double> timeout_s = std::nullopt) const;

  // As get/post, but a status other than 200 is an IoError quoting the server.
  nlohmann::json get_ok(const std::string& path, Retry retry) const;
  nlohmann::json post_ok(const std::string& path, const nlohmann::json& body, Retry retry,
                         std::optional<double> timeout_s = std::nullopt) const;

  // "METHOD <url><path>: HTTP <status>: <the server's message>", for errors.
  std::string describe(const std::string& method, const std::string& path, const HttpReply& reply) const;
  const std::string& base_url() const { return settings_.base_url; }

 private:
  HttpReply send(const std::string& method, const std::string& path, const std::string* body, Retry retry,
                 double timeout_s) const;

  HttpSettings settings_;
};

// The message inside a vLLM/SGLang/OpenAI error body ({"error": {"message"}},
// {"message"} or {"detail"}), else the body itself, cut to a readable length.
std::string server_message(const std::string& body);

// `text` as JSON, or a discarded value when it is not JSON or nests deeper than
// `max_depth`: a hostile body nested 100,000 deep parses, but copying or freeing
// it recurses once per level and overflows the stack.
template <class Json = nlohmann::json>
Json parse_json_bounded(std::string_view text, int max_depth = 64) {
  bool too_deep = false;
  Json parsed = Json::parse(
      text,
      [&](int depth, typename Json::parse_event_t, Json&) {
        too_deep = too_deep || depth > max_depth;
        return !too_deep;  // deeper values are dropped, never built
      },
      /*allow_exceptions=*/false);
  return too_deep ? Json(Json::value_t::discarded) : parsed;
}

}  // namespace rlcore::http
