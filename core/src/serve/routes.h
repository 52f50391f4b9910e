// The route table of `rlcore serve`: method and path to the OpenAiApi or
// DevModeApi call that answers it. The HTTP side parses and frames; this
// decides which call runs and whether it may block (run off the I/O threads).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rlcore/core/serve/api.h"
#include "rlcore/core/serve/dev_mode.h"

namespace rlcore::serve {

struct HttpRequest {
  std::string method;
  std::string path;                               // without the query
  std::multimap<std::string, std::string> query;  // decoded, in order
  std::string body;
};

// "a=1&b=x%20y&b=z" -> {a: 1, b: "x y", b: z}; '+' is a space, as in forms.
std::multimap<std::string, std::string> parse_query(const std::string& query);

class Routes {
 public:
  Routes(std::shared_ptr<OpenAiApi> api, std::shared_ptr<DevModeApi> dev_mode);

  // kInline: answered on the I/O thread at once; kBlocking: may wait (a
  // paused gate, a reload, a generation on an engine that does not run
  // requests), so it runs on the handler pool; kGeneration: a blocking route
  // that generates, which the server's request_timeout_s bounds.
  enum class Kind { kInline, kBlocking, kGeneration };
  struct Route {
    Kind kind = Kind::kBlocking;
    std::function<ApiResponse(const HttpRequest&)> answer;
  };
  // nullptr: no such route (404).
  const Route* find(const std::string& method, const std::string& path) const;

 private:
  void add(const std::string& method, const std::string& path, Kind kind,
           std::function<ApiResponse(const HttpRequest&)> answer);
  void add_dev_routes(DevModeApi& dev);

  std::shared_ptr<OpenAiApi> api_;
  std::shared_ptr<DevModeApi> dev_mode_;
  std::map<std::pair<std::string, std::string>, Route> routes_;
};

}  // namespace rlcore::serve
