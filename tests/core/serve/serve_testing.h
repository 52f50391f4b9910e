// Shared by the serve tests: a deterministic test engine (a test double for
// the HTTP layer, registered into a Registry by hand) and a ServedModel over
// the built-in tokenizer.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "rlcore/capabilities.h"
#include "rlcore/inference_engine.h"
#include <catch2/catch.hpp>
#include "../../common/error_of.h"
#include "../../common/loopback_socket.h"

#include <httplib.h>

#include "rlcore/core/serve/api.h"
#include "rlcore/core/serve/server.h"
#include "rlcore/core/serve/served_model.h"
#include "rlcore/error.h"
#include "rlcore/options.h"
#include "rlcore/registry.h"
#include "rlcore/tokenizer/tokenizer.h"

namespace rlcore_test {

// Sample j of every prompt emits script[(j + k) % size] at step k, stopping
// after a stop token (kept, as real engines do) or at max_tokens; log-prob of
// step k is -0.5 * (k + 1). Records what it was asked and whether two calls
// ever overlapped.
class ScriptedEngine : public rlcore::InferenceEngine {
 public:
  explicit ScriptedEngine(std::vector<int32_t> script) : script_(std::move(script)) {}

  rlcore::GenerationOutput generate(const std::vector<std::vector<int32_t>>& prompts,
                                    const rlcore::SamplingParams& sampling) override {
    if (in_flight_.fetch_add(1) != 0) overlapped_ = true;
    // Long enough that concurrent requests would overlap if the server did not serialise them.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    rlcore::GenerationOutput output;
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      for (int64_t j = 0; j < sampling.n; ++j) {
        std::vector<int32_t> ids;
        std::vector<float> logprobs;
        rlcore::FinishReason finish = rlcore::FinishReason::kLength;
        for (int64_t k = 0; k < sampling.max_tokens; ++k) {
          const int32_t id = script_[static_cast<std::size_t>(j + k) % script_.size()];
          ids.push_back(id);
          logprobs.push_back(-0.5f * static_cast<float>(k + 1));
          const auto& stops = sampling.stop_token_ids;
          if (std::find(stops.begin(), stops.end(), id) != stops.end()) {
            finish = rlcore::FinishReason::kStop;
            break;
          }
        }
        output.token_ids.push_back(ids);
        output.logprobs.push_back(logprobs);
        output.finish_reasons.push_back(finish);
      }
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      last_prompts_ = prompts;
      last_sampling_ = sampling;
      ++calls_;
    }
    in_flight_.fetch_sub(1);
    return output;
  }

  std::vector<rlcore::WeightMeta> weight_meta() const override { return {}; }
  void load_weights(const rlcore::NamedTensorList&, int64_t) override {}
  int64_t weight_version() const override { return 0; }
  void sleep() override {}
  void wake_up() override {}

  bool overlapped() const { return overlapped_; }
  int calls() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return calls_;
  }
  rlcore::SamplingParams last_sampling() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return last_sampling_;
  }
  std::vector<std::vector<int32_t>> last_prompts() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return last_prompts_;
  }

 private:
  std::vector<int32_t> script_;
  std::atomic<int> in_flight_{0};
  std::atomic<bool> overlapped_{false};
  mutable std::mutex mutex_;
  int calls_ = 0;
  std::vector<std::vector<int32_t>> last_prompts_;
  rlcore::SamplingParams last_sampling_;
};

struct ScriptedOptions {
  std::string text = "ab";  // the script: these tokens, then EOS
};

inline rlcore::serve::ServedModel test_model(int64_t max_model_len = 64) {
  const auto tokenizer = rlcore::make_builtin_tokenizer();
  return rlcore::serve::ServedModel{
      "tiny",    "/models/tiny", max_model_len, tokenizer.vocab_size(), {*tokenizer.eos_token_id()},
      tokenizer, 1700000000};
}

// The script of "ab" then EOS, in the built-in tokenizer's ids.
inline std::vector<int32_t> scripted_tokens(const rlcore::Tokenizer& tokenizer, const std::string& text) {
  std::vector<int32_t> script = tokenizer.encode(text);
  script.push_back(*tokenizer.eos_token_id());
  return script;
}

// Registers the scripted engine as inference_engine "scripted" and makes one
// through the registry, as `rlcore serve` does with a plugin's engine.
inline std::shared_ptr<ScriptedEngine> make_scripted_engine(rlcore::Registry& registry) {
  rlcore::PluginRegistrar registrar(registry, rlcore::PluginOrigin{"serve-test", "0.0.0", ""});
  if (!registry.find(rlcore::InferenceEngine::kKind, "scripted")) {
    registrar.add<rlcore::InferenceEngine>(
        "scripted", "Deterministic engine for the serve tests",
        rlcore::OptionsSchema<ScriptedOptions>().key("text", &ScriptedOptions::text, "Tokens to emit before EOS."),
        [](const ScriptedOptions& options) {
          const auto tokenizer = rlcore::make_builtin_tokenizer();
          return std::make_shared<ScriptedEngine>(scripted_tokens(tokenizer, options.text));
        });
  }
  return std::static_pointer_cast<ScriptedEngine>(registry.create<rlcore::InferenceEngine>("scripted"));
}

// A Server on 127.0.0.1:<free port>, serving from its own thread until
// destroyed; with `dev_mode`, the dev-mode routes too (weights from `model_dir`).
class RunningServer {
 public:
  explicit RunningServer(std::shared_ptr<rlcore::InferenceEngine> engine, rlcore::serve::ServerOptions options = {},
                         bool dev_mode = false, const std::string& model_dir = "/models/tiny")
      : api_(std::make_shared<rlcore::serve::OpenAiApi>(std::move(engine), test_model())),
        server_(api_, with_dev_mode(std::move(options), dev_mode, model_dir)),
        port_(server_.bind("127.0.0.1", 0)),
        thread_([this] { served_cleanly_ = server_.serve(); }) {}

  ~RunningServer() {
    server_.stop();
    thread_.join();
  }

  httplib::Client client(const std::string& api_key = "") const {
    httplib::Client client("127.0.0.1", port_);
    client.set_read_timeout(60, 0);
    if (!api_key.empty()) client.set_bearer_token_auth(api_key.c_str());
    return client;
  }

  int port() const { return port_; }
  void stop_and_join() {
    server_.stop();
    thread_.join();
    thread_ = std::thread([] {});
  }
  bool served_cleanly() const { return served_cleanly_; }

 private:
  rlcore::serve::ServerOptions with_dev_mode(rlcore::serve::ServerOptions options, bool dev_mode,
                                             const std::string& model_dir) const {
    if (dev_mode) options.dev_mode = std::make_shared<rlcore::serve::DevModeApi>(api_, model_dir);
    return options;
  }

  std::shared_ptr<rlcore::serve::OpenAiApi> api_;
  rlcore::serve::Server server_;
  int port_;
  bool served_cleanly_ = false;
  std::thread thread_;
};

// A request-level engine for the serve tests: every running request gets
// token (prompt[0] + its position) per step and finishes at max_tokens.
// step() holds the first step back until `hold_until_running` requests have
// been submitted (or 10 s passed), so concurrent callers are known to meet in
// one batch; with stall_after_first_token, a step after a request's first
// token waits (up to 10 s) until something is aborted. generate() is refused:
// everything goes through requests.
class ScriptedRequests : public rlcore::InferenceEngine, public rlcore::GeneratesRequests {
 public:
  explicit ScriptedRequests(size_t hold_until_running = 0, bool stall_after_first_token = false)
      : hold_(hold_until_running), stall_(stall_after_first_token) {}

  rlcore::GenerationOutput generate(const std::vector<std::vector<int32_t>>&, const rlcore::SamplingParams&) override {
    throw rlcore::Error("ScriptedRequests: generate() is not used when an engine runs requests");
  }
  std::vector<rlcore::WeightMeta> weight_meta() const override { return {}; }
  void load_weights(const rlcore::NamedTensorList&, int64_t) override {}
  int64_t weight_version() const override { return 3; }
  void sleep() override {}
  void wake_up() override {}

  void submit(rlcore::GenerationRequest request) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (request.prompt_ids.empty()) throw rlcore::ValueError("request '" + request.id + "': the prompt is empty");
    if (request.prompt_ids[0] == 999) throw rlcore::OverloadedError("request '" + request.id + "': queue full");
    resumed_sizes_.push_back(request.resumed.size());
    running_.emplace(request.id, Running{request, request.resumed});  // a resumed request goes on from its tokens
    seeds_.push_back(request.sampling.seed);
    ++submitted_;
    changed_.notify_all();
  }

  rlcore::StepOutput step() override {
    std::unique_lock<std::mutex> lock(mutex_);
    step_thread_ = std::this_thread::get_id();
    if (!running_.empty() && ++token_steps_ == block_at_) {
      blocked_ = true;
      changed_.notify_all();
      changed_.wait_for(lock, std::chrono::seconds(10), [&] { return !blocked_; });
    }
    if (hold_ > 0) {
      changed_.wait_for(lock, std::chrono::seconds(10), [&] { return submitted_ >= hold_; });
      hold_ = 0;
    }
    if (fail_) throw rlcore::Error("device lost");
    if (stall_ && stepped_) changed_.wait_for(lock, std::chrono::seconds(10), [&] { return aborted_ > 0; });
    stepped_ = stepped_ || !running_.empty();  // a step that gave a token
    rlcore::StepOutput out;
    most_running_ = std::max(most_running_, running_.size());
    for (auto it = running_.begin(); it != running_.end();) {
      Running& r = it->second;
      const auto token = static_cast<int32_t>(r.request.prompt_ids[0] + r.tokens.size());
      r.tokens.token_ids.push_back(token);
      r.tokens.logprobs.push_back(-0.5f);
      r.tokens.weight_versions.push_back(3);
      rlcore::TokenDelta delta;
      delta.id = it->first;
      delta.tokens.token_ids = {token};
      delta.tokens.logprobs = {-0.5f};
      delta.tokens.weight_versions = {3};
      out.deltas.push_back(std::move(delta));
      if (static_cast<int64_t>(r.tokens.size()) >= r.request.sampling.max_tokens) {
        out.finished.push_back(output(it->first, r, rlcore::FinishReason::kLength));
        it = running_.erase(it);
      } else {
        ++it;
      }
    }
    return out;
  }

  std::optional<rlcore::RequestOutput> abort(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = running_.find(id);
    if (it == running_.end()) return std::nullopt;
    rlcore::RequestOutput out = output(id, it->second, rlcore::FinishReason::kAbort);
    running_.erase(it);
    ++aborted_;
    changed_.notify_all();
    return out;
  }

  rlcore::GenerationLoad load() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    rlcore::GenerationLoad load;
    load.running = static_cast<int64_t>(running_.size());
    return load;
  }

  size_t most_running() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return most_running_;
  }
  size_t aborted() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return aborted_;
  }
  std::vector<int64_t> seeds() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return seeds_;
  }
  // The `step`-th step that gives tokens waits (up to 10 s) for release_step();
  // wait_blocked() returns once it does.
  void block_at_step(size_t step) {
    std::lock_guard<std::mutex> lock(mutex_);
    block_at_ = step;
  }
  bool wait_blocked() {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, std::chrono::seconds(10), [&] { return blocked_; });
  }
  void release_step() {
    std::lock_guard<std::mutex> lock(mutex_);
    blocked_ = false;
    changed_.notify_all();
  }
  size_t token_steps() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return token_steps_;
  }
  std::vector<size_t> resumed_sizes() const {  // per submit(), in order
    std::lock_guard<std::mutex> lock(mutex_);
    return resumed_sizes_;
  }
  std::thread::id step_thread() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return step_thread_;
  }
  void fail_steps() {
    std::lock_guard<std::mutex> lock(mutex_);
    fail_ = true;
  }

 private:
  struct Running {
    rlcore::GenerationRequest request;
    rlcore::GeneratedTokens tokens;
  };
  static rlcore::RequestOutput output(const std::string& id, const Running& r, rlcore::FinishReason reason) {
    rlcore::RequestOutput out;
    out.id = id;
    out.generated = r.tokens;
    out.finish_reason = reason;
    out.seed = r.request.sampling.seed;
    return out;
  }

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, Running> running_;
  size_t hold_;
  bool stall_;
  bool stepped_ = false;
  size_t aborted_ = 0;
  size_t submitted_ = 0;
  size_t most_running_ = 0;
  std::vector<int64_t> seeds_;
  bool fail_ = false;
  std::thread::id step_thread_;
  size_t token_steps_ = 0;  // steps that gave tokens
  size_t block_at_ = 0;
  bool blocked_ = false;
  std::vector<size_t> resumed_sizes_;
};

// Sends `request` (raw HTTP/1.1 text, e.g. one httplib's client would not
// write) to 127.0.0.1:port and returns every byte of the answer, read until
// the server closes the connection (send "Connection: close").
inline std::string raw_http(int port, const std::string& request) {
  const int fd = connect_loopback(port);
  REQUIRE(::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size()));
  std::string bytes;
  char buffer[4096];
  for (ssize_t got; (got = ::recv(fd, buffer, sizeof(buffer), 0)) > 0;)
    bytes.append(buffer, static_cast<std::size_t>(got));
  ::close(fd);
  return bytes;
}

}  // namespace rlcore_test
