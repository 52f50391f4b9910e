// Anchors the capability interfaces' vtables and type info in librlcore_sdk, so
// capability<T>() (a dynamic_cast) sees one type across every plugin.
#include "rlcore/capabilities.h"

namespace rlcore {

AdoptsWeights::~AdoptsWeights() = default;
DataParallel::~DataParallel() = default;
TensorParallel::~TensorParallel() = default;
PipelineParallel::~PipelineParallel() = default;
OffloadsState::~OffloadsState() = default;
Sleeps::~Sleeps() = default;
RemoteGeneration::~RemoteGeneration() = default;
BoundedSwapMemory::~BoundedSwapMemory() = default;
ComputesSumPiSquared::~ComputesSumPiSquared() = default;
TrainsLowRankAdapters::~TrainsLowRankAdapters() = default;
GathersIntoBuffers::~GathersIntoBuffers() = default;
GeneratesRequests::~GeneratesRequests() = default;
ReportsGenerationStats::~ReportsGenerationStats() = default;
RecordsRouting::~RecordsRouting() = default;
ReplaysRouting::~ReplaysRouting() = default;
ReportsLogprobs::~ReportsLogprobs() = default;

const std::vector<std::string>& capability_names() {
  static const std::vector<std::string> names = {
      AdoptsWeights::kName,          DataParallel::kName,       TensorParallel::kName,
      PipelineParallel::kName,       OffloadsState::kName,      Sleeps::kName,
      RemoteGeneration::kName,       BoundedSwapMemory::kName,  ComputesSumPiSquared::kName,
      TrainsLowRankAdapters::kName,  GathersIntoBuffers::kName, GeneratesRequests::kName,
      ReportsGenerationStats::kName, RecordsRouting::kName,     ReplaysRouting::kName,
      ReportsLogprobs::kName};
  return names;
}

}  // namespace rlcore
