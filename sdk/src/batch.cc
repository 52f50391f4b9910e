// Batch column operations with verl DataProto semantics. Every operation that
// rearranges rows is expressed once as "tensor op + the same row list on JSON".
#include "rlcore/batch.h"

#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <sstream>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "rlcore/error.h"
#include "rlcore/string_join.h"

namespace rlcore {

using nlohmann::json;
using JsonColumn = std::vector<json>;
using Rows = std::vector<int64_t>;

struct Batch::Impl {
  std::optional<int64_t> size;
  std::map<std::string, at::Tensor> tensors;
  std::map<std::string, JsonColumn> non_tensors;
  json meta_info = json::object();

  bool contains(const std::string& key) const { return tensors.count(key) > 0 || non_tensors.count(key) > 0; }

  // A batch of `rows.size()` rows: tensors through `tensor_op`, JSON columns by
  // picking `rows`, which must describe the same rows as `tensor_op` produces.
  template <class TensorOp>
  std::unique_ptr<Impl> take(const Rows& rows, TensorOp&& tensor_op) const {
    auto out = std::make_unique<Impl>();
    out->size = static_cast<int64_t>(rows.size());
    out->meta_info = meta_info;
    for (const auto& [key, tensor] : tensors) out->tensors.emplace(key, tensor_op(tensor));
    for (const auto& [key, column] : non_tensors) {
      JsonColumn picked;
      picked.reserve(rows.size());
      for (int64_t row : rows) picked.push_back(column[row]);
      out->non_tensors.emplace(key, std::move(picked));
    }
    return out;
  }
};

namespace {

template <class T>
std::string str(const T& value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

template <class Map>
std::vector<std::string> keys_of(const Map& map) {
  std::vector<std::string> keys;
  keys.reserve(map.size());
  for (const auto& entry : map) keys.push_back(entry.first);
  return keys;
}

// Bitwise rather than at::equal: a column holding NaN is still "the same column".
bool same_tensor(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  if (a.is_same(b)) return true;
  at::Tensor ca = a.cpu().contiguous();
  at::Tensor cb = b.cpu().contiguous();
  return ca.nbytes() == 0 || std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

Rows range_rows(int64_t start, int64_t end, int64_t step) {
  Rows rows;
  for (int64_t row = start; row < end; row += step) rows.push_back(row);
  return rows;
}

}  // namespace

Batch::Batch() = default;
Batch::Batch(int64_t size) : impl_(std::make_unique<Impl>()) {
  if (size < 0) throw ValueError("Batch: size must be >= 0, got " + std::to_string(size));
  impl_->size = size;
}
Batch::Batch(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Batch::Batch(const Batch& other) : impl_(other.impl_ ? std::make_unique<Impl>(*other.impl_) : nullptr) {}
Batch::Batch(Batch&& other) noexcept = default;
Batch& Batch::operator=(const Batch& other) {
  if (this != &other) impl_ = other.impl_ ? std::make_unique<Impl>(*other.impl_) : nullptr;
  return *this;
}
Batch& Batch::operator=(Batch&& other) noexcept = default;
Batch::~Batch() = default;

const Batch::Impl& Batch::impl() const {
  static const Impl kEmpty;
  return impl_ ? *impl_ : kEmpty;
}

Batch::Impl& Batch::mutable_impl() {
  if (!impl_) impl_ = std::make_unique<Impl>();
  return *impl_;
}

int64_t Batch::size() const { return impl().size.value_or(0); }
bool Batch::has_size() const { return impl().size.has_value(); }

namespace {

void check_rows(const std::optional<int64_t>& size, const std::string& key, int64_t rows) {
  if (size && *size != rows) {
    throw ValueError("column '" + key + "' has " + std::to_string(rows) + " rows but the batch has " +
                     std::to_string(*size));
  }
}

}  // namespace

void Batch::set(const std::string& key, at::Tensor value) {
  if (!value.defined()) throw ValueError("column '" + key + "': tensor is undefined");
  if (value.dim() == 0) {
    throw ValueError("column '" + key + "': a 0-dim tensor has no batch dimension");
  }
  Impl& self = mutable_impl();
  if (self.non_tensors.count(key)) {
    throw ValueError("column '" + key + "' already exists as a non-tensor column");
  }
  check_rows(self.size, key, value.size(0));
  self.size = value.size(0);
  self.tensors.insert_or_assign(key, std::move(value));
}

void Batch::set_non_tensor(const std::string& key, std::vector<json> values) {
  Impl& self = mutable_impl();
  if (self.tensors.count(key)) {
    throw ValueError("column '" + key + "' already exists as a tensor column");
  }
  const auto rows = static_cast<int64_t>(values.size());
  check_rows(self.size, key, rows);
  self.size = rows;
  self.non_tensors.insert_or_assign(key, std::move(values));
}

bool Batch::contains(const std::string& key) const { return impl().contains(key); }
bool Batch::is_tensor(const std::string& key) const { return impl().tensors.count(key) > 0; }

const at::Tensor& Batch::tensor(const std::string& key) const {
  auto it = impl().tensors.find(key);
  if (it == impl().tensors.end()) {
    throw ValueError("no tensor column '" + key + "'; tensor columns: " + join_or_none(tensor_keys()));
  }
  return it->second;
}

const std::vector<json>& Batch::non_tensor(const std::string& key) const {
  auto it = impl().non_tensors.find(key);
  if (it == impl().non_tensors.end()) {
    throw ValueError("no non-tensor column '" + key + "'; non-tensor columns: " + join_or_none(non_tensor_keys()));
  }
  return it->second;
}

std::vector<std::string> Batch::tensor_keys() const { return keys_of(impl().tensors); }
std::vector<std::string> Batch::non_tensor_keys() const { return keys_of(impl().non_tensors); }

json& Batch::meta_info() { return mutable_impl().meta_info; }
const json& Batch::meta_info() const { return impl().meta_info; }

namespace {

std::string all_columns(const Batch& batch) {
  std::vector<std::string> keys = batch.tensor_keys();
  for (auto& key : batch.non_tensor_keys()) keys.push_back(std::move(key));
  return join_or_none(keys);
}

}  // namespace

Batch Batch::select(const std::vector<std::string>& keys) const {
  const Impl& self = impl();
  auto out = std::make_unique<Impl>();
  out->size = self.size;
  out->meta_info = self.meta_info;
  for (const auto& key : keys) {
    if (auto it = self.tensors.find(key); it != self.tensors.end()) {
      out->tensors.insert(*it);
    } else if (auto jt = self.non_tensors.find(key); jt != self.non_tensors.end()) {
      out->non_tensors.insert(*jt);
    } else {
      throw ValueError("select: no column '" + key + "'; columns: " + all_columns(*this));
    }
  }
  return Batch(std::move(out));
}

Batch Batch::pop(const std::vector<std::string>& keys) {
  for (const auto& key : keys) {
    if (!contains(key)) {
      throw ValueError("pop: no column '" + key + "'; columns: " + all_columns(*this));
    }
  }
  Impl& self = mutable_impl();
  auto out = std::make_unique<Impl>();
  out->size = self.size;
  out->meta_info = self.meta_info;
  for (const auto& key : keys) {
    if (auto node = self.tensors.extract(key)) out->tensors.insert(std::move(node));
    if (auto node = self.non_tensors.extract(key)) out->non_tensors.insert(std::move(node));
  }
  return Batch(std::move(out));
}

void Batch::rename(const std::string& from, const std::string& to) {
  if (!contains(from)) {
    throw ValueError("rename: no column '" + from + "'; columns: " + all_columns(*this));
  }
  if (from == to) return;
  if (contains(to)) throw ValueError("rename: column '" + to + "' already exists");
  Impl& self = mutable_impl();
  if (auto node = self.tensors.extract(from)) {
    node.key() = to;
    self.tensors.insert(std::move(node));
  } else {
    auto column = self.non_tensors.extract(from);
    column.key() = to;
    self.non_tensors.insert(std::move(column));
  }
}

Batch& Batch::union_with(const Batch& other) {
  const Impl& theirs = other.impl();
  const Impl& mine = impl();
  if (mine.size && theirs.size && *mine.size != *theirs.size) {
    throw ValueError("union: batch sizes differ (" + std::to_string(*mine.size) + " vs " +
                     std::to_string(*theirs.size) + ")");
  }
  // Check everything before changing anything, so a failed union leaves *this intact.
  for (const auto& [key, tensor] : theirs.tensors) {
    if (mine.non_tensors.count(key)) {
      throw ValueError("union: '" + key + "' is a non-tensor column here but a tensor column there");
    }
    auto it = mine.tensors.find(key);
    if (it != mine.tensors.end() && !same_tensor(it->second, tensor)) {
      throw ValueError("union: tensor column '" + key + "' differs between the batches");
    }
  }
  for (const auto& [key, column] : theirs.non_tensors) {
    if (mine.tensors.count(key)) {
      throw ValueError("union: '" + key + "' is a tensor column here but a non-tensor column there");
    }
    auto it = mine.non_tensors.find(key);
    if (it != mine.non_tensors.end() && it->second != column) {
      throw ValueError("union: non-tensor column '" + key + "' differs between the batches");
    }
  }
  for (const auto& [key, value] : theirs.meta_info.items()) {
    auto it = mine.meta_info.find(key);
    if (it != mine.meta_info.end() && *it != value) {
      throw ValueError("union: meta_info key '" + key + "' differs (" + it->dump() + " vs " + value.dump() + ")");
    }
  }
  Impl& self = mutable_impl();
  if (!self.size) self.size = theirs.size;
  for (const auto& entry : theirs.tensors) self.tensors.insert(entry);
  for (const auto& entry : theirs.non_tensors) self.non_tensors.insert(entry);
  for (const auto& [key, value] : theirs.meta_info.items()) self.meta_info.emplace(key, value);
  return *this;
}

Batch Batch::slice(int64_t start, int64_t end, int64_t step) const {
  if (start < 0 || end < start || end > size() || step < 1) {
    throw ValueError("slice(" + std::to_string(start) + ", " + std::to_string(end) + ", " + std::to_string(step) +
                     ") is invalid for a batch of " + std::to_string(size()) + " rows");
  }
  return Batch(
      impl().take(range_rows(start, end, step), [&](const at::Tensor& t) { return t.slice(0, start, end, step); }));
}

std::vector<Batch> Batch::chunk(int64_t chunks) const {
  if (chunks < 1) throw ValueError("chunk: chunks must be >= 1, got " + std::to_string(chunks));
  if (size() % chunks != 0) {
    throw ValueError("chunk: batch size " + std::to_string(size()) + " is not divisible by " + std::to_string(chunks) +
                     "; call pad_to_divisor(" + std::to_string(chunks) + ") first");
  }
  const int64_t rows = size() / chunks;
  std::vector<Batch> parts;
  for (int64_t i = 0; i < chunks; ++i) parts.push_back(slice(i * rows, (i + 1) * rows));
  return parts;
}

std::vector<Batch> Batch::split(int64_t split_size) const {
  if (split_size < 1) {
    throw ValueError("split: split_size must be >= 1, got " + std::to_string(split_size));
  }
  std::vector<Batch> parts;
  for (int64_t start = 0; start < size(); start += split_size) {
    parts.push_back(slice(start, std::min(start + split_size, size())));
  }
  return parts;
}

int64_t Batch::pad_to_divisor(int64_t divisor) {
  if (divisor < 1) {
    throw ValueError("pad_to_divisor: divisor must be >= 1, got " + std::to_string(divisor));
  }
  const int64_t rows = size();
  const int64_t pad = (divisor - rows % divisor) % divisor;
  if (pad == 0) return 0;
  Rows order = range_rows(0, rows, 1);
  for (int64_t i = 0; i < pad; ++i) order.push_back(i % rows);
  at::Tensor index = at::tensor(order, at::kLong);
  impl_ = impl().take(order, [&](const at::Tensor& t) { return t.index_select(0, index.to(t.device())); });
  return pad;
}

void Batch::unpad(int64_t pad) {
  if (pad < 0 || pad > size()) {
    throw ValueError("unpad: pad " + std::to_string(pad) + " is out of range for a batch of " + std::to_string(size()) +
                     " rows");
  }
  if (pad > 0) *this = slice(0, size() - pad);
}

Batch Batch::repeat(int64_t times, bool interleave) const {
  const int64_t rows = size();
  if (times < 1) throw ValueError("repeat: times must be >= 1, got " + std::to_string(times));
  if (rows > 0 && times > std::numeric_limits<int64_t>::max() / rows) {
    throw ValueError("repeat: " + std::to_string(rows) + " rows x " + std::to_string(times) + " overflows");
  }
  Rows order;
  order.reserve(static_cast<size_t>(rows * times));
  for (int64_t i = 0; i < rows * times; ++i) order.push_back(interleave ? i / times : i % rows);
  return Batch(impl().take(order, [&](const at::Tensor& t) {
    if (interleave) return t.repeat_interleave(times, 0);
    std::vector<int64_t> reps(t.dim(), 1);
    reps[0] = times;
    return t.repeat(reps);
  }));
}

void Batch::reorder(const at::Tensor& indices) {
  if (!indices.defined() || indices.dim() != 1 || !at::isIntegralType(indices.scalar_type(), /*includeBool=*/false)) {
    throw ValueError("reorder: indices must be a 1-D integer tensor");
  }
  at::Tensor index = indices.to(at::kCPU, at::kLong).contiguous();
  const int64_t* data = index.data_ptr<int64_t>();
  Rows order(data, data + index.numel());
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i] < 0 || order[i] >= size()) {
      throw ValueError("reorder: indices[" + std::to_string(i) + "] = " + std::to_string(order[i]) +
                       " is out of range for a batch of " + std::to_string(size()) + " rows");
    }
  }
  impl_ = impl().take(order, [&](const at::Tensor& t) { return t.index_select(0, index.to(t.device())); });
}

namespace {

// Names the first column that `part` lacks relative to `first`, or that it adds.
template <class Map>
void check_same_keys(const Map& first, const Map& part, size_t index, const char* kind) {
  for (const auto& entry : first) {
    if (!part.count(entry.first)) {
      throw ValueError("concat: part " + std::to_string(index) + " lacks " + kind + " column '" + entry.first + "'");
    }
  }
  for (const auto& entry : part) {
    if (!first.count(entry.first)) {
      throw ValueError("concat: part " + std::to_string(index) + " has " + kind + " column '" + entry.first +
                       "' that part 0 lacks");
    }
  }
}

void check_concatenable(const std::string& key, const at::Tensor& first, const at::Tensor& part, size_t index) {
  const bool same_trailing = first.dim() == part.dim() && first.sizes().slice(1) == part.sizes().slice(1);
  if (first.scalar_type() != part.scalar_type() || first.device() != part.device() || !same_trailing) {
    throw ValueError("concat: tensor column '" + key + "' is " + str(part.scalar_type()) + str(part.sizes()) + " on " +
                     str(part.device()) + " in part " + std::to_string(index) + " but " + str(first.scalar_type()) +
                     str(first.sizes()) + " on " + str(first.device()) + " in part 0");
  }
}

}  // namespace

Batch Batch::concat(const std::vector<Batch>& parts) {
  if (parts.empty()) throw ValueError("concat: no batches given");
  const Impl& first = parts[0].impl();
  auto out = std::make_unique<Impl>();
  for (size_t i = 0; i < parts.size(); ++i) {
    const Impl& part = parts[i].impl();
    check_same_keys(first.tensors, part.tensors, i, "tensor");
    check_same_keys(first.non_tensors, part.non_tensors, i, "non-tensor");
    for (const auto& [key, tensor] : part.tensors) {
      check_concatenable(key, first.tensors.at(key), tensor, i);
    }
    for (const auto& [key, value] : part.meta_info.items()) {
      auto it = out->meta_info.find(key);
      if (it != out->meta_info.end() && *it != value) {
        throw ValueError("concat: meta_info key '" + key + "' differs in part " + std::to_string(i) + " (" +
                         value.dump() + " vs " + it->dump() + ")");
      }
      out->meta_info.emplace(key, value);
    }
    if (part.size) out->size = out->size.value_or(0) + *part.size;
  }
  for (const auto& entry : first.tensors) {
    std::vector<at::Tensor> pieces;
    for (const auto& part : parts) pieces.push_back(part.impl().tensors.at(entry.first));
    out->tensors.emplace(entry.first, at::cat(pieces, 0));
  }
  for (const auto& entry : first.non_tensors) {
    JsonColumn joined;
    for (const auto& part : parts) {
      const JsonColumn& column = part.impl().non_tensors.at(entry.first);
      joined.insert(joined.end(), column.begin(), column.end());
    }
    out->non_tensors.emplace(entry.first, std::move(joined));
  }
  return Batch(std::move(out));
}

bool Batch::equals(const Batch& other) const {
  const Impl& a = impl();
  const Impl& b = other.impl();
  if (a.size != b.size || a.meta_info != b.meta_info || a.non_tensors != b.non_tensors ||
      keys_of(a.tensors) != keys_of(b.tensors)) {
    return false;
  }
  for (const auto& [key, tensor] : a.tensors) {
    if (!same_tensor(tensor, b.tensors.at(key))) return false;
  }
  return true;
}

}  // namespace rlcore
