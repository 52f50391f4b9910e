// Parquet rows -> JSON records (see data_parquet.h), a row group at a time.
#include <arrow/api.h>
#include <arrow/io/file.h>
#include <parquet/arrow/reader.h>
#include <parquet/exception.h>
#include <parquet/metadata.h>

#include <algorithm>

#include "records.h"
#include "rlcore/error.h"

namespace rlcore::data::parquet {
namespace {

using nlohmann::json;

// Deeper nesting than any dataset has; refused rather than recursed into.
constexpr int kMaxNesting = 64;

// Column types rlcore reads; anything else is refused before any data is read.
void check_readable(const arrow::DataType& type, const std::string& column, const std::string& path, int depth = 0) {
  if (depth > kMaxNesting) {
    throw FormatError(path + ": column '" + column.substr(0, 200) + "...' is nested more than " +
                      std::to_string(kMaxNesting) + " levels deep");
  }
  switch (type.id()) {
    case arrow::Type::NA:
    case arrow::Type::BOOL:
    case arrow::Type::INT8:
    case arrow::Type::INT16:
    case arrow::Type::INT32:
    case arrow::Type::INT64:
    case arrow::Type::UINT8:
    case arrow::Type::UINT16:
    case arrow::Type::UINT32:
    case arrow::Type::UINT64:
    case arrow::Type::FLOAT:
    case arrow::Type::DOUBLE:
    case arrow::Type::STRING:
    case arrow::Type::LARGE_STRING:
      return;
    case arrow::Type::LIST:
    case arrow::Type::LARGE_LIST:
    case arrow::Type::FIXED_SIZE_LIST:
      check_readable(*type.field(0)->type(), column + "[]", path, depth + 1);
      return;
    case arrow::Type::STRUCT:
      for (const auto& field : type.fields())
        check_readable(*field->type(), column + "." + field->name(), path, depth + 1);
      return;
    case arrow::Type::MAP: {
      const auto& map = static_cast<const arrow::MapType&>(type);
      const auto key = map.key_type()->id();
      if (key != arrow::Type::STRING && key != arrow::Type::LARGE_STRING) break;
      check_readable(*map.item_type(), column + "{}", path, depth + 1);
      return;
    }
    case arrow::Type::DICTIONARY:
      check_readable(*static_cast<const arrow::DictionaryType&>(type).value_type(), column, path, depth + 1);
      return;
    default:
      break;
  }
  throw FormatError(path + ": column '" + column + "' has type " + type.ToString() +
                    ", which rlcore cannot read (it reads strings, numbers, booleans and lists, structs and "
                    "string-keyed maps of them); drop or convert the column");
}

std::string text_at(const arrow::Array& array, int64_t row) {
  if (array.type_id() == arrow::Type::LARGE_STRING) {
    return static_cast<const arrow::LargeStringArray&>(array).GetString(row);
  }
  return static_cast<const arrow::StringArray&>(array).GetString(row);
}

template <class ArrayType>
json number_at(const arrow::Array& array, int64_t row) {
  return json(static_cast<const ArrayType&>(array).Value(row));
}

json value_at(const arrow::Array& array, int64_t row);

json elements(const arrow::Array& values, int64_t begin, int64_t end) {
  json out = json::array();
  for (int64_t i = begin; i < end; ++i) out.push_back(value_at(values, i));
  return out;
}

json value_at(const arrow::Array& array, int64_t row) {
  if (array.IsNull(row)) return nullptr;
  switch (array.type_id()) {
    case arrow::Type::NA:
      return nullptr;
    case arrow::Type::BOOL:
      return static_cast<const arrow::BooleanArray&>(array).Value(row);
    case arrow::Type::INT8:
      return number_at<arrow::Int8Array>(array, row);
    case arrow::Type::INT16:
      return number_at<arrow::Int16Array>(array, row);
    case arrow::Type::INT32:
      return number_at<arrow::Int32Array>(array, row);
    case arrow::Type::INT64:
      return number_at<arrow::Int64Array>(array, row);
    case arrow::Type::UINT8:
      return number_at<arrow::UInt8Array>(array, row);
    case arrow::Type::UINT16:
      return number_at<arrow::UInt16Array>(array, row);
    case arrow::Type::UINT32:
      return number_at<arrow::UInt32Array>(array, row);
    case arrow::Type::UINT64:
      return number_at<arrow::UInt64Array>(array, row);
    case arrow::Type::FLOAT:
      return number_at<arrow::FloatArray>(array, row);
    case arrow::Type::DOUBLE:
      return number_at<arrow::DoubleArray>(array, row);
    case arrow::Type::STRING:
    case arrow::Type::LARGE_STRING:
      return text_at(array, row);
    case arrow::Type::LIST: {
      const auto& list = static_cast<const arrow::ListArray&>(array);
      return elements(*list.values(), list.value_offset(row), list.value_offset(row + 1));
    }
    case arrow::Type::LARGE_LIST: {
      const auto& list = static_cast<const arrow::LargeListArray&>(array);
      return elements(*list.values(), list.value_offset(row), list.value_offset(row + 1));
    }
    case arrow::Type::FIXED_SIZE_LIST: {
      const auto& list = static_cast<const arrow::FixedSizeListArray&>(array);
      return elements(*list.values(), list.value_offset(row), list.value_offset(row) + list.value_length(row));
    }
    case arrow::Type::STRUCT: {
      const auto& record = static_cast<const arrow::StructArray&>(array);
      json out = json::object();
      for (int k = 0; k < record.num_fields(); ++k) {
        out[record.struct_type()->field(k)->name()] = value_at(*record.field(k), row);
      }
      return out;
    }
    case arrow::Type::MAP: {
      const auto& map = static_cast<const arrow::MapArray&>(array);
      json out = json::object();
      for (int64_t i = map.value_offset(row); i < map.value_offset(row + 1); ++i) {
        out[text_at(*map.keys(), i)] = value_at(*map.items(), i);
      }
      return out;
    }
    case arrow::Type::DICTIONARY: {
      const auto& dictionary = static_cast<const arrow::DictionaryArray&>(array);
      return value_at(*dictionary.dictionary(), dictionary.GetValueIndex(row));
    }
    default:
      throw FormatError("unreadable parquet type " + array.type()->ToString());  // excluded by check_readable
  }
}

template <class T>
T value_or_throw(arrow::Result<T> result, const std::string& path, const char* doing) {
  if (!result.ok()) throw FormatError(path + ": " + doing + ": " + result.status().ToString());
  return std::move(result).ValueUnsafe();
}

// Arrow sizes its buffers from the row counts the metadata declares, so a
// corrupt count (a 2 KB file declaring 10^11 rows, found by fuzzing) would
// allocate gigabytes before any check ran. The row groups must add up to the
// file's count, and that count must fit the file: no dataset rlcore reads
// (a prompt per row) packs more rows than this per byte.
constexpr int64_t kMaxRowsPerFileByte = 64;

void check_row_counts(const ::parquet::FileMetaData& metadata, int64_t file_bytes, const std::string& path) {
  const int64_t declared = metadata.num_rows();
  if (declared < 0 || declared > kMaxRowsPerFileByte * std::max<int64_t>(file_bytes, 1)) {
    throw FormatError(path + ": the parquet footer declares " + std::to_string(declared) + " rows in a file of " +
                      std::to_string(file_bytes) + " bytes: corrupt");
  }
  int64_t sum = 0;
  for (int group = 0; group < metadata.num_row_groups(); ++group) {
    const int64_t rows = metadata.RowGroup(group)->num_rows();
    if (rows < 0 || rows > declared - sum) {
      throw FormatError(path + ": row group " + std::to_string(group) + " declares " + std::to_string(rows) +
                        " rows, more than the file's " + std::to_string(declared) + ": corrupt");
    }
    sum += rows;
  }
  if (sum != declared) {
    throw FormatError(path + ": the row groups hold " + std::to_string(sum) + " rows, the footer declares " +
                      std::to_string(declared) + ": corrupt");
  }
}

void read_file(const std::string& path,
               const std::function<void(const nlohmann::json& record, const std::string& where)>& visit) {
  auto opened = arrow::io::ReadableFile::Open(path);
  if (!opened.ok()) throw IoError("cannot read dataset file '" + path + "': " + opened.status().ToString());
  const int64_t file_bytes = value_or_throw((*opened)->GetSize(), path, "cannot size the file");
  auto reader = value_or_throw(::parquet::arrow::OpenFile(*opened, arrow::default_memory_pool()), path,
                               "not a readable parquet file");
  check_row_counts(*reader->parquet_reader()->metadata(), file_bytes, path);
  std::shared_ptr<arrow::Schema> schema;
  if (const auto status = reader->GetSchema(&schema); !status.ok()) {
    throw FormatError(path + ": bad parquet schema: " + status.ToString());
  }
  for (const auto& field : schema->fields()) check_readable(*field->type(), field->name(), path);

  int64_t row = 0;
  for (int group = 0; group < reader->num_row_groups(); ++group) {
    const auto table = value_or_throw(reader->ReadRowGroup(group), path, "cannot read a row group");
    // Checks offsets and lengths against the buffers, so a corrupt file cannot
    // send the conversion below out of bounds.
    if (const auto status = table->ValidateFull(); !status.ok()) {
      throw FormatError(path + ": row group " + std::to_string(group) + " is corrupt: " + status.ToString());
    }
    const auto batch = value_or_throw(table->CombineChunksToBatch(), path, "cannot combine a row group");
    for (int64_t i = 0; i < batch->num_rows(); ++i, ++row) {
      json record = json::object();
      for (int c = 0; c < batch->num_columns(); ++c) record[batch->column_name(c)] = value_at(*batch->column(c), i);
      visit(record, path + "[" + std::to_string(row) + "]");
    }
  }
}

}  // namespace

void for_each_record(const std::string& path,
                     const std::function<void(const nlohmann::json& record, const std::string& where)>& visit) {
  try {
    read_file(path, visit);
  } catch (const ::parquet::ParquetException& e) {
    throw FormatError(path + ": not a readable parquet file: " + e.what());
  }
}

}  // namespace rlcore::data::parquet
