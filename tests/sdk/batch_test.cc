// Batch column operations: values after every operation, and the errors that
// name the key and sizes at fault.
#include "batch_testing.h"

#include "rlcore/batch.h"
#include "rlcore/error.h"

using nlohmann::json;
using rlcore::Batch;
using rlcore::ValueError;
using rlcore_test::error_of;
using rlcore_test::strings;
using rlcore_test::values;
using V = std::vector<int64_t>;
using S = std::vector<std::string>;

namespace {

// Four rows: ids [[0,1],[2,3],[4,5],[6,7]], score [0,1,2,3], uid a..d.
Batch four_rows() {
  Batch batch;
  batch.set("ids", at::arange(8, at::kLong).view({4, 2}));
  batch.set("score", at::arange(4, at::kFloat));
  batch.set_non_tensor("uid", {"a", "b", "c", "d"});
  batch.meta_info()["temperature"] = 0.5;
  return batch;
}

}  // namespace

TEST_CASE("set fixes the row count and rejects columns of another size", "[batch]") {
  Batch batch;
  CHECK_FALSE(batch.has_size());
  CHECK(batch.size() == 0);
  batch.set("ids", at::zeros({3, 5}));
  CHECK(batch.size() == 3);
  CHECK(error_of<ValueError>([&] { batch.set("mask", at::zeros({4})); }) ==
        "column 'mask' has 4 rows but the batch has 3");
  CHECK(error_of<ValueError>([&] { batch.set_non_tensor("uid", {"x"}); }) ==
        "column 'uid' has 1 rows but the batch has 3");
  CHECK(error_of<ValueError>([&] { batch.set("scalar", at::scalar_tensor(1.0)); }) ==
        "column 'scalar': a 0-dim tensor has no batch dimension");
  CHECK(error_of<ValueError>([&] { Batch(-1); }) == "Batch: size must be >= 0, got -1");
  CHECK_FALSE(batch.contains("mask"));
}

TEST_CASE("tensor and non-tensor columns share one key space", "[batch]") {
  Batch batch = four_rows();
  CHECK(error_of<ValueError>([&] { batch.set("uid", at::zeros({4})); }) ==
        "column 'uid' already exists as a non-tensor column");
  CHECK(error_of<ValueError>([&] {
          batch.set_non_tensor("ids", json::array({1, 2, 3, 4}));
        }) == "column 'ids' already exists as a tensor column");
  CHECK(error_of<ValueError>([&] { batch.tensor("uid"); }) == "no tensor column 'uid'; tensor columns: ids, score");
  CHECK(error_of<ValueError>([&] { batch.non_tensor("ids"); }) ==
        "no non-tensor column 'ids'; non-tensor columns: uid");
  CHECK(batch.is_tensor("ids"));
  CHECK_FALSE(batch.is_tensor("uid"));
  // Replacing a column of the right size is allowed.
  batch.set("score", at::full({4}, 7.0));
  CHECK(values(batch.tensor("score")) == V{7, 7, 7, 7});
}

TEST_CASE("select keeps the named columns and meta_info", "[batch]") {
  const Batch batch = four_rows();
  const Batch picked = batch.select({"score", "uid"});
  CHECK(picked.tensor_keys() == S{"score"});
  CHECK(picked.non_tensor_keys() == S{"uid"});
  CHECK(values(picked.tensor("score")) == V{0, 1, 2, 3});
  CHECK(picked.meta_info() == json{{"temperature", 0.5}});
  CHECK(batch.contains("ids"));
  CHECK(error_of<ValueError>([&] { batch.select({"nope"}); }) == "select: no column 'nope'; columns: ids, score, uid");
  CHECK(batch.select({}).size() == 4);
}

TEST_CASE("pop removes columns and returns them", "[batch]") {
  Batch batch = four_rows();
  CHECK(error_of<ValueError>([&] { batch.pop({"ids", "nope"}); }) == "pop: no column 'nope'; columns: ids, score, uid");
  CHECK(batch.contains("ids"));  // a failed pop removes nothing
  const Batch popped = batch.pop({"ids", "uid"});
  CHECK(batch.tensor_keys() == S{"score"});
  CHECK(batch.non_tensor_keys().empty());
  CHECK(values(popped.tensor("ids")) == V{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(strings(popped.non_tensor("uid")) == S{"a", "b", "c", "d"});
  CHECK(popped.meta_info()["temperature"] == 0.5);
  // The row count outlives the columns, as a TensorDict's batch_size does.
  batch.pop({"score"});
  CHECK(batch.size() == 4);
  CHECK(error_of<ValueError>([&] { batch.set("x", at::zeros({2})); }) == "column 'x' has 2 rows but the batch has 4");
}

TEST_CASE("rename moves a column to a new key", "[batch]") {
  Batch batch = four_rows();
  batch.rename("ids", "input_ids");
  batch.rename("uid", "prompt_uid");
  CHECK(batch.tensor_keys() == S{"input_ids", "score"});
  CHECK(values(batch.tensor("input_ids")) == V{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(strings(batch.non_tensor("prompt_uid")) == S{"a", "b", "c", "d"});
  CHECK(error_of<ValueError>([&] { batch.rename("score", "input_ids"); }) ==
        "rename: column 'input_ids' already exists");
  CHECK(error_of<ValueError>([&] { batch.rename("ids", "x"); }) ==
        "rename: no column 'ids'; columns: input_ids, score, prompt_uid");
}

TEST_CASE("union merges columns and meta_info of equal-sized batches", "[batch]") {
  Batch batch = four_rows();
  Batch other(4);
  other.set("score", at::arange(4, at::kFloat));  // same content: allowed
  other.set("reward", at::tensor({1, 0, 1, 0}));
  other.set_non_tensor("source", {"m", "m", "g", "g"});
  other.meta_info()["step"] = 3;
  batch.union_with(other);
  CHECK(batch.tensor_keys() == S{"ids", "reward", "score"});
  CHECK(values(batch.tensor("reward")) == V{1, 0, 1, 0});
  CHECK(strings(batch.non_tensor("source")) == S{"m", "m", "g", "g"});
  CHECK(batch.meta_info() == json{{"temperature", 0.5}, {"step", 3}});
}

TEST_CASE("union refuses conflicts and then leaves the batch unchanged", "[batch]") {
  Batch batch = four_rows();
  const Batch before = batch;

  Batch differs(4);
  differs.set("extra", at::ones({4}));
  differs.set("score", at::tensor({0.f, 1.f, 2.f, 9.f}));
  CHECK(error_of<ValueError>([&] { batch.union_with(differs); }) ==
        "union: tensor column 'score' differs between the batches");

  Batch dtype(4);
  dtype.set("score", at::arange(4, at::kDouble));  // same values, other dtype
  CHECK(error_of<ValueError>([&] { batch.union_with(dtype); }) ==
        "union: tensor column 'score' differs between the batches");

  Batch rows(4);
  rows.set_non_tensor("uid", {"a", "b", "c", "z"});
  CHECK(error_of<ValueError>([&] { batch.union_with(rows); }) ==
        "union: non-tensor column 'uid' differs between the batches");

  Batch meta(4);
  meta.meta_info()["temperature"] = 1.0;
  CHECK(error_of<ValueError>([&] { batch.union_with(meta); }) ==
        "union: meta_info key 'temperature' differs (0.5 vs 1.0)");

  CHECK(error_of<ValueError>([&] { batch.union_with(Batch(5)); }) == "union: batch sizes differ (4 vs 5)");
  CHECK(batch.equals(before));
}

TEST_CASE("concat joins rows and merges meta_info", "[batch]") {
  Batch head = four_rows().slice(0, 1);
  Batch tail = four_rows().slice(1, 4);
  tail.meta_info()["step"] = 7;
  const Batch joined = Batch::concat({tail, head});
  CHECK(joined.size() == 4);
  CHECK(values(joined.tensor("ids")) == V{2, 3, 4, 5, 6, 7, 0, 1});
  CHECK(strings(joined.non_tensor("uid")) == S{"b", "c", "d", "a"});
  CHECK(joined.meta_info() == json{{"temperature", 0.5}, {"step", 7}});
}

TEST_CASE("concat names the part and column that do not fit", "[batch]") {
  const Batch batch = four_rows();
  CHECK(error_of<ValueError>([] { Batch::concat({}); }) == "concat: no batches given");
  CHECK(error_of<ValueError>([&] {
          Batch::concat({batch, batch.select({"ids", "uid"})});
        }) == "concat: part 1 lacks tensor column 'score'");
  Batch wider = batch;
  wider.set("ids", at::zeros({4, 3}, at::kLong));
  CHECK(error_of<ValueError>([&] {
          Batch::concat({batch, wider});
        }) == "concat: tensor column 'ids' is Long[4, 3] on cpu in part 1 but Long[4, 2] on cpu in part 0");
  Batch hotter = batch;
  hotter.meta_info()["temperature"] = 2;
  CHECK(error_of<ValueError>([&] {
          Batch::concat({batch, hotter});
        }) == "concat: meta_info key 'temperature' differs in part 1 (2 vs 0.5)");
}

TEST_CASE("slice takes a row range with a step, as views", "[batch]") {
  const Batch batch = four_rows();
  const Batch odd = batch.slice(1, 4, 2);
  CHECK(odd.size() == 2);
  CHECK(values(odd.tensor("ids")) == V{2, 3, 6, 7});
  CHECK(strings(odd.non_tensor("uid")) == S{"b", "d"});
  CHECK(odd.tensor("ids").storage().is_alias_of(batch.tensor("ids").storage()));
  CHECK(batch.slice(2, 2).size() == 0);
  CHECK(error_of<ValueError>([&] { batch.slice(3, 5); }) == "slice(3, 5, 1) is invalid for a batch of 4 rows");
}

TEST_CASE("chunk splits into equal parts and split into fixed-size parts", "[batch]") {
  const Batch batch = four_rows();
  const auto halves = batch.chunk(2);
  REQUIRE(halves.size() == 2);
  CHECK(values(halves[1].tensor("ids")) == V{4, 5, 6, 7});
  CHECK(strings(halves[1].non_tensor("uid")) == S{"c", "d"});
  CHECK(halves[1].meta_info()["temperature"] == 0.5);
  CHECK(error_of<ValueError>([&] { batch.chunk(3); }) ==
        "chunk: batch size 4 is not divisible by 3; call pad_to_divisor(3) first");

  const auto parts = batch.split(3);
  REQUIRE(parts.size() == 2);
  CHECK(values(parts[0].tensor("score")) == V{0, 1, 2});
  CHECK(values(parts[1].tensor("score")) == V{3});
  CHECK(Batch(0).split(2).empty());
}

TEST_CASE("pad_to_divisor cycles rows from the start and unpad drops them", "[batch]") {
  Batch batch = four_rows().slice(0, 3);
  const Batch original = batch;
  const int64_t pad = batch.pad_to_divisor(8);
  CHECK(pad == 5);
  CHECK(batch.size() == 8);
  CHECK(values(batch.tensor("score")) == V{0, 1, 2, 0, 1, 2, 0, 1});
  CHECK(strings(batch.non_tensor("uid")) == S{"a", "b", "c", "a", "b", "c", "a", "b"});
  CHECK(batch.chunk(4).size() == 4);
  batch.unpad(pad);
  CHECK(batch.equals(original));
  CHECK(batch.pad_to_divisor(3) == 0);
  CHECK(error_of<ValueError>([&] { batch.unpad(4); }) == "unpad: pad 4 is out of range for a batch of 3 rows");
}

TEST_CASE("repeat interleaves or tiles rows", "[batch]") {
  const Batch batch = four_rows().slice(0, 2);
  const Batch interleaved = batch.repeat(3, /*interleave=*/true);
  CHECK(values(interleaved.tensor("ids")) == V{0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3});
  CHECK(strings(interleaved.non_tensor("uid")) == S{"a", "a", "a", "b", "b", "b"});
  const Batch tiled = batch.repeat(2, /*interleave=*/false);
  CHECK(values(tiled.tensor("ids")) == V{0, 1, 2, 3, 0, 1, 2, 3});
  CHECK(strings(tiled.non_tensor("uid")) == S{"a", "b", "a", "b"});
  CHECK(tiled.tensor("ids").sizes() == at::IntArrayRef{4, 2});
  CHECK(error_of<ValueError>([&] { batch.repeat(0); }) == "repeat: times must be >= 1, got 0");
}

TEST_CASE("reorder permutes rows by an index tensor", "[batch]") {
  Batch batch = four_rows();
  batch.reorder(at::tensor({3, 0, 2, 1}, at::kInt));
  CHECK(values(batch.tensor("ids")) == V{6, 7, 0, 1, 4, 5, 2, 3});
  CHECK(values(batch.tensor("score")) == V{3, 0, 2, 1});
  CHECK(strings(batch.non_tensor("uid")) == S{"d", "a", "c", "b"});
  CHECK(error_of<ValueError>([&] {
          batch.reorder(at::tensor({0, 4}));
        }) == "reorder: indices[1] = 4 is out of range for a batch of 4 rows");
  CHECK(error_of<ValueError>([&] {
          batch.reorder(at::tensor({0.0, 1.0}));
        }) == "reorder: indices must be a 1-D integer tensor");
  // Like verl, indices may drop and repeat rows.
  batch.reorder(at::tensor({1, 1}));
  CHECK(strings(batch.non_tensor("uid")) == S{"a", "a"});
  CHECK(batch.size() == 2);
}

TEST_CASE("copies share tensors, moved-from batches are empty", "[batch]") {
  Batch batch = four_rows();
  Batch copy = batch;
  CHECK(copy.equals(batch));
  copy.meta_info()["step"] = 1;
  CHECK_FALSE(copy.equals(batch));
  CHECK(copy.tensor("ids").is_same(batch.tensor("ids")));
  Batch moved = std::move(batch);
  CHECK(moved.size() == 4);
  CHECK(batch.size() == 0);  // NOLINT(bugprone-use-after-move): documented as empty
  CHECK(batch.tensor_keys().empty());
  CHECK(batch.meta_info().is_object());
}
