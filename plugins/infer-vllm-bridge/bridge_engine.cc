#include "bridge_engine.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <future>
#include <optional>
#include <system_error>
#include <utility>

#include <ATen/ATen.h>

#include "completion_protocol.h"
#include "rlcore/error.h"
#include "rlcore/safetensors/safetensors.h"

namespace rlcore::infer_vllm_bridge {
namespace fs = std::filesystem;
namespace {

HttpSettings http_settings(const BridgeOptions& options, const std::string& url) {
  HttpSettings settings;
  settings.base_url = url;
  settings.client_name = "vllm_bridge";
  settings.api_key = options.api_key;
  if (settings.api_key.empty()) {
    if (const char* key = std::getenv("RLCORE_BRIDGE_API_KEY")) settings.api_key = key;
  }
  settings.connect_timeout_s = options.connect_timeout_s;
  settings.request_timeout_s = options.request_timeout_s;
  settings.max_retries = options.max_retries;
  settings.retry_backoff_s = options.retry_backoff_s;
  return settings;
}

ServerExpectations expectations(const BridgeOptions& options) {
  return ServerExpectations{options.server_kind, options.served_model_name, options.max_model_len};
}

std::vector<WeightMeta> checkpoint_meta(const std::string& model_path) {
  if (model_path.empty()) throw ConfigError("vllm_bridge: no model path (actor_rollout_ref.model.path)");
  const SafetensorsCheckpoint checkpoint(model_path);
  std::vector<WeightMeta> meta;
  for (const std::string& name : checkpoint.names()) {
    const SafetensorsEntry& entry = checkpoint.entry(name);
    meta.push_back(WeightMeta{name, entry.shape, entry.dtype});
  }
  return meta;
}

void append(GenerationOutput& into, GenerationOutput&& part) {
  for (auto& ids : part.token_ids) into.token_ids.push_back(std::move(ids));
  for (auto& lp : part.logprobs) into.logprobs.push_back(std::move(lp));
  into.finish_reasons.insert(into.finish_reasons.end(), part.finish_reasons.begin(), part.finish_reasons.end());
}

}  // namespace

BridgeEngine::Server::Server(const HttpSettings& settings, const BridgeOptions& options)
    : http(settings),
      info(probe_server(http, expectations(options))),
      control(http, info.kind, options.reload_timeout_s) {}

BridgeEngine::BridgeEngine(const BridgeOptions& options, const ComponentContext& context)
    : options_(options), meta_(checkpoint_meta(context.model_path)) {
  if (options.server_urls.empty() || options.server_urls.front().empty()) {
    throw ConfigError(
        "vllm_bridge: server_url is required (e.g. actor_rollout_ref.rollout.server_url=http://host:8000)");
  }
  for (const std::string& url : options.server_urls) {
    if (std::count(options.server_urls.begin(), options.server_urls.end(), url) > 1) {
      // Two concurrent reloads of one server would interleave its pause / reload / resume.
      throw ConfigError("vllm_bridge: server_url lists " + url + " more than once");
    }
    servers_.push_back(std::make_unique<Server>(http_settings(options, url), options));
    const Server& first = *servers_.front();
    const Server& added = *servers_.back();
    if (added.info.model != first.info.model) {
      throw ConfigError("vllm_bridge: the servers of server_url must serve one model: " + first.http.base_url() +
                        " serves '" + first.info.model + "', " + added.http.base_url() + " serves '" +
                        added.info.model + "'");
    }
  }
  if (context.comm != nullptr && context.comm->world_size() > 1) world_ = context.comm->group("world");
  if (leader()) {
    fs::path root = options.weights_dir;
    if (root.empty()) {
      root = fs::temp_directory_path() / ("rlcore-vllm-bridge-" + std::to_string(::getpid()));
      owns_weights_dir_ = true;
    }
    snapshots_.emplace(root, context.model_path);
  }
}

BridgeEngine::~BridgeEngine() {
  if (snapshots_ && owns_weights_dir_) {
    std::error_code ignored;
    fs::remove_all(snapshots_->root(), ignored);
  }
}

bool BridgeEngine::leader() const { return !world_ || world_->rank() == 0; }

const fs::path& BridgeEngine::weights_dir() const {
  if (!snapshots_) throw ValueError("vllm_bridge: only rank 0 writes weight snapshots");
  return snapshots_->root();
}

void BridgeEngine::share_outcome(const std::string& failure, const std::string& what) const {
  bool failed = !failure.empty();
  if (world_) {
    at::Tensor status = at::full({1}, failed ? 1 : 0, at::kLong);
    world_->broadcast(status, 0);
    failed = status.item<int64_t>() != 0;
  }
  if (!failed) return;
  if (!failure.empty()) throw IoError(failure);
  throw IoError("vllm_bridge: " + what + " failed on rank 0 (its error says why)");
}

GenerationOutput BridgeEngine::generate(const std::vector<std::vector<int32_t>>& prompts,
                                        const SamplingParams& sampling) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (weights_asleep_) throw ValueError("vllm_bridge: generate() while asleep: call wake_up() and load weights first");
  if (sampling.n < 1) throw ValueError("vllm_bridge: n must be >= 1");
  wake_kv_cache_if_asleep();
  check_server_weight_version();
  GenerationOutput out = generate_chunks(prompts, sampling);
  out.weight_version = version_;
  return out;
}

GenerationOutput BridgeEngine::generate_chunks(const std::vector<std::vector<int32_t>>& prompts,
                                               const SamplingParams& sampling) const {
  const auto per_request = static_cast<std::size_t>(options_.prompts_per_request);
  std::vector<std::vector<std::vector<int32_t>>> chunks;
  for (std::size_t begin = 0; begin < prompts.size(); begin += per_request) {
    const std::size_t end = std::min(prompts.size(), begin + per_request);
    chunks.emplace_back(prompts.begin() + static_cast<std::ptrdiff_t>(begin),
                        prompts.begin() + static_cast<std::ptrdiff_t>(end));
  }
  const std::size_t first_server = world_ ? static_cast<std::size_t>(world_->rank()) : 0;
  const auto send = [&](std::size_t c) {
    const Server& server = *servers_[(first_server + c) % servers_.size()];
    // A seeded run stays reproducible whatever the request sizes: chunk c gets seed + c.
    const int64_t seed = sampling.seed >= 0 ? sampling.seed + static_cast<int64_t>(c) : -1;
    const HttpReply reply = server.http.post(
        "/v1/completions", completion_request(server.info.model, chunks[c], sampling, seed), Retry::kYes);
    if (reply.status != 200) throw IoError("vllm_bridge: " + server.http.describe("POST", "/v1/completions", reply));
    if (reply.json.is_null()) {
      throw FormatError("vllm_bridge: POST " + server.http.base_url() +
                        "/v1/completions answered 200 with a body that is not JSON: " + reply.body.substr(0, 200));
    }
    return parse_completion_response(reply.json, chunks[c].size(), sampling.n);
  };
  // A sliding window: each of up to max_concurrent_requests senders takes the
  // next chunk as soon as its last answer is in, so the server's continuous
  // batching always has requests to admit (no wave waits for its slowest).
  std::vector<std::optional<GenerationOutput>> parts(chunks.size());
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  const auto sender = [&] {
    for (std::size_t c = next++; c < chunks.size() && !failed; c = next++) {
      try {
        parts[c] = send(c);
      } catch (...) {
        failed = true;
        throw;
      }
    }
  };
  const std::size_t senders = std::min(chunks.size(), static_cast<std::size_t>(options_.max_concurrent_requests));
  std::vector<std::future<void>> running;
  for (std::size_t s = 0; s < senders; ++s) running.push_back(std::async(std::launch::async, sender));
  std::exception_ptr failure;
  for (auto& result : running) {
    try {
      result.get();
    } catch (...) {
      if (!failure) failure = std::current_exception();  // wait for every sender before throwing
    }
  }
  if (failure) std::rethrow_exception(failure);
  GenerationOutput out;
  for (auto& part : parts) append(out, std::move(*part));
  return out;
}

std::vector<WeightMeta> BridgeEngine::weight_meta() const { return meta_; }

void BridgeEngine::on_every_server(const std::function<void(const Server&)>& action) const {
  if (servers_.size() == 1) return action(*servers_.front());  // no thread for the usual case
  std::vector<std::future<void>> running;
  for (const auto& server : servers_) running.push_back(std::async(std::launch::async, action, std::cref(*server)));
  std::exception_ptr failure;
  for (auto& result : running) {
    try {
      result.get();
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
}

void BridgeEngine::reload_every_server(const fs::path& dir, int64_t version) const {
  on_every_server([&](const Server& server) {
    server.control.load_weights(dir, version);
    const std::optional<std::string> reported = server.control.weight_version();
    if (reported && *reported != std::to_string(version)) {
      throw IoError("vllm_bridge: " + server.http.base_url() + " reports weights version '" + *reported +
                    "' after loading version " + std::to_string(version));
    }
  });
}

void BridgeEngine::load_weights(const NamedTensorList& weights, int64_t version) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string failure;
  if (leader()) {
    try {
      const fs::path dir =
          snapshots_->write(weights, version, last_good_.empty() ? snapshots_->model_path() : last_good_);
      try {
        reload_every_server(dir, version);
      } catch (const std::exception& e) {
        std::string restored = "no earlier weights to restore";
        if (!last_good_.empty()) {
          try {
            on_every_server([&](const Server& server) { server.control.load_weights(last_good_, version_); });
            restored = std::string(servers_.size() > 1 ? "every server was" : "the server was") +
                       " given back version " + std::to_string(version_) + " (" + last_good_.string() + ")";
          } catch (const std::exception& again) {
            restored = "restoring version " + std::to_string(version_) + " failed too: " + again.what();
          }
        }
        throw IoError(std::string(e.what()) + "; " + restored);
      }
      if (kv_cache_asleep_) on_every_server([](const Server& server) { server.control.wake_kv_cache(); });
      snapshots_->remove_all_but({dir});
      last_good_ = dir;
    } catch (const std::exception& e) {
      failure = e.what();  // any failure: the other ranks are waiting for the outcome in a broadcast
    }
  }
  share_outcome(failure, "loading weights version " + std::to_string(version));
  version_ = version;
  kv_cache_asleep_ = false;
}

int64_t BridgeEngine::weight_version() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return version_;
}

void BridgeEngine::sleep() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!options_.free_cache_engine || weights_asleep_) return;
  if (leader()) on_every_server([&](const Server& server) { server.control.sleep(options_.sleep_level); });
  weights_asleep_ = kv_cache_asleep_ = true;
}

void BridgeEngine::wake_up() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!weights_asleep_) return;
  if (leader()) on_every_server([](const Server& server) { server.control.wake_weights(); });
  weights_asleep_ = false;
}

void BridgeEngine::wake_kv_cache_if_asleep() {
  if (!kv_cache_asleep_) return;
  if (leader()) on_every_server([](const Server& server) { server.control.wake_kv_cache(); });
  kv_cache_asleep_ = false;
}

void BridgeEngine::check_server_weight_version() const {
  if (version_ == 0 || !leader()) return;
  on_every_server([&](const Server& server) {
    const std::optional<std::string> reported = server.control.weight_version();
    if (reported && *reported != std::to_string(version_)) {
      throw IoError("vllm_bridge: " + server.http.base_url() + " serves weights version '" + *reported +
                    "' but the trainer loaded version " + std::to_string(version_) +
                    " (was the server reloaded or restarted by someone else?)");
    }
  });
}

}  // namespace rlcore::infer_vllm_bridge
