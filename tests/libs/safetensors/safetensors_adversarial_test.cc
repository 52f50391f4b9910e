// Hostile safetensors files and checkpoint directories: each must be refused
// with an rlcore error that names the file (and tensor), never a crash.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>

#include <ATen/ATen.h>

#include "rlcore/error.h"
#include "rlcore/safetensors/safetensors.h"
#include "../../common/error_of.h"
#include "../../common/test_paths.h"
#include "safetensors_testing.h"

namespace fs = std::filesystem;
using Catch::Contains;
using rlcore::SafetensorsCheckpoint;
using rlcore::SafetensorsFile;
using rlcore_test::error_of;

namespace {

using safetensors_test::read_bytes;
using safetensors_test::u64_le;
using safetensors_test::write_bytes;

fs::path adversarial_dir(const std::string& name) {
  return safetensors_test::fresh_dir("safetensors_adversarial", name);
}

std::string file_bytes(const std::string& header, std::size_t data_size) {
  return u64_le(header.size()) + header + std::string(data_size, '\0');
}

// One F32 tensor entry.
std::string f32(const std::string& name, const std::string& shape, std::uint64_t begin, std::uint64_t end) {
  return "\"" + name + "\":{\"dtype\":\"F32\",\"shape\":" + shape + ",\"data_offsets\":[" + std::to_string(begin) +
         "," + std::to_string(end) + "]}";
}

// Writes `bytes` and returns the FormatError opening it throws, after checking
// that the message names the file.
std::string format_error(const std::string& bytes) {
  fs::path path = adversarial_dir("format_error") / "bad.safetensors";
  write_bytes(path, bytes);
  std::string message = error_of<rlcore::FormatError>([&] { SafetensorsFile file(path); });
  CHECK_THAT(message, Contains(path.string()));
  return message;
}

}  // namespace

TEST_CASE("safetensors refuses truncated files", "[safetensors]") {
  CHECK_THAT(format_error(std::string("\x10\x00\x00", 3)), Contains("too short for the 8-byte header length"));
  CHECK_THAT(format_error(u64_le(1000) + "{}"),
             Contains("header length 1000 exceeds the 2 bytes after it (truncated file?)"));
  std::string whole = file_bytes("{" + f32("w", "[4]", 0, 16) + "}", 16);
  CHECK_THAT(format_error(whole.substr(0, whole.size() - 4)),
             Contains("tensor 'w': data_offsets [0,16] run past the end of the 12-byte data "
                      "region (truncated file?)"));
}

TEST_CASE("safetensors refuses bad header lengths and non-JSON headers", "[safetensors]") {
  CHECK_THAT(format_error(u64_le(200'000'000) + "{}"), Contains("header length 200000000 is outside [2, 100000000]"));
  CHECK_THAT(format_error(u64_le(1) + "{"), Contains("header length 1 is outside"));
  CHECK_THAT(format_error(file_bytes("{\"a\": ", 0)), Contains("header: not valid JSON"));
  // nlohmann alone would stop at the NUL and accept this; the reference refuses it.
  CHECK_THAT(format_error(file_bytes(std::string("{}\0\0\0\0\0\0", 8), 0)),
             Contains("header: not valid JSON: NUL byte at offset 2"));
  CHECK_THAT(format_error(file_bytes("[1, 2]", 0)), Contains("header is not a JSON object"));
  CHECK_THAT(format_error(file_bytes("\"{}\"", 0)), Contains("header is not a JSON object"));
  CHECK_THAT(format_error(file_bytes("{\"\xff\": 1}", 0)), Contains("not valid JSON"));
  CHECK_THAT(format_error(file_bytes(std::string(64, '[') + std::string(64, ']'), 0)),
             Contains("nested deeper than 3"));
}

TEST_CASE("safetensors refuses malformed tensor entries", "[safetensors]") {
  CHECK_THAT(format_error(file_bytes(R"({"w": [1]})", 0)), Contains("tensor 'w': entry is not an object"));
  CHECK_THAT(format_error(file_bytes(R"({"w":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}})", 1)),
             Contains("tensor 'w': unknown or unsupported dtype \"F8_E4M3\""));
  CHECK_THAT(format_error(file_bytes(R"({"w":{"dtype":7,"shape":[1],"data_offsets":[0,4]}})", 4)),
             Contains("tensor 'w': missing or non-string \"dtype\""));
  CHECK_THAT(format_error(file_bytes("{" + f32("w", "[-1]", 0, 4) + "}", 4)),
             Contains("tensor 'w': shape must hold non-negative integers, got [-1]"));
  CHECK_THAT(format_error(file_bytes("{" + f32("w", "[2.0]", 0, 8) + "}", 8)),
             Contains("tensor 'w': shape must hold non-negative integers, got [2.0]"));
  CHECK_THAT(format_error(file_bytes("{" + f32("w", "[\"2\"]", 0, 8) + "}", 8)),
             Contains("shape must hold non-negative integers"));
  CHECK_THAT(format_error(file_bytes("{" + f32("w", "3", 0, 12) + "}", 12)),
             Contains("tensor 'w': missing or non-array \"shape\""));
  CHECK_THAT(format_error(file_bytes(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4)),
             Contains("tensor 'w': \"data_offsets\" must be [begin, end]"));
  CHECK_THAT(format_error(file_bytes(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,-4]}})", 4)),
             Contains("tensor 'w': data_offsets end must be a non-negative integer, got -4"));
  CHECK_THAT(format_error(file_bytes("{" + f32("w", "[1]", 8, 4) + "}", 8)),
             Contains("tensor 'w': data_offsets [8,4] end before they begin"));
  CHECK_THAT(format_error(file_bytes("{" + f32("w", "[1]", 0, 4) + "," + f32("w", "[1]", 4, 8) + "}", 8)),
             Contains("duplicate key 'w'"));
  CHECK_THAT(format_error(file_bytes(R"({"__metadata__":{"k":1}})", 0)),
             Contains("__metadata__ value for 'k' is not a string"));
  CHECK_THAT(format_error(file_bytes(R"({"__metadata__":[]})", 0)), Contains("__metadata__ is not an object"));
}

TEST_CASE("safetensors refuses sizes and ranges that do not add up", "[safetensors]") {
  CHECK_THAT(format_error(file_bytes("{" + f32("w", "[3]", 0, 8) + "}", 8)),
             Contains("tensor 'w': shape [3] of F32 needs 12 bytes but data_offsets [0,8] span 8"));
  CHECK_THAT(format_error(file_bytes("{" + f32("w", "[4294967296,4294967296,4294967296]", 0, 8) + "}", 8)),
             Contains("tensor 'w': shape [4294967296,4294967296,4294967296] overflows"));
  // u64 wraps to 0 here; a naive product would match the empty range.
  CHECK_THAT(format_error(file_bytes("{" + f32("w", "[4611686018427387904,4]", 0, 0) + "}", 0)), Contains("overflows"));
  CHECK_THAT(format_error(file_bytes("{" + f32("w", "[0,9223372036854775807,2]", 0, 0) + "}", 0)),
             Contains("overflows"));
  CHECK_THAT(format_error(file_bytes("{" + f32("w", "[2]", 16, 24) + "}", 16)),
             Contains("tensor 'w': data_offsets [16,24] run past the end of the 16-byte"));
  CHECK_THAT(format_error(file_bytes("{" + f32("a", "[2]", 0, 8) + "," + f32("b", "[2]", 4, 12) + "}", 12)),
             Contains("tensor 'b' overlaps tensor 'a'"));
  CHECK_THAT(format_error(file_bytes("{" + f32("a", "[2]", 0, 8) + "," + f32("z", "[0]", 4, 4) + "}", 8)),
             Contains("tensor 'z' overlaps tensor 'a'"));
  CHECK_THAT(format_error(file_bytes("{" + f32("a", "[1]", 0, 4) + "," + f32("b", "[1]", 8, 12) + "}", 12)),
             Contains("hole in the data region: bytes [4, 8) before tensor 'b'"));
  CHECK_THAT(format_error(file_bytes("{" + f32("a", "[1]", 4, 8) + "}", 8)),
             Contains("bytes [0, 4) before tensor 'a'"));
  CHECK_THAT(format_error(file_bytes("{" + f32("a", "[1]", 0, 4) + "}", 8)),
             Contains("bytes [4, 8) at the end belong to no tensor"));
}

TEST_CASE("safetensors lookups and opens fail with rlcore errors", "[safetensors]") {
  fs::path dir = adversarial_dir("lookups");
  rlcore::save_safetensors(dir / "ok.safetensors", {{"a", at::zeros({2})}});
  SafetensorsFile file(dir / "ok.safetensors");
  CHECK_THAT(error_of<rlcore::ValueError>([&] { file.view("nope"); }),
             Contains("ok.safetensors: no tensor named 'nope'"));
  CHECK_THROWS_AS(file.load("nope"), rlcore::ValueError);
  CHECK_THAT(error_of<rlcore::IoError>([&] { SafetensorsFile f(dir / "missing.safetensors"); }),
             Contains("missing.safetensors: cannot open"));
  CHECK_THAT(error_of<rlcore::IoError>([&] { SafetensorsFile f(dir); }), Contains("is a directory"));
}

TEST_CASE("safetensors checkpoints refuse bad indexes", "[safetensors]") {
  fs::path dir = adversarial_dir("checkpoint");
  rlcore::save_safetensors(dir / "shard.safetensors", {{"a", at::zeros({2})}});
  fs::path outside = dir.parent_path() / "outside.safetensors";
  rlcore::save_safetensors(outside, {{"a", at::zeros({2})}});
  auto with_index = [&](const std::string& text) { write_bytes(dir / rlcore::kSafetensorsIndexFile, text); };

  with_index(R"({"weight_map": {"a": "shard.safetensors"}})");
  SafetensorsCheckpoint ok(dir);
  REQUIRE(ok.names() == std::vector<std::string>{"a"});
  CHECK_THAT(error_of<rlcore::ValueError>([&] { ok.view("b"); }), Contains("no tensor named 'b' in the checkpoint"));

  for (const std::string& shard :
       std::vector<std::string>{"../outside.safetensors", outside.string(), "sub/../shard.safetensors", "..", ""}) {
    INFO(shard);
    with_index(R"({"weight_map": {"a": ")" + shard + R"("}})");
    CHECK_THAT(error_of<rlcore::FormatError>([&] { SafetensorsCheckpoint c(dir); }),
               Contains("weight_map['a']") && Contains("is not a file name inside"));
  }
  with_index(R"({"weight_map": {"a": "shard.safetensors\u0000x"}})");
  CHECK_THROWS_AS(SafetensorsCheckpoint(dir), rlcore::FormatError);
  with_index(R"({"weight_map": {"a": 3}})");
  CHECK_THROWS_AS(SafetensorsCheckpoint(dir), rlcore::FormatError);

  with_index(R"({"weight_map": {"a": "model-00002-of-00002.safetensors"}})");
  CHECK_THAT(error_of<rlcore::IoError>([&] { SafetensorsCheckpoint c(dir); }),
             Contains("shard 'model-00002-of-00002.safetensors' (holding tensor 'a') does not "
                      "exist"));
  with_index(R"({"weight_map": {"b": "shard.safetensors"}})");
  CHECK_THAT(error_of<rlcore::FormatError>([&] { SafetensorsCheckpoint c(dir); }),
             Contains("tensor 'b' is not in its shard 'shard.safetensors'"));
  with_index(R"({"weight_map": {"a": "shard.safetensors", "a": "shard.safetensors"}})");
  CHECK_THAT(error_of<rlcore::FormatError>([&] { SafetensorsCheckpoint c(dir); }), Contains("duplicate key 'a'"));
  with_index(R"({"metadata": {}})");
  CHECK_THAT(error_of<rlcore::FormatError>([&] { SafetensorsCheckpoint c(dir); }),
             Contains("missing \"weight_map\" object"));
  with_index("not json");
  CHECK_THAT(error_of<rlcore::FormatError>([&] { SafetensorsCheckpoint c(dir); }),
             Contains(rlcore::kSafetensorsIndexFile) && Contains("not valid JSON"));

  fs::remove(dir / rlcore::kSafetensorsIndexFile);
  CHECK_THAT(error_of<rlcore::IoError>([&] { SafetensorsCheckpoint c(dir); }),
             Contains("no model.safetensors or model.safetensors.index.json"));
}

TEST_CASE("safetensors fuzz: mutated files only ever raise rlcore errors", "[safetensors]") {
  fs::path dir = adversarial_dir("fuzz");
  fs::path seed_path = dir / "seed.safetensors";
  at::manual_seed(3);
  rlcore::save_safetensors(seed_path,
                           {{"a", at::randn({2, 3})},
                            {"b", at::tensor({1, 2, 3}, at::kByte)},
                            {"c", at::randn({4}).to(at::kBFloat16)},
                            {"d", at::scalar_tensor(7, at::kLong)},
                            {"e", at::empty({0, 5})}},
                           {{"format", "pt"}});
  const std::string seed = read_bytes(seed_path);
  std::uint64_t header_size = 0;
  std::memcpy(&header_size, seed.data(), 8);
  const std::size_t header_end = 8 + header_size;
  const char kAlphabet[] = "{}[]\":,-.eE0123456789 \\ufdtrnFIUBL8_\xff";
  const std::string alphabet(kAlphabet, sizeof kAlphabet);  // with the trailing NUL

  std::mt19937_64 rng(20240611);
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % std::max<std::size_t>(n, 1)); };
  fs::path path = dir / "mutant.safetensors";
  int accepted = 0;
  int refused = 0;
  auto start = std::chrono::steady_clock::now();
  for (int iteration = 0; iteration < 2000; ++iteration) {
    std::string bytes = seed;
    for (std::size_t m = 0, n = 1 + pick(3); m < n; ++m) {
      // Mostly hit the header, where the parser lives.
      std::size_t at = pick(4) == 0 ? pick(bytes.size()) : pick(std::min(bytes.size(), header_end));
      switch (pick(6)) {
        case 0:
          bytes[at] = static_cast<char>(rng());
          break;
        case 1:
          bytes[at] = alphabet[pick(alphabet.size())];
          break;
        case 2:
          bytes.insert(at, 1, alphabet[pick(alphabet.size())]);
          break;
        case 3:
          bytes.erase(at, 1 + pick(4));
          break;
        case 4:
          bytes.resize(pick(bytes.size() + 16));
          break;
        case 5:
          if (bytes.size() >= 8) bytes[pick(2)] += static_cast<char>(int(pick(17)) - 8);
          break;
      }
      if (bytes.empty()) break;
    }
    // A fresh file, not a truncated one: ext4 flushes truncate-and-rewrite on
    // close (auto_da_alloc), which makes this loop 100x slower.
    fs::remove(path);
    write_bytes(path, bytes);
    try {
      SafetensorsFile file(path);
      for (const auto& name : file.names()) {
        const auto& entry = file.entry(name);
        REQUIRE(file.view(name).sizes().vec() == entry.shape);
        REQUIRE(file.load(name).nbytes() == entry.nbytes());
      }
      ++accepted;
    } catch (const rlcore::Error&) {
      ++refused;
    } catch (const std::exception& e) {
      FAIL("iteration " << iteration << " threw a non-rlcore error: " << e.what());
    }
  }
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO("fuzz: " << accepted << " accepted, " << refused << " refused in " << seconds << " s");
  REQUIRE(refused > 1000);
  REQUIRE(accepted > 0);
}
