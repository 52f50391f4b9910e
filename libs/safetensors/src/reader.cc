// Reading safetensors: header validation (the file is untrusted input), the
// memory mapping behind zero-copy views, and sharded checkpoint directories.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <system_error>
#include <unordered_map>
#include <unordered_set>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "rlcore/error.h"
#include "rlcore/safetensors/safetensors.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian; views would need byte swapping");

namespace rlcore {
namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;  // ordered: names() keeps header order

namespace {

struct DtypeName {
  const char* name;
  at::ScalarType dtype;
};

constexpr std::array<DtypeName, 10> kDtypes{{
    {"F64", at::kDouble},
    {"F32", at::kFloat},
    {"F16", at::kHalf},
    {"BF16", at::kBFloat16},
    {"I64", at::kLong},
    {"I32", at::kInt},
    {"I16", at::kShort},
    {"I8", at::kChar},
    {"U8", at::kByte},
    {"BOOL", at::kBool},
}};

constexpr std::uint64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

std::string last_errno_text() { return std::system_category().message(errno); }

// Keeps error messages short when a hostile header holds huge values.
std::string brief(const Json& value) {
  std::string text = value.dump();
  constexpr std::size_t kMax = 80;
  return text.size() <= kMax ? text : text.substr(0, kMax) + "...";
}

// A read-only private mapping of a whole file; views hold it via shared_ptr.
class MappedFile {
 public:
  explicit MappedFile(const fs::path& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw IoError(path.string() + ": cannot open: " + last_errno_text());
    struct stat info {};
    if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
      std::string why = S_ISDIR(info.st_mode) ? "is a directory" : "not a regular file";
      ::close(fd);
      throw IoError(path.string() + ": cannot read: " + why);
    }
    size_ = static_cast<std::uint64_t>(info.st_size);
    if (size_ > 0) {
      void* addr = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (addr == MAP_FAILED) {
        std::string why = last_errno_text();
        ::close(fd);
        throw IoError(path.string() + ": cannot mmap: " + why);
      }
      data_ = static_cast<const std::uint8_t*>(addr);
    }
    ::close(fd);  // the mapping stays valid without the descriptor
  }
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<std::uint8_t*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::uint8_t* data() const { return data_; }
  std::uint64_t size() const { return size_; }

 private:
  const std::uint8_t* data_ = nullptr;
  std::uint64_t size_ = 0;
};

// Parses untrusted JSON. Rejects what nlohmann would accept silently but other
// parsers refuse, so that two readers of one file cannot disagree about it:
// duplicate keys (nlohmann keeps one) and NUL bytes (nlohmann stops reading at
// the first). Also rejects nesting deeper than `max_depth`, which no valid
// file has.
Json parse_untrusted_json(const char* begin, const char* end, int max_depth, const std::string& where) {
  if (const void* nul = std::memchr(begin, '\0', end - begin)) {
    throw FormatError(where + ": not valid JSON: NUL byte at offset " +
                      std::to_string(static_cast<const char*>(nul) - begin));
  }
  std::vector<std::unordered_set<std::string>> keys;  // one set per open object
  int depth = 0;
  auto check = [&](int, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        if (++depth > max_depth) {
          throw FormatError(where + ": JSON nested deeper than " + std::to_string(max_depth));
        }
        if (event == Json::parse_event_t::object_start) keys.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        keys.pop_back();
        --depth;
        break;
      case Json::parse_event_t::array_end:
        --depth;
        break;
      case Json::parse_event_t::key: {
        const auto& key = parsed.get_ref<const std::string&>();
        if (!keys.back().insert(key).second) {
          throw FormatError(where + ": duplicate key '" + key + "'");
        }
        break;
      }
      case Json::parse_event_t::value:
        break;
    }
    return true;
  };
  try {
    return Json::parse(begin, end, check);
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(where + ": not valid JSON: " + e.what());
  }
}

std::uint64_t read_u64_le(const std::uint8_t* bytes) {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

std::uint64_t get_uint(const Json& value, const std::string& what) {
  if (!value.is_number_unsigned()) {
    throw FormatError(what + " must be a non-negative integer, got " + brief(value));
  }
  return value.get<std::uint64_t>();
}

// Checks one header entry against itself and the data size; the ranges'
// relation to each other is check_layout's job.
SafetensorsEntry parse_entry(const std::string& name, const Json& value, std::uint64_t data_size,
                             const std::string& file) {
  const std::string where = file + ": tensor '" + name + "'";
  if (!value.is_object()) throw FormatError(where + ": entry is not an object");
  SafetensorsEntry entry;
  entry.name = name;

  auto dtype = value.find("dtype");
  if (dtype == value.end() || !dtype->is_string()) {
    throw FormatError(where + ": missing or non-string \"dtype\"");
  }
  auto scalar_type = safetensors_dtype_from_name(dtype->get_ref<const std::string&>());
  if (!scalar_type) throw FormatError(where + ": unknown or unsupported dtype " + brief(*dtype));
  entry.dtype = *scalar_type;

  auto shape = value.find("shape");
  if (shape == value.end() || !shape->is_array()) {
    throw FormatError(where + ": missing or non-array \"shape\"");
  }
  // Products of max(dim, 1) must fit int64 so libtorch's numel and strides
  // cannot overflow, even for a tensor with a zero dimension.
  std::uint64_t strides_product = 1;
  bool has_zero = false;
  for (const Json& dim : *shape) {
    if (!dim.is_number_unsigned()) {
      throw FormatError(where + ": shape must hold non-negative integers, got " + brief(*shape));
    }
    std::uint64_t size = dim.get<std::uint64_t>();
    has_zero = has_zero || size == 0;
    if (__builtin_mul_overflow(strides_product, std::max<std::uint64_t>(size, 1), &strides_product) ||
        strides_product > kInt64Max) {
      throw FormatError(where + ": shape " + brief(*shape) + " overflows 64-bit element counts");
    }
    entry.shape.push_back(static_cast<std::int64_t>(size));
  }
  std::uint64_t numel = has_zero ? 0 : strides_product;
  std::uint64_t nbytes = 0;
  if (__builtin_mul_overflow(numel, at::elementSize(entry.dtype), &nbytes)) {
    throw FormatError(where + ": shape " + brief(*shape) + " overflows 64-bit byte counts");
  }

  auto offsets = value.find("data_offsets");
  if (offsets == value.end() || !offsets->is_array() || offsets->size() != 2) {
    throw FormatError(where + ": \"data_offsets\" must be [begin, end]");
  }
  entry.begin = get_uint((*offsets)[0], where + ": data_offsets begin");
  entry.end = get_uint((*offsets)[1], where + ": data_offsets end");
  if (entry.begin > entry.end) {
    throw FormatError(where + ": data_offsets " + brief(*offsets) + " end before they begin");
  }
  if (entry.end > data_size) {
    throw FormatError(where + ": data_offsets " + brief(*offsets) + " run past the end of the " +
                      std::to_string(data_size) + "-byte data region (truncated file?)");
  }
  if (entry.nbytes() != nbytes) {
    throw FormatError(where + ": shape " + brief(*shape) + " of " + dtype->get<std::string>() + " needs " +
                      std::to_string(nbytes) + " bytes but data_offsets " + brief(*offsets) + " span " +
                      std::to_string(entry.nbytes()));
  }
  return entry;
}

// Like the reference implementation, the ranges must tile the data region
// exactly: no overlaps (aliasing tensors) and no holes (hidden bytes).
void check_layout(const std::vector<SafetensorsEntry>& entries, std::uint64_t data_size, const std::string& file) {
  std::vector<const SafetensorsEntry*> sorted;
  for (const auto& entry : entries) sorted.push_back(&entry);
  std::sort(sorted.begin(), sorted.end(),
            [](const auto* a, const auto* b) { return std::tie(a->begin, a->end) < std::tie(b->begin, b->end); });
  std::uint64_t covered = 0;
  const SafetensorsEntry* previous = nullptr;
  for (const auto* entry : sorted) {
    if (entry->begin < covered) {
      throw FormatError(file + ": tensor '" + entry->name + "' overlaps tensor '" + previous->name +
                        "' (data_offsets begin " + std::to_string(entry->begin) + " < " + std::to_string(covered) +
                        ")");
    }
    if (entry->begin > covered) {
      throw FormatError(file + ": hole in the data region: bytes [" + std::to_string(covered) + ", " +
                        std::to_string(entry->begin) + ") before tensor '" + entry->name + "' belong to no tensor");
    }
    covered = entry->end;
    previous = entry;
  }
  if (covered != data_size) {
    throw FormatError(file + ": hole in the data region: bytes [" + std::to_string(covered) + ", " +
                      std::to_string(data_size) + ") at the end belong to no tensor");
  }
}

SafetensorsMetadata parse_metadata(const Json& value, const std::string& file) {
  SafetensorsMetadata metadata;
  if (value.is_null()) return metadata;  // serde's Option accepts null too
  if (!value.is_object()) throw FormatError(file + ": __metadata__ is not an object");
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string()) {
      throw FormatError(file + ": __metadata__ value for '" + key + "' is not a string");
    }
    metadata.emplace(key, item.get<std::string>());
  }
  return metadata;
}

}  // namespace

std::optional<at::ScalarType> safetensors_dtype_from_name(std::string_view name) {
  for (const auto& entry : kDtypes) {
    if (name == entry.name) return entry.dtype;
  }
  return std::nullopt;
}

std::string_view safetensors_dtype_name(at::ScalarType dtype) {
  for (const auto& entry : kDtypes) {
    if (dtype == entry.dtype) return entry.name;
  }
  throw ValueError(std::string("safetensors has no dtype for ") + c10::toString(dtype));
}

// ---------------------------------------------------------------------------
// SafetensorsFile

struct SafetensorsFile::State {
  fs::path path;
  std::shared_ptr<const MappedFile> mapping;
  const std::uint8_t* data = nullptr;  // start of the data region
  std::vector<SafetensorsEntry> entries;
  std::vector<std::string> names;
  std::unordered_map<std::string, std::size_t> index;
  SafetensorsMetadata metadata;
};

SafetensorsFile::SafetensorsFile(const fs::path& path) {
  auto state = std::make_shared<State>();
  state->path = path;
  const std::string file = path.string();
  auto mapping = std::make_shared<const MappedFile>(path);
  const std::uint64_t file_size = mapping->size();
  if (file_size < 8) {
    throw FormatError(file + ": " + std::to_string(file_size) + " bytes is too short for the 8-byte header length");
  }
  const std::uint64_t header_size = read_u64_le(mapping->data());
  if (header_size < 2 || header_size > kSafetensorsMaxHeaderBytes) {
    throw FormatError(file + ": header length " + std::to_string(header_size) + " is outside [2, " +
                      std::to_string(kSafetensorsMaxHeaderBytes) + "]");
  }
  if (header_size > file_size - 8) {
    throw FormatError(file + ": header length " + std::to_string(header_size) + " exceeds the " +
                      std::to_string(file_size - 8) + " bytes after it (truncated file?)");
  }
  const char* header = reinterpret_cast<const char*>(mapping->data() + 8);
  // Depth 3: the top object, a tensor entry, its shape array.
  Json root = parse_untrusted_json(header, header + header_size, 3, file + ": header");
  if (!root.is_object()) throw FormatError(file + ": header is not a JSON object");

  const std::uint64_t data_size = file_size - 8 - header_size;
  for (const auto& [name, value] : root.items()) {
    if (name == "__metadata__") {
      state->metadata = parse_metadata(value, file);
      continue;
    }
    state->index.emplace(name, state->entries.size());
    state->entries.push_back(parse_entry(name, value, data_size, file));
    state->names.push_back(name);
  }
  check_layout(state->entries, data_size, file);
  state->data = mapping->data() + 8 + header_size;
  state->mapping = std::move(mapping);
  state_ = std::move(state);
}

const fs::path& SafetensorsFile::path() const { return state_->path; }

const std::vector<std::string>& SafetensorsFile::names() const { return state_->names; }

bool SafetensorsFile::contains(const std::string& name) const { return state_->index.count(name) != 0; }

const SafetensorsEntry& SafetensorsFile::entry(const std::string& name) const {
  auto it = state_->index.find(name);
  if (it == state_->index.end()) {
    throw ValueError(state_->path.string() + ": no tensor named '" + name + "'");
  }
  return state_->entries[it->second];
}

const SafetensorsMetadata& SafetensorsFile::metadata() const { return state_->metadata; }

at::Tensor SafetensorsFile::view(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  const std::uint8_t* bytes = state_->data + e.begin;
  if (reinterpret_cast<std::uintptr_t>(bytes) % at::elementSize(e.dtype) != 0) return load(name);
  std::shared_ptr<const MappedFile> keep_alive = state_->mapping;
  return at::from_blob(
      const_cast<std::uint8_t*>(bytes), e.shape, [keep_alive](void*) {}, at::TensorOptions().dtype(e.dtype));
}

at::Tensor SafetensorsFile::load(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  at::Tensor tensor = at::empty(e.shape, at::TensorOptions().dtype(e.dtype));
  if (e.nbytes() > 0) std::memcpy(tensor.data_ptr(), state_->data + e.begin, e.nbytes());
  return tensor;
}

NamedTensors SafetensorsFile::load_all() const {
  NamedTensors tensors;
  tensors.reserve(state_->names.size());
  for (const auto& name : state_->names) tensors.emplace_back(name, load(name));
  return tensors;
}

// ---------------------------------------------------------------------------
// SafetensorsCheckpoint

namespace {

// Shard names must be bare file names. A prefix check on canonical paths would
// also reject Hugging Face's cache, whose snapshot files symlink into blobs/.
bool is_bare_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find_first_of(std::string("/\0", 2)) == std::string::npos;
}

std::string read_small_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path.string() + ": cannot open: " + last_errno_text());
  std::error_code ec;
  auto size = fs::file_size(path, ec);
  if (!ec && size > kSafetensorsMaxHeaderBytes) {
    throw FormatError(path.string() + ": " + std::to_string(size) + " bytes is too large for an index");
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw IoError(path.string() + ": read failed");
  return text.str();
}

}  // namespace

struct SafetensorsCheckpoint::State {
  fs::path dir;
  std::vector<SafetensorsFile> shards;
  std::vector<std::string> names;
  std::unordered_map<std::string, std::size_t> shard_of;
};

SafetensorsCheckpoint::SafetensorsCheckpoint(const fs::path& dir) {
  auto state = std::make_shared<State>();
  state->dir = dir;
  const fs::path single = dir / kSafetensorsSingleFile;
  const fs::path index_path = dir / kSafetensorsIndexFile;
  std::error_code ec;
  if (fs::exists(single, ec)) {
    state->shards.emplace_back(single);
    for (const auto& name : state->shards[0].names()) state->shard_of.emplace(name, 0);
  } else if (fs::exists(index_path, ec)) {
    const std::string where = index_path.string();
    const std::string text = read_small_file(index_path);
    // Depth 2: the top object and weight_map / metadata.
    Json index = parse_untrusted_json(text.data(), text.data() + text.size(), 2, where);
    auto weight_map = index.is_object() ? index.find("weight_map") : index.end();
    if (weight_map == index.end() || !weight_map->is_object()) {
      throw FormatError(where + ": missing \"weight_map\" object");
    }
    std::unordered_map<std::string, std::size_t> shard_index;
    for (const auto& [name, shard] : weight_map->items()) {
      if (!shard.is_string() || !is_bare_file_name(shard.get<std::string>())) {
        throw FormatError(where + ": weight_map['" + name + "'] = " + brief(shard) + " is not a file name inside " +
                          dir.string());
      }
      const std::string& shard_name = shard.get_ref<const std::string&>();
      auto [it, added] = shard_index.emplace(shard_name, state->shards.size());
      if (added) {
        const fs::path shard_path = dir / shard_name;
        if (!fs::is_regular_file(shard_path, ec)) {
          throw IoError(where + ": shard '" + shard_name + "' (holding tensor '" + name + "') does not exist in " +
                        dir.string());
        }
        state->shards.emplace_back(shard_path);
      }
      if (!state->shards[it->second].contains(name)) {
        throw FormatError(where + ": tensor '" + name + "' is not in its shard '" + shard_name + "'");
      }
      state->shard_of.emplace(name, it->second);
    }
  } else {
    throw IoError(dir.string() + ": no " + kSafetensorsSingleFile + " or " + kSafetensorsIndexFile);
  }
  for (const auto& item : state->shard_of) state->names.push_back(item.first);
  std::sort(state->names.begin(), state->names.end());
  state_ = std::move(state);
}

const fs::path& SafetensorsCheckpoint::dir() const { return state_->dir; }

const std::vector<std::string>& SafetensorsCheckpoint::names() const { return state_->names; }

bool SafetensorsCheckpoint::contains(const std::string& name) const { return state_->shard_of.count(name) != 0; }

const SafetensorsFile& SafetensorsCheckpoint::shard(const std::string& name) const {
  auto it = state_->shard_of.find(name);
  if (it == state_->shard_of.end()) {
    throw ValueError(state_->dir.string() + ": no tensor named '" + name + "' in the checkpoint");
  }
  return state_->shards[it->second];
}

const std::vector<SafetensorsFile>& SafetensorsCheckpoint::shards() const { return state_->shards; }

const SafetensorsEntry& SafetensorsCheckpoint::entry(const std::string& name) const { return shard(name).entry(name); }

at::Tensor SafetensorsCheckpoint::view(const std::string& name) const { return shard(name).view(name); }

at::Tensor SafetensorsCheckpoint::load(const std::string& name) const { return shard(name).load(name); }

NamedTensors SafetensorsCheckpoint::load_all() const {
  NamedTensors tensors;
  tensors.reserve(state_->names.size());
  for (const auto& name : state_->names) tensors.emplace_back(name, load(name));
  return tensors;
}

}  // namespace rlcore
