// Splitting a call's input over ranks and joining their results, per dispatch mode.
#include "rlcore/core/runtime/dispatch.h"

#include <map>

#include "rlcore/error.h"
#include "rlcore/string_join.h"

namespace rlcore::runtime {

namespace {

constexpr std::pair<DispatchMode, const char*> kModeNames[] = {
    {DispatchMode::kOneToAll, "one_to_all"},  {DispatchMode::kAllToAll, "all_to_all"},
    {DispatchMode::kDpCompute, "dp_compute"}, {DispatchMode::kMeshCompute, "mesh_compute"},
    {DispatchMode::kRankZero, "rank_zero"},
};

const Batch& single_input(const std::vector<Batch>& inputs, DispatchMode mode) {
  static const Batch kEmpty;
  if (inputs.size() > 1) {
    throw ValueError(std::string(to_string(mode)) + " takes one input Batch, got " + std::to_string(inputs.size()));
  }
  return inputs.empty() ? kEmpty : inputs.front();
}

// Pads a copy of `input` to a multiple of `parts` and splits it.
std::vector<Batch> split(const Batch& input, int64_t parts, int64_t& pad, DispatchMode mode) {
  if (!input.has_size()) throw ValueError(std::string(to_string(mode)) + " needs an input Batch to split");
  Batch padded = input;
  pad = input.size() > 0 ? padded.pad_to_divisor(parts) : 0;
  return padded.chunk(parts);
}

}  // namespace

const char* to_string(DispatchMode mode) {
  for (const auto& [value, name] : kModeNames) {
    if (value == mode) return name;
  }
  return "?";
}

DispatchMode dispatch_mode_from_string(const std::string& name) {
  for (const auto& [value, text] : kModeNames) {
    if (name == text) return value;
  }
  throw ValueError("unknown dispatch mode '" + name + "'; modes are: " + join(kModeNames, ", ", [](const auto& mode) {
                     return std::string(mode.second);
                   }));
}

DispatchPlan plan_dispatch(DispatchMode mode, const std::vector<Batch>& inputs, int64_t world_size,
                           const std::vector<MeshRank>& mesh) {
  if (world_size < 1) throw ValueError("a worker group needs at least one rank");
  DispatchPlan plan;
  switch (mode) {
    case DispatchMode::kOneToAll: {
      const Batch& input = single_input(inputs, mode);
      for (int64_t rank = 0; rank < world_size; ++rank) {
        plan.targets.push_back(rank);
        plan.inputs.push_back(input);
        plan.collect.push_back(rank);
      }
      break;
    }
    case DispatchMode::kAllToAll: {
      if (static_cast<int64_t>(inputs.size()) != world_size) {
        throw ValueError("all_to_all needs one input per rank: " + std::to_string(world_size) + " ranks, " +
                         std::to_string(inputs.size()) + " inputs");
      }
      for (int64_t rank = 0; rank < world_size; ++rank) {
        plan.targets.push_back(rank);
        plan.inputs.push_back(inputs[rank]);
        plan.collect.push_back(rank);
      }
      break;
    }
    case DispatchMode::kDpCompute: {
      plan.inputs = split(single_input(inputs, mode), world_size, plan.pad, mode);
      for (int64_t rank = 0; rank < world_size; ++rank) {
        plan.targets.push_back(rank);
        plan.collect.push_back(rank);
      }
      break;
    }
    case DispatchMode::kMeshCompute: {
      if (static_cast<int64_t>(mesh.size()) != world_size) {
        throw ValueError("mesh_compute needs a mesh rank for each of the " + std::to_string(world_size) +
                         " ranks, got " + std::to_string(mesh.size()));
      }
      const int64_t dp_size = mesh.front().dp_size;
      std::map<int64_t, int64_t> collector_of_dp;
      for (int64_t rank = 0; rank < world_size; ++rank) {
        const MeshRank& place = mesh[rank];
        if (place.dp_size != dp_size || place.dp_rank < 0 || place.dp_rank >= dp_size) {
          throw ValueError("rank " + std::to_string(rank) + " reports dp rank " + std::to_string(place.dp_rank) +
                           " of " + std::to_string(place.dp_size) + ", but rank 0 reports dp size " +
                           std::to_string(dp_size));
        }
        if (!place.collect) continue;
        if (!collector_of_dp.emplace(place.dp_rank, rank).second) {
          throw ValueError("dp rank " + std::to_string(place.dp_rank) + " has two collect ranks: " +
                           std::to_string(collector_of_dp[place.dp_rank]) + " and " + std::to_string(rank));
        }
      }
      if (static_cast<int64_t>(collector_of_dp.size()) != dp_size) {
        throw ValueError("every dp rank needs one collect rank; " + std::to_string(collector_of_dp.size()) + " of " +
                         std::to_string(dp_size) + " have one");
      }
      const std::vector<Batch> shards = split(single_input(inputs, mode), dp_size, plan.pad, mode);
      for (int64_t rank = 0; rank < world_size; ++rank) {
        plan.targets.push_back(rank);
        plan.inputs.push_back(shards[mesh[rank].dp_rank]);
      }
      for (const auto& [dp_rank, rank] : collector_of_dp) plan.collect.push_back(rank);
      break;
    }
    case DispatchMode::kRankZero: {
      plan.targets = {0};
      plan.inputs = {single_input(inputs, mode)};
      plan.collect = {0};
      break;
    }
  }
  return plan;
}

Batch collect_results(const DispatchPlan& plan, std::vector<Batch> results) {
  if (results.size() != plan.collect.size()) {
    throw ValueError("expected " + std::to_string(plan.collect.size()) + " results, got " +
                     std::to_string(results.size()));
  }
  std::size_t with_rows = 0;
  for (const auto& result : results) with_rows += result.has_size() ? 1 : 0;
  if (with_rows == 0) return Batch();
  if (with_rows != results.size()) {
    throw ValueError("some ranks returned a Batch and others did not; results cannot be concatenated");
  }
  Batch joined = results.size() == 1 ? std::move(results.front()) : Batch::concat(results);
  if (plan.pad > 0) joined.unpad(plan.pad);
  return joined;
}

}  // namespace rlcore::runtime
