// Safetensors round trips, zero-copy views, sharded checkpoints, and a file
// written byte by byte that pins the reader to the spec rather than our writer.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <iterator>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "rlcore/error.h"
#include "rlcore/safetensors/safetensors.h"
#include "../../common/test_paths.h"
#include "safetensors_testing.h"

namespace fs = std::filesystem;
using rlcore::NamedTensors;
using rlcore::SafetensorsCheckpoint;
using rlcore::SafetensorsFile;

namespace {

using safetensors_test::read_bytes;
using safetensors_test::u64_le;
using safetensors_test::write_bytes;

fs::path case_dir(const std::string& name) { return safetensors_test::fresh_dir("safetensors", name); }

bool same(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() && at::equal(a, b);
}

// One tensor of every dtype, plus the shapes writers get wrong.
NamedTensors sample_tensors() {
  at::manual_seed(7);
  return {
      {"odd_bytes", at::tensor({1, 2, 255}, at::kByte)},  // 3 bytes: forces reordering
      {"f64", at::randn({2, 3}, at::kDouble)},
      {"f32", at::randn({4}, at::kFloat)},
      {"f16", at::randn({3, 2}).to(at::kHalf)},
      {"bf16", at::randn({2, 2, 2}).to(at::kBFloat16)},
      {"i64", at::tensor({int64_t{1} << 40, int64_t{-5}}, at::kLong)},
      {"i32", at::tensor({-7, 2147483647}, at::kInt)},
      {"i16", at::tensor({-32768, 12}, at::kShort)},
      {"i8", at::tensor({-128, 127}, at::kChar)},
      {"bool", at::tensor({1, 0, 1}, at::kByte).to(at::kBool)},
      {"scalar", at::scalar_tensor(3.5, at::kFloat)},
      {"empty", at::empty({0}, at::kFloat)},
      {"empty_3d", at::empty({3, 0, 2}, at::kBFloat16)},
      {"transposed", at::arange(6, at::kFloat).reshape({2, 3}).t()},
  };
}

}  // namespace

TEST_CASE("safetensors round trip keeps every dtype, shape, order and metadata", "[safetensors]") {
  fs::path path = case_dir("round_trip") / "t.safetensors";
  NamedTensors tensors = sample_tensors();
  rlcore::save_safetensors(path, tensors, {{"format", "pt"}, {"step", "12"}});

  SafetensorsFile file(path);
  REQUIRE(file.metadata() == rlcore::SafetensorsMetadata{{"format", "pt"}, {"step", "12"}});
  REQUIRE(file.names().size() == tensors.size());
  NamedTensors loaded = file.load_all();
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, expected] = tensors[i];
    INFO(name);
    REQUIRE(file.names()[i] == name);
    REQUIRE(loaded[i].first == name);
    REQUIRE(file.entry(name).dtype == expected.scalar_type());
    REQUIRE(file.entry(name).shape == expected.sizes().vec());
    REQUIRE(same(loaded[i].second, expected));
    REQUIRE(same(file.view(name), expected));
  }
  REQUIRE(file.view("scalar").dim() == 0);
  REQUIRE(file.view("scalar").item<float>() == 3.5f);

  std::string bytes = read_bytes(path);
  std::uint64_t header_size = 0;
  std::memcpy(&header_size, bytes.data(), 8);
  REQUIRE(header_size % 8 == 0);
  std::uint64_t data_size = 0;
  for (const auto& item : tensors) data_size += item.second.numel() * item.second.element_size();
  REQUIRE(bytes.size() == 8 + header_size + data_size);
  REQUIRE(fs::directory_iterator(path.parent_path()) != fs::directory_iterator());
  for (const auto& item : fs::directory_iterator(path.parent_path())) {
    REQUIRE(item.path().filename() == "t.safetensors");  // no temp file left behind
  }
}

TEST_CASE("safetensors writer output matches the spec byte for byte", "[safetensors]") {
  fs::path path = case_dir("writer_bytes") / "t.safetensors";
  rlcore::save_safetensors(path, {{"a", at::tensor({1.0f})}});
  std::string header = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  header.resize(56, ' ');  // 53 bytes padded to a multiple of 8
  REQUIRE(read_bytes(path) == u64_le(56) + header + std::string("\x00\x00\x80\x3f", 4));
}

TEST_CASE("safetensors reader decodes a file written byte by byte", "[safetensors]") {
  const std::string header = R"({"__metadata__":{"k":"v"},)"
                             R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("h":{"dtype":"BF16","shape":[1,2],"data_offsets":[8,12]},)"
                             R"("i":{"dtype":"I16","shape":[],"data_offsets":[12,14]},)"
                             R"("b":{"dtype":"BOOL","shape":[2],"data_offsets":[14,16]},)"
                             R"("z":{"dtype":"F64","shape":[0,3],"data_offsets":[16,16]}})";
  const std::string data(
      "\x00\x00\x80\x3f"  // F32 1.0
      "\x00\x00\x20\xc0"  // F32 -2.5
      "\x80\x3f\x00\xc0"  // BF16 1.0, -2.0
      "\xfe\xff"          // I16 -2
      "\x01\x00",         // BOOL true, false
      16);
  // Unpadded (legal, and misaligns the data so view() must copy) and padded.
  for (std::size_t padding : {std::size_t{0}, 8 - header.size() % 8}) {
    INFO("padding " << padding);
    std::string padded = header + std::string(padding, ' ');
    fs::path path = case_dir("by_hand") / "t.safetensors";
    write_bytes(path, u64_le(padded.size()) + padded + data);

    SafetensorsFile file(path);
    REQUIRE(file.names() == std::vector<std::string>{"w", "h", "i", "b", "z"});
    REQUIRE(file.metadata().at("k") == "v");
    for (bool use_view : {false, true}) {
      auto get = [&](const std::string& name) { return use_view ? file.view(name) : file.load(name); };
      REQUIRE(same(get("w"), at::tensor({1.0f, -2.5f})));
      REQUIRE(same(get("h"), at::tensor({1.0f, -2.0f}).to(at::kBFloat16).reshape({1, 2})));
      REQUIRE(same(get("i"), at::scalar_tensor(-2, at::kShort)));
      REQUIRE(same(get("b"), at::tensor({1, 0}, at::kByte).to(at::kBool)));
      REQUIRE(same(get("z"), at::empty({0, 3}, at::kDouble)));
    }
    REQUIRE(file.entry("h").begin == 8);
    REQUIRE(file.entry("h").end == 12);
  }
}

TEST_CASE("safetensors views are zero-copy and outlive the reader and the file", "[safetensors]") {
  fs::path path = case_dir("views") / "t.safetensors";
  NamedTensors tensors = sample_tensors();
  rlcore::save_safetensors(path, tensors);

  at::Tensor f64;
  at::Tensor bf16;
  {
    SafetensorsFile file(path);
    f64 = file.view("f64");
    bf16 = file.view("bf16");
    // Both point into one mapping, exactly as far apart as their offsets.
    auto distance = static_cast<const char*>(bf16.data_ptr()) - static_cast<const char*>(f64.data_ptr());
    REQUIRE(distance == static_cast<std::ptrdiff_t>(file.entry("bf16").begin - file.entry("f64").begin));
    REQUIRE(file.view("f64").data_ptr() == f64.data_ptr());
    at::Tensor copy = file.load("f64");
    REQUIRE(copy.data_ptr() != f64.data_ptr());
    copy.add_(1);  // copies are writable
    REQUIRE(same(file.view("f64"), tensors[1].second));
  }
  fs::remove(path);
  REQUIRE(same(f64, tensors[1].second));
  REQUIRE(same(bf16, tensors[4].second));
}

TEST_CASE("safetensors writer refuses what it cannot represent", "[safetensors]") {
  fs::path path = case_dir("writer_errors") / "t.safetensors";
  auto t = at::zeros({2});
  CHECK_THROWS_AS(rlcore::save_safetensors(path, {{"a", t}, {"a", t}}), rlcore::ValueError);
  CHECK_THROWS_AS(rlcore::save_safetensors(path, {{"__metadata__", t}}), rlcore::ValueError);
  CHECK_THROWS_WITH(rlcore::save_safetensors(path, {{"c", at::zeros({2}, at::kComplexFloat)}}),
                    Catch::Contains("no dtype for ComplexFloat"));
  CHECK_THROWS_AS(rlcore::save_safetensors(path, {{std::string("\xff"), t}}), rlcore::ValueError);
  REQUIRE(fs::is_empty(path.parent_path()));
}

TEST_CASE("safetensors sharded checkpoint round trip", "[safetensors]") {
  fs::path dir = case_dir("sharded");
  NamedTensors tensors;
  for (int i = 0; i < 5; ++i) {
    tensors.emplace_back("layer." + std::to_string(i), at::full({100}, float(i)));  // 400 B
  }
  tensors.emplace_back("big", at::ones({300}, at::kFloat));  // 1200 B: a shard of its own
  tensors.emplace_back("tail", at::ones({2}, at::kBFloat16));

  auto written = rlcore::save_safetensors_checkpoint(dir, tensors, 1000);
  std::vector<std::string> files;
  for (const auto& path : written) files.push_back(path.filename().string());
  REQUIRE(files == std::vector<std::string>{"model-00001-of-00005.safetensors", "model-00002-of-00005.safetensors",
                                            "model-00003-of-00005.safetensors", "model-00004-of-00005.safetensors",
                                            "model-00005-of-00005.safetensors", "model.safetensors.index.json"});

  auto index = nlohmann::json::parse(read_bytes(dir / rlcore::kSafetensorsIndexFile));
  REQUIRE(index["metadata"]["total_size"] == 5 * 400 + 1200 + 4);
  REQUIRE(index["weight_map"]["layer.1"] == "model-00001-of-00005.safetensors");
  REQUIRE(index["weight_map"]["layer.2"] == "model-00002-of-00005.safetensors");
  REQUIRE(index["weight_map"]["big"] == "model-00004-of-00005.safetensors");
  REQUIRE(index["weight_map"]["tail"] == "model-00005-of-00005.safetensors");
  REQUIRE(index["weight_map"].size() == tensors.size());

  SafetensorsCheckpoint checkpoint(dir);
  REQUIRE(checkpoint.shards().size() == 5);
  REQUIRE(checkpoint.names().front() == "big");  // sorted
  REQUIRE(checkpoint.shard("layer.4").path().filename() == "model-00003-of-00005.safetensors");
  REQUIRE(checkpoint.shard("tail").metadata().at("format") == "pt");
  for (const auto& [name, expected] : tensors) {
    INFO(name);
    REQUIRE(same(checkpoint.view(name), expected));
    REQUIRE(same(checkpoint.load(name), expected));
  }
  REQUIRE(checkpoint.load_all().size() == tensors.size());

  // Saving again unsharded must not leave the old index or shards behind.
  written = rlcore::save_safetensors_checkpoint(dir, tensors, 1 << 20, {{"format", "custom"}});
  REQUIRE(written.size() == 1);
  std::vector<std::string> left;
  for (const auto& item : fs::directory_iterator(dir)) {
    left.push_back(item.path().filename().string());
  }
  REQUIRE(left == std::vector<std::string>{"model.safetensors"});
  SafetensorsCheckpoint single(dir);
  REQUIRE(single.shards().size() == 1);
  REQUIRE(single.shards()[0].metadata().at("format") == "custom");
  REQUIRE(same(single.view("layer.3"), tensors[3].second));
}
