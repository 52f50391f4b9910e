// `rlcore serve`: an OpenAI/vLLM-compatible HTTP server over any
// inference_engine plugin, until SIGINT or SIGTERM.
#include <fcntl.h>
#include <sys/resource.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <exception>
#include <ostream>
#include <thread>

#include <ATen/Parallel.h>
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "rlcore/core/runtime/local_launcher.h"
#include "rlcore/core/serve/api.h"
#include "rlcore/core/serve/server.h"
#include "rlcore/core/session.h"
#include "rlcore/device.h"
#include "rlcore/error.h"
#include "rlcore/model/config.h"

namespace po = boost::program_options;

namespace rlcore::cli {
namespace {

struct ServeArgs {
  std::string model_dir;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;
  std::string engine = "native";
  std::string served_model_name;
  std::string device = "cpu";
  int64_t threads = 0;  // 0: every core of this machine
  bool dev_mode = false;
  double request_timeout_s = 0;
  double keep_alive_timeout_s = 5;
};

// Where the signal handler writes; a handler can reach nothing but a global,
// and only on_stop_signal reads this one.
int g_stop_pipe = -1;

// Below this many open files the banner says how many clients can connect.
constexpr rlim_t kOpenFilesWanted = 4096;

void on_stop_signal(int signal) {
  const auto byte = static_cast<unsigned char>(signal);
  [[maybe_unused]] const auto written = write(g_stop_pipe, &byte, 1);  // async-signal-safe
}

// SIGINT/SIGTERM -> one byte on a pipe, which a thread turns into
// Server::stop() (nothing else is safe inside a handler). Installed explicitly,
// so a server started with SIGINT ignored (a background job) still stops on it.
// The previous handlers come back on destruction.
class StopSignals {
 public:
  StopSignals() {
    if (pipe2(fds_, O_CLOEXEC) != 0) throw IoError("rlcore serve: cannot create the signal pipe");
    g_stop_pipe = fds_[1];
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(SIGINT, &action, &previous_int_);
    sigaction(SIGTERM, &action, &previous_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &previous_int_, nullptr);
    sigaction(SIGTERM, &previous_term_, nullptr);
    g_stop_pipe = -1;
    close(fds_[0]);
    close(fds_[1]);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Blocks until a signal (returns its number) or wake() (returns 0).
  int wait() const {
    unsigned char byte = 0;
    while (read(fds_[0], &byte, 1) < 0 && errno == EINTR) {
    }
    return byte;
  }
  // A second Ctrl-C while in-flight requests finish then kills at once.
  void default_from_now_on() const {
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
  }
  void wake() const {
    const unsigned char none = 0;
    [[maybe_unused]] const auto written = write(fds_[1], &none, 1);
  }

 private:
  int fds_[2] = {-1, -1};
  struct sigaction previous_int_ {};
  struct sigaction previous_term_ {};
};

// Raises this process's open-file limit to its hard limit (stock Debian's soft
// limit is 1024: a server would refuse clients past about a thousand). Returns
// the limit now in force.
rlim_t raise_open_file_limit() {
  struct rlimit limit {};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < limit.rlim_max) {
    struct rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) return raised.rlim_cur;
  }
  return limit.rlim_cur;
}

// The engine's max_model_len option when it declares one, else the model's.
// A value the user set is checked against the model; the engine's default is
// clamped to it. Either way the engine is told the value the server checks.
int64_t resolve_max_model_len(const ComponentEntry& engine, ConfigNode& options, const model::ModelConfig& config,
                              const std::string& config_path) {
  const int64_t model_limit = config.max_position_embeddings;
  const KeySpec* declared = nullptr;
  for (const auto& key : engine.keys) {
    if (key.name == "max_model_len") declared = &key;
  }
  if (!declared) return model_limit;
  if (options.has("max_model_len") && options["max_model_len"].as<int64_t>() > 0) {
    const auto requested = options["max_model_len"].as<int64_t>();
    if (requested > model_limit) {
      throw ConfigError("max_model_len=" + std::to_string(requested) + " is larger than max_position_embeddings=" +
                        std::to_string(model_limit) + " in " + config_path);
    }
    return requested;
  }
  // Not set, or set to 0 ("the model's", as infer-native reads it).
  int64_t value = model_limit;
  try {
    const int64_t engine_default = std::stoll(declared->default_value);
    if (engine_default > 0 && engine_default < model_limit) value = engine_default;
  } catch (const std::exception&) {
  }
  options.set("max_model_len", std::to_string(value), "rlcore serve");
  return value;
}

}  // namespace

int run_command_serve(const std::vector<std::string>& args, CommandIo io) {
  CommonArgs common;
  ServeArgs serve;
  po::options_description options(
      "rlcore serve --model DIR [options] [key=value ...]\n"
      "OpenAI/vLLM-compatible HTTP server (/v1/completions, /v1/models, /tokenize, /detokenize,\n"
      "/health, /version) over an inference_engine plugin. Positional key=value pairs are the\n"
      "engine's options (see `rlcore config --schema`)");
  add_common_options(options, common);
  options.add_options()("model", po::value(&serve.model_dir)->required(),
                        "checkpoint directory (config.json, "
                        "model.safetensors, tokenizer.json)")(
      "host", po::value(&serve.host), "address to bind (default 127.0.0.1; 0.0.0.0 for every interface)")(
      "port", po::value(&serve.port), "TCP port (default 8000; 0 picks a free one)")(
      "api-key", po::value(&serve.api_key), "require 'Authorization: Bearer KEY' (default: $RLCORE_API_KEY)")(
      "engine", po::value(&serve.engine), "inference_engine plugin name (default native)")(
      "served-model-name", po::value(&serve.served_model_name), "model id clients send (default: --model)")(
      "device", po::value(&serve.device), "auto | cpu | cuda | cuda:N (default cpu)")(
      "threads", po::value(&serve.threads), "intra-op threads of the engine's CPU kernels (default: every core)")(
      "request-timeout-s", po::value(&serve.request_timeout_s),
      "abort a completion still running after this many seconds and answer 504 (default 0: no deadline)")(
      "keep-alive-timeout-s", po::value(&serve.keep_alive_timeout_s),
      "close an idle keep-alive connection after this many seconds (default 5, as vLLM's uvicorn)")(
      "dev-mode", po::bool_switch(&serve.dev_mode),
      "also serve the routes RL trainers use on vLLM (VLLM_SERVER_DEV_MODE=1) and SGLang: sleep/wake_up, "
      "pause/resume, reload weights from disk, weight version (docs/serve.md)");
  if (std::find(args.begin(), args.end(), "--help") != args.end() ||
      std::find(args.begin(), args.end(), "-h") != args.end()) {
    io.out << options << "\nSee docs/serve.md for the routes and fields.\n";
    return 0;
  }
  std::vector<std::string> positional;
  parse_command_line(args, options, positional);
  apply_log_level(common.log_level);
  for (const auto& arg : positional) {
    if (arg.find('=') == std::string::npos) {
      throw ConfigError("rlcore serve: unexpected argument '" + arg + "'; engine options take the form key=value");
    }
  }
  if (serve.port < 0 || serve.port > 65535) {
    throw ConfigError("--port must be in [0, 65535], got " + std::to_string(serve.port));
  }
  if (serve.threads < 0) throw ConfigError("--threads must be >= 0, got " + std::to_string(serve.threads));
  if (!(serve.request_timeout_s >= 0)) {
    throw ConfigError("--request-timeout-s must be >= 0, got " + std::to_string(serve.request_timeout_s));
  }
  if (!(serve.keep_alive_timeout_s > 0)) {
    throw ConfigError("--keep-alive-timeout-s must be > 0, got " + std::to_string(serve.keep_alive_timeout_s));
  }
  if (serve.api_key.empty()) {
    if (const char* key = std::getenv("RLCORE_API_KEY")) serve.api_key = key;
  }
  // libtorch's own default here is one thread (measured: a 100m model decodes
  // 2x slower on 2 cores); the trainer's workers set theirs the same way.
  const int64_t threads = runtime::threads_for_worker(serve.threads, 1);
  at::set_num_threads(static_cast<int>(threads));
  // Before anything is loaded: a device this build or machine cannot give fails at once.
  const at::Device device = resolve_device(serve.device, 0, "--device");

  Session session(common.plugin_paths);
  const ComponentEntry& engine_entry = session.registry().get(InferenceEngine::kKind, serve.engine);
  const std::string config_path = serve.model_dir + "/config.json";
  const auto config = model::ModelConfig::from_file(config_path);
  ConfigNode engine_options;
  apply_overrides(engine_options, positional);
  const int64_t max_model_len = resolve_max_model_len(engine_entry, engine_options, config, config_path);

  // Loaded on a thread that ends, taking its OpenMP pool with it: the engine's
  // kernels then run on the request driver's thread alone (request_driver.h).
  std::shared_ptr<InferenceEngine> engine;
  std::exception_ptr failed;
  std::thread loader([&] {
    try {
      engine = session.registry().create<InferenceEngine>(serve.engine, engine_options,
                                                          ComponentContext{device.str(), serve.model_dir});
    } catch (...) {
      failed = std::current_exception();
    }
  });
  loader.join();
  if (failed) std::rethrow_exception(failed);
  auto api = std::make_shared<serve::OpenAiApi>(
      std::move(engine), serve::load_served_model(serve.model_dir, serve.served_model_name, max_model_len));
  serve::ServerOptions server_options{serve.api_key};
  server_options.request_timeout_s = serve.request_timeout_s;
  server_options.keep_alive_timeout_s = serve.keep_alive_timeout_s;
  const rlim_t open_files = raise_open_file_limit();
  if (serve.dev_mode) server_options.dev_mode = std::make_shared<serve::DevModeApi>(api, serve.model_dir);
  serve::Server server(api, server_options);
  const int port = server.bind(serve.host, serve.port);
  if (serve.api_key.empty() && serve.host != "127.0.0.1" && serve.host != "localhost") {
    spdlog::warn("rlcore serve: listening on {} without --api-key: anyone who can reach it can use the model",
                 serve.host);
  }
  io.out << "rlcore serve: model '" << api->model().name << "' (engine " << serve.engine << ", max_model_len "
         << max_model_len << ", " << threads << " threads, open files " << open_files << ") listening on http://"
         << serve.host << ":" << port << std::endl;
  if (open_files < kOpenFilesWanted) {
    io.out << "rlcore serve: the open-file limit is " << open_files << " (hard limit; `ulimit -Hn` raises it): about "
           << open_files - 32 << " clients at once can connect" << std::endl;
  }

  const StopSignals stop_signals;
  std::thread waiter([&] {
    const int received = stop_signals.wait();
    if (received == 0) return;  // woken after serve() ended on its own
    stop_signals.default_from_now_on();
    io.err << "rlcore serve: " << (received == SIGINT ? "SIGINT" : "SIGTERM")
           << ", stopping after the requests in flight" << std::endl;
    server.stop();
  });
  const bool clean = server.serve();
  stop_signals.wake();
  waiter.join();
  if (!clean) throw IoError("rlcore serve: the accept loop on " + serve.host + ":" + std::to_string(port) + " failed");
  io.out << "rlcore serve: stopped" << std::endl;
  return 0;
}

}  // namespace rlcore::cli
