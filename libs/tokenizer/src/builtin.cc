// The built-in tasks' tokenizer, written out as an HF tokenizer.json so the
// same loader (and any HF tooling) reads it.
#include <nlohmann/json.hpp>

#include "rlcore/tokenizer/tokenizer.h"
#include "byte_level.h"

namespace rlcore {
namespace {

// Qwen2's pattern: \p{N} takes one digit at a time, so no word (and hence no
// merge) ever holds two digits.
constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Merges in rank order, as raw bytes. Each word ("Question", "Answer", "####",
// " ####", the chat roles, " What", " is", " the", " answer", " +", " -", " *",
// " =", "\n\n") got merges joining the first two pieces the earlier merges leave
// it in, until it was one token; so each ends as one token and none digs into
// another. Note "####" is "##" + "##": "###" + "#" would never fire, because
// ("#", "#") outranks it and pairs the last two first.
constexpr const char* kMerges[][2] = {
    {"Q", "u"},        {"Qu", "e"},    {"Que", "s"},   {"Ques", "t"},   {"Quest", "i"},  {"Questi", "o"},
    {"Questio", "n"},  {"A", "n"},     {"An", "s"},    {"Ans", "w"},    {"Answ", "e"},   {"Answe", "r"},
    {"#", "#"},        {"##", "##"},   {" ", "####"},  {"s", "y"},      {"sy", "s"},     {"sys", "t"},
    {"syst", "e"},     {"syste", "m"}, {"u", "s"},     {"us", "e"},     {"use", "r"},    {"a", "s"},
    {"as", "s"},       {"ass", "i"},   {"assi", "s"},  {"assis", "t"},  {"assist", "a"}, {"assista", "n"},
    {"assistan", "t"}, {" ", "W"},     {" W", "h"},    {" Wh", "a"},    {" Wha", "t"},   {" ", "i"},
    {" i", "s"},       {" ", "t"},     {" t", "h"},    {" th", "e"},    {" ", "a"},      {" a", "n"},
    {" an", "s"},      {" ans", "w"},  {" answ", "e"}, {" answe", "r"}, {" ", "+"},      {" ", "-"},
    {" ", "*"},        {" ", "="},     {"\n", "\n"},
};

constexpr const char* kSpecialTokens[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};

nlohmann::json byte_level_step() {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
}

}  // namespace

std::string make_builtin_tokenizer_json() {
  nlohmann::json vocab = nlohmann::json::object();
  int next_id = 0;
  for (int b = 0; b < 256; ++b) vocab[byte_level::byte_to_utf8(static_cast<uint8_t>(b))] = next_id++;
  nlohmann::json merges = nlohmann::json::array();
  for (const auto& merge : kMerges) {
    const std::string left = byte_level::encode(merge[0]);
    const std::string right = byte_level::encode(merge[1]);
    merges.push_back(nlohmann::json::array({left, right}));
    vocab[left + right] = next_id++;
  }
  nlohmann::json added = nlohmann::json::array();
  for (const char* content : kSpecialTokens) {
    added.push_back({{"id", next_id++},
                     {"content", content},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }

  nlohmann::json split = {
      {"type", "Split"}, {"pattern", {{"Regex", kQwen2Pattern}}}, {"behavior", "Isolated"}, {"invert", false}};
  nlohmann::json root = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", {split, byte_level_step()}}}},
      {"post_processor", byte_level_step()},
      {"decoder", byte_level_step()},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", vocab},
        {"merges", merges}}},
  };
  return root.dump(1);
}

Tokenizer make_builtin_tokenizer() {
  SpecialTokenNames names;
  names.eos = "<|im_end|>";
  names.pad = "<|endoftext|>";
  return Tokenizer::from_json(make_builtin_tokenizer_json(), names);
}

}  // namespace rlcore
