// `rlcore conformance`: runs the conformance suite against the components a
// plugin registers and prints what each check found; exits 0 only when nothing failed.
#include <algorithm>
#include <ostream>

#include "cli/commands.h"
#include "conformance/conformance.h"
#include "rlcore/error.h"

namespace po = boost::program_options;

namespace rlcore::cli {

int run_command_conformance(const std::vector<std::string>& args, CommandIo io) {
  CommonArgs common;
  conformance::RunOptions run;
  std::string format = "table";
  po::options_description options(
      "rlcore conformance --plugins FILE|DIR [--kind K] [--name N] [--reference NAME] [--format table|json] "
      "[--models DIR] [key=value ...]\n"
      "Checks every component the given plugins register against the in-tree reference of its kind\n"
      "(train_engine: fsdp, inference_engine: native) on tiny models made on the fly; key=value options\n"
      "go to the components under test. Exit code 0 only when no check failed (docs/conformance.md)");
  add_common_options(options, common);
  options.add_options()("kind", po::value(&run.kind), "only components of this kind (train_engine, ...)")(
      "name", po::value(&run.name), "only the component of this name")(
      "reference", po::value(&run.reference), "the reference component's name (default: the kind's in-tree one)")(
      "format", po::value(&format), "table | json")(
      "models", po::value(&run.models_dir),
      "keep the suite's tiny models in DIR (tiny_seed1, tiny_seed2; reused when there), e.g. for a server that "
      "vllm_bridge drives: rlcore serve --model DIR/tiny_seed1");
  std::vector<std::string> positional;
  parse_command_line(args, options, positional);
  apply_log_level(common.log_level);
  if (format != "table" && format != "json") throw ConfigError("--format must be table or json, got '" + format + "'");
  for (const auto& arg : positional) {
    if (arg.find('=') == std::string::npos) throw ConfigError("rlcore conformance: unexpected argument '" + arg + "'");
    run.overrides.push_back(arg);
  }
  if (!run.kind.empty()) {
    const auto& kinds = component_kinds();
    if (std::find(kinds.begin(), kinds.end(), run.kind) == kinds.end()) {
      std::string known;
      for (const auto& kind : kinds) known += (known.empty() ? "" : ", ") + kind;
      throw ConfigError("--kind '" + run.kind + "' is not a component kind; kinds are: " + known);
    }
  }
  run.plugin_paths = common.plugin_paths;

  Session session(common.plugin_paths);
  for (const auto& refused : session.loader().refused()) {
    io.err << "rlcore conformance: refused " << refused.file << ": " << refused.reason << "\n";
  }
  const auto candidates = conformance::select_candidates(session.registry(), run);
  if (candidates.empty()) {
    throw ConfigError("rlcore conformance: no component matched (plugins: " +
                      (run.plugin_paths.empty() ? std::string("all") : run.plugin_paths.front()) +
                      (run.kind.empty() ? "" : ", kind " + run.kind) + (run.name.empty() ? "" : ", name " + run.name) +
                      "); `rlcore plugins` lists what loaded");
  }
  const auto results = conformance::run_checks(session.registry(), candidates, run, [&](const auto& result) {
    if (format == "table") {
      io.err << "  " << result.kind << "/" << result.name << " " << result.check << ": "
             << conformance::status_name(result.status) << "\n";
    }
  });
  if (format == "json") {
    conformance::print_json(io.out, results);
  } else {
    conformance::print_table(io.out, results);
  }
  for (const auto& result : results) {
    if (result.status == conformance::Status::kFail) return 1;
  }
  return 0;
}

}  // namespace rlcore::cli
