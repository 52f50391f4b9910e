// Wire format round trips: every dtype, edge shapes, non-contiguous input, JSON
// columns; and the encode-side errors.
#include "batch_testing.h"

#include <algorithm>

#include "rlcore/error.h"
#include "rlcore/wire_format.h"

using nlohmann::json;
using rlcore::Batch;
using rlcore_test::error_of;
using rlcore_test::values;

namespace {

Batch round_trip(const Batch& batch) {
  return rlcore::decode_batch(rlcore::unpack(rlcore::pack(rlcore::encode_batch(batch))));
}

}  // namespace

TEST_CASE("every supported dtype round-trips bit for bit", "[wire]") {
  const std::vector<std::pair<at::ScalarType, std::string>> dtypes = {
      {at::kBool, "bool"},     {at::kByte, "uint8"},     {at::kChar, "int8"},    {at::kShort, "int16"},
      {at::kInt, "int32"},     {at::kLong, "int64"},     {at::kHalf, "float16"}, {at::kBFloat16, "bfloat16"},
      {at::kFloat, "float32"}, {at::kDouble, "float64"},
  };
  Batch batch;
  for (const auto& [type, name] : dtypes) {
    // -1, -0.625, ..., 0.875: exact in every float type; wraps in uint8, which is fine.
    const at::Tensor base = at::arange(6, at::kDouble).mul(0.375).sub(1).view({3, 2});
    batch.set(name, type == at::kBool ? base.gt(0) : at::isFloatingType(type) ? base.to(type) : base.mul(8).to(type));
  }
  const rlcore::WireMessage message = rlcore::encode_batch(batch);
  const json header = json::parse(message.header);
  REQUIRE(header["tensors"].size() == dtypes.size());
  for (const auto& entry : header["tensors"]) {
    CHECK(entry["dtype"] == entry["name"]);
    CHECK(entry["shape"] == json::array({3, 2}));
  }
  CHECK(header["tensors"][0]["nbytes"] == 6 * 2);  // sorted keys: "bfloat16" first

  const Batch decoded = round_trip(batch);
  CHECK(decoded.equals(batch));
  for (const auto& [type, name] : dtypes) CHECK(decoded.tensor(name).scalar_type() == type);
  CHECK(values(decoded.tensor("int8")) == std::vector<int64_t>{-8, -5, -2, 1, 4, 7});
  CHECK(values(decoded.tensor("bool")) == std::vector<int64_t>{0, 0, 0, 1, 1, 1});
}

TEST_CASE("empty tensors, zero-row and column-less batches round-trip", "[wire]") {
  Batch empty_cols;
  empty_cols.set("x", at::zeros({3, 0}, at::kFloat));
  empty_cols.set("y", at::ones({3, 2, 0, 4}, at::kBFloat16));
  CHECK(round_trip(empty_cols).equals(empty_cols));
  CHECK(round_trip(empty_cols).tensor("y").sizes() == at::IntArrayRef{3, 2, 0, 4});

  Batch zero_rows;
  zero_rows.set("ids", at::zeros({0, 7}, at::kLong));
  zero_rows.set_non_tensor("uid", {});
  const Batch decoded = round_trip(zero_rows);
  CHECK(decoded.has_size());
  CHECK(decoded.size() == 0);
  CHECK(decoded.tensor("ids").sizes() == at::IntArrayRef{0, 7});
  CHECK(decoded.non_tensor("uid").empty());

  Batch sized(5);
  sized.meta_info()["note"] = "no columns";
  CHECK(round_trip(sized).size() == 5);
  CHECK(round_trip(sized).equals(sized));

  Batch unsized;
  unsized.meta_info()["k"] = 1;
  CHECK_FALSE(round_trip(unsized).has_size());
  CHECK(round_trip(unsized).meta_info() == json{{"k", 1}});
}

TEST_CASE("non-contiguous tensors are encoded by value", "[wire]") {
  const at::Tensor grid = at::arange(24, at::kInt).view({4, 6});
  Batch batch;
  batch.set("transposed", at::arange(12, at::kInt).view({3, 4}).t());
  batch.set("strided", grid.slice(1, 0, 6, 2));
  batch.set("expanded", at::arange(3, at::kInt).view({1, 3}).expand({4, 3}));
  const Batch decoded = round_trip(batch);
  for (const auto& key : batch.tensor_keys()) {
    CHECK(decoded.tensor(key).is_contiguous());
    CHECK(values(decoded.tensor(key)) == values(batch.tensor(key)));
  }
  CHECK(values(decoded.tensor("strided")) == std::vector<int64_t>{0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22});
}

TEST_CASE("contiguous CPU tensors are sent without a copy", "[wire]") {
  Batch batch;
  batch.set("x", at::arange(10, at::kFloat).view({5, 2}));
  const rlcore::WireMessage message = rlcore::encode_batch(batch);
  REQUIRE(message.buffers.size() == 1);
  CHECK(message.buffers[0].data_ptr() == batch.tensor("x").data_ptr());
  const rlcore::WireView view = rlcore::view_of(message);
  CHECK(view.frames[0].size() == 40);
  CHECK(view.header == message.header);
}

TEST_CASE("decoded batches own their memory", "[wire]") {
  Batch batch;
  batch.set("x", at::arange(4, at::kLong));
  std::string packed = rlcore::pack(rlcore::encode_batch(batch));
  const Batch decoded = rlcore::decode_batch(rlcore::unpack(packed));
  std::fill(packed.begin(), packed.end(), '\0');
  CHECK(values(decoded.tensor("x")) == std::vector<int64_t>{0, 1, 2, 3});
}

TEST_CASE("non-tensor columns and meta_info travel in the header", "[wire]") {
  Batch batch(3);
  batch.set_non_tensor("prompt", {"h\xc3\xa9llo \xe2\x9c\x93", json{{"turns", {1, 2}}}, nullptr});
  batch.set_non_tensor("score", {1.5, -2, true});
  batch.meta_info() = {{"eos_token_id", {2, 7}}, {"name", "\xc3\xbc"}, {"nested", {{"a", {}}}}};
  const Batch decoded = round_trip(batch);
  CHECK(decoded.equals(batch));
  CHECK(decoded.non_tensor("prompt")[1]["turns"][1] == 2);
  CHECK(decoded.meta_info()["eos_token_id"] == json::array({2, 7}));
}

TEST_CASE("encode rejects what the wire format cannot carry", "[wire]") {
  Batch complex;
  complex.set("z", at::zeros({2}, at::kComplexFloat));
  CHECK_THAT(error_of<rlcore::ValueError>([&] { rlcore::encode_batch(complex); }),
             Catch::StartsWith("encode_batch: tensor column 'z' (ComplexFloat, layout Strided) "
                               "cannot be encoded; supported dtypes (strided only): bool, uint8"));

  Batch utf8(1);
  utf8.set_non_tensor("s", {std::string("\xff")});
  CHECK_THAT(error_of<rlcore::ValueError>([&] { rlcore::encode_batch(utf8); }),
             Catch::StartsWith("encode_batch: a non-tensor column or meta_info holds a string "
                               "that is not valid UTF-8"));

  Batch meta;
  meta.meta_info() = json::array();
  CHECK(error_of<rlcore::ValueError>([&] { rlcore::encode_batch(meta); }) ==
        "encode_batch: meta_info must be a JSON object, not array");

  rlcore::WireMessage bad{"{}", {at::arange(4).t().expand({3, 4})}};
  CHECK(error_of<rlcore::ValueError>([&] { rlcore::pack(bad); }) ==
        "view_of: buffers[0] is not a contiguous CPU tensor");
}
