// `rlcore report RUN_DIR [--out FILE]`: metrics.jsonl -> a self-contained HTML page.
#include <ostream>

#include "cli/commands.h"
#include "rlcore/core/report/report.h"
#include "rlcore/error.h"

namespace po = boost::program_options;

namespace rlcore::cli {

int run_command_report(const std::vector<std::string>& args, CommandIo io) {
  CommonArgs common;
  std::string out_path;
  po::options_description options(
      "rlcore report RUN_DIR [--out FILE]\n"
      "Writes RUN_DIR/report.html (or FILE): plots of reward, validation accuracy, KL, entropy, response\n"
      "length and step time from RUN_DIR/metrics.jsonl, and the last step's metrics");
  add_common_options(options, common);
  options.add_options()("out", po::value(&out_path), "output file (default RUN_DIR/report.html)")("help,h",
                                                                                                  "this help");
  for (const auto& arg : args) {
    if (arg == "--help" || arg == "-h") {
      io.out << options << "\n";
      return 0;
    }
  }
  std::vector<std::string> positional;
  parse_command_line(args, options, positional);
  apply_log_level(common.log_level);
  if (positional.size() != 1) {
    throw ConfigError("rlcore report takes one run directory, got " + std::to_string(positional.size()) + " arguments");
  }
  io.out << "wrote " << report::write_report(positional.front(), out_path) << "\n";
  return 0;
}

}  // namespace rlcore::cli
