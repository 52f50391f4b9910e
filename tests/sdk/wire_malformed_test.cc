// Malformed wire input: each broken header, frame list or packed buffer throws
// FormatError with a message naming what is wrong.
#include "batch_testing.h"

#include <functional>

#include "rlcore/error.h"
#include "rlcore/wire_format.h"

using nlohmann::json;
using rlcore::FormatError;
using rlcore_test::error_of;

namespace {

constexpr uint64_t k2Pow62 = uint64_t{1} << 62;

// Two rows: x = float32 [[0,1,2],[3,4,5]] (24 bytes), uid = ["a", "b"].
struct Message {
  json header;
  std::vector<std::string> frames;

  Message() {
    rlcore::Batch batch;
    batch.set("x", at::arange(6, at::kFloat).view({2, 3}));
    batch.set_non_tensor("uid", {"a", "b"});
    const rlcore::WireMessage wire = rlcore::encode_batch(batch);
    header = json::parse(wire.header);
    for (auto frame : rlcore::view_of(wire).frames) frames.emplace_back(frame);
  }

  std::string decode_error() const {
    const std::string text = header.dump();
    const std::vector<std::string_view> views(frames.begin(), frames.end());
    return error_of<FormatError>([&] { rlcore::decode_batch(text, views); });
  }
};

struct Case {
  const char* what;
  std::function<void(Message&)> mutate;
  std::string expected;
};

std::string decode_text_error(const std::string& header) {
  return error_of<FormatError>([&] { rlcore::decode_batch(header, {}); });
}

void set_le64(std::string& bytes, size_t offset, uint64_t value) {
  for (int i = 0; i < 8; ++i) bytes[offset + i] = static_cast<char>(value >> (8 * i));
}

std::string unpack_error(const std::string& packed) {
  return error_of<FormatError>([&] { rlcore::unpack(packed); });
}

}  // namespace

TEST_CASE("the unmodified message decodes", "[wire]") {
  const Message message;
  const std::vector<std::string_view> views(message.frames.begin(), message.frames.end());
  const rlcore::Batch batch = rlcore::decode_batch(message.header.dump(), views);
  CHECK(rlcore_test::values(batch.tensor("x")) == std::vector<int64_t>{0, 1, 2, 3, 4, 5});
}

TEST_CASE("malformed headers and frames throw FormatError naming the fault", "[wire]") {
  const std::string x = "tensors[0] (\"x\")";
  const std::vector<Case> cases = {
      {"missing key", [](Message& m) { m.header.erase("meta_info"); }, "wire header: header lacks 'meta_info'"},
      {"unknown key", [](Message& m) { m.header["extra"] = 1; }, "wire header: header has unknown key 'extra'"},
      {"newer version", [](Message& m) { m.header["version"] = 2; },
       "wire header: unsupported version 2 (this build reads 1)"},
      {"version as string", [](Message& m) { m.header["version"] = "1"; },
       "wire header: unsupported version \"1\" (this build reads 1)"},
      {"tensors not an array", [](Message& m) { m.header["tensors"] = json::object(); },
       "wire header: 'tensors' must be an array, got {}"},
      {"meta_info not an object", [](Message& m) { m.header["meta_info"] = json::array(); },
       "wire header: 'meta_info' must be an object, got []"},
      {"missing frame", [](Message& m) { m.frames.clear(); }, "wire header lists 1 tensors but 0 frames arrived"},
      {"extra frame", [](Message& m) { m.frames.push_back("abc"); },
       "wire header lists 1 tensors but 2 frames arrived"},
      {"entry not an object", [](Message& m) { m.header["tensors"][0] = 5; },
       "wire header: tensors[0] must be an object, got 5"},
      {"entry lacks nbytes", [](Message& m) { m.header["tensors"][0].erase("nbytes"); },
       "wire header: tensors[0] lacks 'nbytes'"},
      {"name not a string", [](Message& m) { m.header["tensors"][0]["name"] = 7; },
       "wire header: tensors[0].name must be a string, got 7"},
      {"unknown dtype", [](Message& m) { m.header["tensors"][0]["dtype"] = "float8"; },
       "wire header: " + x +
           ": unknown dtype \"float8\"; known: bool, uint8, int8, int16, "
           "int32, int64, float16, bfloat16, float32, float64"},
      {"negative dim",
       [](Message& m) {
         m.header["tensors"][0]["shape"] = {2, -1};
       },
       "wire header: " + x + ".shape[1] must be an integer in [0, 2^63), got -1"},
      {"fractional dim",
       [](Message& m) {
         m.header["tensors"][0]["shape"] = {2, 1.5};
       },
       "wire header: " + x + ".shape[1] must be an integer in [0, 2^63), got 1.5"},
      {"0-dim shape", [](Message& m) { m.header["tensors"][0]["shape"] = json::array(); },
       "wire header: " + x + ": shape must be an array of 1 to 64 sizes, got []"},
      {"too many dims", [](Message& m) { m.header["tensors"][0]["shape"] = std::vector<int>(65, 1); },
       "wire header: " + x + ": shape must be an array of 1 to 64 sizes, got [1,1,1,1,"},
      {"product overflows",
       [](Message& m) {
         m.header["tensors"][0]["shape"] = {k2Pow62, k2Pow62};
       },
       "wire header: " + x + ": shape [4611686018427387904,4611686018427387904] overflows int64"},
      {"strides overflow behind a zero dim",
       [](Message& m) {
         m.header["tensors"][0]["shape"] = {0, k2Pow62, 4};
       },
       "wire header: " + x + ": shape [0,4611686018427387904,4] overflows int64"},
      {"dim beyond int64",
       [](Message& m) {
         m.header["tensors"][0]["shape"] = {2, ~uint64_t{0}};
       },
       "wire header: " + x + ".shape[1] must be an integer in [0, 2^63), got 18446744073709551615"},
      {"nbytes disagrees with shape", [](Message& m) { m.header["tensors"][0]["nbytes"] = 23; },
       "wire header: " + x + ": shape [2,3] of float32 needs 24 bytes but nbytes is 23"},
      {"short frame", [](Message& m) { m.frames[0].pop_back(); },
       "wire frame for " + x + " has 23 bytes but the header says 24"},
      {"rows disagree with batch_size", [](Message& m) { m.header["batch_size"] = 3; },
       "wire header: " + x + " has 2 rows but batch_size is 3"},
      {"negative batch_size", [](Message& m) { m.header["batch_size"] = -1; },
       "wire header: batch_size must be an integer in [0, 2^63), got -1"},
      {"null batch_size with columns", [](Message& m) { m.header["batch_size"] = nullptr; },
       "wire header: batch_size is null but the batch has columns"},
      {"duplicate tensor name",
       [](Message& m) {
         m.header["tensors"].push_back(m.header["tensors"][0]);
         m.frames.push_back(m.frames[0]);
       },
       "wire header: tensors[1] (\"x\") repeats an earlier tensor name"},
      {"non-tensor rows", [](Message& m) { m.header["non_tensors"]["uid"] = {"a"}; },
       "wire header: non_tensors['uid'] has 1 rows but batch_size is 2"},
      {"non-tensor not an array", [](Message& m) { m.header["non_tensors"]["uid"] = "ab"; },
       "wire header: non_tensors['uid'] must be an array, got \"ab\""},
      {"non-tensor reuses a tensor name",
       [](Message& m) {
         m.header["non_tensors"]["x"] = {1, 2};
       },
       "wire header: non_tensors['x'] reuses the name of a tensor column"},
      {"bool frame byte outside 0/1",
       [](Message& m) {
         m.header["tensors"][0]["dtype"] = "bool";
         m.header["tensors"][0]["shape"] = {2, 12};
       },
       // float32 1.0 is 00 00 80 3f: byte 6 of the frame is 0x80.
       "wire frame for " + x + ": bool byte at offset 6 is 128, not 0 or 1"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    Message message;
    c.mutate(message);
    CHECK_THAT(message.decode_error(), Catch::StartsWith(c.expected));
  }
}

TEST_CASE("header text that is not a JSON object is a FormatError", "[wire]") {
  CHECK_THAT(decode_text_error("{\"version\": 1,"), Catch::StartsWith("wire header is not valid JSON (byte "));
  CHECK_THAT(decode_text_error(""), Catch::StartsWith("wire header is not valid JSON (byte "));
  CHECK_THAT(decode_text_error("{\"a\": \"\xff\"}"),
             Catch::StartsWith("wire header is not valid JSON (byte ") && Catch::Contains("UTF-8"));
  CHECK(decode_text_error("[1, 2]") == "wire header must be a JSON object, got [1,2]");
  // A number too large for a double: nlohmann's out_of_range, not a parse_error (found by fuzzing).
  CHECK_THAT(decode_text_error("{\"version\": 888888888888888E000000000000000000000000000142645263197478000}"),
             Catch::StartsWith("wire header is not valid JSON: ") && Catch::Contains("number overflow"));
  // Deep nesting would otherwise exhaust the stack when the batch is copied.
  const std::string deep = "{\"meta_info\": " + std::string(100000, '[') + "}";
  CHECK(decode_text_error(deep) == "wire header: JSON nests deeper than 128 levels");
}

TEST_CASE("malformed packed buffers throw FormatError naming the offset", "[wire]") {
  rlcore::Batch batch;
  batch.set("x", at::arange(6, at::kFloat).view({2, 3}));
  const std::string packed = rlcore::pack(rlcore::encode_batch(batch));
  const size_t header_bytes = rlcore::encode_batch(batch).header.size();
  REQUIRE(packed.size() == 24 + 8 + header_bytes + 24);

  CHECK(unpack_error(packed.substr(0, 10)) == "packed batch: 10 bytes is shorter than the 24-byte preamble");
  std::string bad = packed;
  bad[0] = 'X';
  CHECK(unpack_error(bad) == "packed batch: bad magic at byte 0 (expected \"RLCB\")");
  bad = packed;
  bad[4] = 2;
  CHECK(unpack_error(bad) == "packed batch: unsupported version 2 at byte 4 (this build reads 1)");
  bad = packed;
  set_le64(bad, 16, uint64_t{1} << 61);
  CHECK_THAT(unpack_error(bad), Catch::StartsWith("packed batch: frame count 2305843009213693952 at byte 16 needs "
                                                  "more length fields than the"));
  bad = packed;
  set_le64(bad, 8, ~uint64_t{0});
  CHECK(unpack_error(bad) ==
        "packed batch: header length 18446744073709551615 at byte 8 exceeds "
        "the " +
            std::to_string(header_bytes + 24) + " bytes left at byte 32");
  bad = packed;
  set_le64(bad, 24, ~uint64_t{0} - 3);
  CHECK_THAT(unpack_error(bad), Catch::StartsWith("packed batch: frame 0 length 18446744073709551612 at byte 24 "
                                                  "exceeds the 24 bytes left"));
  CHECK_THAT(unpack_error(packed.substr(0, packed.size() - 1)),
             Catch::StartsWith("packed batch: frame 0 length 24 at byte 24 exceeds the 23"));
  CHECK(unpack_error(packed + "zz") ==
        "packed batch: 2 trailing bytes after the last frame at byte " + std::to_string(packed.size()));
}
