// The control plane over real sockets in one process: admission by secret,
// Batch round trips, refusal of strangers and garbage, heartbeat deadlines.
#include "runtime_testing.h"
#include "../../common/loopback_socket.h"

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <vector>

#include <zmq.hpp>

#include "rlcore/core/runtime/control_client.h"
#include "rlcore/core/runtime/control_server.h"
#include "rlcore/core/runtime/errors.h"
#include "rlcore/core/runtime/secret.h"
#include "rlcore/error.h"

using namespace std::chrono_literals;
using rlcore_test::error_of;
using rlcore_test::eventually;

namespace {

// A server with short heartbeats that records what its handlers see.
struct Recorder {
  std::mutex mutex;
  std::vector<rlcore::runtime::PeerInfo> hellos;
  std::vector<rlcore::runtime::Envelope> messages;
  std::vector<std::pair<rlcore::runtime::PeerInfo, std::string>> lost;

  template <class T>
  std::size_t count(const std::vector<T>& items) {
    std::lock_guard<std::mutex> lock(mutex);
    return items.size();
  }
};

rlcore::runtime::ControlServerOptions server_options(const std::string& secret) {
  rlcore::runtime::ControlServerOptions options;
  options.secret = secret;
  options.heartbeat_interval = 50ms;
  options.heartbeat_timeout = 600ms;
  return options;
}

std::unique_ptr<rlcore::runtime::ControlServer> start_server(Recorder& recorder, const std::string& secret) {
  rlcore::runtime::ControlServer::Handlers handlers;
  handlers.on_hello = [&recorder](const rlcore::runtime::PeerInfo& peer) {
    std::lock_guard<std::mutex> lock(recorder.mutex);
    recorder.hellos.push_back(peer);
    return nlohmann::json{{"role", "tester"}};
  };
  handlers.on_message = [&recorder](const rlcore::runtime::PeerInfo&, rlcore::runtime::Envelope message) {
    std::lock_guard<std::mutex> lock(recorder.mutex);
    recorder.messages.push_back(std::move(message));
  };
  handlers.on_lost = [&recorder](const rlcore::runtime::PeerInfo& peer, const std::string& reason) {
    std::lock_guard<std::mutex> lock(recorder.mutex);
    recorder.lost.emplace_back(peer, reason);
  };
  return std::make_unique<rlcore::runtime::ControlServer>(server_options(secret), handlers);
}

rlcore::runtime::ControlClientOptions client_options(const std::string& endpoint, const std::string& secret,
                                                     int64_t rank) {
  rlcore::runtime::ControlClientOptions options;
  options.endpoint = endpoint;
  options.secret = secret;
  options.self = rlcore::runtime::PeerInfo{rank, 2, rank, "testhost", 1000 + rank};
  options.connect_timeout = 5s;
  return options;
}

std::string frame_text(const nlohmann::json& header) { return header.dump(); }

nlohmann::json header_of(const std::string& type) { return rlcore::runtime::control_header(type); }

}  // namespace

TEST_CASE("control headers are validated before anything else is read", "[runtime][control]") {
  const rlcore::runtime::MessageLimits limits;
  nlohmann::json call = header_of("call");
  call["id"] = 7;
  call["method"] = "role.method";
  call["args"] = nlohmann::json::object();
  CHECK(rlcore::runtime::parse_control_header(frame_text(call), limits)["method"] == "role.method");

  CHECK_THAT(error_of<rlcore::FormatError>([&] { rlcore::runtime::parse_control_header("{not json", limits); }),
             Catch::Contains("not valid JSON"));
  CHECK_THAT(
      error_of<rlcore::FormatError>([&] { rlcore::runtime::parse_control_header(std::string(70000, ' '), limits); }),
      Catch::Contains("exceeds the limit"));
  CHECK_THAT(error_of<rlcore::FormatError>([&] {
               rlcore::runtime::parse_control_header(std::string(5000, '[') + std::string(5000, ']'), limits);
             }),
             Catch::Contains("nests deeper"));
  CHECK_THAT(error_of<rlcore::FormatError>([&] { rlcore::runtime::parse_control_header("[1,2]", limits); }),
             Catch::Contains("not a JSON object"));

  nlohmann::json wrong_version = call;
  wrong_version["v"] = 2;
  CHECK_THAT(error_of<rlcore::FormatError>([&] { rlcore::runtime::validate_control_header(wrong_version); }),
             Catch::Contains("\"v\""));
  nlohmann::json unknown = header_of("launch_missiles");
  CHECK_THAT(error_of<rlcore::FormatError>([&] { rlcore::runtime::validate_control_header(unknown); }),
             Catch::Contains("unknown message type"));
  nlohmann::json no_method = call;
  no_method.erase("method");
  CHECK_THAT(error_of<rlcore::FormatError>([&] { rlcore::runtime::validate_control_header(no_method); }),
             Catch::Contains("missing field \"method\""));
  nlohmann::json bad_id = call;
  bad_id["id"] = "7";
  CHECK_THAT(error_of<rlcore::FormatError>([&] { rlcore::runtime::validate_control_header(bad_id); }),
             Catch::Contains("\"id\" must be an integer"));
  nlohmann::json stray_frames = call;
  stray_frames["frames"] = 3;
  CHECK_THAT(error_of<rlcore::FormatError>([&] { rlcore::runtime::validate_control_header(stray_frames); }),
             Catch::Contains("frames without a batch"));
  nlohmann::json hello = header_of("hello");
  hello.update({{"secret", "s"}, {"rank", -1}, {"world_size", 1}, {"local_rank", 0}, {"host", "h"}, {"pid", 1}});
  CHECK_THAT(error_of<rlcore::FormatError>([&] { rlcore::runtime::validate_control_header(hello); }),
             Catch::Contains("\"rank\" = -1 is outside"));
}

TEST_CASE("secrets are random and compared exactly", "[runtime][control]") {
  const std::string a = rlcore::runtime::generate_secret();
  const std::string b = rlcore::runtime::generate_secret();
  CHECK(a.size() == 64);
  CHECK(a != b);
  CHECK(rlcore::runtime::secrets_equal(a, a));
  CHECK_FALSE(rlcore::runtime::secrets_equal(a, b));
  CHECK_FALSE(rlcore::runtime::secrets_equal(a, a.substr(0, 63)));
  CHECK_FALSE(rlcore::runtime::secrets_equal("", ""));
}

TEST_CASE("an admitted worker exchanges Batches with the controller", "[runtime][control]") {
  Recorder recorder;
  const std::string secret = rlcore::runtime::generate_secret();
  auto server = start_server(recorder, secret);
  rlcore::runtime::ControlClient client(client_options(server->endpoint(), secret, 1), nullptr);
  const rlcore::runtime::Welcome welcome = client.connect();
  CHECK(welcome.setup["role"] == "tester");
  CHECK(welcome.heartbeat_interval == 50ms);
  REQUIRE(recorder.count(recorder.hellos) == 1);
  CHECK(recorder.hellos[0].host == "testhost");
  CHECK(recorder.hellos[0].pid == 1001);
  CHECK(server->connected(1));

  rlcore::runtime::Envelope call;
  call.header = header_of("call");
  call.header.update({{"id", 1}, {"method", "m"}, {"args", {{"factor", 3}}}});
  call.batch.set("x", at::arange(12, at::kFloat).reshape({4, 3}));
  call.batch.set_non_tensor("tag", {"a", "b", "c", "d"});
  server->send(1, call);
  auto received = client.receive(5s);
  REQUIRE(received);
  CHECK(received->type() == "call");
  CHECK(received->header["args"]["factor"] == 3);
  CHECK(received->batch.equals(call.batch));

  rlcore::runtime::Envelope reply;
  reply.header = header_of("reply");
  reply.header.update({{"id", 1}, {"ok", true}, {"value", "done"}});
  reply.batch.set("y", received->batch.tensor("x") * 3);
  client.send(reply);
  REQUIRE(eventually([&] { return recorder.count(recorder.messages) == 1; }, 5s));
  CHECK(recorder.messages[0].header["value"] == "done");
  CHECK(at::equal(recorder.messages[0].batch.tensor("y"), at::arange(12, at::kFloat).reshape({4, 3}) * 3));
  client.close();
}

TEST_CASE("a hello with the wrong secret is refused and its sender's messages are never delivered",
          "[runtime][control][security]") {
  Recorder recorder;
  const std::string secret = rlcore::runtime::generate_secret();
  auto server = start_server(recorder, secret);

  rlcore::runtime::ControlClient intruder(client_options(server->endpoint(), "not-the-secret", 0), nullptr);
  CHECK_THAT(error_of<rlcore::ConfigError>([&] { intruder.connect(); }),
             Catch::Contains("refused this worker") && Catch::Contains("wrong secret"));
  // The refused peer keeps talking: a forged reply must not reach the handler.
  rlcore::runtime::Envelope forged;
  forged.header = header_of("reply");
  forged.header.update({{"id", 1}, {"ok", true}, {"value", "forged"}});
  intruder.send(forged);

  // A peer that never says hello at all.
  zmq::context_t context;
  zmq::socket_t stranger(context, zmq::socket_type::dealer);
  stranger.set(zmq::sockopt::linger, 0);
  stranger.connect(server->endpoint());
  const std::string reply_text = frame_text(forged.header);
  stranger.send(zmq::buffer(reply_text), zmq::send_flags::none);
  stranger.send(zmq::str_buffer("\x01\x02garbage frame"), zmq::send_flags::none);

  REQUIRE(eventually([&] { return server->stats().dropped_messages >= 3; }, 5s));
  CHECK(server->stats().refused_hellos == 1);
  CHECK(recorder.count(recorder.hellos) == 0);  // on_hello never saw it
  CHECK(recorder.count(recorder.messages) == 0);
  CHECK_FALSE(server->connected(0));

  // The legitimate worker of the same rank is still admitted.
  rlcore::runtime::ControlClient worker(client_options(server->endpoint(), secret, 0), nullptr);
  CHECK_NOTHROW(worker.connect());
  CHECK(server->connected(0));
  worker.close();
  intruder.close();
}

TEST_CASE("garbage bytes on the controller port are ignored and the run continues", "[runtime][control][security]") {
  Recorder recorder;
  const std::string secret = rlcore::runtime::generate_secret();
  auto server = start_server(recorder, secret);
  const std::string endpoint = server->endpoint();
  const int port = std::stoi(endpoint.substr(endpoint.rfind(':') + 1));

  // Text (ZeroMQ takes it for a ZMTP/1.0 peer and hands us junk frames) and
  // bytes that open like ZMTP/3 and then break its handshake.
  std::string http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  std::string broken_greeting =
      std::string("\xff\0\0\0\0\0\0\0\x01\x7f\x03\x00", 12) + "NOPE" + std::string(48, '\x00');
  std::string noise;
  for (int i = 0; i < 600; ++i) noise += static_cast<char>((i * 131 + 7) & 0xff);
  for (const std::string& junk : {http + noise, broken_greeting, noise}) {
    const int fd = rlcore_test::connect_loopback(port);
    REQUIRE(::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL) > 0);
    timeval wait{0, 200 * 1000};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
    char sink[256];
    (void)::recv(fd, sink, sizeof(sink), 0);
    ::close(fd);
  }
  CHECK(eventually([&] { return server->stats().connections >= 3; }, 5s));
  CHECK(eventually([&] { return server->stats().handshake_failures >= 1; }, 5s));
  CHECK(eventually([&] { return server->stats().dropped_messages >= 1; }, 5s));
  INFO("handshake failures " << server->stats().handshake_failures << ", dropped " << server->stats().dropped_messages);
  CHECK(recorder.count(recorder.hellos) == 0);
  CHECK(recorder.count(recorder.messages) == 0);

  rlcore::runtime::ControlClient worker(client_options(endpoint, secret, 0), nullptr);
  worker.connect();
  rlcore::runtime::Envelope call;
  call.header = header_of("call");
  call.header.update({{"id", 5}, {"method", "m"}, {"args", nlohmann::json::object()}});
  server->send(0, call);
  auto received = worker.receive(5s);
  REQUIRE(received);
  CHECK(received->header["id"] == 5);
  worker.close();
}

TEST_CASE("a silent worker is reported lost with its rank, host and pid", "[runtime][control][liveness]") {
  Recorder recorder;
  const std::string secret = rlcore::runtime::generate_secret();
  auto server = start_server(recorder, secret);
  rlcore::runtime::ControlClient worker(client_options(server->endpoint(), secret, 1), nullptr);
  worker.connect();
  worker.close(0ms);  // gone without a bye: no more heartbeats
  REQUIRE(eventually([&] { return recorder.count(recorder.lost) == 1; }, 5s));
  CHECK(recorder.lost[0].first.rank == 1);
  CHECK(recorder.lost[0].first.host == "testhost");
  CHECK(recorder.lost[0].first.pid == 1001);
  CHECK_THAT(recorder.lost[0].second, Catch::Contains("no message or heartbeat"));
  CHECK_FALSE(server->connected(1));
  CHECK_THROWS_AS(server->send(1, rlcore::runtime::Envelope{header_of("shutdown"), {}}),
                  rlcore::runtime::WorkerLostError);
}

TEST_CASE("a worker gives up when the controller goes silent", "[runtime][control][liveness]") {
  Recorder recorder;
  const std::string secret = rlcore::runtime::generate_secret();
  auto server = start_server(recorder, secret);
  std::atomic<bool> abandoned{false};
  std::string reason;
  std::mutex reason_mutex;
  rlcore::runtime::ControlClient worker(client_options(server->endpoint(), secret, 0), [&](const std::string& why) {
    std::lock_guard<std::mutex> lock(reason_mutex);
    reason = why;
    abandoned = true;
  });
  worker.connect();
  server->close();  // the controller vanishes without a shutdown
  REQUIRE(eventually([&] { return abandoned.load(); }, 5s));
  std::lock_guard<std::mutex> lock(reason_mutex);
  CHECK_THAT(reason, Catch::Contains("has been silent"));
  CHECK(worker.abandoned());
}

TEST_CASE("a second worker claiming a connected rank is refused", "[runtime][control]") {
  Recorder recorder;
  const std::string secret = rlcore::runtime::generate_secret();
  auto server = start_server(recorder, secret);
  rlcore::runtime::ControlClient first(client_options(server->endpoint(), secret, 1), nullptr);
  first.connect();
  rlcore::runtime::ControlClient second(client_options(server->endpoint(), secret, 1), nullptr);
  CHECK_THAT(error_of<rlcore::ConfigError>([&] { second.connect(); }),
             Catch::Contains("rank 1 is already connected as rank 1 (host testhost, pid 1001)"));
  first.close();
  second.close();
}
