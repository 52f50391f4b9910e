// c10d rendezvous and process groups (world + mesh sub-groups): Gloo for host
// tensors, NCCL or Gloo for device tensors. Compiled with USE_C10D_GLOO (see
// core/CMakeLists.txt).
#include "rlcore/core/runtime/process_groups.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/version.h>

#include "device/nccl_backend.h"
#include "rlcore/error.h"

namespace rlcore::runtime {

struct RendezvousStore::Impl {
  c10::intrusive_ptr<c10d::TCPStore> store;
  std::filesystem::path directory;  // of the file store
};

RendezvousStore::RendezvousStore(const std::string& host, int port, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(port);
  options.isServer = true;
  options.waitWorkers = false;
  options.timeout = timeout;
  try {
    impl_->store = c10::make_intrusive<c10d::TCPStore>(host, options);
  } catch (const std::exception& e) {
    throw IoError("cannot start the rendezvous store on " + host + ":" + std::to_string(port) + ": " + e.what());
  }
}

std::unique_ptr<RendezvousStore> RendezvousStore::on_this_host() {
  std::unique_ptr<RendezvousStore> store(new RendezvousStore());
  std::string pattern = (std::filesystem::temp_directory_path() / "rlcore-store-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw IoError("cannot create the rendezvous directory " + pattern + ": " + std::strerror(errno));
  }
  store->impl_->directory = pattern;  // mkdtemp made it 0700
  return store;
}

RendezvousStore::RendezvousStore() : impl_(std::make_unique<Impl>()) {}

RendezvousStore::~RendezvousStore() {
  if (!impl_->directory.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(impl_->directory, ignored);
  }
}

int RendezvousStore::port() const { return impl_->store ? impl_->store->getPort() : 0; }

std::string RendezvousStore::file() const {
  return impl_->directory.empty() ? std::string() : (impl_->directory / "store").string();
}

std::string local_address_towards(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), "9", &hints, &found) != 0 || !found) {
    throw IoError("cannot resolve host '" + host + "'");
  }
  std::string address;
  const int fd = ::socket(found->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  // Connecting a UDP socket only picks a route; the kernel fills in the source address.
  if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
    sockaddr_storage local{};
    socklen_t length = sizeof(local);
    char text[NI_MAXHOST];
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0 &&
        getnameinfo(reinterpret_cast<sockaddr*>(&local), length, text, sizeof(text), nullptr, 0, NI_NUMERICHOST) == 0) {
      address = text;
    }
  }
  if (fd >= 0) ::close(fd);
  freeaddrinfo(found);
  if (address.empty()) throw IoError("no local address routes to '" + host + "'");
  return address;
}

namespace {

c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo_backend(const c10::intrusive_ptr<c10d::Store>& store, int64_t rank,
                                                        int64_t size, const std::string& address,
                                                        std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(address));
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, static_cast<int>(rank), static_cast<int>(size), options);
}

// One group: Gloo for host tensors, plus the device backend for CUDA tensors.
// The only place that knows how libtorch 1.13 and 2.x differ here: in 2.x a
// ProcessGroup holds one backend per device type and dispatches by tensor.
c10::intrusive_ptr<c10d::ProcessGroup> make_group(const c10::intrusive_ptr<c10d::Store>& store,
                                                  const std::string& prefix, int64_t rank, int64_t size,
                                                  const std::string& address, const ProcessGroupOptions& options) {
  auto scoped = c10::make_intrusive<c10d::PrefixStore>(prefix, store);
  auto gloo = gloo_backend(scoped, rank, size, address, options.timeout);
#if TORCH_VERSION_MAJOR >= 2
  auto group = c10::make_intrusive<c10d::ProcessGroup>(scoped, static_cast<int>(rank), static_cast<int>(size));
  group->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, gloo);
  group->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
  if (options.device_backend == "gloo") {
    group->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::GLOO, gloo);
  } else if (options.device_backend == "nccl") {
    // NCCL rendezvouses under its own prefix so its keys never meet Gloo's.
    device::add_nccl_backend(*group, c10::make_intrusive<c10d::PrefixStore>("nccl", scoped), static_cast<int>(rank),
                             static_cast<int>(size), options.timeout, prefix);
  }
  return group;
#else
  if (!options.device_backend.empty()) {
    throw ConfigError("a '" + options.device_backend + "' backend for device tensors needs libtorch 2.x (this is " +
                      std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + ")");
  }
  return gloo;
#endif
}

}  // namespace

void validate_device_backend(const std::string& device_backend) {
  if (device_backend != "" && device_backend != "nccl" && device_backend != "gloo") {
    throw ConfigError("unknown device backend '" + device_backend + "' (nccl, gloo, or empty for host tensors only)");
  }
}

namespace {

// The controller's store as a worker joins it, and the address its Gloo listens on.
struct JoinedStore {
  c10::intrusive_ptr<c10d::Store> store;
  std::string address;
};

JoinedStore join_store(const ProcessGroupOptions& options) {
  JoinedStore joined;
  const bool on_this_host = !options.store_file.empty();
  joined.address = options.local_address;
  if (joined.address.empty()) joined.address = on_this_host ? "127.0.0.1" : local_address_towards(options.store_host);
  if (on_this_host) {
    // numWorkers -1: no worker deletes the file; the controller removes its directory.
    joined.store = c10::make_intrusive<c10d::FileStore>(options.store_file, -1);
    joined.store->setTimeout(options.timeout);
  } else {
    c10d::TCPStoreOptions store_options;
    store_options.port = static_cast<uint16_t>(options.store_port);
    store_options.isServer = false;
    store_options.timeout = options.timeout;
    joined.store = c10::make_intrusive<c10d::TCPStore>(options.store_host, store_options);
  }
  return joined;
}

}  // namespace

CommGroup join_shared_group(const ProcessGroupOptions& options, const std::string& name, int64_t rank, int64_t size) {
  validate_device_backend(options.device_backend);
  if (size < 1 || rank < 0 || rank >= size) {
    throw ValueError("group '" + name + "': rank " + std::to_string(rank) + " of " + std::to_string(size));
  }
  std::vector<int64_t> members(static_cast<std::size_t>(size));
  for (int64_t i = 0; i < size; ++i) members[static_cast<std::size_t>(i)] = i;
  try {
    const JoinedStore joined = join_store(options);
    return CommGroup(name, make_group(joined.store, "rlcore-shared/" + name, rank, size, joined.address, options),
                     members, rank, options.device_backend);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw IoError("rank " + std::to_string(rank) + " of group '" + name +
                  "': cannot join it through the store: " + e.what());
  }
}

std::unique_ptr<CommContext> make_comm_context(const ProcessGroupOptions& options) {
  const MeshShape mesh = mesh_or_default(options.mesh, options.world_size);
  validate_mesh(mesh, options.world_size);
  validate_device_backend(options.device_backend);
  const std::string where = "rank " + std::to_string(options.rank) + " of '" + options.prefix + "'";
  try {
    const JoinedStore joined = join_store(options);
    const c10::intrusive_ptr<c10d::Store>& store = joined.store;
    const std::string& address = joined.address;

    std::vector<CommGroup> groups;
    std::vector<int64_t> all(static_cast<std::size_t>(options.world_size));
    for (int64_t i = 0; i < options.world_size; ++i) all[i] = i;
    groups.emplace_back(
        "world", make_group(store, options.prefix + "/world", options.rank, options.world_size, address, options), all,
        options.rank, options.device_backend);
    std::vector<std::pair<std::string, int64_t>> dims;
    for (const auto& dim : mesh) dims.emplace_back(dim.name, dim.size);
    for (const std::string& name : mesh_group_names(mesh)) {
      const std::vector<int64_t> members = mesh_group_ranks(mesh, name, options.rank);
      const int64_t group_rank = std::find(members.begin(), members.end(), options.rank) - members.begin();
      // Each sub-group rendezvouses under its own prefix, named by its first member.
      const std::string prefix = options.prefix + "/" + name + "/" + std::to_string(members.front());
      groups.emplace_back(name,
                          make_group(store, prefix, group_rank, static_cast<int64_t>(members.size()), address, options),
                          members, group_rank, options.device_backend);
    }
    return std::make_unique<CommContext>(options.rank, options.world_size, options.local_rank, std::move(dims),
                                         std::move(groups));
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw IoError(where + ": cannot create process groups through the store at " + options.store_host + ":" +
                  std::to_string(options.store_port) + ": " + e.what());
  }
}

}  // namespace rlcore::runtime
