// Parsing of launcher environments (torchrun, Open MPI, Slurm) into a LaunchEnv.
#include "rlcore/core/runtime/launch_env.h"

#include <cstdlib>

#include "rlcore/error.h"

namespace rlcore::runtime {

namespace {

int64_t parse_int(const std::string& name, const std::string& text) {
  std::size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size()) {
    throw ConfigError("environment variable " + name + "='" + text + "' is not an integer");
  }
  return value;
}

struct Names {
  const char* source;
  const char* rank;
  const char* world_size;
  const char* local_rank;
  const char* local_world_size;
};

constexpr Names kLaunchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
};

std::optional<int64_t> read_int(const EnvLookup& env, const char* name) {
  const auto text = env(name);
  if (!text) return std::nullopt;
  return parse_int(name, *text);
}

}  // namespace

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (!value) return std::nullopt;
    return std::string(value);
  };
}

EnvLookup env_from_map(std::map<std::string, std::string> values) {
  return [values = std::move(values)](const std::string& name) -> std::optional<std::string> {
    auto it = values.find(name);
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

LaunchEnv parse_launch_env(const EnvLookup& env) {
  LaunchEnv launch;
  for (const Names& names : kLaunchers) {
    const auto rank = read_int(env, names.rank);
    if (!rank) continue;
    launch.source = names.source;
    launch.rank = *rank;
    const auto world_size = read_int(env, names.world_size);
    if (!world_size) {
      throw ConfigError(std::string("environment variable ") + names.rank + " is set but " + names.world_size +
                        " is not");
    }
    launch.world_size = *world_size;
    launch.local_rank = read_int(env, names.local_rank).value_or(launch.rank);
    // Slurm writes SLURM_NTASKS_PER_NODE as "4" or "4(x2)"; only the plain form is read.
    const auto local_text = env(names.local_world_size);
    if (local_text && local_text->find('(') == std::string::npos) {
      launch.local_world_size = parse_int(names.local_world_size, *local_text);
    } else {
      launch.local_world_size = launch.world_size;
    }
    if (launch.world_size < 1) {
      throw ConfigError(std::string(names.world_size) + "=" + std::to_string(launch.world_size) + " must be >= 1");
    }
    if (launch.rank < 0 || launch.rank >= launch.world_size) {
      throw ConfigError(std::string(names.rank) + "=" + std::to_string(launch.rank) + " is outside [0, " +
                        names.world_size + "=" + std::to_string(launch.world_size) + ")");
    }
    if (launch.local_world_size < 1 || launch.local_rank < 0 || launch.local_rank >= launch.local_world_size) {
      throw ConfigError(std::string(names.local_rank) + "=" + std::to_string(launch.local_rank) + " is outside [0, " +
                        std::to_string(launch.local_world_size) + ")");
    }
    break;
  }
  if (const auto controller = env("RLCORE_CONTROLLER")) {
    launch.controller = *controller;
  } else if (const auto address = env("MASTER_ADDR")) {
    const auto port = env("MASTER_PORT");
    if (!port) throw ConfigError("environment variable MASTER_ADDR is set but MASTER_PORT is not");
    const int64_t number = parse_int("MASTER_PORT", *port);
    if (number < 1 || number > 65535) throw ConfigError("MASTER_PORT=" + *port + " is not a TCP port");
    // ZeroMQ wants IPv6 literals in brackets.
    const bool ipv6 = address->find(':') != std::string::npos && address->front() != '[';
    launch.controller = "tcp://" + (ipv6 ? "[" + *address + "]" : *address) + ":" + *port;
  }
  return launch;
}

}  // namespace rlcore::runtime
