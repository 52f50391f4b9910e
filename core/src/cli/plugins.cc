// `rlcore plugins` and `rlcore version`.
#include <iomanip>
#include <ostream>

#include "cli/commands.h"
#include "rlcore/core/plugin_loader.h"
#include "rlcore/core/session.h"
#include "rlcore/string_join.h"

namespace po = boost::program_options;

namespace rlcore::cli {
namespace {

// Prints rows as left-aligned columns under a header.
void print_table(std::ostream& out, const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()));
    for (std::size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  for (const auto& row : rows) {
    out << " ";
    for (std::size_t i = 0; i < row.size(); ++i) {
      out << " " << (i + 1 < row.size() ? std::setw(static_cast<int>(widths[i])) : std::setw(0)) << std::left << row[i];
    }
    out << "\n";
  }
}

}  // namespace

int run_command_plugins(const std::vector<std::string>& args, CommandIo io) {
  CommonArgs common;
  po::options_description options("rlcore plugins [--plugins PATH]...");
  add_common_options(options, common);
  std::vector<std::string> positional;
  parse_command_line(args, options, positional);
  apply_log_level(common.log_level);
  for (const auto& path : positional) common.plugin_paths.push_back(path);

  Session session(common.plugin_paths);
  const auto& loaded = session.loader().loaded();
  io.out << "Plugins loaded: " << loaded.size() << "\n";
  std::vector<std::vector<std::string>> rows = {{"PLUGIN", "VERSION", "FILE"}};
  for (const auto& plugin : loaded) rows.push_back({plugin.name, plugin.version, plugin.file});
  print_table(io.out, rows);

  const auto components = session.registry().all();
  io.out << "\nComponents: " << components.size() << "\n";
  rows = {{"KIND", "NAME", "PLUGIN", "VERSION", "CAPABILITIES", "FILE"}};
  for (const auto* entry : components) {
    const auto capabilities = session.registry().capabilities(entry->kind, entry->name);
    rows.push_back({entry->kind, entry->name, entry->origin.plugin, entry->origin.version,
                    capabilities.empty() ? "-" : join(capabilities, ","),
                    entry->origin.file.empty() ? "(built in)" : entry->origin.file});
  }
  print_table(io.out, rows);

  const auto& refused = session.loader().refused();
  io.out << "\nRefused: " << refused.size() << "\n";
  rows = {{"FILE", "REASON"}};
  for (const auto& item : refused) rows.push_back({item.file, item.reason});
  if (!refused.empty()) print_table(io.out, rows);
  return 0;
}

int run_command_version(const std::vector<std::string>&, CommandIo io) {
  io.out << "rlcore " << RLCORE_VERSION_STRING << " (" << host_fingerprint() << ")\n";
  return 0;
}

}  // namespace rlcore::cli
