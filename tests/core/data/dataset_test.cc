// Dataset::load: file formats, prompt shapes, templates, length limits, SFT
// responses and the errors for bad records.
#include <catch2/catch.hpp>

#include "data_testing.h"
#include "rlcore/config_node.h"
#include "rlcore/core/data/dataset.h"
#include "rlcore/error.h"
#include "rlcore/tokenizer/tokenizer.h"

using rlcore_test::error_of;

using rlcore::config::DataConfig;
using rlcore::data::Dataset;

namespace {

const rlcore::Tokenizer& tokenizer() {
  static const rlcore::Tokenizer tok = rlcore::make_builtin_tokenizer();
  return tok;
}

std::vector<int32_t> ids(const std::string& text) { return tokenizer().encode(text); }

DataConfig plain_config() {
  DataConfig config;
  config.prompt_template = "plain";
  return config;
}

std::string chat_text(const std::string& system, const std::string& user) {
  std::string text;
  if (!system.empty()) text += "<|im_start|>system\n" + system + "<|im_end|>\n";
  return text + "<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n";
}

}  // namespace

TEST_CASE("jsonl records with string prompts load with their fields", "[data]") {
  rlcore::testing::ScratchDir dir("dataset");
  const std::string file = dir.write(
      "train.jsonl",
      R"({"data_source": "arithmetic", "prompt": "12+35=", "reward_model": {"style": "rule", "ground_truth": "47"}, "extra_info": {"split": "train"}})"
      "\n\n"
      R"({"prompt": "9+9=", "reward_model": {"ground_truth": 18}})"
      "\n");
  const Dataset data = Dataset::load({file}, plain_config(), tokenizer(), false);
  REQUIRE(data.size() == 2);
  CHECK(data.at(0).prompt_ids == ids("12+35="));
  CHECK(data.at(0).data_source == "arithmetic");
  CHECK(data.at(0).ground_truth == "47");
  CHECK(data.at(0).extra_info["split"] == "train");
  CHECK(data.at(0).response_ids.empty());
  CHECK(data.at(0).index == 0);
  CHECK(data.at(1).data_source == "unknown");
  CHECK(data.at(1).ground_truth == "18");
  CHECK(data.at(1).extra_info.is_null());
  CHECK(data.at(1).index == 1);
  CHECK_THROWS_AS(data.at(2), rlcore::ValueError);
}

TEST_CASE("json arrays with chat prompts follow the template", "[data]") {
  rlcore::testing::ScratchDir dir("dataset");
  const std::string file = dir.write("val.json", R"([
    {"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "1+2="}]},
    {"prompt": [{"role": "user", "content": "3+4="}]}
  ])");
  SECTION("chat: the record's system message, else data.system_prompt") {
    DataConfig config;
    config.system_prompt = "Answer with ####.";
    const Dataset data = Dataset::load({file}, config, tokenizer(), false);
    REQUIRE(data.size() == 2);
    CHECK(data.at(0).prompt_ids == ids(chat_text("Be brief.", "1+2=")));
    CHECK(data.at(1).prompt_ids == ids(chat_text("Answer with ####.", "3+4=")));
  }
  SECTION("plain: the user content alone") {
    const Dataset data = Dataset::load({file}, plain_config(), tokenizer(), false);
    CHECK(data.at(0).prompt_ids == ids("1+2="));
    CHECK(data.at(1).prompt_ids == ids("3+4="));
  }
  SECTION("plain with a system prompt is a config error") {
    DataConfig config = plain_config();
    config.system_prompt = "x";
    CHECK_THROWS_AS(Dataset::load({file}, config, tokenizer(), false), rlcore::ConfigError);
  }
}

TEST_CASE("a checkpoint's chat template renders the prompts when it has one", "[data][chat_template]") {
  rlcore::testing::ScratchDir dir("dataset");
  const std::string file = dir.write(
      "train.jsonl", R"({"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "1+2="}]})"
                     "\n"
                     R"({"prompt": "3+4="})"
                     "\n"
                     R"({"prompt": [{"role": "user", "content": "5+6="}, {"role": "assistant", "content": "11"},)"
                     R"( {"role": "user", "content": "and 7+8?"}]})"
                     "\n");
  // Stands in for a checkpoint's template: role:content lines, then the generation prompt.
  std::vector<nlohmann::json> seen;
  const rlcore::data::ChatRenderer renderer = [&](const nlohmann::json& messages) {
    seen.push_back(messages);
    std::string text;
    for (const auto& message : messages) {
      text += message["role"].get<std::string>() + ":" + message["content"].get<std::string>() + "\n";
    }
    return text + "assistant:";
  };
  SECTION("messages as given, a string as one user message, data.system_prompt where none is given") {
    DataConfig config;
    config.system_prompt = "Answer with ####.";
    const Dataset data = Dataset::load({file}, config, tokenizer(), false, renderer);
    REQUIRE(data.size() == 3);
    CHECK(data.at(0).prompt_ids == ids("system:Be brief.\nuser:1+2=\nassistant:"));
    CHECK(data.at(1).prompt_ids == ids("system:Answer with ####.\nuser:3+4=\nassistant:"));
    CHECK(data.at(2).prompt_ids == ids("system:Answer with ####.\nuser:5+6=\nassistant:11\nuser:and 7+8?\nassistant:"));
    CHECK(seen.size() == 3);
  }
  SECTION("apply_chat_template false or prompt_template plain: the template is not used") {
    DataConfig config;
    config.apply_chat_template = false;
    const std::string two_lines = dir.write("two.jsonl", R"({"prompt": "3+4="})"
                                                         "\n");
    CHECK(Dataset::load({two_lines}, config, tokenizer(), false, renderer).at(0).prompt_ids ==
          ids(chat_text("", "3+4=")));
    CHECK(Dataset::load({two_lines}, plain_config(), tokenizer(), false, renderer).at(0).prompt_ids == ids("3+4="));
    CHECK(seen.empty());
  }
  SECTION("a template that fails names the record") {
    const rlcore::data::ChatRenderer raising = [](const nlohmann::json&) -> std::string {
      throw rlcore::ValueError("Conversation roles must alternate user/assistant");
    };
    const std::string message =
        error_of<rlcore::ValueError>([&] { Dataset::load({file}, DataConfig(), tokenizer(), false, raising); });
    CHECK_THAT(message, Catch::Contains("train.jsonl:1") && Catch::Contains("chat template") &&
                            Catch::Contains("Conversation roles must alternate"));
  }
}

TEST_CASE("several files form one dataset, indexed across files", "[data]") {
  rlcore::testing::ScratchDir dir("dataset");
  const std::string a = dir.write("a.jsonl", "{\"prompt\": \"1\"}\n{\"prompt\": \"2\"}\n");
  const std::string b = dir.write("b.json", R"([{"prompt": "3"}])");
  const Dataset data = Dataset::load({a, b}, plain_config(), tokenizer(), false);
  REQUIRE(data.size() == 3);
  CHECK(data.at(2).prompt_ids == ids("3"));
  CHECK(data.at(2).index == 2);
}

TEST_CASE("prompts over max_prompt_length: error, left, right or filtered", "[data]") {
  rlcore::testing::ScratchDir dir("dataset");
  // Digits are one token each with the built-in tokenizer.
  const std::string file = dir.write("long.jsonl", "{\"prompt\": \"12\"}\n{\"prompt\": \"1234567890\"}\n");
  DataConfig config = plain_config();
  config.max_prompt_length = 4;
  REQUIRE(ids("1234567890").size() == 10);

  SECTION("error names the file, line and the keys to change") {
    using Catch::Matchers::Contains;
    CHECK_THAT(error_of<rlcore::ValueError>([&] { Dataset::load({file}, config, tokenizer(), false); }),
               Contains(file + ":2") && Contains("10 tokens") && Contains("data.max_prompt_length=4"));
  }
  SECTION("left keeps the end") {
    config.truncation = "left";
    CHECK(Dataset::load({file}, config, tokenizer(), false).at(1).prompt_ids == ids("7890"));
  }
  SECTION("right keeps the start") {
    config.truncation = "right";
    CHECK(Dataset::load({file}, config, tokenizer(), false).at(1).prompt_ids == ids("1234"));
  }
  SECTION("filter_overlong_prompts drops the record") {
    config.filter_overlong_prompts = true;
    const Dataset data = Dataset::load({file}, config, tokenizer(), false);
    CHECK(data.size() == 1);
    CHECK(data.filtered_count() == 1);
    CHECK(data.at(0).prompt_ids == ids("12"));
  }
  SECTION("a prompt exactly at the limit is kept whole") {
    config.max_prompt_length = 10;
    CHECK(Dataset::load({file}, config, tokenizer(), false).at(1).prompt_ids.size() == 10);
  }
}

TEST_CASE("bad records are errors naming the file, line and key", "[data]") {
  rlcore::testing::ScratchDir dir("dataset");
  const DataConfig config = plain_config();
  auto load = [&](const std::string& name, const std::string& text) {
    return Dataset::load({dir.write(name, text)}, config, tokenizer(), false);
  };
  auto format_error = [&](const std::string& name, const std::string& text) {
    return error_of<rlcore::FormatError>([&] { load(name, text); });
  };
  using Catch::Matchers::Contains;
  const std::string missing = (dir.path() / "missing.jsonl").string();
  CHECK_THAT(format_error("missing.jsonl", "{\"prompt\": \"1\"}\n{\"question\": \"2\"}\n"),
             Contains(missing + ":2") && Contains("'prompt'"));
  CHECK_THAT(format_error("array.json", R"([{"prompt": "1"}, {"q": "2"}])"),
             Contains("array.json[1]") && Contains("'prompt'"));
  CHECK_THAT(format_error("badjson.jsonl", "{\"prompt\": \"1\"}\n{\"prompt\": \n"),
             Contains("badjson.jsonl:2") && Contains("bad JSON"));
  CHECK_THAT(format_error("overflow.jsonl", "{\"prompt\": \"1\", \"n\": 1e999999}\n"),
             Contains("overflow.jsonl:1") && Contains("bad JSON") && Contains("number overflow"));
  CHECK_THAT(format_error("overflow.json", "[{\"prompt\": \"1\", \"n\": -1e999999}]"),
             Contains("overflow.json") && Contains("bad JSON") && Contains("number overflow"));
  CHECK_THAT(format_error("type.jsonl", "{\"prompt\": 7}\n"), Contains("type.jsonl:1") && Contains("string or a list"));
  CHECK_THAT(format_error("role.jsonl", R"({"prompt": [{"role": "assistant", "content": "x"}]})"),
             Contains("role.jsonl:1") && Contains("role 'assistant'"));
  CHECK_THAT(format_error("notobject.jsonl", "[1, 2]\n"), Contains("notobject.jsonl:1") && Contains("JSON object"));
  CHECK_THAT(format_error("nouser.jsonl", R"({"prompt": [{"role": "system", "content": "x"}]})"),
             Contains("nouser.jsonl:1") && Contains("no user message"));
  CHECK_THROWS_AS(load("data.parquet", ""), rlcore::FormatError);
  CHECK_THROWS_AS(load("empty.jsonl", "\n"), rlcore::ValueError);
  CHECK_THROWS_AS(Dataset::load({(dir.path() / "absent.jsonl").string()}, config, tokenizer(), false), rlcore::IoError);
}

TEST_CASE("SFT responses are tokenized with eos and cut on the right", "[data]") {
  rlcore::testing::ScratchDir dir("dataset");
  const std::string file = dir.write("sft.jsonl", R"({"prompt": "12+35=", "response": "#### 47"})");
  DataConfig config = plain_config();
  const int32_t eos = *tokenizer().eos_token_id();
  std::vector<int32_t> expected = ids("#### 47");
  expected.push_back(eos);

  CHECK(Dataset::load({file}, config, tokenizer(), true).at(0).response_ids == expected);
  config.max_response_length = 2;
  CHECK(Dataset::load({file}, config, tokenizer(), true).at(0).response_ids ==
        std::vector<int32_t>(expected.begin(), expected.begin() + 2));
  config.response_key = "answer";
  CHECK_THAT(error_of<rlcore::FormatError>([&] { Dataset::load({file}, config, tokenizer(), true); }),
             Catch::Contains("sft.jsonl:1") && Catch::Contains("'answer'"));
}

TEST_CASE("the data schema takes a path or a list of paths and checks values", "[data]") {
  const auto parse = [](const std::string& yaml) {
    return rlcore::config::data_config_schema().parse(rlcore::ConfigNode::parse(yaml, "test")["data"]);
  };
  const DataConfig one = parse("data: {train_files: a.jsonl, val_files: [b.jsonl, c.json], truncation: left}");
  CHECK(one.train_files == std::vector<std::string>{"a.jsonl"});
  CHECK(one.val_files == std::vector<std::string>{"b.jsonl", "c.json"});
  CHECK(one.truncation == "left");
  CHECK(parse("data: {}").train_batch_size == 1024);
  CHECK_THROWS_WITH(parse("data: {truncation: middle}"), Catch::Contains("data.truncation"));
  CHECK_THROWS_WITH(parse("data: {prompt_template: llama}"), Catch::Contains("data.prompt_template"));
  CHECK_THROWS_WITH(parse("data: {train_batchsize: 3}"), Catch::Contains("train_batchsize"));
}
