// `rlcore config`: the resolved config, or the schema of every key.
#include <ostream>

#include "cli/commands.h"
#include "rlcore/core/config/config_reference.h"
#include "rlcore/core/config/run_config.h"
#include "rlcore/core/session.h"
#include "rlcore/error.h"

namespace po = boost::program_options;

namespace rlcore::cli {

int run_command_config(const std::vector<std::string>& args, CommandIo io) {
  CommonArgs common;
  std::string config_file;
  bool schema = false;
  std::string format = "text";
  po::options_description options("rlcore config [--config FILE] [key=value ...] | --schema [--format text|markdown]");
  add_common_options(options, common);
  options.add_options()("config", po::value(&config_file), "YAML config file")(
      "schema", po::bool_switch(&schema), "print every declared key instead")("format", po::value(&format),
                                                                              "schema format: text or markdown");
  std::vector<std::string> overrides;
  parse_command_line(args, options, overrides);
  apply_log_level(common.log_level);
  if (format != "text" && format != "markdown")
    throw ConfigError("--format must be text or markdown, got '" + format + "'");

  Session session(common.plugin_paths);
  if (schema) {
    io.out << (format == "markdown" ? config::config_reference_markdown(session.registry())
                                    : config::config_reference_text(session.registry()));
    return 0;
  }
  const config::ResolvedConfig resolved = config::resolve_config(session.registry(), config_file, overrides);
  for (const std::string& note : resolved.notes) io.err << "note: " << note << "\n";
  io.out << resolved.tree.to_yaml() << "\n";
  return 0;
}

}  // namespace rlcore::cli
