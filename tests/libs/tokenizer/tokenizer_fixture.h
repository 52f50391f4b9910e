// Builds small tokenizer.json fixtures for the tokenizer tests: the 256 byte
// tokens (id = byte value), one token per merge, then any added tokens.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace rlcore::test {

// GPT-2's bytes_to_unicode, written again here so the tests check the
// library's table rather than reuse it.
inline std::string byte_char(std::uint8_t b) {
  const auto printable = [](int v) {
    return (v >= '!' && v <= '~') || (v >= 0xA1 && v <= 0xAC) || (v >= 0xAE && v <= 0xFF);
  };
  char32_t cp = b;
  if (!printable(b)) {
    cp = 256;
    for (int v = 0; v < b; ++v) cp += printable(v) ? 0 : 1;
  }
  std::string out;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return out;
}

inline std::string byte_level(std::string_view bytes) {
  std::string out;
  for (char c : bytes) out += byte_char(static_cast<std::uint8_t>(c));
  return out;
}

inline nlohmann::json byte_level_pre_tokenizer(bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", use_regex}};
}

// Qwen2's and Llama-3's pre-tokenizers: one regex Split, then ByteLevel.
inline nlohmann::json split_pre_tokenizer(const std::string& regex) {
  nlohmann::json split = {
      {"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}};
  return {{"type", "Sequence"}, {"pretokenizers", nlohmann::json::array({split, byte_level_pre_tokenizer(false)})}};
}

inline const std::string kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline const std::string kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct Fixture {
  // Merges as raw bytes (" " rather than "Ġ"); merge i makes token 256 + i
  // unless an earlier merge already made the same string.
  std::vector<std::pair<std::string, std::string>> merges;
  nlohmann::json pre_tokenizer = byte_level_pre_tokenizer(true);
  nlohmann::json normalizer = nullptr;
  nlohmann::json post_processor = nullptr;
  nlohmann::json added_tokens = nlohmann::json::array();
  bool merges_as_strings = false;  // the older "a b" form instead of ["a", "b"]

  // The id the next add_token call gives.
  std::int32_t next_id() const {
    return 256 + static_cast<std::int32_t>(merges.size()) + static_cast<std::int32_t>(added_tokens.size());
  }

  std::int32_t add_token(const std::string& content, bool special, nlohmann::json extra = nlohmann::json::object()) {
    const std::int32_t id = next_id();
    nlohmann::json entry = {{"id", id},        {"content", content},     {"single_word", false}, {"lstrip", false},
                            {"rstrip", false}, {"normalized", !special}, {"special", special}};
    entry.update(extra);
    added_tokens.push_back(entry);
    return id;
  }

  nlohmann::json json() const {
    nlohmann::json vocab = nlohmann::json::object();
    for (int b = 0; b < 256; ++b) vocab[byte_char(static_cast<std::uint8_t>(b))] = b;
    nlohmann::json merge_list = nlohmann::json::array();
    std::int32_t id = 256;
    for (const auto& [left, right] : merges) {
      const std::string l = byte_level(left);
      const std::string r = byte_level(right);
      if (merges_as_strings) {
        merge_list.push_back(l + " " + r);
      } else {
        merge_list.push_back(nlohmann::json::array({l, r}));
      }
      if (!vocab.contains(l + r)) vocab[l + r] = id;
      ++id;
    }
    return {
        {"version", "1.0"},
        {"truncation", nullptr},
        {"padding", nullptr},
        {"added_tokens", added_tokens},
        {"normalizer", normalizer},
        {"pre_tokenizer", pre_tokenizer},
        {"post_processor", post_processor},
        {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
        {"model",
         {{"type", "BPE"},
          {"dropout", nullptr},
          {"unk_token", nullptr},
          {"continuing_subword_prefix", nullptr},
          {"end_of_word_suffix", nullptr},
          {"fuse_unk", false},
          {"byte_fallback", false},
          {"vocab", vocab},
          {"merges", merge_list}}}};
  }

  std::string text() const { return json().dump(); }
};

// The ids a merge-free fixture gives for raw bytes: one per byte, id = byte value.
inline std::vector<std::int32_t> byte_ids(std::string_view bytes) {
  std::vector<std::int32_t> ids;
  for (char c : bytes) ids.push_back(static_cast<std::uint8_t>(c));
  return ids;
}

}  // namespace rlcore::test
