// The loader against real plugins built in the test tree: one good, and one per
// way a plugin can be broken. Each refusal carries its own precise reason.
#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <string>

#include <nlohmann/json.hpp>

#include "rlcore/core/plugin_loader.h"
#include "rlcore/error.h"
#include "rlcore/grader.h"
#include "rlcore/plugin_abi.h"
#include "../common/test_paths.h"

namespace {

const std::string kDir = rlcore_test::fixture_plugin_dir();

std::string reason_for(const rlcore::PluginLoader& loader, const std::string& file_name) {
  for (const auto& refused : loader.refused()) {
    if (refused.file.size() >= file_name.size() &&
        refused.file.compare(refused.file.size() - file_name.size(), file_name.size(), file_name) == 0) {
      return refused.reason;
    }
  }
  return "<not refused>";
}

}  // namespace

TEST_CASE("good plugins load next to broken ones, each refusal with its reason", "[loader]") {
  rlcore::Registry registry;
  rlcore::PluginLoader loader(registry);
  loader.load_path(kDir + "/good.so");
  loader.load_path(kDir);

  REQUIRE(loader.loaded().size() == 2);
  CHECK(loader.loaded()[0].name == "fixture-good");
  CHECK(loader.loaded()[1].name == "fixture-previous-minor");
  CHECK(loader.loaded()[0].version == "0.0.1");

  CHECK_THAT(reason_for(loader, "not_a_library.so"), Catch::Contains("not a loadable shared library"));
  CHECK_THAT(reason_for(loader, "no_entry.so"), Catch::Contains("no 'rlcore_plugin_descriptor' symbol"));
  CHECK(reason_for(loader, "abi_major.so") ==
        "incompatible SDK ABI major (plugin: 99, rlcore: " + std::to_string(RLCORE_SDK_ABI_MAJOR) + ")");
  CHECK_THAT(reason_for(loader, "fingerprint.so"),
             Catch::StartsWith("fingerprint mismatch: libtorch version (plugin: 0.4, rlcore: "));
  CHECK(reason_for(loader, "register_throws.so") == "register function failed: fixture refuses to register");
  CHECK_THAT(reason_for(loader, "duplicate_grader.so"),
             Catch::Contains("duplicate reward 'fixture_constant': already registered by plugin 'fixture-good'") &&
                 Catch::Contains("good.so"));
  CHECK_THAT(reason_for(loader, "duplicate_name.so"),
             Catch::Contains("duplicate plugin 'fixture-good': already loaded from") && Catch::Contains("good.so"));
  CHECK(reason_for(loader, "next_minor.so") ==
        "built against a newer SDK (plugin: " + std::to_string(RLCORE_SDK_ABI_MAJOR) + "." +
            std::to_string(RLCORE_SDK_ABI_MINOR + 1) + ", rlcore: " + std::to_string(RLCORE_SDK_ABI_MAJOR) + "." +
            std::to_string(RLCORE_SDK_ABI_MINOR) + ")");
  CHECK(loader.refused().size() == 8);

  // Nothing of a refused plugin stays registered, even one that fails after registering.
  CHECK(registry.names("reward") == std::vector<std::string>{"fixture_constant", "previous_minor"});
  CHECK(registry.find("reward", "other") == nullptr);
}

TEST_CASE("a plugin's component is created with validated options", "[loader]") {
  rlcore::Registry registry;
  rlcore::PluginLoader loader(registry);
  loader.load_path(kDir + "/good.so");
  auto grader = registry.create<rlcore::Grader>("fixture_constant", rlcore::ConfigNode::parse("score: 0.25", "test"));
  CHECK(grader->grade("", "", "", nlohmann::json::object()).score == 0.25);

  CHECK_THROWS_WITH(registry.create<rlcore::Grader>("fixture_constant", rlcore::ConfigNode::parse("scor: 1", "t.yaml")),
                    Catch::Contains("unknown key 'scor' (t.yaml:1:7); did you mean 'score'?"));
  CHECK_THROWS_AS(registry.create<rlcore::Grader>("missing"), rlcore::PluginError);
  CHECK_THROWS_WITH(registry.create<rlcore::Grader>("missing"),
                    Catch::Contains("no reward named 'missing'") && Catch::Contains("fixture_constant"));
}

TEST_CASE("loading the same file twice is a no-op; a missing path is refused", "[loader]") {
  rlcore::Registry registry;
  rlcore::PluginLoader loader(registry);
  loader.load_path(kDir + "/good.so");
  loader.load_path(kDir + "/../fixture_plugins/good.so");
  CHECK(loader.loaded().size() == 1);
  CHECK(loader.refused().empty());
  loader.load_path(kDir + "/does_not_exist.so");
  REQUIRE(loader.refused().size() == 1);
  CHECK(loader.refused()[0].reason == "no such file or directory");
}

TEST_CASE("RLCORE_PLUGIN_PATH entries come after command-line paths", "[loader]") {
  setenv("RLCORE_PLUGIN_PATH", "/a:/b", 1);
  const auto paths = rlcore::plugin_search_path({"/cli"});
  unsetenv("RLCORE_PLUGIN_PATH");
  REQUIRE(paths.size() >= 3);
  CHECK(paths[0] == "/cli");
  CHECK(paths[1] == "/a");
  CHECK(paths[2] == "/b");
}

TEST_CASE("a plugin built against the previous SDK minor loads and works; its components record no capabilities",
          "[loader][abi]") {
  rlcore::Registry registry;
  rlcore::PluginLoader loader(registry);
  loader.load_path(kDir + "/previous_minor.so");
  REQUIRE(loader.refused().empty());
  REQUIRE(loader.loaded().size() == 1);
  CHECK(loader.loaded()[0].name == "fixture-previous-minor");
  auto grader = registry.create<rlcore::Grader>("previous_minor");
  CHECK(grader->grade("", "", "", nlohmann::json::object()).score == 0.5);
  CHECK(registry.capabilities("reward", "previous_minor").empty());

  // Its descriptor says the previous minor (the same minor right after a major bump).
  void* library = dlopen((kDir + "/previous_minor.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  REQUIRE(library != nullptr);
  auto entry = reinterpret_cast<rlcore_plugin_entry_fn>(dlsym(library, RLCORE_PLUGIN_ENTRY_SYMBOL));
  REQUIRE(entry != nullptr);
  CHECK(entry()->abi_major == RLCORE_SDK_ABI_MAJOR);
  CHECK(entry()->abi_minor == (RLCORE_SDK_ABI_MINOR > 0 ? RLCORE_SDK_ABI_MINOR - 1 : 0));
}
