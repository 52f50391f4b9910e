// Capabilities: found on a component by capability<T>(), and recorded by the
// registrar from the type a factory makes, for `rlcore plugins`.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>

#include "rlcore/capabilities.h"
#include "rlcore/error.h"
#include "rlcore/grader.h"
#include "rlcore/registry.h"

namespace {

class PlainGrader : public rlcore::Grader {
 public:
  rlcore::GradeResult grade(std::string_view, std::string_view, std::string_view,
                            const nlohmann::json&) const override {
    return {1.0, {}};
  }
};

// Capabilities need not make sense on a grader for the registrar to see them.
class CapableGrader final : public PlainGrader, public rlcore::Sleeps, public rlcore::TensorParallel {};

struct NoOptions {};

}  // namespace

TEST_CASE("capability<T>() finds the capabilities a component inherits, and only those", "[capabilities]") {
  CapableGrader capable;
  PlainGrader plain;
  const rlcore::Grader& as_grader = capable;
  CHECK(rlcore::capability<rlcore::Sleeps>(as_grader) == static_cast<const rlcore::Sleeps*>(&capable));
  CHECK(rlcore::supports<rlcore::TensorParallel>(as_grader));
  CHECK_FALSE(rlcore::supports<rlcore::PipelineParallel>(as_grader));
  CHECK_FALSE(rlcore::supports<rlcore::Sleeps>(static_cast<const rlcore::Grader&>(plain)));
}

TEST_CASE("capabilities_of lists a type's capabilities in capability_names() order", "[capabilities]") {
  CHECK(rlcore::capabilities_of<CapableGrader>() == std::vector<std::string>{"tensor_parallel", "sleep"});
  CHECK(rlcore::capabilities_of<PlainGrader>().empty());
  for (const auto& name : rlcore::capabilities_of<CapableGrader>()) {
    CHECK(std::find(rlcore::capability_names().begin(), rlcore::capability_names().end(), name) !=
          rlcore::capability_names().end());
  }
}

TEST_CASE("the registrar records the capabilities of the type a factory makes", "[capabilities]") {
  rlcore::Registry registry;
  rlcore::PluginRegistrar registrar(registry, {"test", "0.0.1", ""});
  registrar.add<rlcore::Grader>("capable", "", rlcore::OptionsSchema<NoOptions>(),
                                [](const NoOptions&) { return std::make_unique<CapableGrader>(); });
  registrar.add<rlcore::Grader>("plain", "", rlcore::OptionsSchema<NoOptions>(),
                                [](const NoOptions&) { return std::make_shared<PlainGrader>(); });
  // The factory's declared type counts: a base pointer hides the capabilities.
  registrar.add<rlcore::Grader>(
      "hidden", "", rlcore::OptionsSchema<NoOptions>(),
      [](const NoOptions&) -> std::unique_ptr<rlcore::Grader> { return std::make_unique<CapableGrader>(); });
  CHECK(registry.capabilities("reward", "capable") == std::vector<std::string>{"tensor_parallel", "sleep"});
  CHECK(registry.capabilities("reward", "plain").empty());
  CHECK(registry.capabilities("reward", "hidden").empty());
  CHECK(registry.capabilities("reward", "absent").empty());
  CHECK_THROWS_AS(registry.set_capabilities("reward", "absent", {"sleep"}), rlcore::PluginError);
}
