// How every route of `rlcore serve` answers: a JSON body, or an error object
// for whatever the handler threw, so no request can take the server down.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "rlcore/core/serve/api.h"
#include "rlcore/core/serve/api_error.h"
#include "rlcore/core/serve/stream.h"
#include "rlcore/error.h"

namespace rlcore::serve {

// JSON text whatever the strings hold: a byte that is not UTF-8 (a prompt's,
// echoed back in a token string or an error message) becomes U+FFFD instead
// of making dump() throw.
inline std::string json_text(const nlohmann::json& body) {
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

inline ApiResponse ok(const nlohmann::json& body) { return {200, json_text(body)}; }

// Logs the failure (the server's fault) and answers 500. Out of line, so this
// header does not pull in spdlog: rlcore_use_system_fmt (CMake) gives the
// system fmt only to the files that include spdlog themselves.
ApiResponse internal_error(const char* route, const std::string& what);

// ApiError keeps its status; a full queue (OverloadedError) is 503; a
// ValueError from below (tokenizer, engine limits, a bad file) is the
// request's fault (400, as vLLM); anything else 500.
template <class Handle>
ApiResponse answer(const char* route, Handle&& handle) {
  try {
    return handle();
  } catch (const ApiError& e) {
    return {e.status(), json_text(error_body(e))};
  } catch (const OverloadedError& e) {
    return {503, error_text(503, "ServiceUnavailableError", e.what())};
  } catch (const ValueError& e) {
    return {400, error_text(400, "BadRequestError", e.what())};
  } catch (const std::exception& e) {
    return internal_error(route, e.what());
  }
}

// A streamed answer: `stream()` returns its events. vLLM has sent the
// stream's 200 and headers by the time generation runs, so a failure there
// (sorted as answer() sorts it) arrives as an error event and [DONE]; the
// request's own faults are found before, and get ordinary JSON errors.
template <class Stream>
ApiResponse answer_stream(const char* route, Stream&& stream) {
  ApiResponse response = answer(route, [&] { return ApiResponse{200, "", stream()}; });
  if (response.events.empty()) return ApiResponse{200, "", stream_error_events(response.body)};
  return response;
}

}  // namespace rlcore::serve
