// ConfigNode (YAML + overrides, locations) and OptionsSchema (typed keys, checks).
#include <catch2/catch.hpp>

#include "rlcore/config_node.h"
#include "rlcore/error.h"
#include "rlcore/options.h"

using rlcore::ConfigNode;

namespace {

struct Optim {
  double lr = 1e-6;
  std::string warmup_style = "constant";
};

struct Actor {
  int64_t ppo_mini_batch_size = 256;
  bool use_kl_loss = false;
  std::vector<std::string> tags;
  Optim optim;
};

rlcore::OptionsSchema<Actor> actor_schema() {
  rlcore::OptionsSchema<Optim> optim;
  optim.key("lr", &Optim::lr, "Learning rate.", rlcore::greater_than(0))
      .key("warmup_style", &Optim::warmup_style, "Schedule.", rlcore::one_of({"constant", "cosine"}));
  rlcore::OptionsSchema<Actor> actor;
  actor.key("ppo_mini_batch_size", &Actor::ppo_mini_batch_size, "Mini-batch size.", rlcore::at_least(1))
      .key("use_kl_loss", &Actor::use_kl_loss, "KL loss.")
      .key("tags", &Actor::tags, "Tags.")
      .section("optim", &Actor::optim, optim);
  return actor;
}

}  // namespace

TEST_CASE("YAML values parse into typed options; absent keys keep defaults", "[config]") {
  const auto node = ConfigNode::parse("ppo_mini_batch_size: 64\noptim:\n  lr: 3.0e-5\n", "a.yaml");
  const Actor actor = actor_schema().parse(node);
  CHECK(actor.ppo_mini_batch_size == 64);
  CHECK(actor.optim.lr == Approx(3e-5));
  CHECK(actor.optim.warmup_style == "constant");
  CHECK_FALSE(actor.use_kl_loss);
}

TEST_CASE("overrides are typed: ints, floats, bools, lists", "[config]") {
  auto root = ConfigNode::parse("actor:\n  ppo_mini_batch_size: 8\n", "a.yaml");
  rlcore::apply_overrides(
      root, {"actor.ppo_mini_batch_size=16", "actor.use_kl_loss=true", "actor.tags=[x,y]", "actor.optim.lr=0.5"});
  const Actor actor = actor_schema().parse(root["actor"]);
  CHECK(actor.ppo_mini_batch_size == 16);
  CHECK(actor.use_kl_loss);
  CHECK(actor.tags == std::vector<std::string>{"x", "y"});
  CHECK(actor.optim.lr == 0.5);
  CHECK(root["actor"]["optim"]["lr"].location() == "command line 'actor.optim.lr=0.5'");
}

TEST_CASE("errors name the full key path and file:line", "[config]") {
  auto root = ConfigNode::parse("actor:\n  ppo_mini_batch_size: many\n", "b.yaml");
  CHECK_THROWS_WITH(actor_schema().parse(root["actor"]),
                    "key 'actor.ppo_mini_batch_size' (b.yaml:2:24): expected int, got 'many'");
  root = ConfigNode::parse("actor:\n  optim:\n    lr: -1\n", "c.yaml");
  CHECK_THROWS_WITH(actor_schema().parse(root["actor"]),
                    "key 'actor.optim.lr' (c.yaml:3:9): value -1.0 is out of range (must be > 0.0)");
  root = ConfigNode::parse("actor:\n  optim:\n    warmup_style: linear\n", "d.yaml");
  CHECK_THROWS_WITH(actor_schema().parse(root["actor"]), Catch::Contains("one of: constant, cosine"));
  root = ConfigNode::parse("actor:\n  optim: 3\n", "e.yaml");
  CHECK_THROWS_WITH(actor_schema().parse(root["actor"]),
                    Catch::Contains("'actor.optim' (e.yaml:2:10): expected a map"));
  root = ConfigNode::parse("actor:\n  tags: x\n", "f.yaml");
  CHECK_THROWS_WITH(actor_schema().parse(root["actor"]), Catch::Contains("expected a list of string"));
  root = ConfigNode::parse("actor:\n  ppo_mini_batch: 3\n", "g.yaml");
  CHECK_THROWS_WITH(
      actor_schema().parse(root["actor"]),
      Catch::StartsWith("unknown key 'actor.ppo_mini_batch' (g.yaml:2:19); did you mean 'ppo_mini_batch_size'?"));
}

TEST_CASE("malformed YAML and malformed overrides are config errors", "[config]") {
  CHECK_THROWS_AS(ConfigNode::parse("a: [1, 2\n", "bad.yaml"), rlcore::ConfigError);
  CHECK_THROWS_WITH(ConfigNode::parse("- 1\n- 2\n", "list.yaml"), Catch::Contains("must be a map"));
  ConfigNode root;
  CHECK_THROWS_WITH(rlcore::apply_overrides(root, {"novalue"}), Catch::Contains("key.path=value"));
  CHECK_THROWS_WITH(rlcore::apply_overrides(root, {"a..b=1"}), Catch::Contains("empty key segment"));
  rlcore::apply_overrides(root, {"a=1"});
  CHECK_THROWS_WITH(rlcore::apply_overrides(root, {"a.b=2"}), Catch::Contains("'a' is not a map"));
  CHECK_THROWS_AS(ConfigNode::load_file("/no/such/file.yaml"), rlcore::IoError);
}

TEST_CASE("a key repeated in one map is an error naming the second one", "[config]") {
  CHECK_THROWS_WITH(ConfigNode::parse("actor:\n  lr: 1\nother: 2\nactor:\n  lr: 3\n", "dup.yaml"),
                    Catch::Contains("dup.yaml:4:1: key 'actor' appears twice"));
  CHECK_THROWS_WITH(ConfigNode::parse("a:\n  - {x: 1, x: 2}\n", "nested.yaml"),
                    Catch::Contains("key 'x' appears twice"));
  // A YAML mapping or list as a key (found by fuzzing: it escaped as yaml-cpp's bad conversion).
  CHECK_THROWS_WITH(ConfigNode::parse("trainer:\n  ? experiment_name: sft\n", "complex.yaml"),
                    Catch::Contains("complex.yaml:2:5: a key must be a plain name"));
  CHECK_THROWS_WITH(ConfigNode::parse("? [a, b]\n: 1\n", "list.yaml"), Catch::Contains("a key must be a plain name"));
  ConfigNode root = ConfigNode::parse("a: 1\n", "root.yaml");
  CHECK_THROWS_WITH(root.set("b", "{? {c: 1}: 2}", "cli"),
                    Catch::Contains("override 'b'") && Catch::Contains("a key must be a plain name"));
  CHECK_NOTHROW(ConfigNode::parse("a: {x: 1}\nb: {x: 1}\n", "ok.yaml"));
}

TEST_CASE("keys a schema does not declare can be kept for a component", "[config]") {
  struct Section {
    int64_t epochs = 1;
    ConfigNode rest;
  };
  rlcore::OptionsSchema<Section> schema;
  schema.key("epochs", &Section::epochs, "Epochs.").other_keys_to(&Section::rest);
  const Section parsed = schema.parse(ConfigNode::parse("epochs: 2\noptim: {lr: 0.1}\n", "s.yaml"));
  CHECK(parsed.epochs == 2);
  CHECK(parsed.rest.keys() == std::vector<std::string>{"optim"});
  CHECK(parsed.rest["optim"]["lr"].as<double>() == 0.1);
  CHECK_FALSE(parsed.rest.has("epochs"));
}

TEST_CASE("the schema lists every key with type, default and constraint", "[config]") {
  const auto keys = actor_schema().keys();
  REQUIRE(keys.size() == 5);
  CHECK(keys[0].name == "ppo_mini_batch_size");
  CHECK(keys[0].type == "int");
  CHECK(keys[0].default_value == "256");
  CHECK(keys[0].constraint == ">= 1.0");
  CHECK(keys[3].name == "optim.lr");
  CHECK(keys[3].default_value == "1e-06");
  CHECK(keys[4].constraint == "one of: constant, cosine");
}

TEST_CASE("merge and clone keep trees independent", "[config]") {
  auto base = ConfigNode::parse("a:\n  b: 1\n  c: 2\n", "base.yaml");
  const auto copy = base.clone();
  base.merge(ConfigNode::parse("a:\n  c: 3\n", "user.yaml"));
  CHECK(base.at_path("a.b").as<int64_t>() == 1);
  CHECK(base.at_path("a.c").as<int64_t>() == 3);
  CHECK(copy.at_path("a.c").as<int64_t>() == 2);
  CHECK_FALSE(base.at_path("a.missing").defined());
}
