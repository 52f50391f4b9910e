// One client connection of `rlcore serve` on the event-driven server: every
// handler of a connection runs on its strand, so no thread waits on a client.
// Requests are read (pipelined ones one ahead), routed, and answered in
// order; while an answer is in flight a read stays pending, so a client that
// goes away is noticed at once and its answer cancelled (the engine's
// requests aborted). Answers produced later arrive through a ResponseSink.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "rlcore/core/serve/api.h"
#include "rlcore/core/serve/server.h"
#include "serve/routes.h"

namespace rlcore::serve {

// What the connections of one server share. Sinks post to a connection only
// while `posting` holds, so nothing is posted to an io_context being torn down.
struct ServerShared {
  const Routes* routes = nullptr;
  ServerOptions options;
  // Completions, which a paused server holds (vLLM's /pause?mode=keep), and
  // every other call that may wait: apart, so /resume never queues behind
  // the completions it would release.
  boost::asio::thread_pool* completions = nullptr;
  boost::asio::thread_pool* handlers = nullptr;
  std::mutex posting_mutex;
  bool posting = true;
  std::atomic<bool> stopping{false};
  std::atomic<int64_t> open_connections{0};
  std::function<void()> on_last_closed;  // while stopping; called with posting_mutex held
};

class HttpConnection : public std::enable_shared_from_this<HttpConnection> {
 public:
  HttpConnection(boost::asio::ip::tcp::socket socket, std::shared_ptr<ServerShared> shared);
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  void start();
  // Server stopping: closes now if no answer is in flight, else after it.
  void close_when_idle();
  // The server is gone (no I/O thread runs): lets go of the answer in flight.
  void abandon() { owner_.reset(); }

  // The ResponseSink's calls, on the strand; `serial` names the answer, and
  // calls for an answer already ended (a deadline answered it) do nothing.
  void sink_reply(uint64_t serial, int status, std::string body);
  void sink_event(uint64_t serial, std::string event);
  void sink_end(uint64_t serial);
  void sink_on_cancel(uint64_t serial, std::function<void()> cancel);
  boost::asio::any_io_executor executor() { return socket_.get_executor(); }

 private:
  struct Incoming {
    HttpRequest request;
    bool keep_alive = true;
    unsigned version = 11;
    std::optional<ApiResponse> fixed;  // answered without a route (401, 413, 400)
  };

  void read_header();
  void on_header(boost::system::error_code ec);
  void on_body(boost::system::error_code ec);
  void on_read_failed(boost::system::error_code ec);
  void incoming(Incoming item);
  void watch_for_hangup();
  void dispatch(Incoming item);
  void answer(uint64_t serial, ApiResponse response);
  void on_deadline(uint64_t serial);
  void cancel_answer();

  void reply_whole(int status, const std::string& body);
  void start_stream();
  void stream_event(const std::string& event);
  void end_stream();
  void finish_answer();

  void arm_idle_timer();
  void write(std::string bytes);
  void write_next();
  void drain_and_close();
  void drain();
  void close();

  boost::asio::ip::tcp::socket socket_;
  std::shared_ptr<ServerShared> shared_;
  std::string remote_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  bool reading_ = false;
  std::optional<Incoming> queued_;  // a pipelined request, read while the one before is answered
  boost::asio::steady_timer idle_timer_;
  uint64_t idle_generation_ = 0;
  boost::asio::steady_timer deadline_timer_;

  // The answer in flight, and the connection's hold on itself while it runs:
  // a deferred answer reaches it only through a weak pointer.
  bool answering_ = false;
  std::shared_ptr<HttpConnection> owner_;
  uint64_t serial_ = 0;
  std::string method_, path_;
  bool keep_alive_ = true;
  unsigned version_ = 11;
  bool head_sent_ = false;
  bool chunked_ = true;
  int status_ = 0;
  std::function<void()> cancel_;
  bool cancelled_ = false;

  std::deque<std::string> out_;
  bool writing_ = false;
  bool close_after_write_ = false;
  bool closed_ = false;
};

}  // namespace rlcore::serve
