// The event loop of `rlcore serve`: an acceptor and the I/O threads that run
// every connection (http_connection.h), a handler pool for calls that may
// wait, and the stop that lets the answers in flight finish.
#include "rlcore/core/serve/server.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <spdlog/spdlog.h>

#include "rlcore/error.h"
#include "serve/http_connection.h"
#include "serve/routes.h"

namespace rlcore::serve {

namespace net = boost::asio;
using tcp = net::ip::tcp;

struct Server::Impl {
  Impl(std::shared_ptr<OpenAiApi> openai, ServerOptions server_options)
      : api(std::move(openai)),
        options(std::move(server_options)),
        routes(api, options.dev_mode),
        shared(std::make_shared<ServerShared>()),
        acceptor(net::make_strand(io)),
        retry_timer(acceptor.get_executor()),
        completions(static_cast<std::size_t>(std::max(1, options.handler_threads))),
        handlers(static_cast<std::size_t>(std::max(1, options.handler_threads))) {
    shared->routes = &routes;
    shared->options = options;
    shared->completions = &completions;
    shared->handlers = &handlers;
    shared->on_last_closed = [this] { net::post(acceptor.get_executor(), [this] { work.reset(); }); };
  }

  ~Impl() {
    {
      std::lock_guard<std::mutex> lock(shared->posting_mutex);
      shared->posting = false;
    }
    completions.join();  // what the pools run refers to the routes
    handlers.join();
    std::lock_guard<std::mutex> lock(connections_mutex);
    for (const auto& weak : connections) {
      if (auto connection = weak.lock()) connection->abandon();
    }
  }

  void accept();
  void begin_stop();  // on the acceptor's strand

  std::shared_ptr<OpenAiApi> api;
  ServerOptions options;
  Routes routes;
  std::shared_ptr<ServerShared> shared;
  net::io_context io;
  tcp::acceptor acceptor;
  net::steady_timer retry_timer;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::mutex connections_mutex;
  std::vector<std::weak_ptr<HttpConnection>> connections;
  std::atomic<bool> stop_requested{false};
  std::atomic<bool> serving{false};
  bool failed = false;
  // Last: joined before anything they use goes.
  net::thread_pool completions;
  net::thread_pool handlers;
};

void Server::Impl::accept() {
  acceptor.async_accept(net::make_strand(io), [this](boost::system::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
    if (ec) {
      // Out of file descriptors (or memory): the connections open go on; try again shortly.
      const bool transient = ec == net::error::no_descriptors || ec == net::error::no_buffer_space ||
                             ec == net::error::no_memory || ec == net::error::connection_aborted;
      if (!transient) {
        spdlog::error("rlcore serve: accepting connections failed: {}", ec.message());
        failed = true;
        return begin_stop();
      }
      spdlog::warn("rlcore serve: cannot accept a connection ({}); retrying in 100 ms", ec.message());
      retry_timer.expires_after(std::chrono::milliseconds(100));
      retry_timer.async_wait([this](boost::system::error_code wait) {
        if (!wait) accept();
      });
      return;
    }
    auto connection = std::make_shared<HttpConnection>(std::move(socket), shared);
    {
      std::lock_guard<std::mutex> lock(connections_mutex);
      connections.erase(
          std::remove_if(connections.begin(), connections.end(), [](const auto& c) { return c.expired(); }),
          connections.end());
      connections.push_back(connection);
    }
    connection->start();
    accept();
  });
}

void Server::Impl::begin_stop() {
  shared->stopping = true;
  boost::system::error_code ignored;
  acceptor.close(ignored);
  retry_timer.cancel();
  std::vector<std::shared_ptr<HttpConnection>> open;
  {
    std::lock_guard<std::mutex> lock(connections_mutex);
    for (const auto& weak : connections) {
      if (auto connection = weak.lock()) open.push_back(std::move(connection));
    }
  }
  for (const auto& connection : open) connection->close_when_idle();  // still listed: ~Impl abandons them
  if (shared->open_connections == 0) work.reset();
}

Server::Server(std::shared_ptr<OpenAiApi> api, ServerOptions options) {
  if (!api) throw ValueError("rlcore serve: Server needs an OpenAiApi");
  impl_ = std::make_unique<Impl>(std::move(api), std::move(options));
}

Server::~Server() {
  stop();
  if (!impl_->serving) {
    impl_->io.restart();
    impl_->io.poll();  // what stop() posted, with no loop to run it
  }
}

int Server::bind(const std::string& host, int port) {
  const std::string where = host + ":" + std::to_string(port);
  try {
    tcp::resolver resolver(impl_->io);
    const tcp::endpoint endpoint = *resolver.resolve(host, std::to_string(port)).begin();
    tcp::acceptor& acceptor = impl_->acceptor;
    acceptor.open(endpoint.protocol());
    acceptor.set_option(net::socket_base::reuse_address(true));  // quick restarts; not SO_REUSEPORT
    acceptor.bind(endpoint);
    acceptor.listen(net::socket_base::max_listen_connections);
    return acceptor.local_endpoint().port();
  } catch (const boost::system::system_error& e) {
    boost::system::error_code ignored;
    impl_->acceptor.close(ignored);
    throw IoError("rlcore serve: cannot listen on " + where + ": " + e.code().message());
  }
}

bool Server::serve() {
  if (impl_->stop_requested) return true;
  impl_->serving = true;
  impl_->work.emplace(impl_->io.get_executor());
  net::post(impl_->acceptor.get_executor(), [this] {
    if (impl_->acceptor.is_open()) impl_->accept();
  });
  std::vector<std::thread> threads;
  for (int i = 1; i < impl_->options.io_threads; ++i) threads.emplace_back([this] { impl_->io.run(); });
  impl_->io.run();
  for (std::thread& thread : threads) thread.join();
  impl_->serving = false;
  return !impl_->failed;
}

void Server::stop() {
  if (impl_->stop_requested.exchange(true)) return;
  net::post(impl_->acceptor.get_executor(), [this] { impl_->begin_stop(); });
}

}  // namespace rlcore::serve
