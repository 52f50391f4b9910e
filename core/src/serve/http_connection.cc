// HttpConnection: reading, routing, answering and writing one client's
// requests on its strand (Boost.Beast parses, Boost.Asio moves the bytes).
#include "serve/http_connection.h"

#include <array>
#include <chrono>
#include <sstream>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/http/message.hpp>
#include <spdlog/spdlog.h>

#include "rlcore/core/serve/stream.h"

namespace rlcore::serve {
namespace {

namespace net = boost::asio;
namespace http = boost::beast::http;

constexpr std::size_t kHeaderLimit = 64 * 1024;

// Compares every byte so the time taken does not reveal how much of the key
// matched. `expected` is never empty (it starts with "Bearer ").
bool same_secret(const std::string& given, const std::string& expected) {
  unsigned char difference = given.size() == expected.size() ? 0 : 1;
  for (std::size_t i = 0; i < given.size(); ++i) {
    difference |= static_cast<unsigned char>(given[i] ^ expected[i % expected.size()]);
  }
  return difference == 0;
}

const char* error_type(int status) {
  switch (status) {
    case 401:
      return "AuthenticationError";
    case 404:
      return "NotFoundError";
    case 413:
      return "RequestTooLargeError";
    case 504:
      return "TimeoutError";
    default:
      return status >= 500 ? "InternalServerError" : "BadRequestError";
  }
}

ApiResponse error_answer(int status, const std::string& message) {
  return {status, error_text(status, error_type(status), message)};
}

std::string too_large(std::size_t limit) {
  return "Request body too large: the limit is " + std::to_string(limit) + " bytes.";
}

// The answer of a route, whatever it throws (the API's calls catch their own).
ApiResponse call_route(const Routes::Route& route, const HttpRequest& request) {
  try {
    return route.answer(request);
  } catch (const std::exception& e) {
    spdlog::error("{} {}: {}", request.method, request.path, e.what());
    return error_answer(500, e.what());
  }
}

// Posts `call(connection)` to the connection's strand while the server runs;
// false when the connection or the server is gone.
class ConnectionSink : public ResponseSink {
 public:
  ConnectionSink(std::weak_ptr<HttpConnection> connection, uint64_t serial, std::shared_ptr<ServerShared> shared)
      : connection_(std::move(connection)), serial_(serial), shared_(std::move(shared)) {}

  void reply(int status, std::string body) override {
    post([serial = serial_, status, body = std::move(body)](HttpConnection& c) mutable {
      c.sink_reply(serial, status, std::move(body));
    });
  }
  void event(std::string event) override {
    post([serial = serial_, event = std::move(event)](HttpConnection& c) mutable {
      c.sink_event(serial, std::move(event));
    });
  }
  void end_events() override {
    post([serial = serial_](HttpConnection& c) { c.sink_end(serial); });
  }
  void on_cancel(std::function<void()> cancel) override {
    auto shared_cancel = std::make_shared<std::function<void()>>(std::move(cancel));
    const bool posted = post(
        [serial = serial_, shared_cancel](HttpConnection& c) { c.sink_on_cancel(serial, std::move(*shared_cancel)); });
    if (!posted) (*shared_cancel)();  // nobody will read the answer
  }

 private:
  template <class Call>
  bool post(Call call) {
    std::lock_guard<std::mutex> lock(shared_->posting_mutex);
    if (!shared_->posting) return false;
    std::shared_ptr<HttpConnection> connection = connection_.lock();
    if (!connection) return false;
    auto executor = connection->executor();
    net::post(executor, [connection = std::move(connection), call = std::move(call)]() mutable { call(*connection); });
    return true;
  }

  std::weak_ptr<HttpConnection> connection_;
  uint64_t serial_;
  std::shared_ptr<ServerShared> shared_;
};

}  // namespace

HttpConnection::HttpConnection(net::ip::tcp::socket socket, std::shared_ptr<ServerShared> shared)
    : socket_(std::move(socket)),
      shared_(std::move(shared)),
      idle_timer_(socket_.get_executor()),
      deadline_timer_(socket_.get_executor()) {
  ++shared_->open_connections;
  boost::system::error_code ec;
  const auto endpoint = socket_.remote_endpoint(ec);
  if (!ec) remote_ = endpoint.address().to_string();
  socket_.set_option(net::ip::tcp::no_delay(true), ec);  // each streamed token leaves at once
}

HttpConnection::~HttpConnection() {
  if (--shared_->open_connections == 0 && shared_->stopping) {
    std::lock_guard<std::mutex> lock(shared_->posting_mutex);
    if (shared_->posting && shared_->on_last_closed) shared_->on_last_closed();
  }
}

void HttpConnection::start() {
  net::post(socket_.get_executor(), [self = shared_from_this()] { self->read_header(); });
}

void HttpConnection::close_when_idle() {
  net::post(socket_.get_executor(), [self = shared_from_this()] {
    if (!self->answering_ && self->out_.empty()) self->close();
  });
}

// ---- reading ----

void HttpConnection::read_header() {
  if (closed_ || reading_ || queued_) return;
  parser_.emplace();
  parser_->header_limit(kHeaderLimit);
  parser_->body_limit(shared_->options.max_body_bytes);
  reading_ = true;
  if (!answering_) arm_idle_timer();
  http::async_read_header(
      socket_, buffer_, *parser_,
      [self = shared_from_this()](boost::system::error_code ec, std::size_t) { self->on_header(ec); });
}

void HttpConnection::on_header(boost::system::error_code ec) {
  ++idle_generation_;
  idle_timer_.cancel();
  Incoming item;
  if (ec == http::error::body_limit) {  // a Content-Length over the limit
    reading_ = false;
    item.keep_alive = false;  // its body is unread
    item.request.method = std::string(parser_->get().method_string());
    item.request.path = std::string(parser_->get().target());
    item.fixed = error_answer(413, too_large(shared_->options.max_body_bytes));
    return incoming(std::move(item));
  }
  if (ec) return on_read_failed(ec);
  const auto& header = parser_->get();
  item.request.method = std::string(header.method_string());
  const std::string target(header.target());
  const std::size_t question = target.find('?');
  item.request.path = target.substr(0, question);
  if (question != std::string::npos) item.request.query = parse_query(target.substr(question + 1));
  item.version = header.version();
  const std::string& key = shared_->options.api_key;
  // Before the body is read, so an unauthenticated client cannot make the server read megabytes.
  if (!key.empty() && !same_secret(std::string(header[http::field::authorization]), "Bearer " + key)) {
    reading_ = false;
    item.keep_alive = false;  // its body is unread
    item.fixed = error_answer(401, "Unauthorized");
    return incoming(std::move(item));
  }
  if (header[http::field::expect] == "100-continue" && !answering_ && out_.empty()) {
    write("HTTP/1.1 100 Continue\r\n\r\n");
  }
  http::async_read(
      socket_, buffer_, *parser_,
      [self = shared_from_this(), item = std::move(item)](boost::system::error_code ec, std::size_t) mutable {
        self->reading_ = false;
        if (ec == http::error::body_limit) {
          item.keep_alive = false;
          item.fixed = error_answer(413, too_large(self->shared_->options.max_body_bytes));
          return self->incoming(std::move(item));
        }
        if (ec) return self->on_read_failed(ec);
        item.keep_alive = self->parser_->keep_alive();
        item.request.body = std::move(self->parser_->get().body());
        self->incoming(std::move(item));
      });
}

void HttpConnection::on_read_failed(boost::system::error_code ec) {
  reading_ = false;
  if (closed_) return;
  const bool malformed = ec.category() == http::make_error_code(http::error::bad_target).category() &&
                         ec != http::error::end_of_stream && ec != http::error::partial_message;
  if (answering_) {
    cancel_answer();  // the client has gone: nobody reads what its requests would give
    close();
    return;
  }
  if (malformed && out_.empty()) {
    Incoming item;
    item.keep_alive = false;
    item.request.method = "?";
    item.fixed = error_answer(400, std::string("Bad Request: ") + ec.message());
    return incoming(std::move(item));
  }
  close();
}

void HttpConnection::incoming(Incoming item) {
  if (answering_) {
    queued_ = std::move(item);  // answered after the one in flight; reading waits
    return;
  }
  const bool keep_alive = item.keep_alive;
  const bool routed = !item.fixed;
  dispatch(std::move(item));
  // A read stays pending while the answer runs: how a client that goes is noticed.
  if (keep_alive) {
    read_header();
  } else if (routed) {
    watch_for_hangup();
  }
}

void HttpConnection::watch_for_hangup() {
  if (closed_ || reading_) return;
  reading_ = true;
  auto scratch = std::make_shared<std::array<char, 4096>>();
  socket_.async_read_some(
      net::buffer(*scratch), [self = shared_from_this(), scratch](boost::system::error_code ec, std::size_t) {
        self->reading_ = false;
        if (!ec) return self->watch_for_hangup();  // bytes after "Connection: close" are not read as requests
        if (self->answering_ && !self->closed_) {
          self->cancel_answer();
          self->close();
        }
      });
}

// ---- answering ----

void HttpConnection::dispatch(Incoming item) {
  answering_ = true;
  owner_ = shared_from_this();
  const uint64_t serial = ++serial_;
  method_ = item.request.method;
  path_ = item.request.path;
  keep_alive_ = item.keep_alive;
  version_ = item.version;
  head_sent_ = false;
  cancel_ = nullptr;
  cancelled_ = false;
  if (item.fixed) return answer(serial, std::move(*item.fixed));
  const Routes::Route* route = shared_->routes->find(method_, path_);
  if (!route) return answer(serial, error_answer(404, "Not Found: " + method_ + " " + path_));
  if (route->kind == Routes::Kind::kGeneration && shared_->options.request_timeout_s > 0) {
    deadline_timer_.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(shared_->options.request_timeout_s)));
    deadline_timer_.async_wait([self = shared_from_this(), serial](boost::system::error_code ec) {
      if (!ec) self->on_deadline(serial);
    });
  }
  if (route->kind == Routes::Kind::kInline) return answer(serial, call_route(*route, item.request));
  auto& pool = route->kind == Routes::Kind::kGeneration ? *shared_->completions : *shared_->handlers;
  net::post(pool, [self = shared_from_this(), serial, route, request = std::move(item.request)] {
    ApiResponse response = call_route(*route, request);
    net::post(self->executor(),
              [self, serial, response = std::move(response)]() mutable { self->answer(serial, std::move(response)); });
  });
}

void HttpConnection::answer(uint64_t serial, ApiResponse response) {
  if (serial != serial_ || !answering_) {
    if (response.deferred) {  // answered meanwhile (its deadline): its requests are not wanted
      response.deferred(std::make_shared<ConnectionSink>(std::weak_ptr<HttpConnection>(), serial, shared_));
    }
    return;
  }
  if (response.deferred) return response.deferred(std::make_shared<ConnectionSink>(weak_from_this(), serial, shared_));
  if (response.events.empty()) return reply_whole(response.status, response.body);
  for (const std::string& event : response.events) stream_event(event);
  end_stream();
}

void HttpConnection::sink_reply(uint64_t serial, int status, std::string body) {
  if (serial == serial_ && answering_ && !head_sent_) reply_whole(status, body);
}

void HttpConnection::sink_event(uint64_t serial, std::string event) {
  if (serial == serial_ && answering_) stream_event(event);
}

void HttpConnection::sink_end(uint64_t serial) {
  if (serial == serial_ && answering_) end_stream();
}

void HttpConnection::sink_on_cancel(uint64_t serial, std::function<void()> cancel) {
  if (serial != serial_ || !answering_ || cancelled_ || closed_) return cancel();
  cancel_ = std::move(cancel);
}

void HttpConnection::cancel_answer() {
  cancelled_ = true;
  if (auto cancel = std::move(cancel_)) {
    cancel_ = nullptr;
    cancel();
  }
}

void HttpConnection::on_deadline(uint64_t serial) {
  if (serial != serial_ || !answering_ || closed_) return;
  cancel_answer();
  const double limit = shared_->options.request_timeout_s;
  std::ostringstream message;
  message << "The request ran past the server's request_timeout_s (" << limit << " s) and was aborted.";
  spdlog::warn("{} {} {}: {}", remote_, method_, path_, message.str());
  const ApiResponse timeout = error_answer(504, message.str());
  if (!head_sent_) return reply_whole(timeout.status, timeout.body);
  for (const std::string& event : stream_error_events(timeout.body)) stream_event(event);
  end_stream();
}

void HttpConnection::reply_whole(int status, const std::string& body) {
  http::response<http::string_body> response{static_cast<http::status>(status), version_};
  response.set(http::field::server, "rlcore");
  if (!body.empty()) response.set(http::field::content_type, "application/json");
  if (status == 503) response.set(http::field::retry_after, "1");
  response.keep_alive(keep_alive_ && !shared_->stopping);
  response.body() = body;
  response.prepare_payload();
  std::ostringstream bytes;
  bytes << response;
  status_ = status;
  head_sent_ = true;
  write(bytes.str());
  finish_answer();
}

void HttpConnection::start_stream() {
  http::response<http::empty_body> response{http::status::ok, version_};
  response.set(http::field::server, "rlcore");
  response.set(http::field::content_type, "text/event-stream");
  chunked_ = version_ >= 11;  // HTTP/1.0 has no chunks: the stream ends with the connection
  if (chunked_) {
    response.chunked(true);
    response.keep_alive(keep_alive_ && !shared_->stopping);
  } else {
    keep_alive_ = false;
    response.keep_alive(false);
  }
  std::ostringstream head;
  head << response.base();
  status_ = 200;
  head_sent_ = true;
  write(head.str());
}

void HttpConnection::stream_event(const std::string& event) {
  if (!head_sent_) start_stream();
  if (event.empty()) return;  // an empty chunk would end the stream
  if (!chunked_) return write(event);
  std::ostringstream size;
  size << std::hex << event.size() << "\r\n";
  write(size.str() + event + "\r\n");
}

void HttpConnection::end_stream() {
  if (!head_sent_) start_stream();
  if (chunked_) write("0\r\n\r\n");
  finish_answer();
}

void HttpConnection::finish_answer() {
  answering_ = false;
  auto self = std::move(owner_);  // released when this returns
  deadline_timer_.cancel();
  cancel_ = nullptr;
  spdlog::info("{} {} {} {}", remote_, method_, path_, status_);
  if (!keep_alive_ || shared_->stopping) {
    close_after_write_ = true;
    if (out_.empty() && !writing_) drain_and_close();
    return;
  }
  if (queued_) {
    Incoming next = std::move(*queued_);
    queued_.reset();
    return incoming(std::move(next));
  }
  if (reading_) {
    arm_idle_timer();  // the read ahead now waits for a next request
  } else {
    read_header();
  }
}

// ---- the socket ----

void HttpConnection::arm_idle_timer() {
  const uint64_t generation = ++idle_generation_;
  idle_timer_.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(shared_->options.keep_alive_timeout_s)));
  idle_timer_.async_wait([self = shared_from_this(), generation](boost::system::error_code ec) {
    if (!ec && generation == self->idle_generation_ && !self->answering_) self->close();
  });
}

void HttpConnection::write(std::string bytes) {
  if (closed_) return;
  out_.push_back(std::move(bytes));
  if (!writing_) write_next();
}

void HttpConnection::write_next() {
  if (out_.size() > 1) {  // one write for everything queued
    std::string joined;
    for (const std::string& part : out_) joined += part;
    out_.assign(1, std::move(joined));
  }
  writing_ = true;
  net::async_write(socket_, net::buffer(out_.front()),
                   [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
                     self->writing_ = false;
                     if (self->closed_) return;
                     if (ec) {
                       if (self->answering_) self->cancel_answer();
                       self->close();
                       return;
                     }
                     self->out_.pop_front();
                     if (!self->out_.empty()) return self->write_next();
                     if (self->close_after_write_) self->drain_and_close();
                   });
}

void HttpConnection::drain_and_close() {
  // Closing with unread bytes (a refused body) makes the kernel reset the
  // connection, which can destroy the answer before the client reads it: stop
  // sending, read what the client still sends for a moment, then close.
  if (closed_) return;
  if (reading_) return close();  // a read ahead is pending: nothing was refused unread
  boost::system::error_code ignored;
  socket_.shutdown(net::ip::tcp::socket::shutdown_send, ignored);
  ++idle_generation_;
  idle_timer_.expires_after(std::chrono::seconds(2));
  idle_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (!ec) self->close();
  });
  drain();
}

void HttpConnection::drain() {
  auto scratch = std::make_shared<std::array<char, 16 * 1024>>();
  socket_.async_read_some(net::buffer(*scratch),
                          [self = shared_from_this(), scratch](boost::system::error_code ec, std::size_t) {
                            if (ec) return self->close();
                            self->drain();
                          });
}

void HttpConnection::close() {
  if (closed_) return;
  closed_ = true;
  auto self = std::move(owner_);
  if (!writing_) out_.clear();  // else the write in flight still reads its buffer
  idle_timer_.cancel();
  deadline_timer_.cancel();
  boost::system::error_code ignored;
  socket_.shutdown(net::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
}

}  // namespace rlcore::serve
