// Each launcher's environment (torchrun, Open MPI, Slurm, none) parsed into one runtime::LaunchEnv,
// and the intra-op thread count a worker is started with.
#include "runtime_testing.h"

#include <sched.h>

#include <cstdlib>

#include "rlcore/core/runtime/launch_env.h"
#include "rlcore/core/runtime/local_launcher.h"
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

TEST_CASE("a worker's thread count: the key, else an inherited OMP_NUM_THREADS, else its cores / workers",
          "[runtime][launch]") {
  const char* saved = std::getenv("OMP_NUM_THREADS");
  const std::string restore = saved ? saved : "";
  cpu_set_t mask;
  REQUIRE(::sched_getaffinity(0, sizeof(mask), &mask) == 0);
  const int64_t cores = CPU_COUNT(&mask);

  ::setenv("OMP_NUM_THREADS", "3", 1);
  CHECK(runtime::threads_for_worker(5, 2) == 5);  // runtime.threads_per_worker wins
  CHECK(runtime::threads_for_worker(0, 2) == 3);  // what rlcore was given, per worker, as torchrun does
  ::setenv("OMP_NUM_THREADS", "many", 1);         // not a count: ignored
  CHECK(runtime::threads_for_worker(0, 1) == cores);
  ::unsetenv("OMP_NUM_THREADS");
  CHECK(runtime::threads_for_worker(0, 1) == cores);
  CHECK(runtime::threads_for_worker(0, cores * 4) == 1);
  // Pinned to one core (taskset, a cpuset, ctest's PROCESSOR_AFFINITY), on a host with more.
  cpu_set_t one;
  CPU_ZERO(&one);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &mask)) {
      CPU_SET(cpu, &one);
      break;
    }
  }
  REQUIRE(::sched_setaffinity(0, sizeof(one), &one) == 0);
  CHECK(runtime::threads_for_worker(0, 1) == 1);
  REQUIRE(::sched_setaffinity(0, sizeof(mask), &mask) == 0);
  if (saved) ::setenv("OMP_NUM_THREADS", restore.c_str(), 1);
}
