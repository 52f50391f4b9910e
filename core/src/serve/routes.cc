// Every route of `rlcore serve` and the query strings of the dev-mode ones.
#include "serve/routes.h"

#include <cctype>

namespace rlcore::serve {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decode(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
      out += ' ';
    } else if (text[i] == '%' && i + 2 < text.size() && hex_value(text[i + 1]) >= 0 && hex_value(text[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(text[i + 1]) * 16 + hex_value(text[i + 2]));
      i += 2;
    } else {
      out += text[i];  // a stray '%' stays, as Python's unquote leaves it
    }
  }
  return out;
}

std::string query_value(const HttpRequest& req, const std::string& key, const std::string& fallback) {
  const auto it = req.query.find(key);
  return it == req.query.end() ? fallback : it->second;
}

}  // namespace

std::multimap<std::string, std::string> parse_query(const std::string& query) {
  std::multimap<std::string, std::string> fields;
  std::size_t start = 0;
  while (start <= query.size()) {
    std::size_t end = query.find('&', start);
    if (end == std::string::npos) end = query.size();
    const std::string pair = query.substr(start, end - start);
    if (!pair.empty()) {
      const std::size_t equals = pair.find('=');
      if (equals == std::string::npos) {
        fields.emplace(percent_decode(pair), "");
      } else {
        fields.emplace(percent_decode(pair.substr(0, equals)), percent_decode(pair.substr(equals + 1)));
      }
    }
    start = end + 1;
  }
  return fields;
}

Routes::Routes(std::shared_ptr<OpenAiApi> api, std::shared_ptr<DevModeApi> dev_mode)
    : api_(std::move(api)), dev_mode_(std::move(dev_mode)) {
  OpenAiApi& openai = *api_;
  add("POST", "/v1/completions", Kind::kGeneration,
      [&openai](const HttpRequest& req) { return openai.completions(req.body); });
  add("POST", "/v1/chat/completions", Kind::kGeneration,
      [&openai](const HttpRequest& req) { return openai.chat_completions(req.body); });
  add("GET", "/v1/models", Kind::kInline, [&openai](const HttpRequest&) { return openai.models(); });
  add("GET", "/health", Kind::kInline, [](const HttpRequest&) { return ApiResponse{200, ""}; });
  add("GET", "/version", Kind::kInline, [&openai](const HttpRequest&) { return openai.version(); });
  add("POST", "/tokenize", Kind::kBlocking, [&openai](const HttpRequest& req) { return openai.tokenize(req.body); });
  add("POST", "/detokenize", Kind::kBlocking,
      [&openai](const HttpRequest& req) { return openai.detokenize(req.body); });
  if (dev_mode_) add_dev_routes(*dev_mode_);
}

void Routes::add_dev_routes(DevModeApi& dev) {
  // vLLM (VLLM_SERVER_DEV_MODE=1).
  add("POST", "/sleep", Kind::kBlocking,
      [&dev](const HttpRequest& req) { return dev.sleep(query_value(req, "level", "1")); });
  add("POST", "/wake_up", Kind::kBlocking, [&dev](const HttpRequest& req) {
    std::vector<std::string> tags;
    const auto [first, last] = req.query.equal_range("tags");
    for (auto it = first; it != last; ++it) tags.push_back(it->second);
    return dev.wake_up(tags);
  });
  add("GET", "/is_sleeping", Kind::kInline, [&dev](const HttpRequest&) { return dev.is_sleeping(); });
  add("POST", "/reset_prefix_cache", Kind::kBlocking, [&dev](const HttpRequest&) { return dev.reset_prefix_cache(); });
  add("POST", "/pause", Kind::kBlocking, [&dev](const HttpRequest& req) {
    return dev.pause(query_value(req, "mode", "abort"), query_value(req, "clear_cache", "true"));
  });
  add("POST", "/resume", Kind::kBlocking, [&dev](const HttpRequest&) { return dev.resume(); });
  add("GET", "/is_paused", Kind::kInline, [&dev](const HttpRequest&) { return dev.is_paused(); });
  add("POST", "/collective_rpc", Kind::kBlocking,
      [&dev](const HttpRequest& req) { return dev.collective_rpc(req.body); });
  add("POST", "/update_weight_version", Kind::kBlocking,
      [&dev](const HttpRequest& req) { return dev.update_weight_version(req.body); });
  add("GET", "/weight_info", Kind::kInline, [&dev](const HttpRequest&) { return dev.weight_info(); });
  // SGLang.
  add("POST", "/abort_request", Kind::kBlocking,
      [&dev](const HttpRequest& req) { return dev.abort_request(req.body); });
  add("POST", "/update_weights_from_disk", Kind::kBlocking,
      [&dev](const HttpRequest& req) { return dev.update_weights_from_disk(req.body); });
  add("POST", "/release_memory_occupation", Kind::kBlocking,
      [&dev](const HttpRequest& req) { return dev.release_memory_occupation(req.body); });
  add("POST", "/resume_memory_occupation", Kind::kBlocking,
      [&dev](const HttpRequest& req) { return dev.resume_memory_occupation(req.body); });
  for (const char* route : {"/model_info", "/get_model_info"}) {
    add("GET", route, Kind::kInline, [&dev](const HttpRequest&) { return dev.model_info(); });
  }
  // SGLang answers text; nothing to flush here either way.
  for (const char* method : {"GET", "POST"}) {
    add(method, "/flush_cache", Kind::kBlocking, [&dev](const HttpRequest&) { return dev.reset_prefix_cache(); });
  }
}

void Routes::add(const std::string& method, const std::string& path, Kind kind,
                 std::function<ApiResponse(const HttpRequest&)> answer) {
  routes_[{method, path}] = Route{kind, std::move(answer)};
}

const Routes::Route* Routes::find(const std::string& method, const std::string& path) const {
  const auto it = routes_.find({method, path});
  return it == routes_.end() ? nullptr : &it->second;
}

}  // namespace rlcore::serve
