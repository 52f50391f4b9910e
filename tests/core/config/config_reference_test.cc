// Docs that cannot lie: every key docs/config-reference.md lists is set, on
// the command line, over a real config (configs/quickstart.yaml), with the
// component that reads it selected, and `rlcore config` must accept it: its
// default, and each of its documented choices.
#include <catch2/catch.hpp>

#include <regex>

#include "../cli/cli_testing.h"
#include "rlcore/device.h"
#include "../../common/test_paths.h"

namespace {

struct DocumentedKey {
  std::string section;   // "core" or "<kind> '<name>'"
  std::string selector;  // the override that selects the section's component ("" for core and graders)
  std::string key, type, default_value;
  std::vector<std::string> choices;
};

// The override that makes the run use component `name` of `kind`.
std::string selector_for(const std::string& kind, const std::string& name) {
  if (kind == "advantage_estimator") return "algorithm.adv_estimator=" + name;
  if (kind == "inference_engine") return "actor_rollout_ref.rollout.name=" + name;
  if (kind == "offloader") return "actor_rollout_ref.hybrid_engine.offloader=" + name;
  if (kind == "policy_loss") return "actor_rollout_ref.actor.policy_loss.loss_mode=" + name;
  if (kind == "sharding_manager") return "actor_rollout_ref.rollout.sharding_manager=" + name;
  if (kind == "train_engine") return "actor_rollout_ref.actor.strategy=" + name;
  return "";  // reward graders are read by name from reward.graders.<name>
}

std::vector<std::string> split_cells(const std::string& row) {
  std::vector<std::string> cells;
  std::string cell;
  for (std::size_t i = 1; i < row.size(); ++i) {
    if (row[i] == '\\' && i + 1 < row.size() && row[i + 1] == '|') {
      cell += '|';
      ++i;
    } else if (row[i] == '|') {
      cells.push_back(cell);
      cell.clear();
    } else {
      cell += row[i];
    }
  }
  for (std::string& c : cells) {
    c.erase(0, c.find_first_not_of(' '));
    c.erase(c.find_last_not_of(' ') + 1);
  }
  return cells;
}

std::string unquote(const std::string& cell) {
  return cell.size() >= 2 && cell.front() == '`' && cell.back() == '`' ? cell.substr(1, cell.size() - 2) : cell;
}

std::vector<DocumentedKey> documented_keys(const std::string& markdown) {
  static const std::regex kSection(R"(^## (\w+) '([^']+)' \(plugin)");
  std::vector<DocumentedKey> keys;
  std::string section, selector;
  std::istringstream lines(markdown);
  for (std::string line; std::getline(lines, line);) {
    std::smatch match;
    if (line == "## core") {
      section = "core";
      selector.clear();
    } else if (std::regex_search(line, match, kSection)) {
      section = match[1].str() + " '" + match[2].str() + "'";
      selector = selector_for(match[1].str(), match[2].str());
    } else if (!section.empty() && line.rfind("| `", 0) == 0) {
      const std::vector<std::string> cells = split_cells(line);
      REQUIRE(cells.size() >= 5);
      DocumentedKey key{section, selector, unquote(cells[0]), cells[1], unquote(cells[2]), {}};
      const std::string allowed = cells[3];
      if (allowed.rfind("one of: ", 0) == 0) {
        std::istringstream choices(allowed.substr(8));
        for (std::string choice; std::getline(choices, choice, ',');) {
          key.choices.push_back(choice.substr(choice.find_first_not_of(' ')));
        }
      }
      keys.push_back(key);
    }
  }
  return keys;
}

// The default as a command-line value ("" is an empty string there).
std::string cli_value(const std::string& value) { return value == "\"\"" ? "''" : value; }

// Choices that need hardware this machine may not have.
bool needs_missing_hardware(const std::string& key, const std::string& choice) {
  return key == "trainer.device" && choice == "cuda" && (!rlcore::cuda_build() || rlcore::cuda_device_count() == 0);
}

// Overrides a choice needs beside it (a key whose value needs another key's).
std::vector<std::string> companions(const std::string& key, const std::string& choice) {
  if (key == "async_training.on_rollout_failure" && choice == "restart") {
    return {"async_training.mode=fully_async", "rollout.n_gpus_per_node=2"};
  }
  if (key == "actor_rollout_ref.actor.router_replay.mode" && choice == "R3") {
    return {"actor_rollout_ref.rollout.enable_rollout_routing_replay=true"};
  }
  return {};
}

}  // namespace

TEST_CASE("every key the config reference lists is accepted where it says, with its documented choices",
          "[cli][config_reference]") {
  const auto reference = cli_test::run({"config", "--schema", "--format", "markdown"});
  REQUIRE(reference.status == 0);
  const std::vector<DocumentedKey> keys = documented_keys(reference.out);
  REQUIRE(keys.size() > 150);
  const std::string config = rlcore_test::source_dir() + "/configs/quickstart.yaml";
  int64_t checked = 0;
  for (const DocumentedKey& key : keys) {
    if (key.type == "map") continue;  // a container of other keys, not a value
    // A tool's keys are read from the tool config file, not the run config (agent_loop_test checks them there).
    if (key.section.rfind("tool '", 0) == 0) continue;
    std::vector<std::string> values = {cli_value(key.default_value)};
    // A list's choices are its allowed elements.
    for (const std::string& choice : key.choices)
      values.push_back(key.type.rfind("list", 0) == 0 ? "[" + choice + "]" : choice);
    for (const std::string& value : values) {
      if (needs_missing_hardware(key.key, value)) continue;
      std::vector<std::string> args = {"config", "--config", config};
      if (!key.selector.empty()) args.push_back(key.selector);
      args.push_back(key.key + "=" + value);
      for (const std::string& companion : companions(key.key, value)) args.push_back(companion);
      const auto result = cli_test::run(args);
      INFO(key.section << ": rlcore config ... " << (key.selector.empty() ? "" : key.selector + " ") << key.key << "="
                       << value << "\n"
                       << result.err);
      CHECK(result.status == 0);
      ++checked;
    }
  }
  CHECK(checked > 150);
}

TEST_CASE("algorithm carries every estimator's keys, as verl's does; each estimator reads its own",
          "[cli][config_reference]") {
  const std::string config =
      rlcore_test::source_dir() + "/configs/quickstart.yaml";  // grpo, norm_adv_by_std_in_grpo set
  // verl's default algorithm section: gae's gamma and lam next to grpo's key.
  CHECK(cli_test::run({"config", "--config", config, "algorithm.gamma=1.0", "algorithm.lam=1.0"}).status == 0);
  CHECK(cli_test::run({"config", "--config", config, "algorithm.adv_estimator=gae"}).status == 0);
  const auto typo = cli_test::run({"config", "--config", config, "algorithm.gammma=1.0"});
  CHECK(typo.status != 0);
  CHECK_THAT(typo.err, Catch::Contains("gammma"));
  // The chosen estimator still checks its own keys.
  const auto wrong_type =
      cli_test::run({"config", "--config", config, "algorithm.adv_estimator=gae", "algorithm.gamma=abc"});
  CHECK(wrong_type.status != 0);
}
