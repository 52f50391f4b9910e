// Seeded fuzzing of decode: mutated, truncated and random input must either
// decode or throw FormatError; any other exception (or a crash) fails.
#include "batch_testing.h"

#include <random>

#include "rlcore/error.h"
#include "rlcore/wire_format.h"

using nlohmann::json;

namespace {

using Rng = std::mt19937_64;

struct Outcome {
  int decoded = 0;
  int rejected = 0;
};

std::vector<rlcore::Batch> samples() {
  rlcore::Batch mixed;
  mixed.set("ids", at::arange(12, at::kLong).view({4, 3}));
  mixed.set("mask", at::arange(4).remainder(2).to(at::kBool));
  mixed.set("logp", at::randn({4, 2}).to(at::kBFloat16));
  mixed.set("empty", at::zeros({4, 0}, at::kHalf));
  mixed.set("bytes", at::arange(8, at::kChar).view({4, 2}));
  mixed.set_non_tensor("uid", {"a", "b", json{{"k", {1, 2}}}, nullptr});
  mixed.meta_info() = {{"temperature", 0.7}, {"eos", {1, 2}}};
  rlcore::Batch zero_rows;
  zero_rows.set("x", at::zeros({0, 5}));
  rlcore::Batch meta_only;
  meta_only.meta_info()["step"] = 3;
  return {mixed, zero_rows, meta_only};
}

template <class F>
void expect_only_format_errors(F&& decode, Outcome& outcome, int iteration) {
  try {
    decode();
    ++outcome.decoded;
  } catch (const rlcore::FormatError&) {
    ++outcome.rejected;
  } catch (const std::exception& e) {
    FAIL("iteration " << iteration << " threw something other than FormatError: " << e.what());
  }
}

json interesting_value(Rng& rng) {
  static const std::vector<json> kValues = {-1,
                                            0,
                                            1,
                                            2,
                                            3,
                                            4,
                                            64,
                                            uint64_t{1} << 62,
                                            uint64_t{1} << 63,
                                            ~uint64_t{0},
                                            1.5,
                                            -0.0,
                                            "float32",
                                            "bool",
                                            "bfloat16",
                                            "x",
                                            "",
                                            nullptr,
                                            true,
                                            json::array(),
                                            json::object(),
                                            json::array({uint64_t{1} << 62, uint64_t{1} << 62}),
                                            json::array({0, -1}),
                                            json::array({4})};
  return kValues[rng() % kValues.size()];
}

// Replaces, removes or adds one node of the header tree.
void mutate_tree(json& node, Rng& rng) {
  const bool container = (node.is_object() || node.is_array()) && !node.empty();
  if (!container || rng() % 4 == 0) {
    node = interesting_value(rng);
    return;
  }
  if (rng() % 8 == 0) {
    if (node.is_object()) {
      node.erase(std::next(node.begin(), static_cast<long>(rng() % node.size())));
    } else {
      node.push_back(interesting_value(rng));
    }
    return;
  }
  mutate_tree(*std::next(node.begin(), static_cast<long>(rng() % node.size())), rng);
}

std::string mutate_bytes(std::string bytes, Rng& rng) {
  switch (rng() % 4) {
    case 0:  // flip a few bytes anywhere
      for (int n = 1 + rng() % 4; n > 0 && !bytes.empty(); --n) {
        bytes[rng() % bytes.size()] = static_cast<char>(rng());
      }
      return bytes;
    case 1:  // truncate
      return bytes.substr(0, rng() % (bytes.size() + 1));
    case 2:  // insert garbage
      return bytes.insert(rng() % (bytes.size() + 1), std::string(1 + rng() % 16, char(rng())));
    default: {  // overwrite a length field with a boundary value
      static const uint64_t kLengths[] = {0, 1, 7, 8, 1u << 20, uint64_t{1} << 62, ~uint64_t{0}};
      const size_t field = 8 + 8 * (rng() % 4);
      const uint64_t value = kLengths[rng() % 7];
      for (int i = 0; i < 8 && field + i < bytes.size(); ++i) {
        bytes[field + i] = static_cast<char>(value >> (8 * i));
      }
      return bytes;
    }
  }
}

}  // namespace

TEST_CASE("fuzzed packed buffers decode or throw FormatError", "[wire]") {
  Rng rng(20240611);
  std::vector<std::string> packed;
  for (const auto& batch : samples()) packed.push_back(rlcore::pack(rlcore::encode_batch(batch)));
  Outcome outcome;
  for (int i = 0; i < 3000; ++i) {
    const std::string input = i % 10 == 0 ? std::string("RLCB\x01\0\0\0", 8) + std::string(rng() % 64, char(rng()))
                                          : mutate_bytes(packed[rng() % packed.size()], rng);
    expect_only_format_errors([&] { rlcore::decode_batch(rlcore::unpack(input)); }, outcome, i);
  }
  for (int i = 0; i < 200; ++i) {
    std::string noise(rng() % 256, '\0');
    for (auto& byte : noise) byte = static_cast<char>(rng());
    expect_only_format_errors([&] { rlcore::decode_batch(rlcore::unpack(noise)); }, outcome, i);
  }
  CHECK(outcome.rejected > 2000);
  CHECK(outcome.decoded > 0);  // flips inside tensor bytes still decode
}

TEST_CASE("fuzzed header trees decode or throw FormatError", "[wire]") {
  Rng rng(7);
  Outcome outcome;
  const auto batches = samples();
  for (int i = 0; i < 3000; ++i) {
    const rlcore::WireMessage message = rlcore::encode_batch(batches[rng() % batches.size()]);
    json header = json::parse(message.header);
    for (int n = 1 + rng() % 3; n > 0; --n) mutate_tree(header, rng);
    std::vector<std::string_view> frames = rlcore::view_of(message).frames;
    if (rng() % 10 == 0 && !frames.empty()) frames.pop_back();
    const std::string text = header.dump();
    expect_only_format_errors([&] { rlcore::decode_batch(text, frames); }, outcome, i);
  }
  CHECK(outcome.rejected > 1000);
  CHECK(outcome.decoded > 0);
}
