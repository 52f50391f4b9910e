// `rlcore grade`: score a JSONL file of {"response", "ground_truth", "data_source"}
// lines offline, one JSON line out per line in, then a summary line. The trainer's
// own dumps (rollout_data_dir, validation_data_dir: "output", "gts") and verl data
// rows ("reward_model": {"ground_truth"}) are read as they are.
#include <fstream>
#include <istream>
#include <map>
#include <ostream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "rlcore/core/trainer/reward_router.h"
#include "rlcore/core/config/run_config.h"
#include "rlcore/core/session.h"
#include "rlcore/error.h"

namespace po = boost::program_options;

namespace rlcore::cli {
namespace {

// The first of `names` the record has, as text; a name may be a path "a.b".
std::string text_field(const nlohmann::json& record, std::initializer_list<const char*> names, std::size_t line_number,
                       bool required) {
  for (const char* name : names) {
    const std::string path = name;
    const std::size_t dot = path.find('.');
    const nlohmann::json* parent = &record;
    if (dot != std::string::npos) {
      auto outer = record.find(path.substr(0, dot));
      if (outer == record.end() || !outer->is_object()) continue;
      parent = &*outer;
    }
    auto it = parent->find(dot == std::string::npos ? path : path.substr(dot + 1));
    if (it == parent->end() || it->is_null()) continue;
    // Ground truths are often numbers in JSON (gsm8k); graders compare text.
    return it->is_string() ? it->get<std::string>() : it->dump();
  }
  if (required) {
    std::string spelled;
    for (const char* name : names) spelled += std::string(spelled.empty() ? "" : " or ") + "\"" + name + "\"";
    throw FormatError("line " + std::to_string(line_number) + ": missing field " + spelled);
  }
  return "";
}

struct Summary {
  std::size_t count = 0;
  std::map<std::string, double> sums;

  void add(const GradeResult& result) {
    ++count;
    sums["score"] += result.score;
    for (const auto& [name, value] : result.extras) sums[name] += value;
  }

  nlohmann::json to_json() const {
    nlohmann::json summary = {{"count", count}};
    for (const auto& [name, sum] : sums) summary[name + "/mean"] = count ? sum / static_cast<double>(count) : 0.0;
    return {{"summary", summary}};
  }
};

}  // namespace

int run_command_grade(const std::vector<std::string>& args, CommandIo io) {
  CommonArgs common;
  std::string grader = "auto";
  po::options_description options(
      "rlcore grade --grader NAME [option=value ...] [reward.key=value ...] [FILE]\n"
      "Reads JSONL lines {\"response\", \"ground_truth\", \"data_source\", \"extra_info\"} from FILE (or stdin);\n"
      "also the trainer's rollout/validation dumps (\"output\", \"gts\") and verl's reward_model.ground_truth");
  add_common_options(options, common);
  options.add_options()("grader", po::value(&grader),
                        "grader name, or auto to pick by data_source (options then take the form NAME.key=value)");
  std::vector<std::string> positional;
  parse_command_line(args, options, positional);
  apply_log_level(common.log_level);

  std::string input_path;
  std::vector<std::string> overrides;
  for (const auto& arg : positional) {
    if (arg.rfind("reward.", 0) == 0 && arg.find('=') != std::string::npos) {
      overrides.push_back(arg);  // a full key, e.g. reward.custom_reward_function.path=reward.py
    } else if (arg.find('=') != std::string::npos) {
      overrides.push_back("reward.graders." + (grader == "auto" ? "" : grader + ".") + arg);
    } else if (input_path.empty()) {
      input_path = arg;
    } else {
      throw ConfigError("rlcore grade takes one input file, got '" + input_path + "' and '" + arg + "'");
    }
  }
  overrides.push_back("reward.grader=" + grader);

  Session session(common.plugin_paths);
  const config::ResolvedConfig resolved = config::resolve_config(session.registry(), "", overrides);
  const trainer::RewardRouter router(session.registry(), resolved.config.reward);

  std::ifstream file;
  if (!input_path.empty() && input_path != "-") {
    file.open(input_path);
    if (!file) throw IoError("cannot read '" + input_path + "'");
  }
  std::istream& input = file.is_open() ? static_cast<std::istream&>(file) : io.in;

  Summary summary;
  std::string line;
  for (std::size_t line_number = 1; std::getline(input, line); ++line_number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const nlohmann::json record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (record.is_discarded() || !record.is_object()) {
      throw FormatError("line " + std::to_string(line_number) + " of " + (input_path.empty() ? "stdin" : input_path) +
                        " is not a JSON object");
    }
    const nlohmann::json extra = record.value("extra_info", nlohmann::json::object());
    trainer::RewardSample sample{
        text_field(record, {"response", "output"}, line_number, true),
        text_field(record, {"ground_truth", "gts", "reward_model.ground_truth"}, line_number, true),
        text_field(record, {"data_source"}, line_number, grader == "auto"), &extra};
    const GradeResult result = router.score(sample);
    nlohmann::json out = {{"score", result.score}};
    for (const auto& [name, value] : result.extras) out[name] = value;
    io.out << out.dump() << "\n";
    summary.add(result);
  }
  io.out << summary.to_json().dump() << "\n";
  return 0;
}

}  // namespace rlcore::cli
