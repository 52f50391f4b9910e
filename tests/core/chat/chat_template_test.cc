// ChatTemplate: real checkpoints' chat templates render byte for byte as
// transformers renders them (tests/core/chat/reference/chat_template_reference.py)
// on a corpus of conversations; the interpreter's constructs and its errors.
#include "rlcore/core/chat/chat_template.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include <catch2/catch.hpp>

#include "../../common/error_of.h"
#include "../../common/reference_python.h"
#include "../../common/test_paths.h"

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using rlcore::chat::ChatTemplate;
using rlcore::chat::ChatTemplateError;
using rlcore::chat::ChatTemplateOptions;

namespace {

const fs::path kFixtures = fs::path(rlcore_test::source_dir()) / "tests/fixtures/chat_templates";

Json read_json(const fs::path& path) {
  std::ifstream in(path);
  return Json::parse(in);
}

std::string render(const std::string& source, const Json& messages = Json::array(), ChatTemplateOptions options = {}) {
  return ChatTemplate::from_string(source).render(messages, options);
}

std::string first_difference(const std::string& a, const std::string& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  const size_t from = i < 40 ? 0 : i - 40;
  return "first difference at byte " + std::to_string(i) + "\nrlcore:       ..." + a.substr(from, 80) +
         "\ntransformers: ..." + b.substr(from, 80);
}

}  // namespace

TEST_CASE("real chat templates render exactly as transformers renders them", "[chat_template]") {
  const fs::path corpus = kFixtures / "conversations.json";
  const Json cases = read_json(corpus)["cases"];
  for (const char* name : {"qwen3", "llama3_1"}) {
    SECTION(name) {
      const fs::path config = kFixtures / name / "tokenizer_config.json";
      const Json expected = Json::parse(
          rlcore_test::run_reference(rlcore_test::reference_script("core/chat/reference/chat_template_reference.py"),
                                     {config.string(), corpus.string()}));
      const auto chat_template = ChatTemplate::from_checkpoint(config.parent_path());
      REQUIRE(chat_template.has_value());
      int compared = 0;
      for (const Json& c : cases) {
        const std::string case_name = c["name"];
        INFO(name << " / " << case_name);
        ChatTemplateOptions options;
        options.add_generation_prompt = c["add_generation_prompt"];
        if (c.contains("tools")) options.tools = c["tools"];
        if (c.contains("extra")) options.extra = c["extra"];
        const Json& want = expected.at(case_name);
        if (want.is_object()) {  // the template raised
          CHECK_THAT(rlcore_test::error_of<ChatTemplateError>([&] { chat_template->render(c["messages"], options); }),
                     Catch::Contains(want["error"].get<std::string>()));
          continue;
        }
        const std::string got = chat_template->render(c["messages"], options);
        INFO(first_difference(got, want.get<std::string>()));
        CHECK(got == want.get<std::string>());
        ++compared;
      }
      CHECK(compared >= 40);
    }
  }
}

TEST_CASE("whitespace control follows trim_blocks and lstrip_blocks", "[chat_template]") {
  CHECK(render("{% if true %}\nyes\n{% endif %}\n") == "yes\n");
  CHECK(render("  {% if true %}x{% endif %}") == "x");      // lstrip_blocks
  CHECK(render("a  {% if true %}x{% endif %}") == "a  x");  // not at a line start
  CHECK(render("a {{- ' b ' -}} c") == "a b c");
  CHECK(render("{{ 'x' }}\n{{ 'y' }}") == "x\ny");  // trim_blocks is for blocks only
  CHECK(render("{# note #}\nz") == "z");
}

TEST_CASE("expressions, filters, tests and methods behave as in Python", "[chat_template]") {
  CHECK(render("{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }}") ==
        "7 3 -4 1 3.5 1024");
  CHECK(render("{{ true }} {{ none }} {{ 1.0 }} {{ 1e-5 }} {{ [1, 'a'] }} {{ {'k': 1} }}") ==
        "True None 1.0 1e-05 [1, 'a'] {'k': 1}");
  CHECK(render("{{ 'a' ~ 1 ~ none }}") == "a1None");
  CHECK(render("{{ ' x '|trim }}|{{ 'ab'|upper }}|{{ [3, 1]|length }}|{{ ['a', 'b']|join(', ') }}") == "x|AB|2|a, b");
  CHECK(render("{{ {'b': 1, 'a': [true, none, 1.5, 'é\"']}|tojson }}") == R"({"b": 1, "a": [true, null, 1.5, "é\""]})");
  CHECK(render("{{ {'a': [1]}|tojson(indent=2) }}") == "{\n  \"a\": [\n    1\n  ]\n}");
  CHECK(render("{{ 'a,b,,c'.split(',') }} {{ ' x y '.split() }} {{ 'xxhixx'.strip('x') }}") ==
        "['a', 'b', '', 'c'] ['x', 'y'] hi");
  CHECK(render("{{ 'hello'.startswith('he') }} {{ 'hello'[1:3] }} {{ [1, 2, 3][::-1] }} {{ [1, 2, 3][-1] }}") ==
        "True el [3, 2, 1] 3");
  CHECK(render("{{ x is defined }} {{ x is not defined }} {{ 3 is odd }} {{ 'a' is string }} {{ none is none }}") ==
        "False True True True True");
  CHECK(render("{{ missing|default('d') }} {{ ''|default('e', true) }} {{ 'a' if false else 'b' }}") == "d e b");
  CHECK(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }}{{ ',' if not loop.last }}{% endfor %}") ==
        "a=1,b=2");
  CHECK(render("{% for x in [1, 2, 3, 4] if x is even %}{{ loop.index }}:{{ x }} {% endfor %}") == "1:2 2:4 ");
  CHECK(render("{% for x in [] %}a{% else %}empty{% endfor %}") == "empty");
  CHECK(render("{% for x in [1, 2, 3] %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}") == "1");
  CHECK(render("{% set ns = namespace(n=0) %}{% for x in [1, 2] %}{% set ns.n = ns.n + x %}{% endfor %}{{ ns.n }}") ==
        "3");
  CHECK(render("{% set n = 0 %}{% for x in [1, 2] %}{% set n = n + x %}{% endfor %}{{ n }}") == "0");  // loop scope
  CHECK(render("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', "
               "'?') }}") == "Hi A! Hi B?");
  CHECK(render("{{ [{'r': 'a'}, {'r': 'b'}]|selectattr('r', 'equalto', 'b')|list|length }}") == "1");
  CHECK(render("{{ [{'r': 'a'}, {'r': 'b'}]|map(attribute='r')|join }}") == "ab");
  CHECK(render("{{ messages[0].content }}", Json::array({{{"role", "user"}, {"content", "hi"}}})) == "hi");
}

TEST_CASE("what the renderer lacks, and the template's own errors, are named errors", "[chat_template]") {
  using rlcore_test::error_of;
  CHECK_THAT(error_of<ChatTemplateError>([] { render("{{ 'x'|wordwrap(3) }}"); }),
             Catch::Contains("filter 'wordwrap' is not supported") && Catch::Contains("line 1"));
  CHECK_THAT(error_of<ChatTemplateError>([] { render("\n{% raw %}x{% endraw %}"); }),
             Catch::Contains("statement 'raw' is not supported") && Catch::Contains("line 2"));
  CHECK_THAT(error_of<ChatTemplateError>([] { render("{% if true %}x"); }), Catch::Contains("endif"));
  CHECK_THAT(error_of<ChatTemplateError>([] { render("{{ raise_exception('Roles must alternate') }}"); }),
             Catch::Equals("Roles must alternate"));
  CHECK_THAT(error_of<ChatTemplateError>([] { render("{{ x.y }}"); }), Catch::Contains("'x' is undefined"));
  CHECK_THAT(error_of<ChatTemplateError>([] { render("{{ 'a' + 1 }}"); }), Catch::Contains("unsupported operand"));
  CHECK_THAT(error_of<ChatTemplateError>([] { render("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}"); }),
             Catch::Contains("deeper than 64"));
}

TEST_CASE("a checkpoint's template comes from chat_template.jinja, else tokenizer_config.json", "[chat_template]") {
  const fs::path dir = fs::path(rlcore_test::binary_dir()) / "chat_template_checkpoint";
  fs::remove_all(dir);
  fs::create_directories(dir);
  CHECK_FALSE(ChatTemplate::from_checkpoint(dir).has_value());
  std::ofstream(dir / "tokenizer_config.json")
      << R"({"bos_token": {"content": "<s>"}, "chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "{{ bos_token }}D"}]})";
  CHECK(ChatTemplate::from_checkpoint(dir)->render(Json::array()) == "<s>D");
  std::ofstream(dir / "chat_template.jinja") << "{{ bos_token }}J{{ messages|length }}";
  CHECK(ChatTemplate::from_checkpoint(dir)->render(Json::array({{{"role", "user"}, {"content", "x"}}})) == "<s>J1");
  std::ofstream(dir / "chat_template.jinja") << "{% for %}";
  CHECK_THAT(rlcore_test::error_of<ChatTemplateError>([&] { ChatTemplate::from_checkpoint(dir); }),
             Catch::Contains("chat_template.jinja"));
  fs::remove_all(dir);
}
