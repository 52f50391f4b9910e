// `rlcore serve` over the real stack: the infer-native plugin loaded from the
// build tree, a tiny random checkpoint written by `model init`'s code, the
// server in-process and as the rlcore binary stopped by SIGTERM.
#include "serve_testing.h"
#include "../../common/reference_python.h"

#ifdef RLCORE_HAVE_INFER_NATIVE

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include <httplib.h>

#include <nlohmann/json.hpp>

#include "rlcore/core/checkpoint_init.h"
#include "rlcore/core/cli/cli.h"
#include "rlcore/core/serve/api.h"
#include "rlcore/core/serve/server.h"
#include "rlcore/core/session.h"
#include "../../common/test_paths.h"

extern char** environ;

using namespace rlcore::serve;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kMaxModelLen = 96;

// A tiny llama checkpoint, written once for the whole test binary.
const std::string& checkpoint_dir() {
  static const std::string dir = [] {
    const fs::path path = fs::temp_directory_path() / ("rlcore_serve_e2e_" + std::to_string(::getpid()));
    rlcore::ModelInitOptions options;
    options.arch = "llama";
    options.size = "tiny";
    options.out = path;
    options.seed = 7;
    options.force = true;
    rlcore::init_random_checkpoint(options);
    std::atexit([] {
      std::error_code ignored;
      fs::remove_all(fs::temp_directory_path() / ("rlcore_serve_e2e_" + std::to_string(::getpid())), ignored);
    });
    return path.string();
  }();
  return dir;
}

// The native engine made through the registry, as the command does.
class NativeServer {
 public:
  NativeServer() : session_(std::vector<std::string>{}) {
    rlcore::ConfigNode options;
    rlcore::apply_overrides(options, {"max_model_len=" + std::to_string(kMaxModelLen), "max_num_seqs=4"});
    auto engine = session_.registry().create<rlcore::InferenceEngine>(
        "native", options, rlcore::ComponentContext{"cpu", checkpoint_dir()});
    api_ =
        std::make_shared<OpenAiApi>(std::move(engine), load_served_model(checkpoint_dir(), "tiny-llama", kMaxModelLen));
    server_ = std::make_unique<Server>(api_);
    port_ = server_->bind("127.0.0.1", 0);
    thread_ = std::thread([this] { server_->serve(); });
  }
  ~NativeServer() {
    server_->stop();
    thread_.join();
  }

  json post(const std::string& path, const json& body, int expected_status = 200) {
    httplib::Client client("127.0.0.1", port_);
    client.set_read_timeout(120, 0);
    auto result = client.Post(path.c_str(), body.dump(), "application/json");
    REQUIRE(result);
    INFO(result->body);
    REQUIRE(result->status == expected_status);
    return json::parse(result->body);
  }

  const ServedModel& model() const { return api_->model(); }
  int port() const { return port_; }

 private:
  rlcore::Session session_;
  std::shared_ptr<OpenAiApi> api_;
  std::unique_ptr<Server> server_;
  int port_ = 0;
  std::thread thread_;
};

std::vector<int32_t> ids_of(const json& value) { return value.get<std::vector<int32_t>>(); }

}  // namespace

TEST_CASE("native engine: greedy completions are deterministic and well formed", "[serve][native]") {
  NativeServer server;
  const json request = {{"prompt", "Question: 1 + 2"}, {"max_tokens", 6}, {"temperature", 0},
                        {"ignore_eos", true},          {"logprobs", 0},   {"return_token_ids", true}};
  const json first = server.post("/v1/completions", request);
  const json second = server.post("/v1/completions", request);
  REQUIRE(first["choices"].size() == 1);
  const json& choice = first["choices"][0];
  CHECK(choice["finish_reason"] == "length");
  CHECK(choice["token_ids"].size() == 6);
  CHECK(choice["token_ids"] == second["choices"][0]["token_ids"]);
  CHECK(choice["text"] == second["choices"][0]["text"]);
  CHECK(choice["logprobs"]["tokens"].size() == 6);
  CHECK(choice["logprobs"]["token_logprobs"].size() == 6);
  for (const auto& logprob : choice["logprobs"]["token_logprobs"]) CHECK(logprob.get<double>() <= 0.0);
  const auto prompt_ids = server.model().tokenizer.encode("Question: 1 + 2");
  CHECK(ids_of(choice["prompt_token_ids"]) == prompt_ids);
  CHECK(first["usage"]["prompt_tokens"] == prompt_ids.size());
  CHECK(first["usage"]["completion_tokens"] == 6);

  // The same prompt as token ids (from /tokenize) gives the same greedy answer.
  const json tokens = server.post("/tokenize", {{"prompt", "Question: 1 + 2"}});
  json by_ids = request;
  by_ids["prompt"] = tokens["tokens"];
  CHECK(server.post("/v1/completions", by_ids)["choices"][0]["token_ids"] == choice["token_ids"]);

  // Stopping on the first greedy token: one token, stop_reason names it, the text leaves it out.
  const int32_t first_token = choice["token_ids"][0];
  json stop = request;
  stop["stop_token_ids"] = {first_token};
  const json stopped = server.post("/v1/completions", stop)["choices"][0];
  CHECK(stopped["finish_reason"] == "stop");
  CHECK(stopped["stop_reason"] == first_token);
  CHECK(ids_of(stopped["token_ids"]) == std::vector<int32_t>{first_token});
  CHECK(stopped["text"] == "");
}

TEST_CASE("the openai client gets the same seeded answer whole and streamed", "[serve][native][openai]") {
  NativeServer server;
  const json answers =
      json::parse(rlcore_test::run_reference(rlcore_test::reference_script("core/serve/reference/openai_client.py"),
                                             {std::to_string(server.port()), "tiny-llama"}));
  INFO(answers.dump(2));
  CHECK(answers["models"] == json::array({"tiny-llama"}));
  REQUIRE(answers["whole"].size() == 4);
  CHECK(answers["stream"] == answers["whole"]);
  CHECK(answers["stream_usage"] == answers["whole_usage"]);
  CHECK(answers["chunks"].get<int64_t>() == answers["whole_usage"]["completion_tokens"].get<int64_t>() + 1);
  std::string all_text;
  for (const json& choice : answers["whole"]) all_text += choice["text"].get<std::string>();
  CHECK_FALSE(all_text.empty());
}

TEST_CASE("the openai client chats through the checkpoint's template, whole and streamed", "[serve][native][openai]") {
  NativeServer server;
  const json answers = json::parse(
      rlcore_test::run_reference(rlcore_test::reference_script("core/serve/reference/openai_chat_client.py"),
                                 {std::to_string(server.port()), "tiny-llama", checkpoint_dir()}));
  INFO(answers.dump(2));
  REQUIRE(answers["whole"].size() == 2);
  CHECK(answers["stream"] == answers["whole"]);
  CHECK(answers["stream_usage"] == answers["whole_usage"]);
  CHECK(answers["roles"] == json::array({"assistant", "assistant"}));
  CHECK(answers["whole_roles"] == json::array({"assistant", "assistant"}));
  // /tokenize with messages renders the checkpoint's template exactly as transformers does.
  CHECK(answers["tokenize_ids"] == answers["transformers_ids"]);
  CHECK(answers["whole_usage"]["prompt_tokens"] == answers["tokenize_ids"].size());
}

TEST_CASE("native engine: the most likely tokens, echo and the prompt's log-probs", "[serve][native][logprobs]") {
  NativeServer server;
  const std::vector<int32_t> prompt = server.model().tokenizer.encode("Question: 1 + 2");
  const json request = {{"prompt", "Question: 1 + 2"}, {"max_tokens", 4}, {"temperature", 0},
                        {"ignore_eos", true},          {"logprobs", 3},   {"echo", true},
                        {"prompt_logprobs", 2}};
  const json choice = server.post("/v1/completions", request)["choices"][0];
  CHECK(choice["text"].get<std::string>().rfind("Question: 1 + 2", 0) == 0);
  const json& logprobs = choice["logprobs"];
  REQUIRE(logprobs["tokens"].size() == prompt.size() + 4);
  CHECK(logprobs["token_logprobs"][0].is_null());
  CHECK(logprobs["top_logprobs"][0].is_null());
  const json& prompt_logprobs = choice["prompt_logprobs"];
  REQUIRE(prompt_logprobs.size() == prompt.size());
  CHECK(prompt_logprobs[0].is_null());
  for (std::size_t t = 1; t < logprobs["tokens"].size(); ++t) {
    INFO("token " << t);
    const double logprob = logprobs["token_logprobs"][t];
    const json& top = logprobs["top_logprobs"][t];
    CHECK(top.size() >= 3);
    CHECK(top.size() <= 4);  // the token itself, when not among the 3 most likely
    CHECK(top[logprobs["tokens"][t].get<std::string>()] == logprob);
    double best = -1e9;
    for (const auto& [token, value] : top.items()) best = std::max(best, value.get<double>());
    if (t >= prompt.size()) {
      CHECK(logprob == best);  // greedy: the sampled token is the most likely
    } else {
      // The prompt's tokens, as echo and as prompt_logprobs, agree.
      const json& entry = prompt_logprobs[t][std::to_string(prompt[t])];
      CHECK(entry["logprob"] == logprob);
      CHECK(entry["rank"].get<int64_t>() >= 1);
      CHECK(prompt_logprobs[t].size() >= 2);
    }
  }

  // Streamed: each chunk carries its token's most likely tokens, as the whole answer does.
  json streamed = {{"prompt", "Question: 1 + 2"}, {"max_tokens", 4}, {"temperature", 0},
                   {"ignore_eos", true},          {"logprobs", 3},   {"stream", true}};
  httplib::Client client("127.0.0.1", server.port());
  auto result = client.Post("/v1/completions", streamed.dump(), "application/json");
  REQUIRE(result);
  REQUIRE(result->status == 200);
  std::vector<json> chunks;
  std::istringstream lines(result->body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("data: {", 0) == 0) chunks.push_back(json::parse(line.substr(6)));
  }
  REQUIRE(chunks.size() == 4);
  for (std::size_t t = 0; t < 4; ++t) {
    CHECK(chunks[t]["choices"][0]["logprobs"]["top_logprobs"][0] == logprobs["top_logprobs"][prompt.size() + t]);
  }

  // Chat: top_logprobs lists the sampled token first, then the others, 3 in all.
  const json chat = server.post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                                         {"max_tokens", 3},
                                                         {"temperature", 0},
                                                         {"logprobs", true},
                                                         {"top_logprobs", 3},
                                                         {"prompt_logprobs", 1}});
  const json& content = chat["choices"][0]["logprobs"]["content"];
  REQUIRE(content.size() >= 1);
  for (const json& token : content) {
    REQUIRE(token["top_logprobs"].size() == 3);
    CHECK(token["top_logprobs"][0]["token"] == token["token"]);
    CHECK(token["top_logprobs"][0]["logprob"] == token["logprob"]);
    CHECK(token["top_logprobs"][1]["logprob"].get<double>() >= token["top_logprobs"][2]["logprob"].get<double>());
  }
  CHECK(chat["prompt_logprobs"].size() == chat["usage"]["prompt_tokens"].get<std::size_t>());
}

TEST_CASE("native engine: n samples per prompt come back prompt-major and seeded", "[serve][native]") {
  NativeServer server;
  const json request = {{"prompt", {{5, 6, 7}, {8, 9}}},
                        {"n", 3},
                        {"max_tokens", 4},
                        {"temperature", 1.0},
                        {"seed", 1234},
                        {"ignore_eos", true},
                        {"return_token_ids", true}};
  const json response = server.post("/v1/completions", request);
  REQUIRE(response["choices"].size() == 6);
  for (std::size_t k = 0; k < 6; ++k) {
    const json& choice = response["choices"][k];
    CHECK(choice["index"] == k);
    CHECK(ids_of(choice["prompt_token_ids"]) == (k < 3 ? std::vector<int32_t>{5, 6, 7} : std::vector<int32_t>{8, 9}));
    CHECK(choice["token_ids"].size() == 4);
  }
  CHECK(response["usage"]["prompt_tokens"] == 5);
  CHECK(response["usage"]["completion_tokens"] == 24);
  const json again = server.post("/v1/completions", request);
  for (std::size_t k = 0; k < 6; ++k) CHECK(again["choices"][k]["token_ids"] == response["choices"][k]["token_ids"]);
}

TEST_CASE("native engine: limits come from the served model", "[serve][native]") {
  NativeServer server;
  const json too_long = server.post("/v1/completions", {{"prompt", std::vector<int>(90, 5)}, {"max_tokens", 10}}, 400);
  CHECK(too_long["message"] ==
        "'max_tokens' or 'max_completion_tokens' is too large: 10. This model's maximum context length is 96 tokens "
        "and your request has 90 input tokens (10 > 96 - 90).");
  const json vocab = server.post("/v1/completions", {{"prompt", {server.model().vocab_size}}}, 400);
  CHECK(vocab["message"] == "Token id " + std::to_string(server.model().vocab_size) + " is out of vocabulary");
}

namespace {

// The rlcore binary as a child process with its stdout on a pipe.
class Child {
 public:
  explicit Child(std::vector<std::string> args) {
    int fds[2];
    REQUIRE(pipe2(fds, O_CLOEXEC) == 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    std::vector<char*> argv;
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    REQUIRE(posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ) == 0);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    out_ = fds[0];
  }
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(out_);
  }

  // Reads stdout until `marker` shows up or the child closes it; a 120 s
  // deadline keeps a broken server from hanging the test.
  std::string read_until(const std::string& marker) {
    char buffer[4096];
    while (output_.find(marker) == std::string::npos) {
      pollfd poll_fd{out_, POLLIN, 0};
      if (poll(&poll_fd, 1, 120000) <= 0) break;
      const ssize_t got = read(out_, buffer, sizeof(buffer));
      if (got <= 0) break;
      output_.append(buffer, static_cast<std::size_t>(got));
    }
    return output_;
  }

  // Sends `signal` and returns the exit status.
  int stop(int signal) {
    kill(pid_, signal);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  std::string output_;
};

}  // namespace

TEST_CASE("the rlcore serve command answers with auth and stops cleanly on SIGTERM", "[serve][native][cli]") {
  // max_model_len=0 is infer-native's "the model's": the server must then use 2048 too.
  Child child({rlcore_test::rlcore_executable(), "serve", "--model", checkpoint_dir(), "--port", "0", "--api-key",
               "k3y", "--served-model-name", "tiny-llama", "--plugins", rlcore_test::plugin_build_dir(),
               "max_num_seqs=8", "max_model_len=0", "--threads", "1", "--log-level", "warn"});
  const std::string banner = child.read_until("\n");
  REQUIRE_THAT(banner, Catch::Contains("listening on http://127.0.0.1:"));
  CHECK_THAT(banner, Catch::Contains("model 'tiny-llama' (engine native, max_model_len 2048, 1 threads, open files "));
  const int port = std::stoi(banner.substr(banner.rfind(':') + 1));

  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(120, 0);
  auto denied = client.Get("/v1/models");
  REQUIRE(denied);
  CHECK(denied->status == 401);

  client.set_bearer_token_auth("k3y");
  auto models = client.Get("/v1/models");
  REQUIRE(models);
  CHECK(models->status == 200);
  CHECK(json::parse(models->body)["data"][0]["max_model_len"] == 2048);
  auto completion = client.Post("/v1/completions", R"({"model": "tiny-llama", "prompt": "Hi", "max_tokens": 3,
                                                       "ignore_eos": true})",
                                "application/json");
  REQUIRE(completion);
  CHECK(completion->status == 200);
  CHECK(json::parse(completion->body)["usage"]["completion_tokens"] == 3);

  CHECK(child.stop(SIGTERM) == 0);
  CHECK_THAT(child.read_until("rlcore serve: stopped"), Catch::Contains("rlcore serve: stopped"));
}

TEST_CASE("rlcore serve reports bad arguments before binding anything", "[serve][native][cli]") {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"serve", "--model", checkpoint_dir(), "--port", "0", "max_model_len=4096"},
       "max_model_len=4096 is larger than max_position_embeddings=2048 in " + checkpoint_dir() + "/config.json"},
      {{"serve", "--model", checkpoint_dir(), "--engine", "nonexistent"},
       "no inference_engine named 'nonexistent' is registered"},
      {{"serve", "--model", checkpoint_dir(), "stray"},
       "rlcore serve: unexpected argument 'stray'; engine options take the form key=value"},
      {{"serve", "--model", checkpoint_dir(), "--port", "70000"}, "--port must be in [0, 65535], got 70000"},
      {{"serve", "--model", checkpoint_dir(), "--threads", "-2"}, "--threads must be >= 0, got -2"},
      {{"serve", "--port", "0"}, "the option '--model' is required but missing"},
      {{"serve", "--model", checkpoint_dir() + "/missing", "--port", "0"},
       "cannot read model config '" + checkpoint_dir() + "/missing/config.json'"},
  };
  std::istringstream in;
  std::ostringstream help_out, help_err;
  CHECK(rlcore::cli::run_cli({"serve", "--help"}, in, help_out, help_err) == 0);
  CHECK_THAT(help_out.str(), Catch::Contains("--served-model-name"));
  for (const auto& c : cases) {
    INFO(c.message);
    std::ostringstream out, err;
    CHECK(rlcore::cli::run_cli(c.args, in, out, err) == 1);
    CHECK_THAT(err.str(), Catch::Contains(c.message));
    CHECK_THAT(out.str(), !Catch::Contains("listening"));
  }
}

#endif  // RLCORE_HAVE_INFER_NATIVE
