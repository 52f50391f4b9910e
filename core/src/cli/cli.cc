// Dispatch of `rlcore COMMAND ...` and the options shared by every command.
#include "rlcore/core/cli/cli.h"

#include <algorithm>
#include <iostream>

#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "rlcore/error.h"

namespace po = boost::program_options;

namespace rlcore::cli {
namespace {

constexpr const char* kUsage = R"(rlcore: reinforcement-learning post-training of language models

usage: rlcore [COMMAND] [--plugins PATH]... [options] [key.path=value ...]

commands:
  (none)    run training from --config FILE (the RL trainer)
  plugins   list loaded plugins and components, and every refused file with the reason
  config    print the resolved config (--config FILE [overrides]) or every key (--schema)
  conformance  check a plugin's components against the in-tree references (--plugins FILE|DIR)
  export    a train engine's sharded checkpoint -> a Hugging Face directory (--checkpoint, --model, --out)
  data      write the built-in task's datasets (data make --task arithmetic --out DIR)
  grade     score a JSONL file of responses offline with a grader
  report    write RUN_DIR/report.html: plots of a run's metrics.jsonl
  sft       supervised fine-tuning on prompt/response JSONL (--config FILE), then an HF checkpoint
  serve     OpenAI/vLLM-compatible HTTP server over an inference engine (--model DIR)
  version   print the version and build fingerprint
  worker    run a worker process (started by a launcher), or --check the worker runtime

common options:
  --plugins PATH     plugin directory or file (repeatable; also RLCORE_PLUGIN_PATH)
  --log-level LEVEL  trace|debug|info|warn|error|off

`rlcore COMMAND --help` describes a command.
)";

}  // namespace

void add_common_options(po::options_description& options, CommonArgs& common) {
  options.add_options()("plugins", po::value(&common.plugin_paths)->composing(),
                        "plugin directory or file (repeatable)")("log-level", po::value(&common.log_level),
                                                                 "trace|debug|info|warn|error|off");
}

po::variables_map parse_command_line(const std::vector<std::string>& args, const po::options_description& options,
                                     std::vector<std::string>& positional) {
  po::options_description all;
  all.add(options);
  all.add_options()("positional", po::value(&positional)->composing(), "");
  po::positional_options_description positions;
  positions.add("positional", -1);
  if (std::find(args.begin(), args.end(), "--help") != args.end() ||
      std::find(args.begin(), args.end(), "-h") != args.end()) {
    std::ostringstream usage;
    usage << options;
    throw HelpRequested{usage.str()};
  }
  try {
    po::variables_map values;
    po::store(po::command_line_parser(args).options(all).positional(positions).run(), values);
    po::notify(values);
    return values;
  } catch (const po::error& e) {
    std::ostringstream usage;
    usage << options;
    throw ConfigError(std::string(e.what()) + "\n" + usage.str());
  }
}

void apply_log_level(const std::string& level) {
  if (level.empty()) return;
  const auto parsed = spdlog::level::from_str(level);
  if (parsed == spdlog::level::off && level != "off") {
    throw ConfigError("unknown log level '" + level + "'; levels are: trace, debug, info, warn, error, off");
  }
  spdlog::set_level(parsed);
}

int run_cli(const std::vector<std::string>& args, std::istream& in, std::ostream& out, std::ostream& err) {
  CommandIo io{in, out, err};
  try {
    if (!args.empty() && (args[0] == "--help" || args[0] == "-h" || args[0] == "help")) {
      out << kUsage;
      return 0;
    }
    const std::string command =
        args.empty() || args[0].rfind("-", 0) == 0 || args[0].find('=') != std::string::npos ? "" : args[0];
    const std::vector<std::string> rest(args.begin() + (command.empty() ? 0 : 1), args.end());
    if (command.empty()) return run_command_train(rest, io);
    if (command == "plugins") return run_command_plugins(rest, io);
    if (command == "config") return run_command_config(rest, io);
    if (command == "conformance") return run_command_conformance(rest, io);
    if (command == "export") return run_command_export(rest, io);
    if (command == "data") return run_command_data(rest, io);
    if (command == "grade") return run_command_grade(rest, io);
    if (command == "model") return run_command_model(rest, io);
    if (command == "report") return run_command_report(rest, io);
    if (command == "serve") return run_command_serve(rest, io);
    if (command == "sft") return run_command_sft(rest, io);
    if (command == "version") return run_command_version(rest, io);
    if (command == "worker") return run_command_worker(rest, io);
    err << "rlcore: unknown command '" << command << "'\n\n" << kUsage;
    return 2;
  } catch (const HelpRequested& help) {
    out << help.usage;
    return 0;
  } catch (const Error& e) {
    err << "rlcore: error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    err << "rlcore: internal error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace rlcore::cli
