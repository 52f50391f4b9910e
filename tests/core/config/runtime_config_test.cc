// The runtime config section: defaults, named pools, role placement and errors.
#include <catch2/catch.hpp>

#include "../../common/error_of.h"
#include "rlcore/core/config/runtime_config.h"
#include "rlcore/error.h"

using namespace rlcore;
using rlcore_test::error_of;

namespace {

config::RuntimeConfig parse(const std::string& yaml) {
  return config::runtime_config_schema().parse(ConfigNode::parse(yaml, "test.yaml")["runtime"]);
}

const std::vector<runtime::RoleSpec> kRoles = {{"actor", "actor", {}}, {"rollout", "rollout", {}}, {"ref", "ref", {}}};

}  // namespace

TEST_CASE("without pools every role shares the global pool of nnodes x n_workers_per_node", "[config]") {
  const config::RuntimeConfig config = parse("runtime: {nnodes: 2, n_workers_per_node: 4, heartbeat_timeout_s: 2.5}");
  const auto pools = config::resolve_pools(config, kRoles);
  REQUIRE(pools.size() == 1);
  CHECK(pools[0].name == "global");
  CHECK(pools[0].nodes == std::vector<int64_t>{4, 4});
  CHECK(pools[0].size() == 8);
  CHECK(pools[0].roles.size() == 3);
  const runtime::ClusterOptions options = config::cluster_options(config, pools);
  CHECK(options.heartbeat_timeout == std::chrono::milliseconds(2500));
  CHECK(options.launcher == "local");
  CHECK(options.process_groups);
}

TEST_CASE("named pools take the roles they list; the rest stay colocated in global", "[config]") {
  const config::RuntimeConfig config = parse(R"(
runtime:
  launcher: external
  n_workers_per_node: 2
  pools:
    gen: {nodes: [4], roles: [rollout], mesh: {dp: 2, tp: 2}, threads_per_worker: 3}
)");
  const auto pools = config::resolve_pools(config, kRoles);
  REQUIRE(pools.size() == 2);
  CHECK(pools[0].name == "global");
  REQUIRE(pools[0].roles.size() == 2);
  CHECK(pools[0].roles[0].name == "actor");
  CHECK(pools[0].roles[1].name == "ref");
  CHECK(pools[1].name == "gen");
  CHECK(pools[1].roles[0].name == "rollout");
  REQUIRE(pools[1].mesh.size() == 2);
  CHECK(pools[1].mesh[1].name == "tp");
  CHECK(pools[1].threads_per_worker == 3);
  CHECK(config::cluster_options(config, pools).launcher == "external");
}

TEST_CASE("pool errors name the key", "[config]") {
  CHECK_THAT(
      error_of<ConfigError>([] { config::resolve_pools(parse("runtime: {pools: {p: {roles: [critic]}}}"), kRoles); }),
      Catch::Contains("runtime.pools.p.roles") && Catch::Contains("no role 'critic'"));
  CHECK_THAT(error_of<ConfigError>([] {
               config::resolve_pools(parse("runtime: {pools: {a: {roles: [actor]}, b: {roles: [actor]}}}"), kRoles);
             }),
             Catch::Contains("already in another pool"));
  CHECK_THAT(error_of<ConfigError>([] {
               config::resolve_pools(parse("runtime: {pools: {a: {nodes: [3], roles: [actor], mesh: {dp: 2}}}}"),
                                     kRoles);
             }),
             Catch::Contains("runtime.pools.a") && Catch::Contains("has 2 ranks but the pool has 3"));
  CHECK_THAT(error_of<ConfigError>(
                 [] { config::resolve_pools(parse("runtime: {pools: {a: {roles: [actor], gpus: 2}}}"), kRoles); }),
             Catch::Contains("gpus"));
  CHECK_THAT(error_of<ConfigError>([] { parse("runtime: {launcher: k8s}"); }), Catch::Contains("runtime.launcher"));
  CHECK_THAT(error_of<ConfigError>([] { parse("runtime: {heartbeat_interval_s: 0}"); }),
             Catch::Contains("heartbeat_interval_s"));
}

TEST_CASE("cluster options are checked before anything starts", "[config]") {
  config::RuntimeConfig config = parse("runtime: {launcher: external, transport: ipc}");
  runtime::ClusterOptions options = config::cluster_options(config, config::resolve_pools(config, kRoles));
  CHECK_THAT(error_of<ConfigError>([&] { runtime::Cluster cluster(options); }), Catch::Contains("ipc transport"));
  config = parse("runtime: {n_workers_per_node: 2, nnodes: 2}");
  options = config::cluster_options(config, config::resolve_pools(config, kRoles));
  CHECK_THAT(error_of<ConfigError>([&] { runtime::Cluster cluster(options); }),
             Catch::Contains("spans 2 nodes; the local launcher starts workers on this host only"));
  config = parse("runtime: {launcher: external}");
  options = config::cluster_options(config, config::resolve_pools(config, kRoles));
  options.secret.clear();
  ::unsetenv("RLCORE_SECRET");
  CHECK_THAT(error_of<ConfigError>([&] { runtime::Cluster cluster(options); }), Catch::Contains("set RLCORE_SECRET"));
}
