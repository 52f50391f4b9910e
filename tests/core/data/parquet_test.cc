// Parquet datasets held to pyarrow: files pyarrow writes (several row groups,
// nulls at every level, nested lists and structs, maps, dictionary encoding,
// every integer width) read as pyarrow reads them; files rlcore writes read
// back by pyarrow with the values and types given; columns rlcore cannot read
// and corrupt files refused with errors naming the column or the file.
#include <catch2/catch.hpp>

#include "../../common/reference_python.h"
#include "data/parquet/records.h"
#include "data_testing.h"
#include "rlcore/core/data/dataset.h"
#include "rlcore/error.h"
#include "rlcore/tokenizer/tokenizer.h"

using nlohmann::json;
using rlcore_test::error_of;

namespace {

std::string parquet_reference() { return rlcore_test::reference_script("core/data/reference/parquet_reference.py"); }

std::vector<json> read_rows(const std::string& path, std::vector<std::string>* wheres = nullptr) {
  std::vector<json> rows;
  rlcore::data::parquet::for_each_record(path, [&](const json& record, const std::string& where) {
    rows.push_back(record);
    if (wheres != nullptr) wheres->push_back(where);
  });
  return rows;
}

}  // namespace

TEST_CASE("parquet files pyarrow writes read as pyarrow reads them", "[data][parquet]") {
  rlcore::testing::ScratchDir dir("parquet_read");
  const json expected = json::parse(rlcore_test::run_reference(parquet_reference(), {"write", dir.path().string()}));
  for (const std::string file : {"verl_rows.parquet", "types.parquet"}) {
    INFO(file);
    std::vector<std::string> wheres;
    const std::vector<json> rows = read_rows((dir.path() / file).string(), &wheres);
    REQUIRE(rows.size() == expected[file].size());
    for (size_t i = 0; i < rows.size(); ++i) {
      INFO("row " << i << "\nrlcore:  " << rows[i].dump() << "\npyarrow: " << expected[file][i].dump());
      CHECK(rows[i] == expected[file][i]);
      CHECK(wheres[i] == (dir.path() / file).string() + "[" + std::to_string(i) + "]");
    }
  }
}

TEST_CASE("a parquet column rlcore cannot read is an error naming it", "[data][parquet]") {
  rlcore::testing::ScratchDir dir("parquet_columns");
  rlcore_test::run_reference(parquet_reference(), {"write", dir.path().string()});
  const std::string binary = (dir.path() / "binary.parquet").string();
  const std::string message = error_of<rlcore::FormatError>([&] { read_rows(binary); });
  CHECK_THAT(message,
             Catch::Contains(binary) && Catch::Contains("column 'extra_info.image'") && Catch::Contains("binary"));
  CHECK_THAT(error_of<rlcore::FormatError>([&] { read_rows((dir.path() / "timestamp.parquet").string()); }),
             Catch::Contains("column 'created'") && Catch::Contains("timestamp"));
}

TEST_CASE("a corrupt or missing parquet file is an error naming it", "[data][parquet]") {
  rlcore::testing::ScratchDir dir("parquet_corrupt");
  rlcore_test::run_reference(parquet_reference(), {"write", dir.path().string()});
  const auto good = dir.path() / "verl_rows.parquet";
  std::ifstream in(good, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());

  const std::string not_parquet = dir.write("text.parquet", "{\"prompt\": \"hi\"}\n");
  CHECK_THAT(error_of<rlcore::FormatError>([&] { read_rows(not_parquet); }), Catch::Contains(not_parquet));
  const std::string truncated = dir.write("truncated.parquet", bytes.substr(0, bytes.size() / 2));
  CHECK_THAT(error_of<rlcore::FormatError>([&] { read_rows(truncated); }), Catch::Contains(truncated));
  // Flipped bytes in the data pages (the footer intact). Parquet pages carry no
  // checksum, so damage to plain values can read as other values; damage to
  // headers, lengths or compressed streams must be an rlcore error naming the
  // file (anything else escapes and fails the test), never a crash.
  int refused = 0;
  int damaged_files = 0;
  for (size_t at = 8; at + 64 < bytes.size() / 2; at += 37, ++damaged_files) {
    std::string damaged = bytes;
    for (size_t k = 0; k < 8; ++k) damaged[at + k] = static_cast<char>(~damaged[at + k]);
    const std::string path = dir.write("damaged.parquet", damaged);
    try {
      read_rows(path);
    } catch (const rlcore::Error& e) {
      CHECK_THAT(e.what(), Catch::Contains(path));
      ++refused;
    }
  }
  INFO(refused << " of " << damaged_files << " damaged files refused");
  CHECK(refused > damaged_files / 4);
  const std::string missing = (dir.path() / "missing.parquet").string();
  CHECK_THAT(error_of<rlcore::IoError>([&] { read_rows(missing); }), Catch::Contains(missing));
}

TEST_CASE("parquet files rlcore writes read back in pyarrow with the types and values given", "[data][parquet]") {
  rlcore::testing::ScratchDir dir("parquet_write");
  std::vector<json> records;
  for (int i = 0; i < 9; ++i) {
    records.push_back({{"name", "row " + std::to_string(i) + " ✓"},
                       {"count", i},
                       {"score", i == 3 ? json() : json(i + 0.5)},
                       {"flag", i % 2 == 0},
                       {"tags", i == 4 ? json() : json::array({"a", std::to_string(i)})},
                       {"turns", {{{"role", "user"}, {"content", "hi"}}}},
                       {"meta", {{"split", "train"}, {"index", i}}}});
  }
  records[5]["meta"]["extra"] = 1.25;  // a key only one record has: a nullable struct field
  const std::string path = (dir.path() / "out.parquet").string();
  rlcore::data::parquet::WriteOptions options;
  options.columns = {"name", "count", "score", "flag", "tags", "turns", "meta"};
  options.rows_per_group = 4;
  rlcore::data::parquet::write_records(path, records, options);

  const json read = json::parse(rlcore_test::run_reference(parquet_reference(), {"read", path}));
  CHECK(read["num_row_groups"] == 3);
  CHECK(read["schema"] ==
        json::array({"name: string", "count: int64", "score: double", "flag: bool", "tags: list<element: string>",
                     "turns: list<element: struct<content: string, role: string>>",
                     "meta: struct<extra: double, index: int64, split: string>"}));
  REQUIRE(read["rows"].size() == records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    json want = records[i];
    if (!want["meta"].contains("extra")) want["meta"]["extra"] = nullptr;
    INFO("row " << i);
    CHECK(read["rows"][i] == want);
  }
  CHECK(read_rows(path) == read["rows"].get<std::vector<json>>());
}

TEST_CASE("parquet writing refuses mixed types and keys outside the columns", "[data][parquet]") {
  rlcore::testing::ScratchDir dir("parquet_refuse");
  const std::string path = (dir.path() / "bad.parquet").string();
  rlcore::data::parquet::WriteOptions options;
  options.columns = {"a"};
  CHECK_THAT(error_of<rlcore::ValueError>([&] {
               rlcore::data::parquet::write_records(path, {{{"a", "text"}}, {{"a", 3}}}, options);
             }),
             Catch::Contains("record 1") && Catch::Contains("column 'a' mixes string and integer"));
  CHECK_THAT(error_of<rlcore::ValueError>([&] {
               rlcore::data::parquet::write_records(path, {{{"a", {{"b", {1, "x"}}}}}}, options);
             }),
             Catch::Contains("column 'a.b[]' mixes integer and string"));
  CHECK_THAT(error_of<rlcore::ValueError>([&] {
               rlcore::data::parquet::write_records(path, {{{"a", 1}, {"z", 2}}}, options);
             }),
             Catch::Contains("key 'z'"));
  CHECK_FALSE(std::filesystem::exists(path));
  CHECK_FALSE(std::filesystem::exists(path + ".partial"));
}

TEST_CASE("a parquet dataset in verl's layout loads like its JSONL twin", "[data][parquet]") {
  rlcore::testing::ScratchDir dir("parquet_dataset");
  const json expected = json::parse(rlcore_test::run_reference(parquet_reference(), {"write", dir.path().string()}));
  // The same rows as JSON lines, nulls included (the loader treats null as absent).
  std::string jsonl;
  for (const auto& row : expected["verl_rows.parquet"]) jsonl += row.dump() + "\n";
  const std::string twin = dir.write("verl_rows.jsonl", jsonl);

  const rlcore::Tokenizer tokenizer = rlcore::make_builtin_tokenizer();
  rlcore::config::DataConfig config;
  config.max_prompt_length = 256;
  const auto from_parquet =
      rlcore::data::Dataset::load({(dir.path() / "verl_rows.parquet").string()}, config, tokenizer, false);
  const auto from_jsonl = rlcore::data::Dataset::load({twin}, config, tokenizer, false);
  REQUIRE(from_parquet.size() == 7);
  REQUIRE(from_jsonl.size() == 7);
  for (int64_t i = 0; i < from_parquet.size(); ++i) {
    INFO("row " << i);
    CHECK(from_parquet.at(i).prompt_ids == from_jsonl.at(i).prompt_ids);
    CHECK(from_parquet.at(i).data_source == from_jsonl.at(i).data_source);
    CHECK(from_parquet.at(i).ground_truth == from_jsonl.at(i).ground_truth);
    CHECK(from_parquet.at(i).extra_info == from_jsonl.at(i).extra_info);
  }
  CHECK(from_parquet.at(0).data_source == "openai/gsm8k");
  CHECK(from_parquet.at(1).ground_truth == "2");
}

TEST_CASE(
    "verl's agent fields (agent_name, extra_info.tools_kwargs, interaction_kwargs) load from parquet as from JSONL",
    "[data][parquet][agent]") {
  rlcore::testing::ScratchDir dir("parquet_agent");
  std::vector<json> records;
  std::string jsonl;
  for (int i = 0; i < 4; ++i) {
    records.push_back(
        {{"data_source", "arithmetic"},
         {"agent_name", i == 3 ? "single_turn_agent" : "tool_agent"},
         {"prompt", {{{"role", "user"}, {"content", std::to_string(100 + i) + "*7="}}}},
         {"reward_model", {{"style", "rule"}, {"ground_truth", std::to_string((100 + i) * 7)}}},
         {"extra_info",
          {{"index", i},
           {"tools_kwargs", {{"calculator", {{"create_kwargs", {{"precision", "exact"}}}}}}},
           {"interaction_kwargs", {{"name", "gsm8k"}, {"ground_truth", std::to_string((100 + i) * 7)}}}}}});
    jsonl += records.back().dump() + "\n";
  }
  const std::string path = (dir.path() / "agent.parquet").string();
  rlcore::data::parquet::WriteOptions options;
  options.columns = {"data_source", "agent_name", "prompt", "reward_model", "extra_info"};
  rlcore::data::parquet::write_records(path, records, options);
  const std::string twin = dir.write("agent.jsonl", jsonl);
  const rlcore::Tokenizer tokenizer = rlcore::make_builtin_tokenizer();
  rlcore::config::DataConfig config;
  const auto from_parquet = rlcore::data::Dataset::load({path}, config, tokenizer, false);
  const auto from_jsonl = rlcore::data::Dataset::load({twin}, config, tokenizer, false);
  REQUIRE(from_parquet.size() == 4);
  for (int64_t i = 0; i < 4; ++i) {
    INFO("row " << i);
    CHECK(from_parquet.at(i).agent_name == from_jsonl.at(i).agent_name);
    CHECK(from_parquet.at(i).extra_info == from_jsonl.at(i).extra_info);
  }
  CHECK(from_parquet.at(0).agent_name == "tool_agent");
  CHECK(from_parquet.at(3).agent_name == "single_turn_agent");
  CHECK(from_parquet.at(0).extra_info["tools_kwargs"]["calculator"]["create_kwargs"]["precision"] == "exact");
  // Carried to the reward function in extra_info, as verl's dataset carries them.
  CHECK(from_parquet.at(2).extra_info["interaction_kwargs"]["ground_truth"] == "714");
}
