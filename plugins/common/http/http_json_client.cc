// HttpJsonClient over cpp-httplib: one httplib::Client per request, so calls
// from several threads never share a connection.
#include "http_json_client.h"

#include <chrono>
#include <cmath>
#include <thread>
#include <utility>

#include <httplib.h>

#include "rlcore/error.h"

namespace rlcore::http {
namespace {

constexpr std::size_t kMaxQuoted = 500;

void set_timeout(httplib::Client& client, double seconds, bool connect) {
  const auto whole = static_cast<time_t>(std::floor(seconds));
  const auto micro = static_cast<time_t>((seconds - static_cast<double>(whole)) * 1e6);
  if (connect) {
    client.set_connection_timeout(whole, micro);
  } else {
    client.set_read_timeout(whole, micro);
    client.set_write_timeout(whole, micro);
  }
}

nlohmann::json parse_or_null(const std::string& body) {
  if (body.empty()) return nullptr;
  nlohmann::json parsed = parse_json_bounded(body);
  return parsed.is_discarded() ? nlohmann::json() : parsed;
}

bool retryable_status(int status) { return status == 408 || status == 429 || status >= 500; }

std::string transport_failure(httplib::Error error, const HttpSettings& settings, double timeout_s) {
  switch (error) {
    case httplib::Error::Connection:
      return "cannot connect (refused or unreachable)";
    case httplib::Error::ConnectionTimeout:
      return "no connection within connect_timeout_s (" + std::to_string(settings.connect_timeout_s) + " s)";
    case httplib::Error::Read:
      return "no complete answer within " + std::to_string(timeout_s) + " s or the connection closed";
    case httplib::Error::Write:
      return "the request could not be sent (connection closed)";
    default:
      return httplib::to_string(error);
  }
}

}  // namespace

std::string server_message(const std::string& body) {
  const nlohmann::json parsed = parse_or_null(body);
  std::string message;
  if (parsed.is_object()) {
    const auto error = parsed.find("error");
    if (error != parsed.end() && error->is_object() && error->contains("message") && (*error)["message"].is_string()) {
      message = (*error)["message"].get<std::string>();
    } else if (error != parsed.end() && error->is_string()) {
      message = error->get<std::string>();
    } else if (parsed.contains("message") && parsed["message"].is_string()) {
      message = parsed["message"].get<std::string>();
    } else if (parsed.contains("detail")) {
      message = parsed["detail"].is_string() ? parsed["detail"].get<std::string>() : parsed["detail"].dump();
    }
  }
  if (message.empty()) message = body.empty() ? "(empty body)" : body;
  if (message.size() > kMaxQuoted) message = message.substr(0, kMaxQuoted) + "...";
  return message;
}

HttpJsonClient::HttpJsonClient(HttpSettings settings) : settings_(std::move(settings)) {
  while (!settings_.base_url.empty() && settings_.base_url.back() == '/') settings_.base_url.pop_back();
  if (settings_.base_url.rfind("http://", 0) != 0 && settings_.base_url.rfind("https://", 0) != 0) {
    throw ConfigError(settings_.client_name + ": URL '" + settings_.base_url + "' must start with http:// or https://");
  }
  if (!httplib::Client(settings_.base_url).is_valid()) {
    throw ConfigError(settings_.client_name + ": URL '" + settings_.base_url +
                      "' is not a valid URL (expected http://host:port)");
  }
}

HttpReply HttpJsonClient::send(const std::string& method, const std::string& path, const std::string* body, Retry retry,
                               double timeout_s) const {
  const int64_t attempts = 1 + (retry == Retry::kYes ? settings_.max_retries : 0);
  double backoff = settings_.retry_backoff_s;
  std::string last_failure;
  for (int64_t attempt = 1; attempt <= attempts; ++attempt) {
    httplib::Client client(settings_.base_url);
    set_timeout(client, settings_.connect_timeout_s, /*connect=*/true);
    set_timeout(client, timeout_s, /*connect=*/false);
    if (!settings_.api_key.empty()) client.set_bearer_token_auth(settings_.api_key);
    const httplib::Result result = body != nullptr ? client.Post(path, *body, "application/json") : client.Get(path);
    if (result) {
      HttpReply reply{result->status, result->body, parse_or_null(result->body)};
      if (!retryable_status(reply.status) || attempt == attempts) return reply;
      last_failure = describe(method, path, reply);
    } else {
      last_failure =
          method + " " + settings_.base_url + path + ": " + transport_failure(result.error(), settings_, timeout_s);
    }
    if (attempt < attempts) {
      std::this_thread::sleep_for(std::chrono::duration<double>(backoff));
      backoff *= 2;
    }
  }
  throw IoError(settings_.client_name + ": " + last_failure +
                (attempts > 1 ? " (after " + std::to_string(attempts) + " attempts)" : ""));
}

HttpReply HttpJsonClient::get(const std::string& path, Retry retry) const {
  return send("GET", path, nullptr, retry, settings_.request_timeout_s);
}

HttpReply HttpJsonClient::post(const std::string& path, const nlohmann::json& body, Retry retry,
                               std::optional<double> timeout_s) const {
  const std::string text = body.is_null() ? std::string() : body.dump();
  return send("POST", path, &text, retry, timeout_s.value_or(settings_.request_timeout_s));
}

nlohmann::json HttpJsonClient::get_ok(const std::string& path, Retry retry) const {
  HttpReply reply = get(path, retry);
  if (reply.status != 200) throw IoError(settings_.client_name + ": " + describe("GET", path, reply));
  return std::move(reply.json);
}

nlohmann::json HttpJsonClient::post_ok(const std::string& path, const nlohmann::json& body, Retry retry,
                                       std::optional<double> timeout_s) const {
  HttpReply reply = post(path, body, retry, timeout_s);
  if (reply.status != 200) throw IoError(settings_.client_name + ": " + describe("POST", path, reply));
  return std::move(reply.json);
}

std::string HttpJsonClient::describe(const std::string& method, const std::string& path, const HttpReply& reply) const {
  return method + " " + settings_.base_url + path + ": HTTP " + std::to_string(reply.status) + ": " +
         server_message(reply.body);
}

}  // namespace rlcore::http
