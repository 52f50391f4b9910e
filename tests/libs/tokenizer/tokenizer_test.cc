// Tokenizer tests: BPE merge order against ids worked out by hand, added
// tokens, byte-exact round trips, lossy decode, errors and concurrent encode.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <thread>

#include "rlcore/error.h"
#include "rlcore/tokenizer/tokenizer.h"
#include "tokenizer_fixture.h"

using rlcore::Tokenizer;
using rlcore::test::byte_ids;
using rlcore::test::Fixture;
using Ids = std::vector<int32_t>;

namespace {

Tokenizer load(const Fixture& fixture) { return Tokenizer::from_json(fixture.text()); }

std::string load_error_of(const Fixture& fixture) {
  try {
    load(fixture);
  } catch (const rlcore::FormatError& e) {
    return e.what();
  }
  return "no FormatError";
}

std::string error_of_json(const std::string& text) {
  try {
    Tokenizer::from_json(text);
  } catch (const rlcore::FormatError& e) {
    return e.what();
  }
  return "no FormatError";
}

std::filesystem::path temp_file(const std::string& name, const std::string& content) {
  const auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

}  // namespace

TEST_CASE("BPE applies merges by rank, not by position", "[tokenizer]") {
  Fixture f;
  f.merges = {{"b", "c"}, {"a", "b"}, {"a", "bc"}};  // ids 256 "bc", 257 "ab", 258 "abc"
  const Tokenizer tok = load(f);
  // (a,b) comes first in the word but ranks below (b,c): firing it first would
  // strand "ab" + "c", for which there is no merge.
  CHECK(tok.encode("abc") == Ids{258});
  CHECK(tok.encode("ab") == Ids{257});
  CHECK(tok.encode("abcab") == Ids{258, 257});
  CHECK(tok.encode("cab") == Ids{'c', 257});
}

TEST_CASE("BPE merges equal-rank pairs leftmost first and rechecks new pairs", "[tokenizer]") {
  Fixture f;
  f.merges = {{"a", "a"}, {"aa", "a"}, {"aa", "aa"}};  // 256 "aa", 257 "aaa", 258 "aaaa"
  const Tokenizer tok = load(f);
  CHECK(tok.encode("aa") == Ids{256});
  CHECK(tok.encode("aaa") == Ids{257});
  // a a a a -> aa a a -> aa aa (rank 0 beats (aa,a) at rank 1) -> aaaa.
  CHECK(tok.encode("aaaa") == Ids{258});
  // a a a a a -> aa a a a -> aa aa a -> aa aaa ((aa,a) rank 1 beats (aa,aa) rank 2).
  CHECK(tok.encode("aaaaa") == Ids{256, 257});
}

TEST_CASE("BPE on GPT-2-style words worked out by hand", "[tokenizer]") {
  Fixture f;
  f.merges = {{"l", "l"}, {"h", "e"}, {"he", "ll"}, {"hell", "o"}, {" ", "w"}, {"o", "r"}, {" w", "or"}, {"l", "d"}};
  // 256 ll, 257 he, 258 hell, 259 hello, 260 Ġw, 261 or, 262 Ġwor, 263 ld
  for (bool as_strings : {false, true}) {
    f.merges_as_strings = as_strings;
    const Tokenizer tok = load(f);
    CHECK(tok.encode("hello world") == Ids{259, 262, 263});
    // The regex keeps "hello" and " world" apart: no merge runs across the space.
    CHECK(tok.encode("hello") == Ids{259});
    CHECK(tok.encode("world") == Ids{'w', 261, 263});
    CHECK(tok.id_to_token(262) == "\xC4\xA0wor");  // "Ġwor"
    CHECK(tok.token_to_id("\xC4\xA0wor") == 262);
  }
}

TEST_CASE("the byte-level table matches GPT-2's bytes_to_unicode", "[tokenizer]") {
  const Tokenizer tok = load(Fixture{});
  CHECK(tok.token_to_id("\xC4\xA0") == 32);    // "Ġ" is the space
  CHECK(tok.token_to_id("\xC4\x8A") == 10);    // "Ċ" is the newline
  CHECK(tok.token_to_id("\xC4\x80") == 0);     // "Ā" is byte 0
  CHECK(tok.token_to_id("\xC5\x83") == 0xAD);  // "Ń" is the soft hyphen byte
  CHECK(tok.token_to_id("A") == 'A');
  for (int b = 0; b < 256; ++b) {
    CHECK(tok.decode(Ids{b}) == std::string(1, static_cast<char>(b)));
  }
  CHECK(tok.vocab_size() == 256);
}

TEST_CASE("added tokens match before pre-tokenization, longest first", "[tokenizer]") {
  Fixture f;
  f.merges = {{"<", "|"}, {"e", "n"}};  // would split the tokens if they reached BPE
  const int32_t end = f.add_token("<|end|>", true);
  const int32_t endoftext = f.add_token("<|endoftext|>", true);
  const int32_t start = f.add_token("<|im_start|>", true);
  const Tokenizer tok = load(f);
  CHECK(tok.encode("<|endoftext|>") == Ids{endoftext});
  CHECK(tok.encode("x<|end|>y<|endoftext|>") == Ids{'x', end, 'y', endoftext});
  CHECK(tok.encode("<|im_start|>user\nhi") == Ids{start, 'u', 's', 'e', 'r', '\n', 'h', 'i'});
  // A prefix that is not a whole token is plain text, merged as usual.
  CHECK(tok.encode("<|en") == Ids{256, 257});
  CHECK(tok.is_special_token(end));
  CHECK_FALSE(tok.is_special_token('x'));
  CHECK(tok.token_to_id("<|endoftext|>") == endoftext);
  CHECK(tok.id_to_token(start) == "<|im_start|>");
  CHECK(tok.vocab_size() == start + 1);
}

TEST_CASE("special tokens can be encoded as text and skipped on decode", "[tokenizer]") {
  Fixture f;
  const int32_t im_end = f.add_token("<|im_end|>", true);
  const int32_t think = f.add_token("<think>", false);  // added but not special
  const Tokenizer tok = load(f);
  CHECK(tok.encode("a<|im_end|>", false) == byte_ids("a<|im_end|>"));
  CHECK(tok.encode("<think>a<|im_end|>", false) == [&] {
    Ids ids{think, 'a'};
    for (int32_t id : byte_ids("<|im_end|>")) ids.push_back(id);
    return ids;
  }());
  const Ids ids = tok.encode("<think>hi<|im_end|>");
  REQUIRE(ids == Ids{think, 'h', 'i', im_end});
  CHECK(tok.decode(ids) == "<think>hi<|im_end|>");
  CHECK(tok.decode(ids, true) == "<think>hi");
}

TEST_CASE("added tokens honour lstrip, rstrip and single_word", "[tokenizer]") {
  Fixture f;
  const int32_t mask = f.add_token("<mask>", true, {{"lstrip", true}});
  const int32_t sep = f.add_token("<sep>", true, {{"rstrip", true}});
  const int32_t ok = f.add_token("ok", false, {{"single_word", true}});
  const Tokenizer tok = load(f);
  CHECK(tok.encode("a <mask>b") == Ids{'a', mask, 'b'});
  CHECK(tok.encode("a<sep>  b") == Ids{'a', sep, 'b'});
  CHECK(tok.encode("ok book ok.") == Ids{ok, ' ', 'b', 'o', 'o', 'k', ' ', ok, '.'});
  // lstrip swallows the space, and decoding gives the token's content only.
  CHECK(tok.decode(tok.encode("a <mask>b")) == "a<mask>b");
}

TEST_CASE("encode then decode gives back the exact bytes", "[tokenizer]") {
  Fixture gpt2;
  // The last four make tokens that end inside a character (of 世 and of 😀).
  gpt2.merges = {{" ", "t"},           {"h", "e"},       {" t", "he"},        {"\xE4", "\xB8"},
                 {"\xE4\xB8", "\x96"}, {"\xF0", "\x9F"}, {"\xF0\x9F", "\x98"}};
  gpt2.add_token("<|endoftext|>", true);
  Fixture qwen2 = gpt2;
  qwen2.pre_tokenizer = rlcore::test::split_pre_tokenizer(rlcore::test::kQwen2Regex);
  Fixture llama3 = gpt2;
  llama3.pre_tokenizer = rlcore::test::split_pre_tokenizer(rlcore::test::kLlama3Regex);

  const std::vector<std::string> texts = {
      "",
      "the quick brown fox, isn't it?  Twice\n\n\tthe 12345 numbers!",
      "你好，世界。这是一个测试。",
      "مرحبا بالعالم",
      "नमस्ते दुनिया",
      "Привет, мир! Ёжик",
      "こんにちは世界、カタカナ",
      "emoji 😀👍🏽 family 👨‍👩‍👧‍👦 flags 🇯🇵🇺🇸 keycap 1️⃣",
      "combining e\xCC\x81 a\xCC\x8A\xCC\xA3 Z\xCC\xA4\xCD\x94\xCD\xA7",
      "lone continuation \x80\xBF here",
      "truncated \xE4\xB8 and \xF0\x9F\x98 then end \xC3",
      "overlong \xC0\xAF \xE0\x80\xAF \xF0\x80\x80\xAF surrogate \xED\xA0\x80 too big \xF4\x90\x80\x80",
      "bytes \xFF\xFE\xFD\xF8",
      std::string("nul \0 inside", 12),
      "specials <|endoftext|> mid<|endoftext|>text<|endoftext|",
      "\r\n \u00A0\u2028\u3000 \x0B spaces of all kinds   ",
  };
  for (const Fixture* f : {&gpt2, &qwen2, &llama3}) {
    const Tokenizer tok = load(*f);
    for (const std::string& text : texts) {
      INFO("text: " << text);
      const Ids ids = tok.encode(text);
      CHECK(tok.decode(ids) == text);
      CHECK(tok.decode(tok.encode(text, false)) == text);
    }
  }
}

TEST_CASE("decode_lossy replaces ill-formed UTF-8 the way HF does", "[tokenizer]") {
  const Tokenizer tok = load(Fixture{});
  const auto lossy = [&](const std::string& bytes) { return tok.decode_lossy(tok.encode(bytes)); };
  CHECK(lossy("abc\x80"
              "def") ==
        "abc\xEF\xBF\xBD"
        "def");
  CHECK(lossy("\xE2\x82") == "\xEF\xBF\xBD");  // a truncated sequence is one U+FFFD
  CHECK(lossy("\xF0\x9F\x98"
              "A") ==
        "\xEF\xBF\xBD"
        "A");
  CHECK(lossy("\xC0\xAF") == "\xEF\xBF\xBD\xEF\xBF\xBD");                  // overlong: each byte
  CHECK(lossy("\xED\xA0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  CHECK(lossy("ok \xE2\x82\xAC") == "ok \xE2\x82\xAC");
  // A response cut inside a character: decode keeps the bytes, lossy repairs them.
  const Ids euro = tok.encode("\xE2\x82\xAC");
  const Ids cut(euro.begin(), euro.end() - 1);
  CHECK(tok.decode(cut) == "\xE2\x82");
  CHECK(tok.decode_lossy(cut) == "\xEF\xBF\xBD");
  const std::vector<int64_t> wide(euro.begin(), euro.end());
  CHECK(tok.decode(wide.data(), wide.size()) == "\xE2\x82\xAC");
  CHECK(tok.decode_lossy(wide.data(), 1) == "\xEF\xBF\xBD");
}

TEST_CASE("unknown ids are errors that name the id", "[tokenizer]") {
  Fixture f;
  f.merges = {{"a", "b"}, {"a", "b"}};  // the repeat leaves id 257 unused
  const Tokenizer tok = load(f);
  CHECK_THROWS_WITH(tok.decode(Ids{'a', 999}), Catch::Contains("token id 999"));
  CHECK_THROWS_AS(tok.decode(Ids{257}), rlcore::ValueError);
  CHECK_THROWS_AS(tok.id_to_token(-1), rlcore::ValueError);
  const int64_t big = int64_t{1} << 40;
  CHECK_THROWS_WITH(tok.decode(&big, 1), Catch::Contains("1099511627776"));
  CHECK_FALSE(tok.token_to_id("zz").has_value());
}

TEST_CASE("malformed tokenizer.json errors name the problem", "[tokenizer]") {
  CHECK_THROWS_WITH(Tokenizer::from_json("{\"model\": "), Catch::Contains("invalid JSON"));
  CHECK_THROWS_WITH(Tokenizer::from_json("[]"), Catch::Contains("expected a JSON object"));

  nlohmann::json no_model = Fixture{}.json();
  no_model.erase("model");
  CHECK_THAT(error_of_json(no_model.dump()), Catch::Contains("model: missing"));

  Fixture unknown;
  unknown.merges = {{"a", "b"}};
  nlohmann::json bad_merge = unknown.json();
  bad_merge["model"]["merges"][0] = nlohmann::json::array({"a", "zz"});
  CHECK_THAT(error_of_json(bad_merge.dump()),
             Catch::Contains("model.merges[0]") && Catch::Contains("\"zz\" is not in model.vocab"));
  bad_merge["model"]["merges"][0] = "a b c";
  CHECK_THAT(error_of_json(bad_merge.dump()), Catch::Contains("model.merges[0] (\"a b c\")"));
  bad_merge["model"]["merges"][0] = nlohmann::json::array({"x", "y"});
  CHECK_THAT(error_of_json(bad_merge.dump()), Catch::Contains("merged token \"xy\""));

  nlohmann::json word_piece = Fixture{}.json();
  word_piece["model"]["type"] = "WordPiece";
  CHECK_THAT(error_of_json(word_piece.dump()), Catch::Contains("model.type"));

  nlohmann::json no_byte = Fixture{}.json();
  no_byte["model"]["vocab"].erase("\xC4\xA0");
  CHECK_THAT(error_of_json(no_byte.dump()), Catch::Contains("byte 0x20"));

  Fixture lowercase;
  lowercase.normalizer = {{"type", "Lowercase"}};
  CHECK_THAT(load_error_of(lowercase), Catch::Contains("normalizer.type") && Catch::Contains("Lowercase"));

  Fixture whitespace;
  whitespace.pre_tokenizer = {{"type", "Whitespace"}};
  CHECK_THAT(load_error_of(whitespace), Catch::Contains("pre_tokenizer.type"));

  Fixture sideways;
  sideways.pre_tokenizer = rlcore::test::split_pre_tokenizer("\\s+");
  sideways.pre_tokenizer["pretokenizers"][0]["behavior"] = "Sideways";
  CHECK_THAT(load_error_of(sideways), Catch::Contains("pre_tokenizer.pretokenizers[0].behavior"));

  Fixture bad_regex;
  bad_regex.pre_tokenizer = rlcore::test::split_pre_tokenizer("(unclosed");
  CHECK_THAT(load_error_of(bad_regex),
             Catch::Contains("pre_tokenizer.pretokenizers[0].pattern.Regex") && Catch::Contains("does not compile"));

  Fixture no_content;
  no_content.add_token("x", true);
  no_content.added_tokens[0].erase("content");
  CHECK_THAT(load_error_of(no_content), Catch::Contains("added_tokens[0].content"));

  nlohmann::json padded = Fixture{}.json();
  padded["padding"] = {{"strategy", "BatchLongest"}};
  CHECK_THAT(error_of_json(padded.dump()), Catch::Contains("padding"));

  nlohmann::json wrong_type = Fixture{}.json();
  wrong_type["model"]["vocab"] = "not an object";
  CHECK_THAT(error_of_json(wrong_type.dump()), Catch::Contains("model.vocab"));
}

TEST_CASE("from_file names the file in its errors", "[tokenizer]") {
  const auto missing = std::filesystem::temp_directory_path() / "rlcore_no_such_tokenizer.json";
  CHECK_THROWS_AS(Tokenizer::from_file(missing.string()), rlcore::IoError);
  CHECK_THROWS_WITH(Tokenizer::from_file(missing.string()), Catch::Contains(missing.string()));

  const auto bad = temp_file("rlcore_bad_tokenizer.json", "{ not json");
  CHECK_THROWS_WITH(Tokenizer::from_file(bad.string()),
                    Catch::Contains(bad.string()) && Catch::Contains("invalid JSON"));

  Fixture f;
  f.merges = {{"h", "i"}};
  const auto good = temp_file("rlcore_good_tokenizer.json", f.text());
  CHECK(Tokenizer::from_file(good.string()).encode("hi") == Ids{256});
  std::filesystem::remove(bad);
  std::filesystem::remove(good);
}

TEST_CASE("bos/eos/pad come from names, given or read from tokenizer_config.json", "[tokenizer]") {
  Fixture f;
  const int32_t eos = f.add_token("<|im_end|>", true);
  const int32_t pad = f.add_token("<|endoftext|>", true);
  rlcore::SpecialTokenNames names;
  names.eos = "<|im_end|>";
  names.pad = "<|endoftext|>";
  const Tokenizer tok = Tokenizer::from_json(f.text(), names);
  CHECK(tok.eos_token_id() == eos);
  CHECK(tok.pad_token_id() == pad);
  CHECK_FALSE(tok.bos_token_id().has_value());

  names.bos = "<s>";
  CHECK_THROWS_WITH(Tokenizer::from_json(f.text(), names), Catch::Contains("bos token \"<s>\""));

  const auto dir = std::filesystem::temp_directory_path() / "rlcore_tokenizer_dir";
  std::filesystem::create_directories(dir);
  temp_file("rlcore_tokenizer_dir/tokenizer.json", f.text());
  temp_file("rlcore_tokenizer_dir/tokenizer_config.json",
            R"({"bos_token": null, "eos_token": {"content": "<|im_end|>"},
                "pad_token": "<|endoftext|>"})");
  const Tokenizer from_dir = Tokenizer::from_pretrained_dir(dir.string());
  CHECK(from_dir.eos_token_id() == eos);
  CHECK(from_dir.pad_token_id() == pad);
  CHECK_FALSE(from_dir.bos_token_id().has_value());
  std::filesystem::remove_all(dir);
}

TEST_CASE("TemplateProcessing adds Llama-3's BOS only through post_process", "[tokenizer]") {
  Fixture f;
  const int32_t bos = f.add_token("<|begin_of_text|>", true);
  f.post_processor = nlohmann::json::parse(R"({
    "type": "Sequence",
    "processors": [
      {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
      {"type": "TemplateProcessing",
       "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                  {"Sequence": {"id": "A", "type_id": 0}}],
       "pair": [],
       "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [0],
                                                 "tokens": ["<|begin_of_text|>"]}}}]})");
  f.post_processor["processors"][1]["special_tokens"]["<|begin_of_text|>"]["ids"][0] = bos;
  const Tokenizer tok = load(f);
  CHECK(tok.encode("hi") == Ids{'h', 'i'});
  CHECK(tok.post_process(tok.encode("hi")) == Ids{bos, 'h', 'i'});
}

TEST_CASE("ignore_merges takes a whole word that is a token as it is", "[tokenizer]") {
  Fixture f;
  f.merges = {{"a", "b"}, {"b", "c"}, {"bc", "d"}, {"a", "bcd"}};  // 256 ab, 257 bc, 258 bcd, 259 abcd
  nlohmann::json json = f.json();
  // "abcd" merges to ab + c + d... unless the word itself is looked up first.
  CHECK(Tokenizer::from_json(json.dump()).encode("abcd") == Ids{256, 'c', 'd'});
  json["model"]["ignore_merges"] = true;
  CHECK(Tokenizer::from_json(json.dump()).encode("abcd") == Ids{259});
}

TEST_CASE("encode is safe and deterministic across threads", "[tokenizer]") {
  Fixture f;
  f.merges = {{" ", "t"}, {"h", "e"}, {" t", "he"}, {"e", "r"}, {"t", "h"}};
  f.add_token("<|endoftext|>", true);
  const Tokenizer tok = load(f);
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i) {
    texts.push_back("the other " + std::to_string(i * 7919) + " there<|endoftext|>théâtre " +
                    std::string(static_cast<std::size_t>(i % 13), 'e'));
  }
  std::vector<Ids> expected;
  for (const auto& text : texts) expected.push_back(tok.encode(text));

  std::vector<int> mismatches(8, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      const Tokenizer copy = tok;  // copies share the loaded state and the cache
      for (int round = 0; round < 20; ++round) {
        for (std::size_t i = 0; i < texts.size(); ++i) {
          if (copy.encode(texts[i]) != expected[i]) ++mismatches[t];
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(mismatches == std::vector<int>(8, 0));
  CHECK(tok.decode(expected[3]) == texts[3]);
}

TEST_CASE("long inputs do not overflow the regex engine", "[tokenizer]") {
  const Tokenizer tok = load(Fixture{});
  for (const std::string& text :
       {std::string(1 << 20, ' ') + "x", std::string(1 << 20, 'a'), std::string(1 << 20, '=')}) {
    const Ids ids = tok.encode(text);
    CHECK(ids.size() == text.size());
    CHECK(tok.decode(ids) == text);
  }
}
