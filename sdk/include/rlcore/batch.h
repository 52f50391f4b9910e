// Batch: the unit of data passed between trainer stages (verl's DataProto).
// Named tensor and per-row JSON columns that share a row count, plus meta_info.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <nlohmann/json_fwd.hpp>

#include "rlcore/export.h"

namespace rlcore {

// Every column has exactly size() rows: a tensor column's first dimension, a
// non-tensor column's vector length. Tensor and non-tensor columns share one key
// space, so a key names exactly one column.
//
// The row count is fixed by the constructor or by the first column set; it stays
// when columns are removed (like a TensorDict's batch_size).
//
// Copies share tensor storage (like a Python dict of tensors); operations that
// return a new Batch follow torch: slice()/chunk()/split() return views, the
// others copy rows. Precondition violations throw rlcore::ValueError.
class RLCORE_API Batch {
 public:
  Batch();
  explicit Batch(int64_t size);
  Batch(const Batch& other);
  Batch(Batch&& other) noexcept;
  Batch& operator=(const Batch& other);
  Batch& operator=(Batch&& other) noexcept;
  ~Batch();

  // Rows in every column; 0 while no size has been fixed.
  int64_t size() const;
  // False only for a Batch that was never given a size nor a column.
  bool has_size() const;

  // Adds or replaces a column. The tensor needs at least one dimension.
  void set(const std::string& key, at::Tensor value);
  void set_non_tensor(const std::string& key, std::vector<nlohmann::json> values);

  bool contains(const std::string& key) const;
  bool is_tensor(const std::string& key) const;
  const at::Tensor& tensor(const std::string& key) const;
  const std::vector<nlohmann::json>& non_tensor(const std::string& key) const;
  // Sorted, so iteration order (and the wire encoding) is deterministic.
  std::vector<std::string> tensor_keys() const;
  std::vector<std::string> non_tensor_keys() const;

  // Always a JSON object.
  nlohmann::json& meta_info();
  const nlohmann::json& meta_info() const;

  // Keeps only `keys` (tensor or non-tensor); meta_info is copied.
  Batch select(const std::vector<std::string>& keys) const;
  // Removes `keys` and returns them as a Batch of the same size; meta_info is copied.
  Batch pop(const std::vector<std::string>& keys);
  void rename(const std::string& from, const std::string& to);

  // Adds the other batch's columns and meta_info keys. A key present in both
  // must hold identical content (same dtype, shape and bytes / equal JSON).
  // Nothing changes when it throws.
  Batch& union_with(const Batch& other);

  // Rows [start, end) with a step; 0 <= start <= end <= size().
  Batch slice(int64_t start, int64_t end, int64_t step = 1) const;
  // `chunks` equal parts; size() must be divisible (see pad_to_divisor).
  std::vector<Batch> chunk(int64_t chunks) const;
  // Parts of `split_size` rows, the last one possibly shorter.
  std::vector<Batch> split(int64_t split_size) const;
  // Appends rows, cycling from row 0 as verl's pad_dataproto_to_divisor does, so
  // size() becomes a multiple of `divisor`. Returns how many rows were added.
  int64_t pad_to_divisor(int64_t divisor);
  // Drops the last `pad` rows (the inverse of pad_to_divisor).
  void unpad(int64_t pad);
  // interleave: rows a,b -> a,a,b,b; otherwise tiled: a,b,a,b.
  Batch repeat(int64_t times, bool interleave = true) const;
  // Row i becomes old row indices[i]; like verl, indices may repeat or omit rows
  // and the new size is indices.numel(). indices: 1-D integer tensor, any device.
  void reorder(const at::Tensor& indices);

  // Joins along rows. Every part needs the same columns with matching dtype and
  // trailing shape; meta_info keys are merged and must not conflict.
  static Batch concat(const std::vector<Batch>& parts);

  // Same size, columns, dtypes, shapes, bytes, JSON values and meta_info.
  bool equals(const Batch& other) const;

 private:
  struct Impl;
  explicit Batch(std::unique_ptr<Impl> impl);
  const Impl& impl() const;
  Impl& mutable_impl();

  // Null means empty; a moved-from Batch is therefore a valid empty Batch.
  std::unique_ptr<Impl> impl_;
};

}  // namespace rlcore
