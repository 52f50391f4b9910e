// The two TensorBoard records rlcore writes, encoded as the protocol buffers
// tensorboard reads (tensorflow/core/util/event.proto, summary.proto), and
// framed as TFRecords. Only the fields rlcore uses are encoded:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2; }
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace rlcore::metrics::tensorboard {

// The first record of every event file: {wall_time, file_version "brain.Event:2"}.
std::string file_version_event(double wall_time);

// One step's scalars: {wall_time, step, summary {tag, simple_value}...}.
std::string scalars_event(double wall_time, int64_t step, const std::vector<std::pair<std::string, float>>& scalars);

// A TFRecord: uint64 length, masked CRC-32C of the length, data, masked CRC-32C
// of the data (all little-endian).
std::string tfrecord(const std::string& data);

}  // namespace rlcore::metrics::tensorboard
