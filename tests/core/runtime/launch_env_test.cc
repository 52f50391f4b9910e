// Each launcher's environment (torchrun, Open MPI, Slurm, none) parsed into one runtime::LaunchEnv.
#include "runtime_testing.h"

#include "rlcore/core/runtime/launch_env.h"
#include "rlcore/core/runtime/worker.h"
#include "rlcore/error.h"

using rlcore::runtime::env_from_map;
using rlcore::runtime::parse_launch_env;
using rlcore_test::error_of;

TEST_CASE("torchrun-style variables give rank, sizes and the controller", "[runtime][launch]") {
  const auto launch = runtime::parse_launch_env(runtime::env_from_map({{"RANK", "5"},
                                                                       {"WORLD_SIZE", "8"},
                                                                       {"LOCAL_RANK", "1"},
                                                                       {"LOCAL_WORLD_SIZE", "4"},
                                                                       {"MASTER_ADDR", "node0"},
                                                                       {"MASTER_PORT", "29500"}}));
  CHECK(launch.source == "torchrun");
  CHECK(launch.rank == 5);
  CHECK(launch.world_size == 8);
  CHECK(launch.local_rank == 1);
  CHECK(launch.local_world_size == 4);
  CHECK(launch.controller == "tcp://node0:29500");
}

TEST_CASE("Open MPI's variables are read under mpirun", "[runtime][launch]") {
  const auto launch = runtime::parse_launch_env(runtime::env_from_map({{"OMPI_COMM_WORLD_RANK", "3"},
                                                                       {"OMPI_COMM_WORLD_SIZE", "4"},
                                                                       {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                                                       {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                                                       {"RLCORE_CONTROLLER", "tcp://10.0.0.1:7000"}}));
  CHECK(launch.source == "openmpi");
  CHECK(launch.rank == 3);
  CHECK(launch.world_size == 4);
  CHECK(launch.local_rank == 1);
  CHECK(launch.local_world_size == 2);
  CHECK(launch.controller == "tcp://10.0.0.1:7000");
}

TEST_CASE("Slurm's variables are read under srun", "[runtime][launch]") {
  auto launch = runtime::parse_launch_env(runtime::env_from_map(
      {{"SLURM_PROCID", "6"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "2"}, {"SLURM_NTASKS_PER_NODE", "4"}}));
  CHECK(launch.source == "slurm");
  CHECK(launch.rank == 6);
  CHECK(launch.world_size == 8);
  CHECK(launch.local_rank == 2);
  CHECK(launch.local_world_size == 4);
  CHECK(launch.controller.empty());
  // Heterogeneous allocations write "4(x2)"; the local size then falls back to the world size.
  launch = runtime::parse_launch_env(runtime::env_from_map(
      {{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"}, {"SLURM_NTASKS_PER_NODE", "4(x2)"}}));
  CHECK(launch.local_world_size == 8);
}

TEST_CASE("torchrun variables win over Open MPI's and Slurm's", "[runtime][launch]") {
  const auto launch = runtime::parse_launch_env(runtime::env_from_map({{"RANK", "1"},
                                                                       {"WORLD_SIZE", "2"},
                                                                       {"OMPI_COMM_WORLD_RANK", "0"},
                                                                       {"OMPI_COMM_WORLD_SIZE", "4"},
                                                                       {"SLURM_PROCID", "3"},
                                                                       {"SLURM_NTASKS", "4"},
                                                                       {"RLCORE_CONTROLLER", "ipc:///tmp/c"},
                                                                       {"MASTER_ADDR", "ignored"},
                                                                       {"MASTER_PORT", "1"}}));
  CHECK(launch.source == "torchrun");
  CHECK(launch.rank == 1);
  CHECK(launch.world_size == 2);
  CHECK(launch.local_rank == 1);  // LOCAL_RANK unset: the global rank
  CHECK(launch.controller == "ipc:///tmp/c");
}

TEST_CASE("no launcher means a single worker; IPv6 controller addresses get brackets", "[runtime][launch]") {
  const auto launch =
      runtime::parse_launch_env(runtime::env_from_map({{"MASTER_ADDR", "fe80::1"}, {"MASTER_PORT", "29500"}}));
  CHECK(launch.source == "default");
  CHECK(launch.rank == 0);
  CHECK(launch.world_size == 1);
  CHECK(launch.controller == "tcp://[fe80::1]:29500");
}

TEST_CASE("bad launcher variables are errors naming the variable", "[runtime][launch]") {
  CHECK_THAT(error_of<rlcore::ConfigError>([] {
               runtime::parse_launch_env(runtime::env_from_map({{"RANK", "two"}, {"WORLD_SIZE", "4"}}));
             }),
             Catch::Contains("RANK='two' is not an integer"));
  CHECK_THAT(error_of<rlcore::ConfigError>([] {
               runtime::parse_launch_env(runtime::env_from_map({{"RANK", "1"}}));
             }),
             Catch::Contains("WORLD_SIZE is not"));
  CHECK_THAT(error_of<rlcore::ConfigError>([] {
               runtime::parse_launch_env(runtime::env_from_map({{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "4"}}));
             }),
             Catch::Contains("SLURM_PROCID=4 is outside [0, SLURM_NTASKS=4)"));
  CHECK_THAT(error_of<rlcore::ConfigError>([] {
               runtime::parse_launch_env(runtime::env_from_map({{"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}}));
             }),
             Catch::Contains("MASTER_PORT=70000"));
  CHECK_THAT(error_of<rlcore::ConfigError>([] {
               runtime::parse_launch_env(runtime::env_from_map({{"MASTER_ADDR", "h"}}));
             }),
             Catch::Contains("MASTER_PORT is not"));
}

TEST_CASE("a worker takes its secret and parent from the environment", "[runtime][launch]") {
  const auto options =
      rlcore::runtime::worker_options_from_env(runtime::env_from_map({{"RANK", "0"},
                                                                      {"WORLD_SIZE", "1"},
                                                                      {"RLCORE_CONTROLLER", "tcp://h:1"},
                                                                      {"RLCORE_SECRET", "abc"},
                                                                      {"RLCORE_PARENT_PID", "42"}}));
  CHECK(options.controller == "tcp://h:1");
  CHECK(options.secret == "abc");
  CHECK(options.parent_pid == 42);
  CHECK_THAT(error_of<rlcore::ConfigError>([] {
               rlcore::runtime::worker_options_from_env(runtime::env_from_map({{"RLCORE_PARENT_PID", "me"}}));
             }),
             Catch::Contains("RLCORE_PARENT_PID"));
}
