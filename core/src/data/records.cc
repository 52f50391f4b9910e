// Reading dataset files record by record (see data/records.h).
#include "data/records.h"

#include <fstream>
#include <sstream>

#include "data/parquet/records.h"
#include "rlcore/error.h"

namespace rlcore::data::records {
namespace {

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void require_object(const nlohmann::json& record, const std::string& where) {
  if (!record.is_object()) {
    throw FormatError(where + ": a record must be a JSON object, got " + std::string(record.type_name()));
  }
}

void read_json_array(std::istream& in, const std::string& path,
                     const std::function<void(const nlohmann::json&, const std::string&)>& visit) {
  nlohmann::json records;
  try {
    records = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for a huge number
    throw FormatError(path + ": bad JSON: " + e.what());
  }
  if (!records.is_array()) {
    throw FormatError(path + ": a .json dataset must be an array of records, got " + std::string(records.type_name()));
  }
  for (size_t i = 0; i < records.size(); ++i) {
    const std::string where = path + "[" + std::to_string(i) + "]";
    require_object(records[i], where);
    visit(records[i], where);
  }
}

}  // namespace

void read_jsonl(std::istream& in, const std::string& path,
                const std::function<void(const nlohmann::json&, const std::string&)>& visit) {
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(number);
    nlohmann::json record;
    try {
      record = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for a huge number
      throw FormatError(where + ": bad JSON: " + e.what());
    }
    require_object(record, where);
    visit(record, where);
  }
}

void for_each_record(const std::string& path,
                     const std::function<void(const nlohmann::json& record, const std::string& where)>& visit) {
  if (ends_with(path, ".parquet")) return data::parquet::for_each_record(path, visit);
  const bool jsonl = ends_with(path, ".jsonl");
  if (!jsonl && !ends_with(path, ".json")) {
    throw FormatError(path +
                      ": unsupported dataset format; use .parquet, .jsonl (one object per line) or .json (an "
                      "array of objects)");
  }
  std::ifstream in(path);
  if (!in) throw IoError("cannot read dataset file '" + path + "'");
  if (jsonl) {
    read_jsonl(in, path, visit);
  } else {
    read_json_array(in, path, visit);
  }
}

}  // namespace rlcore::data::records
