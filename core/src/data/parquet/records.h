// Private to the core's data code: parquet dataset files as JSON records, read
// and written with Apache Arrow C++ (docs/decisions/0009-parquet-with-arrow.md).
// Arrow's headers need C++20, so only this folder's sources see them (the
// rlcore_parquet library); this interface is plain C++17.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace rlcore::data::parquet {

// Calls `visit(record, where)` for each row of the parquet file `path`, in
// order; `where` is "path[ROW]" (0-based over the whole file). A row is an
// object with one key per column: strings, integers, floats and booleans as
// themselves, null for a null, lists (and fixed-size lists) as arrays, structs
// as objects, maps with string keys as objects, dictionary-encoded columns as
// their values. Throws IoError when the file cannot be opened, and FormatError
// naming the file for a file that is not valid parquet and naming the column
// (e.g. "extra_info.image") for a type rlcore cannot read (binary, dates, ...).
void for_each_record(const std::string& path,
                     const std::function<void(const nlohmann::json& record, const std::string& where)>& visit);

struct WriteOptions {
  std::vector<std::string> columns;  // the file's columns in this order; every record has only these keys
  int64_t rows_per_group = 1024 * 1024;
};

// Writes `records` (objects) to `path` as one parquet table, snappy-compressed,
// atomically (a temporary file renamed into place). Column types follow the
// values: string, int64 (integers), double (any float among them), bool,
// list<...> for arrays and struct<...> for objects, whose fields are the union
// of the keys seen, in sorted order, as Hugging Face `datasets` writes them;
// nulls are allowed anywhere. Throws ValueError naming the record and column
// for a key outside `columns` or values of mixed types, IoError when `path`
// cannot be written.
void write_records(const std::string& path, const std::vector<nlohmann::json>& records, const WriteOptions& options);

}  // namespace rlcore::data::parquet
