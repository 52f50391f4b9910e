// Private to the core's data code: the JSON records of a dataset file, each with
// where it came from, for error messages.
#pragma once

#include <functional>
#include <istream>
#include <string>

#include <nlohmann/json.hpp>

namespace rlcore::data::records {

// Calls `visit(record, where)` for each record of `path`, in order: .parquet
// files one row per record (`where` is "path[ROW]"; data_parquet/records.h),
// .jsonl files one JSON object per line (blank lines skipped; `where` is
// "path:LINE"), .json files one array of objects (`where` is "path[INDEX]").
// Throws IoError when the file cannot be read and FormatError, naming the file
// and line, row or column, for bad contents or another extension.
void for_each_record(const std::string& path,
                     const std::function<void(const nlohmann::json& record, const std::string& where)>& visit);

// One JSON object per non-blank line of `in` (JSONL); `where` is "path:line".
// FormatError naming the line for bad JSON or a value that is not an object.
void read_jsonl(std::istream& in, const std::string& path,
                const std::function<void(const nlohmann::json& record, const std::string& where)>& visit);

}  // namespace rlcore::data::records
