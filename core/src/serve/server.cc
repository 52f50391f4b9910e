// The HTTP wiring of `rlcore serve` on cpp-httplib's thread pool: each route
// forwards the body to OpenAiApi; auth and limits are checked before routing.
#include "rlcore/core/serve/server.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include <httplib.h>
#include <sys/socket.h>
#include <spdlog/spdlog.h>

#include "rlcore/error.h"

namespace rlcore::serve {
namespace {

constexpr const char* kJson = "application/json";

// Compares every byte so the time taken does not reveal how much of the key
// matched. `expected` is never empty (it starts with "Bearer ").
bool same_secret(const std::string& given, const std::string& expected) {
  unsigned char difference = given.size() == expected.size() ? 0 : 1;
  for (std::size_t i = 0; i < given.size(); ++i) {
    difference |= static_cast<unsigned char>(given[i] ^ expected[i % expected.size()]);
  }
  return difference == 0;
}

const char* error_type(int status) {
  switch (status) {
    case 401:
      return "AuthenticationError";
    case 404:
      return "NotFoundError";
    case 405:
      return "MethodNotAllowedError";
    case 413:
      return "RequestTooLargeError";
    default:
      return status >= 500 ? "InternalServerError" : "BadRequestError";
  }
}

// httplib's default also sets SO_REUSEPORT, which lets a second server bind a
// port already in use and share its traffic; keep only SO_REUSEADDR (quick restarts).
void reuse_address_only(socket_t sock) {
  int yes = 1;
  setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
}

void reply(httplib::Response& res, const ApiResponse& answer) {
  res.status = answer.status;
  if (answer.live) {
    // Events written as they are produced; a failed write (the client has gone) ends it.
    res.set_chunked_content_provider("text/event-stream", [live = answer.live](std::size_t, httplib::DataSink& sink) {
      live([&sink](const std::string& event) { return sink.write(event.data(), event.size()); });
      sink.done();
      return true;
    });
    return;
  }
  if (answer.events.empty()) {
    res.set_content(answer.body, kJson);
    return;
  }
  // One chunk per event (chunked transfer encoding), as vLLM's StreamingResponse.
  auto events = std::make_shared<std::vector<std::string>>(answer.events);
  res.set_chunked_content_provider("text/event-stream",
                                   [events, next = std::size_t{0}](std::size_t, httplib::DataSink& sink) mutable {
                                     if (next == events->size()) {
                                       sink.done();
                                       return true;
                                     }
                                     const std::string& event = (*events)[next++];
                                     return sink.write(event.data(), event.size());
                                   });
}

}  // namespace

struct Server::Impl {
  std::shared_ptr<OpenAiApi> api;
  ServerOptions options;
  httplib::Server http;
  std::atomic<bool> stop_requested{false};
  std::atomic<bool> serving{false};

  void add_routes();
  void add_dev_routes(DevModeApi& dev);
};

void Server::Impl::add_dev_routes(DevModeApi& dev) {
  using Req = httplib::Request;
  using Res = httplib::Response;
  // vLLM (VLLM_SERVER_DEV_MODE=1).
  http.Post("/sleep", [&dev](const Req& req, Res& res) {
    reply(res, dev.sleep(req.has_param("level") ? req.get_param_value("level") : "1"));
  });
  http.Post("/wake_up", [&dev](const Req& req, Res& res) {
    std::vector<std::string> tags;
    for (std::size_t i = 0; i < req.get_param_value_count("tags"); ++i) tags.push_back(req.get_param_value("tags", i));
    reply(res, dev.wake_up(tags));
  });
  http.Get("/is_sleeping", [&dev](const Req&, Res& res) { reply(res, dev.is_sleeping()); });
  http.Post("/reset_prefix_cache", [&dev](const Req&, Res& res) { reply(res, dev.reset_prefix_cache()); });
  http.Post("/pause", [&dev](const Req& req, Res& res) {
    reply(res, dev.pause(req.has_param("mode") ? req.get_param_value("mode") : "abort",
                         req.has_param("clear_cache") ? req.get_param_value("clear_cache") : "true"));
  });
  http.Post("/resume", [&dev](const Req&, Res& res) { reply(res, dev.resume()); });
  http.Get("/is_paused", [&dev](const Req&, Res& res) { reply(res, dev.is_paused()); });
  http.Post("/collective_rpc", [&dev](const Req& req, Res& res) { reply(res, dev.collective_rpc(req.body)); });
  http.Post("/update_weight_version",
            [&dev](const Req& req, Res& res) { reply(res, dev.update_weight_version(req.body)); });
  http.Get("/weight_info", [&dev](const Req&, Res& res) { reply(res, dev.weight_info()); });
  // SGLang.
  http.Post("/abort_request", [&dev](const Req& req, Res& res) { reply(res, dev.abort_request(req.body)); });
  http.Post("/update_weights_from_disk",
            [&dev](const Req& req, Res& res) { reply(res, dev.update_weights_from_disk(req.body)); });
  http.Post("/release_memory_occupation",
            [&dev](const Req& req, Res& res) { reply(res, dev.release_memory_occupation(req.body)); });
  http.Post("/resume_memory_occupation",
            [&dev](const Req& req, Res& res) { reply(res, dev.resume_memory_occupation(req.body)); });
  for (const char* route : {"/model_info", "/get_model_info"}) {
    http.Get(route, [&dev](const Req&, Res& res) { reply(res, dev.model_info()); });
  }
  const auto flush = [&dev](const Req&, Res& res) {
    reply(res, dev.reset_prefix_cache());  // SGLang answers text; nothing to flush here either way
  };
  http.Get("/flush_cache", flush);
  http.Post("/flush_cache", flush);
}

void Server::Impl::add_routes() {
  http.Post("/v1/completions",
            [this](const httplib::Request& req, httplib::Response& res) { reply(res, api->completions(req.body)); });
  http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    reply(res, api->chat_completions(req.body));
  });
  http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) { reply(res, api->models()); });
  http.Get("/health", [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  http.Get("/version", [this](const httplib::Request&, httplib::Response& res) { reply(res, api->version()); });
  http.Post("/tokenize",
            [this](const httplib::Request& req, httplib::Response& res) { reply(res, api->tokenize(req.body)); });
  http.Post("/detokenize",
            [this](const httplib::Request& req, httplib::Response& res) { reply(res, api->detokenize(req.body)); });
  if (options.dev_mode) add_dev_routes(*options.dev_mode);

  // Runs before the body is read, so an unauthenticated client cannot make the server read megabytes.
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (options.api_key.empty() || same_secret(req.get_header_value("Authorization"), "Bearer " + options.api_key)) {
      // A POST with neither Content-Length nor chunked encoding has an empty
      // body, as uvicorn (vLLM's server) reads it: `curl -X POST host/sleep`,
      // which vLLM's docs give. httplib would read to the end of the
      // connection and answer 400; the request object is httplib's own
      // (non-const) one, handed to this hook before the body is read.
      if (req.method == "POST" && !req.has_header("Content-Length") && !req.has_header("Transfer-Encoding")) {
        const_cast<httplib::Request&>(req).headers.emplace("Content-Length", "0");
      }
      return httplib::Server::HandlerResponse::Unhandled;
    }
    res.status = 401;
    res.set_content(error_text(401, error_type(401), "Unauthorized"), kJson);
    return httplib::Server::HandlerResponse::Handled;
  });

  // httplib answers unknown routes (404) and oversized bodies (413) with an
  // empty body; give those the error object too. Bodies set by routes stay.
  http.set_error_handler(
      httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        std::string message = "HTTP error " + std::to_string(res.status);
        if (res.status == 404) message = "Not Found: " + req.method + " " + req.path;
        if (res.status == 413) {
          message = "Request body too large: the limit is " + std::to_string(options.max_body_bytes) + " bytes.";
        }
        res.set_content(error_text(res.status, error_type(res.status), message), kJson);
        return httplib::Server::HandlerResponse::Handled;
      }));

  http.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr error) {
    std::string message = "unknown error";
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      message = e.what();
    } catch (...) {
    }
    spdlog::error("{} {}: {}", req.method, req.path, message);
    res.status = 500;
    res.set_content(error_text(500, error_type(500), message), kJson);
  });

  http.set_logger([](const httplib::Request& req, const httplib::Response& res) {
    spdlog::info("{} {} {} {}", req.remote_addr, req.method, req.path, res.status);
  });
}

Server::Server(std::shared_ptr<OpenAiApi> api, ServerOptions options) : impl_(std::make_unique<Impl>()) {
  if (!api) throw ValueError("rlcore serve: Server needs an OpenAiApi");
  impl_->api = std::move(api);
  impl_->options = std::move(options);
  impl_->http.set_payload_max_length(impl_->options.max_body_bytes);
  impl_->http.set_socket_options(reuse_address_only);
  impl_->add_routes();
}

Server::~Server() { stop(); }

int Server::bind(const std::string& host, int port) {
  const int bound = port == 0 ? impl_->http.bind_to_any_port(host) : (impl_->http.bind_to_port(host, port) ? port : -1);
  if (bound <= 0) throw IoError("rlcore serve: cannot listen on " + host + ":" + std::to_string(port));
  return bound;
}

bool Server::serve() {
  impl_->serving = true;
  const bool ok = impl_->stop_requested || impl_->http.listen_after_bind();
  impl_->serving = false;
  return ok || impl_->stop_requested;
}

void Server::stop() {
  impl_->stop_requested = true;
  // httplib's stop() does nothing until the accept loop runs; wait for it when
  // serve() has been entered, so a stop racing with start-up is not lost.
  while (impl_->serving && !impl_->http.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  impl_->http.stop();
}

}  // namespace rlcore::serve
