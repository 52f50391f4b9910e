// A scripted HTTP server on 127.0.0.1 for the bridge's tests: each route's
// answer is a function the test sets, and every request is recorded, so tests
// can play a vLLM or SGLang server that is slow, broken or rude.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

namespace bridge_test {

struct Recorded {
  std::string method;
  std::string target;  // path plus ?query in the order sent
  std::string body;
};

class FakeServer {
 public:
  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

  FakeServer() {
    const auto dispatch = [this](const httplib::Request& req, httplib::Response& res) {
      Handler handler;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        std::string target = req.path;
        std::string separator = "?";
        for (const auto& [key, value] : req.params) {
          target += separator + key + "=" + value;
          separator = "&";
        }
        log_.push_back({req.method, target, req.body});
        const auto it = routes_.find(req.method + " " + req.path);
        if (it != routes_.end()) handler = it->second;
      }
      if (handler) {
        handler(req, res);
      } else {
        res.status = 404;
        res.set_content(R"({"detail":"Not Found"})", "application/json");
      }
    };
    http_.Get(".*", dispatch);
    http_.Post(".*", dispatch);
    port_ = http_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { http_.listen_after_bind(); });
    while (!http_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeServer() {
    http_.stop();
    thread_.join();
  }
  FakeServer(const FakeServer&) = delete;
  FakeServer& operator=(const FakeServer&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  void on(const std::string& method, const std::string& path, Handler handler) {
    std::lock_guard<std::mutex> lock(mutex_);
    routes_[method + " " + path] = std::move(handler);
  }
  void on_json(const std::string& method, const std::string& path, nlohmann::json body, int status = 200) {
    on(method, path, [body = body.dump(), status](const httplib::Request&, httplib::Response& res) {
      res.status = status;
      res.set_content(body, "application/json");
    });
  }
  void remove(const std::string& method, const std::string& path) {
    std::lock_guard<std::mutex> lock(mutex_);
    routes_.erase(method + " " + path);
  }

  std::vector<Recorded> log() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return log_;
  }
  // "METHOD target" of every request but the read-only probes, in order.
  std::vector<std::string> calls(const std::vector<std::string>& skip = {"GET"}) const {
    std::vector<std::string> out;
    for (const Recorded& r : log()) {
      bool skipped = false;
      for (const std::string& s : skip) skipped = skipped || r.method == s;
      if (!skipped) out.push_back(r.method + " " + r.target);
    }
    return out;
  }
  void clear_log() {
    std::lock_guard<std::mutex> lock(mutex_);
    log_.clear();
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::string, Handler> routes_;
  std::vector<Recorded> log_;
  httplib::Server http_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace bridge_test
