// Hugging Face safetensors checkpoints: a validating, memory-mapped reader for
// single files and sharded directories, and an atomic (sharded) writer.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace rlcore {

// File names Hugging Face uses inside a checkpoint directory.
inline constexpr const char* kSafetensorsSingleFile = "model.safetensors";
inline constexpr const char* kSafetensorsIndexFile = "model.safetensors.index.json";

// The reference implementation's cap; a real header is at most a few MB.
inline constexpr std::uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

using SafetensorsMetadata = std::map<std::string, std::string>;
// Ordered, so that a save/load round trip keeps the caller's order.
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// One tensor as described by a file's header.
struct SafetensorsEntry {
  std::string name;
  at::ScalarType dtype = at::ScalarType::Undefined;
  std::vector<std::int64_t> shape;
  // Byte range relative to the start of the data region (after the header).
  std::uint64_t begin = 0;
  std::uint64_t end = 0;

  std::uint64_t nbytes() const { return end - begin; }
};

// "F32", "BF16", ... <-> at::ScalarType, for the ten dtypes libtorch 1.13 has.
// The first returns nullopt for an unknown name; the second throws ValueError.
std::optional<at::ScalarType> safetensors_dtype_from_name(std::string_view name);
std::string_view safetensors_dtype_name(at::ScalarType dtype);

// One .safetensors file, mapped read-only. The whole header is validated on
// open (the file is untrusted input); tensor data is touched only on access.
// Copies share the mapping; all methods are const and thread-safe. As with any
// mmap, truncating the file in place while views exist faults (SIGBUS);
// save_safetensors replaces files by rename, which is safe.
class SafetensorsFile {
 public:
  // Throws IoError if the file cannot be opened or mapped, FormatError if it is
  // not a valid safetensors file.
  explicit SafetensorsFile(const std::filesystem::path& path);

  const std::filesystem::path& path() const;
  // In header order.
  const std::vector<std::string>& names() const;
  bool contains(const std::string& name) const;
  // Throws ValueError naming the file if `name` is absent.
  const SafetensorsEntry& entry(const std::string& name) const;
  const SafetensorsMetadata& metadata() const;

  // Zero-copy CPU tensor over the mapping; it keeps the mapping alive after
  // this object is gone. The memory is read-only: writing into it crashes
  // (SIGSEGV), so use load() for tensors you will modify. Falls back to a copy
  // when the bytes are not aligned for the dtype (never for files written by
  // HF or by save_safetensors, which order tensors by alignment).
  at::Tensor view(const std::string& name) const;
  // An owning, writable copy.
  at::Tensor load(const std::string& name) const;
  NamedTensors load_all() const;

 private:
  struct State;
  std::shared_ptr<const State> state_;
};

// A Hugging Face checkpoint directory: `model.safetensors`, or else
// `model.safetensors.index.json` plus the shards it names, presented as one
// name -> tensor map. Shards are opened (and their headers validated) up front.
class SafetensorsCheckpoint {
 public:
  // Throws IoError if neither file exists or a shard is missing, FormatError if
  // the index or a shard is malformed or a shard name leaves the directory.
  explicit SafetensorsCheckpoint(const std::filesystem::path& dir);

  const std::filesystem::path& dir() const;
  // Sorted by name.
  const std::vector<std::string>& names() const;
  bool contains(const std::string& name) const;
  // Throws ValueError naming the directory if `name` is absent.
  const SafetensorsEntry& entry(const std::string& name) const;
  // The shard holding `name`.
  const SafetensorsFile& shard(const std::string& name) const;
  const std::vector<SafetensorsFile>& shards() const;

  // As SafetensorsFile::view / load.
  at::Tensor view(const std::string& name) const;
  at::Tensor load(const std::string& name) const;
  NamedTensors load_all() const;

 private:
  struct State;
  std::shared_ptr<const State> state_;
};

// Writes `tensors` (any device, any strides; copied to contiguous CPU one at a
// time) to `path` atomically: a temp file in the same directory is written,
// fsynced and renamed over `path`. Throws ValueError for a duplicate or
// reserved name or an unsupported dtype/layout, IoError if writing fails.
void save_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                      const SafetensorsMetadata& metadata = {});

// Writes a Hugging Face checkpoint into `dir` (created if needed): shards of at
// most `max_shard_bytes` of tensor data (a larger tensor gets a shard of its
// own) named `model-00001-of-0000N.safetensors` plus
// `model.safetensors.index.json`, or a single `model.safetensors` if everything
// fits. Adds metadata {"format": "pt"} unless given (transformers requires it),
// and removes the files of an earlier save that the new one does not replace.
// Each file is replaced atomically, but not the set: for an all-or-nothing
// save, write a fresh directory and rename it. Returns the files written.
std::vector<std::filesystem::path> save_safetensors_checkpoint(const std::filesystem::path& dir,
                                                               const NamedTensors& tensors,
                                                               std::uint64_t max_shard_bytes,
                                                               SafetensorsMetadata metadata = {});

}  // namespace rlcore
