// JSON records -> one parquet table (see data_parquet.h): the column types are
// inferred from the values first, then the records are appended to Arrow
// builders of those types.
#include <arrow/api.h>
#include <arrow/io/file.h>
#include <parquet/arrow/writer.h>
#include <parquet/exception.h>

#include <algorithm>
#include <filesystem>
#include <limits>

#include "records.h"
#include "rlcore/error.h"

namespace rlcore::data::parquet {
namespace {

using nlohmann::json;

// The type of a column, widened as values are seen: null < anything; int < float.
struct Shape {
  enum class Kind { kNull, kBool, kInt, kFloat, kString, kList, kStruct };
  Kind kind = Kind::kNull;
  std::vector<std::string> field_names;  // kStruct, sorted
  std::vector<Shape> children;           // kStruct: one per field; kList: the element
};

const char* kind_name(Shape::Kind kind) {
  static const char* const kNames[] = {"null", "boolean", "integer", "float", "string", "list", "struct"};
  return kNames[static_cast<int>(kind)];
}

Shape::Kind kind_of(const json& value) {
  switch (value.type()) {
    case json::value_t::boolean:
      return Shape::Kind::kBool;
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return Shape::Kind::kInt;
    case json::value_t::number_float:
      return Shape::Kind::kFloat;
    case json::value_t::string:
      return Shape::Kind::kString;
    case json::value_t::array:
      return Shape::Kind::kList;
    case json::value_t::object:
      return Shape::Kind::kStruct;
    default:
      return Shape::Kind::kNull;
  }
}

void widen(Shape& shape, const json& value, const std::string& column, const std::string& where) {
  const Shape::Kind kind = kind_of(value);
  if (kind == Shape::Kind::kNull) return;
  if (value.is_number_unsigned() && value.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())) {
    throw ValueError(where + ": column '" + column + "': " + value.dump() + " does not fit in int64");
  }
  const bool numbers = (kind == Shape::Kind::kInt || kind == Shape::Kind::kFloat) &&
                       (shape.kind == Shape::Kind::kInt || shape.kind == Shape::Kind::kFloat);
  if (shape.kind == Shape::Kind::kNull) {
    shape.kind = kind;
    if (kind == Shape::Kind::kList) shape.children.resize(1);
  } else if (numbers) {
    if (kind == Shape::Kind::kFloat) shape.kind = kind;
  } else if (shape.kind != kind) {
    throw ValueError(where + ": column '" + column + "' mixes " + kind_name(shape.kind) + " and " + kind_name(kind) +
                     " values");
  }
  if (kind == Shape::Kind::kList) {
    for (const auto& element : value) widen(shape.children[0], element, column + "[]", where);
  } else if (kind == Shape::Kind::kStruct) {
    for (const auto& [name, field_value] : value.items()) {
      const auto at = std::lower_bound(shape.field_names.begin(), shape.field_names.end(), name);
      const auto index = at - shape.field_names.begin();
      if (at == shape.field_names.end() || *at != name) {
        shape.field_names.insert(at, name);
        shape.children.insert(shape.children.begin() + index, Shape{});
      }
      widen(shape.children[static_cast<size_t>(index)], field_value, column + "." + name, where);
    }
  }
}

std::shared_ptr<arrow::DataType> arrow_type(const Shape& shape, const std::string& column) {
  switch (shape.kind) {
    case Shape::Kind::kNull:
      return arrow::null();
    case Shape::Kind::kBool:
      return arrow::boolean();
    case Shape::Kind::kInt:
      return arrow::int64();
    case Shape::Kind::kFloat:
      return arrow::float64();
    case Shape::Kind::kString:
      return arrow::utf8();
    case Shape::Kind::kList:
      return arrow::list(arrow_type(shape.children[0], column + "[]"));
    case Shape::Kind::kStruct: {
      if (shape.field_names.empty()) {
        throw ValueError("column '" + column + "' holds only empty objects, which parquet cannot store");
      }
      arrow::FieldVector fields;
      for (size_t k = 0; k < shape.field_names.size(); ++k) {
        fields.push_back(
            arrow::field(shape.field_names[k], arrow_type(shape.children[k], column + "." + shape.field_names[k])));
      }
      return arrow::struct_(fields);
    }
  }
  return arrow::null();
}

void check(const arrow::Status& status, const std::string& what) {
  if (!status.ok()) throw IoError(what + ": " + status.ToString());
}

void append(arrow::ArrayBuilder& builder, const json& value) {
  static const std::string what = "building a parquet column";
  if (value.is_null()) return check(builder.AppendNull(), what);
  switch (builder.type()->id()) {
    case arrow::Type::BOOL:
      return check(static_cast<arrow::BooleanBuilder&>(builder).Append(value.get<bool>()), what);
    case arrow::Type::INT64:
      return check(static_cast<arrow::Int64Builder&>(builder).Append(value.get<int64_t>()), what);
    case arrow::Type::DOUBLE:
      return check(static_cast<arrow::DoubleBuilder&>(builder).Append(value.get<double>()), what);
    case arrow::Type::STRING:
      return check(static_cast<arrow::StringBuilder&>(builder).Append(value.get_ref<const std::string&>()), what);
    case arrow::Type::LIST: {
      auto& list = static_cast<arrow::ListBuilder&>(builder);
      check(list.Append(), what);
      for (const auto& element : value) append(*list.value_builder(), element);
      return;
    }
    case arrow::Type::STRUCT: {
      auto& record = static_cast<arrow::StructBuilder&>(builder);
      check(record.Append(), what);
      const std::shared_ptr<arrow::DataType> type = builder.type();  // nested builders make a new one each call
      for (int k = 0; k < record.num_fields(); ++k) {
        const auto field = value.find(type->field(k)->name());
        append(*record.field_builder(k), field == value.end() ? json() : *field);
      }
      return;
    }
    default:
      return check(builder.AppendNull(), what);  // a null-typed column: every value is null
  }
}

std::shared_ptr<arrow::Table> make_table(const std::vector<json>& records, const std::vector<std::string>& columns) {
  std::vector<Shape> shapes(columns.size());
  for (size_t i = 0; i < records.size(); ++i) {
    const std::string where = "record " + std::to_string(i);
    if (!records[i].is_object()) throw ValueError(where + ": a record must be a JSON object");
    for (const auto& [name, value] : records[i].items()) {
      const auto column = std::find(columns.begin(), columns.end(), name);
      if (column == columns.end()) throw ValueError(where + ": key '" + name + "' is not one of the file's columns");
      widen(shapes[static_cast<size_t>(column - columns.begin())], value, name, where);
    }
  }
  arrow::FieldVector fields;
  std::vector<std::shared_ptr<arrow::Array>> arrays;
  for (size_t c = 0; c < columns.size(); ++c) {
    fields.push_back(arrow::field(columns[c], arrow_type(shapes[c], columns[c])));
    std::unique_ptr<arrow::ArrayBuilder> builder;
    check(arrow::MakeBuilder(arrow::default_memory_pool(), fields.back()->type(), &builder), "making a builder");
    for (const auto& record : records) {
      const auto value = record.find(columns[c]);
      append(*builder, value == record.end() ? json() : *value);
    }
    std::shared_ptr<arrow::Array> array;
    check(builder->Finish(&array), "finishing column '" + columns[c] + "'");
    arrays.push_back(std::move(array));
  }
  return arrow::Table::Make(arrow::schema(fields), arrays, static_cast<int64_t>(records.size()));
}

void write_table(const arrow::Table& table, const std::string& path, int64_t rows_per_group) {
  auto sink = arrow::io::FileOutputStream::Open(path);
  if (!sink.ok()) throw IoError("cannot write '" + path + "': " + sink.status().ToString());
  const auto properties = ::parquet::WriterProperties::Builder().compression(::parquet::Compression::SNAPPY)->build();
  check(::parquet::arrow::WriteTable(table, arrow::default_memory_pool(), *sink, rows_per_group, properties),
        "cannot write '" + path + "'");
  check((*sink)->Close(), "cannot write '" + path + "'");
}

}  // namespace

void write_records(const std::string& path, const std::vector<nlohmann::json>& records, const WriteOptions& options) {
  if (options.rows_per_group < 1) throw ValueError("parquet rows_per_group must be >= 1");
  const auto table = make_table(records, options.columns);
  const std::string partial = path + ".partial";
  try {
    try {
      write_table(*table, partial, options.rows_per_group);
    } catch (const ::parquet::ParquetException& e) {
      throw IoError("cannot write '" + path + "': " + e.what());
    }
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(partial, ignored);
    throw;
  }
  std::error_code error;
  std::filesystem::rename(partial, path, error);
  if (error) throw IoError("cannot write '" + path + "': " + error.message());
}

}  // namespace rlcore::data::parquet
