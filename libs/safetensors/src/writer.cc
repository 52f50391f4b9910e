// Writing safetensors files and sharded Hugging Face checkpoints, each file
// atomically (rlcore/atomic_file.h).
#include <algorithm>
#include <cstdio>
#include <regex>
#include <set>
#include <system_error>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "rlcore/atomic_file.h"
#include "rlcore/error.h"
#include "rlcore/safetensors/safetensors.h"

namespace rlcore {
namespace fs = std::filesystem;

namespace {

void check_tensors(const NamedTensors& tensors, const std::string& where) {
  std::set<std::string_view> seen;
  for (const auto& [name, tensor] : tensors) {
    const std::string what = where + ": tensor '" + name + "'";
    if (name == "__metadata__") throw ValueError(what + ": the name is reserved");
    if (!seen.insert(name).second) throw ValueError(what + ": duplicate name");
    if (!tensor.defined()) throw ValueError(what + ": undefined tensor");
    if (tensor.layout() != at::kStrided || tensor.is_meta()) {
      throw ValueError(what + ": only dense tensors with data can be saved");
    }
    safetensors_dtype_name(tensor.scalar_type());  // throws for unsupported dtypes
  }
}

std::uint64_t nbytes_of(const at::Tensor& tensor) {
  return static_cast<std::uint64_t>(tensor.numel()) * tensor.element_size();
}

template <typename Json>
std::string dump_json(const Json& json, int indent, const std::string& where) {
  try {
    return json.dump(indent);
  } catch (const nlohmann::json::exception& e) {
    throw ValueError(where + ": a tensor name or metadata string is not valid UTF-8: " + e.what());
  }
}

std::string shard_file_name(std::size_t number, std::size_t count) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", number, count);
  return name;
}

// Deletes what an earlier save left that the files just written do not
// replace, so the reader cannot pick up a stale model.safetensors or shard.
void remove_stale_files(const fs::path& dir, const std::vector<fs::path>& written) {
  static const std::regex kShardName(R"(model-\d{5,}-of-\d{5,}\.safetensors)");
  std::set<fs::path> keep(written.begin(), written.end());
  std::error_code ec;
  for (const auto& item : fs::directory_iterator(dir, ec)) {
    const std::string name = item.path().filename().string();
    bool ours = name == kSafetensorsSingleFile || name == kSafetensorsIndexFile || std::regex_match(name, kShardName);
    if (ours && keep.count(item.path()) == 0 && !fs::remove(item.path(), ec)) {
      throw IoError(item.path().string() + ": cannot remove stale file: " + ec.message());
    }
  }
  if (ec) throw IoError(dir.string() + ": cannot list: " + ec.message());
}

}  // namespace

void save_safetensors(const fs::path& path, const NamedTensors& tensors, const SafetensorsMetadata& metadata) {
  const std::string where = path.string();
  check_tensors(tensors, where);

  // Data goes in order of decreasing element size (stable, as HF's writer
  // does): with the 8-aligned data start every tensor is then aligned for its
  // dtype, which zero-copy views need. The header keeps the caller's order.
  std::vector<std::size_t> order(tensors.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return tensors[a].second.element_size() > tensors[b].second.element_size();
  });
  std::vector<std::uint64_t> begin(tensors.size());
  std::uint64_t offset = 0;
  for (std::size_t i : order) {
    begin[i] = offset;
    offset += nbytes_of(tensors[i].second);
  }

  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& tensor = tensors[i].second;
    header[tensors[i].first] = {
        {"dtype", std::string(safetensors_dtype_name(tensor.scalar_type()))},
        {"shape", tensor.sizes().vec()},
        {"data_offsets", {begin[i], begin[i] + nbytes_of(tensor)}},
    };
  }
  std::string text = dump_json(header, -1, where);
  if (text.size() > kSafetensorsMaxHeaderBytes) {
    throw ValueError(where + ": the header would be " + std::to_string(text.size()) +
                     " bytes, more than readers accept");
  }
  text.resize((text.size() + 7) / 8 * 8, ' ');

  std::uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<std::uint8_t>(text.size() >> (8 * i));
  AtomicFile file(path);
  file.write(length, sizeof length);
  file.write(text.data(), text.size());
  for (std::size_t i : order) {
    // One tensor at a time, so at most one extra copy is alive.
    at::Tensor cpu = tensors[i].second.detach().to(at::kCPU).contiguous();
    file.write(cpu.data_ptr(), nbytes_of(cpu));
  }
  file.commit();
}

std::vector<fs::path> save_safetensors_checkpoint(const fs::path& dir, const NamedTensors& tensors,
                                                  std::uint64_t max_shard_bytes, SafetensorsMetadata metadata) {
  if (max_shard_bytes == 0) throw ValueError(dir.string() + ": max_shard_bytes must be positive");
  check_tensors(tensors, dir.string());
  metadata.emplace("format", "pt");

  // Greedy in the caller's order, like transformers' shard_checkpoint.
  std::vector<NamedTensors> shards;
  std::uint64_t shard_bytes = 0;
  std::uint64_t total_bytes = 0;
  for (const auto& item : tensors) {
    const std::uint64_t bytes = nbytes_of(item.second);
    if (shards.empty() || (!shards.back().empty() && shard_bytes + bytes > max_shard_bytes)) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(item);
    shard_bytes += bytes;
    total_bytes += bytes;
  }

  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw IoError(dir.string() + ": cannot create directory: " + ec.message());

  std::vector<fs::path> written;
  if (shards.size() <= 1) {
    written.push_back(dir / kSafetensorsSingleFile);
    save_safetensors(written.back(), shards.empty() ? NamedTensors{} : shards[0], metadata);
  } else {
    nlohmann::json weight_map = nlohmann::json::object();
    for (std::size_t i = 0; i < shards.size(); ++i) {
      const std::string name = shard_file_name(i + 1, shards.size());
      written.push_back(dir / name);
      save_safetensors(written.back(), shards[i], metadata);
      for (const auto& item : shards[i]) weight_map[item.first] = name;
    }
    // Written last: a reader never sees an index naming shards not yet there.
    nlohmann::json index = {{"metadata", {{"total_size", total_bytes}}},
                            {"weight_map", weight_map}};  // sorted keys, as HF writes it
    written.push_back(dir / kSafetensorsIndexFile);
    write_file_atomically(written.back(), dump_json(index, 2, written.back().string()) + "\n");
  }
  remove_stale_files(dir, written);
  return written;
}

}  // namespace rlcore
