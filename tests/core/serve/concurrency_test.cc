// The event-driven server under load, over raw sockets: 256 clients at once
// with a quarter leaving mid-stream, keep-alive and pipelining, idle
// connections that cost the active ones nothing, the deadline, and the 503's
// Retry-After. A paced engine stands in for decoding (1 ms a step).
#include "serve_testing.h"

#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlcore/core/serve/api.h"
#include "rlcore/core/serve/server.h"

using namespace rlcore::serve;
using nlohmann::json;

namespace {

// The scripted engine (a token a step, prompt[0] + its position) whose steps
// take 1 ms, as a small model's decode would. A prompt starting with 99 is
// refused as a full queue would be.
class PacedEngine : public rlcore_test::ScriptedRequests {
 public:
  void submit(rlcore::GenerationRequest request) override {
    if (request.prompt_ids.at(0) == 99) throw rlcore::OverloadedError("the waiting queue is full");
    ScriptedRequests::submit(std::move(request));
  }
  rlcore::StepOutput step() override {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return ScriptedRequests::step();
  }
};

// A server over the paced engine whose model takes prompts of any length.
class PacedServer {
 public:
  explicit PacedServer(ServerOptions options = {})
      : engine_(std::make_shared<PacedEngine>()),
        api_(std::make_shared<OpenAiApi>(engine_, rlcore_test::test_model(/*max_model_len=*/100000000))),
        server_(api_, std::move(options)),
        port_(server_.bind("127.0.0.1", 0)),
        thread_([this] { served_cleanly_ = server_.serve(); }) {}
  ~PacedServer() {
    server_.stop();
    thread_.join();
  }
  PacedEngine& engine() { return *engine_; }
  int port() const { return port_; }

  // Polls `done` for up to 10 s (an abort reaches the engine after the client has gone).
  template <class Done>
  static bool eventually(Done done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }

 private:
  std::shared_ptr<PacedEngine> engine_;
  std::shared_ptr<OpenAiApi> api_;
  Server server_;
  int port_;
  bool served_cleanly_ = false;
  std::thread thread_;
};

std::string post_request(const std::string& path, const json& body) {
  const std::string text = body.dump();
  return "POST " + path +
         " HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(text.size()) +
         "\r\n\r\n" + text;
}

void send_all(int fd, const std::string& bytes) {
  REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()));
}

struct HttpAnswer {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;                            // chunks joined
};

// Reads one answer from a keep-alive connection (Content-Length or chunked);
// `pending` keeps bytes read past it (a pipelined answer). status 0: the
// connection ended first.
HttpAnswer read_answer(int fd, std::string& pending) {
  const auto fill = [&] {
    char buffer[8192];
    const ssize_t got = ::recv(fd, buffer, sizeof(buffer), 0);
    if (got <= 0) return false;
    pending.append(buffer, static_cast<size_t>(got));
    return true;
  };
  HttpAnswer answer;
  size_t head_end;
  while ((head_end = pending.find("\r\n\r\n")) == std::string::npos) {
    if (!fill()) return answer;
  }
  const std::string head = pending.substr(0, head_end);
  pending.erase(0, head_end + 4);
  answer.status = std::stoi(head.substr(9, 3));
  for (size_t line = head.find("\r\n"); line != std::string::npos;) {
    const size_t next = head.find("\r\n", line + 2);
    const std::string field = head.substr(line + 2, next == std::string::npos ? std::string::npos : next - line - 2);
    const size_t colon = field.find(':');
    std::string name = field.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(c));
    answer.headers[name] = field.substr(colon + 2);
    line = next;
  }
  if (answer.headers.count("content-length")) {
    const auto length = std::stoul(answer.headers["content-length"]);
    while (pending.size() < length) {
      if (!fill()) return HttpAnswer{};
    }
    answer.body = pending.substr(0, length);
    pending.erase(0, length);
    return answer;
  }
  while (true) {  // chunked
    size_t line_end;
    while ((line_end = pending.find("\r\n")) == std::string::npos) {
      if (!fill()) return HttpAnswer{};
    }
    const auto size = std::stoul(pending.substr(0, line_end), nullptr, 16);
    while (pending.size() < line_end + 2 + size + 2) {
      if (!fill()) return HttpAnswer{};
    }
    answer.body += pending.substr(line_end + 2, size);
    pending.erase(0, line_end + 2 + size + 2);
    if (size == 0) return answer;
  }
}

// The token ids of a completion answer: the whole body's, or a stream's chunks' in order.
std::vector<int32_t> answered_ids(const HttpAnswer& answer, bool streamed) {
  std::vector<int32_t> ids;
  if (!streamed) return json::parse(answer.body)["choices"][0]["token_ids"].get<std::vector<int32_t>>();
  for (size_t start = 0; (start = answer.body.find("data: ", start)) != std::string::npos;) {
    const size_t end = answer.body.find("\n\n", start);
    const std::string payload = answer.body.substr(start + 6, end - start - 6);
    start = end;
    if (payload == "[DONE]") break;
    const json chunk = json::parse(payload);
    for (const auto& choice : chunk["choices"]) {
      if (choice["token_ids"].is_array()) {
        for (const auto& id : choice["token_ids"]) ids.push_back(id.get<int32_t>());
      }
    }
  }
  return ids;
}

std::vector<int32_t> expected_ids(int32_t base, int32_t count) {
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < count; ++i) ids.push_back(base + i);
  return ids;
}

}  // namespace

TEST_CASE("256 clients at once, a quarter leaving mid-stream: the rest are answered, the leavers' requests aborted",
          "[serve][concurrency]") {
  PacedServer server;
  constexpr int kClients = 256;
  constexpr int32_t kTokens = 24;
  std::vector<std::string> failures(kClients);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      const bool leaves = c % 4 == 0;
      const bool streamed = leaves || c % 4 == 1 || c % 4 == 2;
      const int32_t base = 40 + c % 50;
      // A leaver's request would run for hours: only an abort ends it.
      const json body = {{"prompt", {base}},
                         {"max_tokens", leaves ? 10000000 : kTokens},
                         {"stream", streamed},
                         {"return_token_ids", true}};
      const int fd = rlcore_test::connect_loopback(server.port());
      send_all(fd, post_request("/v1/completions", body));
      if (leaves) {
        std::string seen;
        char buffer[4096];
        while (seen.find("data: {") == std::string::npos) {
          const ssize_t got = ::recv(fd, buffer, sizeof(buffer), 0);
          if (got <= 0) {
            failures[c] = "the stream ended before its first token";
            break;
          }
          seen.append(buffer, static_cast<size_t>(got));
        }
        ::close(fd);  // gone mid-stream
        return;
      }
      std::string pending;
      const HttpAnswer answer = read_answer(fd, pending);
      ::close(fd);
      if (answer.status != 200) {
        failures[c] = "status " + std::to_string(answer.status) + ": " + answer.body;
      } else if (answered_ids(answer, streamed) != expected_ids(base, kTokens)) {
        failures[c] = "wrong tokens: " + answer.body.substr(0, 300);
      } else if (streamed && answer.body.find("data: [DONE]\n\n") == std::string::npos) {
        failures[c] = "the stream did not end with [DONE]";
      }
    });
  }
  for (auto& client : clients) client.join();
  for (int c = 0; c < kClients; ++c) {
    INFO("client " << c);
    CHECK(failures[c].empty());
  }
  CHECK(PacedServer::eventually([&] { return server.engine().aborted() == kClients / 4; }));
  CHECK(server.engine().aborted() == kClients / 4);
  CHECK(PacedServer::eventually([&] { return server.engine().load().running == 0; }));
  CHECK(server.engine().load().running == 0);
  CHECK(server.engine().load().waiting == 0);
}

TEST_CASE("a non-streamed request whose client leaves is aborted at once, not run to its end", "[serve][concurrency]") {
  PacedServer server;
  const int fd = rlcore_test::connect_loopback(server.port());
  send_all(fd, post_request("/v1/completions", {{"prompt", {50}}, {"max_tokens", 10000000}}));
  REQUIRE(PacedServer::eventually([&] { return server.engine().load().running == 1; }));
  ::close(fd);
  CHECK(PacedServer::eventually([&] { return server.engine().aborted() == 1; }));
  CHECK(server.engine().load().running == 0);
}

TEST_CASE("keep-alive and pipelining: answers come back in order on one connection", "[serve][concurrency]") {
  PacedServer server;
  const int fd = rlcore_test::connect_loopback(server.port());
  // Three requests in one write: a completion, the models, a streamed completion.
  send_all(fd, post_request("/v1/completions", {{"prompt", {60}}, {"max_tokens", 5}, {"return_token_ids", true}}) +
                   "GET /v1/models HTTP/1.1\r\nHost: test\r\n\r\n" +
                   post_request("/v1/completions",
                                {{"prompt", {70}}, {"max_tokens", 3}, {"stream", true}, {"return_token_ids", true}}));
  std::string pending;
  const HttpAnswer first = read_answer(fd, pending);
  REQUIRE(first.status == 200);
  CHECK(answered_ids(first, false) == expected_ids(60, 5));
  const HttpAnswer second = read_answer(fd, pending);
  REQUIRE(second.status == 200);
  CHECK(json::parse(second.body)["object"] == "list");
  HttpAnswer third = read_answer(fd, pending);
  REQUIRE(third.status == 200);
  CHECK(third.headers["content-type"] == "text/event-stream");
  CHECK(answered_ids(third, true) == expected_ids(70, 3));
  // The connection stays open for more.
  send_all(fd, "GET /health HTTP/1.1\r\nHost: test\r\n\r\n");
  CHECK(read_answer(fd, pending).status == 200);
  ::close(fd);
}

TEST_CASE("hundreds of idle keep-alive connections do not hold back active clients", "[serve][concurrency]") {
  ServerOptions options;
  options.keep_alive_timeout_s = 60;
  PacedServer server(options);
  std::vector<int> idle;
  for (int i = 0; i < 300; ++i) idle.push_back(rlcore_test::connect_loopback(server.port()));
  // An idle client that sent one request and keeps its connection.
  std::string pending;
  send_all(idle[0], "GET /health HTTP/1.1\r\nHost: test\r\n\r\n");
  CHECK(read_answer(idle[0], pending).status == 200);

  std::atomic<int> answered{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 32; ++c) {
    clients.emplace_back([&, c] {
      const int fd = rlcore_test::connect_loopback(server.port());
      send_all(fd, post_request("/v1/completions", {{"prompt", {40 + c}}, {"max_tokens", 8}}));
      std::string rest;
      if (read_answer(fd, rest).status == 200) ++answered;
      ::close(fd);
    });
  }
  for (auto& client : clients) client.join();
  CHECK(answered == 32);
  for (const int fd : idle) ::close(fd);
}

TEST_CASE("request_timeout_s aborts a completion past its deadline: 504 whole, an error event streamed",
          "[serve][concurrency]") {
  ServerOptions options;
  options.request_timeout_s = 0.3;
  PacedServer server(options);
  std::string pending;

  int fd = rlcore_test::connect_loopback(server.port());
  send_all(fd, post_request("/v1/completions", {{"prompt", {50}}, {"max_tokens", 10000000}}));
  const HttpAnswer whole = read_answer(fd, pending);
  ::close(fd);
  CHECK(whole.status == 504);
  const json error = json::parse(whole.body);
  CHECK(error["type"] == "TimeoutError");
  CHECK_THAT(error["message"].get<std::string>(), Catch::Contains("request_timeout_s (0.3 s)"));

  fd = rlcore_test::connect_loopback(server.port());
  pending.clear();
  send_all(fd, post_request("/v1/completions", {{"prompt", {50}}, {"max_tokens", 10000000}, {"stream", true}}));
  const HttpAnswer streamed = read_answer(fd, pending);
  ::close(fd);
  CHECK(streamed.status == 200);
  CHECK_THAT(streamed.body, Catch::Contains("\"TimeoutError\""));
  CHECK_THAT(streamed.body, Catch::EndsWith("data: [DONE]\n\n"));

  CHECK(PacedServer::eventually([&] { return server.engine().aborted() == 2; }));
  CHECK(server.engine().load().running == 0);
  // A completion inside the deadline is untouched.
  fd = rlcore_test::connect_loopback(server.port());
  pending.clear();
  send_all(fd, post_request("/v1/completions", {{"prompt", {50}}, {"max_tokens", 4}}));
  CHECK(read_answer(fd, pending).status == 200);
  ::close(fd);
}

TEST_CASE("a full waiting queue is a 503 with Retry-After", "[serve][concurrency]") {
  PacedServer server;
  const int fd = rlcore_test::connect_loopback(server.port());
  std::string pending;
  send_all(fd, post_request("/v1/completions", {{"prompt", {99}}, {"max_tokens", 4}}));
  HttpAnswer refused = read_answer(fd, pending);
  CHECK(refused.status == 503);
  CHECK(refused.headers["retry-after"] == "1");
  CHECK(json::parse(refused.body)["message"] == "the waiting queue is full");
  // Streamed too: refused before the stream begins.
  send_all(fd, post_request("/v1/completions", {{"prompt", {99}}, {"max_tokens", 4}, {"stream", true}}));
  refused = read_answer(fd, pending);
  CHECK(refused.status == 503);
  CHECK(refused.headers["retry-after"] == "1");
  ::close(fd);
}
