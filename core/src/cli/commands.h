// Private to the core: the subcommands behind run_cli and the options they share.
#pragma once

#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "rlcore/core/config/run_config.h"
#include "rlcore/core/session.h"

namespace rlcore::cli {

struct CommandIo {
  std::istream& in;
  std::ostream& out;
  std::ostream& err;
};

// Options every command accepts: --plugins (repeatable), --log-level.
struct CommonArgs {
  std::vector<std::string> plugin_paths;
  std::string log_level;
};

// Adds the common options to `options`, bound to `common`.
void add_common_options(boost::program_options::options_description& options, CommonArgs& common);

// What parse_command_line throws for --help / -h: the command's usage, which
// run_cli prints to stdout before exiting 0.
struct HelpRequested {
  std::string usage;
};

// Parses `args` with `options` and positional arguments collected into `positional`;
// returns what was given; throws ConfigError with the usage when something is wrong
// and HelpRequested when --help or -h is among `args`.
boost::program_options::variables_map parse_command_line(const std::vector<std::string>& args,
                                                         const boost::program_options::options_description& options,
                                                         std::vector<std::string>& positional);

void apply_log_level(const std::string& level);

// What the training commands (train, sft) share: parses --config, --plugins,
// --log-level and key=value overrides, loads the plugins and resolves the config.
struct ConfiguredRun {
  CommonArgs common;
  std::unique_ptr<Session> session;
  config::ResolvedConfig resolved;
};
ConfiguredRun configure_run(const std::vector<std::string>& args, const std::string& usage);

int run_command_plugins(const std::vector<std::string>& args, CommandIo io);
int run_command_report(const std::vector<std::string>& args, CommandIo io);
int run_command_config(const std::vector<std::string>& args, CommandIo io);
int run_command_conformance(const std::vector<std::string>& args, CommandIo io);
int run_command_data(const std::vector<std::string>& args, CommandIo io);
int run_command_export(const std::vector<std::string>& args, CommandIo io);
int run_command_grade(const std::vector<std::string>& args, CommandIo io);
int run_command_model(const std::vector<std::string>& args, CommandIo io);
int run_command_serve(const std::vector<std::string>& args, CommandIo io);
int run_command_sft(const std::vector<std::string>& args, CommandIo io);
int run_command_train(const std::vector<std::string>& args, CommandIo io);
int run_command_version(const std::vector<std::string>& args, CommandIo io);
int run_command_worker(const std::vector<std::string>& args, CommandIo io);

}  // namespace rlcore::cli
