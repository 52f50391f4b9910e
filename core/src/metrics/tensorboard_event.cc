#include "metrics/tensorboard_event.h"

#include <cstring>

#include <boost/crc.hpp>

namespace rlcore::metrics::tensorboard {
namespace {

// Protocol buffer wire format: a varint key (field << 3 | wire type), then the value.
enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out += static_cast<char>((value & 0x7f) | 0x80);
    value >>= 7;
  }
  out += static_cast<char>(value);
}

void put_key(std::string& out, uint32_t field, WireType type) { put_varint(out, (field << 3) | type); }

template <class T>
void put_little_endian(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // the machines are little-endian, as the format
  out.append(bytes, sizeof(T));
}

void put_bytes(std::string& out, uint32_t field, const std::string& bytes) {
  put_key(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out += bytes;
}

void put_wall_time(std::string& out, double wall_time) {
  put_key(out, 1, kFixed64);
  put_little_endian(out, wall_time);
}

uint32_t masked_crc32c(const std::string& bytes) {
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;  // CRC-32C (Castagnoli)
  crc.process_bytes(bytes.data(), bytes.size());
  const uint32_t value = crc.checksum();
  return ((value >> 15) | (value << 17)) + 0xa282ead8u;  // TFRecord's mask
}

}  // namespace

std::string file_version_event(double wall_time) {
  std::string event;
  put_wall_time(event, wall_time);
  put_bytes(event, 3, "brain.Event:2");
  return event;
}

std::string scalars_event(double wall_time, int64_t step, const std::vector<std::pair<std::string, float>>& scalars) {
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    std::string entry;
    put_bytes(entry, 1, tag);
    put_key(entry, 2, kFixed32);
    put_little_endian(entry, value);
    put_bytes(summary, 1, entry);
  }
  std::string event;
  put_wall_time(event, wall_time);
  put_key(event, 2, kVarint);
  put_varint(event, static_cast<uint64_t>(step));
  put_bytes(event, 5, summary);
  return event;
}

std::string tfrecord(const std::string& data) {
  std::string length;
  put_little_endian(length, static_cast<uint64_t>(data.size()));
  std::string record = length;
  put_little_endian(record, masked_crc32c(length));
  record += data;
  put_little_endian(record, masked_crc32c(data));
  return record;
}

}  // namespace rlcore::metrics::tensorboard
