// `rlcore data make`: writes the built-in task's datasets (train/val for RL, sft for SFT).
#include <ostream>
#include <sstream>

#include "commands.h"
#include "rlcore/core/data/arithmetic_task.h"
#include "rlcore/error.h"

namespace po = boost::program_options;

namespace rlcore {
namespace {

constexpr const char* kDataUsage =
    "rlcore data make --task arithmetic --out DIR [--train 20000] [--val 500] [--digits 2] [--seed 1] "
    "[--ops +,-]\n"
    "Writes DIR/train.jsonl and DIR/val.jsonl (RL records, data_source \"arithmetic\") and DIR/sft.jsonl\n"
    "(the training prompts with their \"response\"). Problems look like \"12+35=\" -> \"#### 47\"";

std::vector<std::string> split_ops(const std::string& text) {
  std::vector<std::string> ops;
  std::istringstream in(text);
  for (std::string op; std::getline(in, op, ',');) {
    if (!op.empty()) ops.push_back(op);
  }
  return ops;
}

int run_data_make(const std::vector<std::string>& args, CommandIo io) {
  CommonArgs common;
  ArithmeticTaskOptions task;
  std::string task_name;
  std::string out_dir;
  std::string ops = "+";
  po::options_description options(kDataUsage);
  add_common_options(options, common);
  options.add_options()("task", po::value(&task_name)->required(), "arithmetic")(
      "out", po::value(&out_dir)->required(), "directory to write (created when missing)")(
      "train", po::value(&task.train), "training records (default 20000)")(
      "val", po::value(&task.val), "validation records (default 500), none of them in train")(
      "digits", po::value(&task.digits), "digits per operand, 1 to 9 (default 2)")(
      "seed", po::value(&task.seed), "seed (default 1): the same seed writes the same files")(
      "ops", po::value(&ops), "operators, comma-separated: any of +,-,* (default +)");
  std::vector<std::string> positional;
  parse_command_line(args, options, positional);
  apply_log_level(common.log_level);
  if (!positional.empty()) throw ConfigError("rlcore data make: unexpected argument '" + positional.front() + "'");
  if (task_name != "arithmetic")
    throw ConfigError("rlcore data make: unknown task '" + task_name + "'; tasks: arithmetic");
  task.ops = split_ops(ops);

  const ArithmeticTaskData data = make_arithmetic_task(task);
  const ArithmeticTaskFiles files = write_arithmetic_task(data, out_dir);
  io.out << "wrote the arithmetic task (" << task.digits << "-digit operands, ops " << ops << ", seed " << task.seed
         << "):\n"
         << "  " << files.train << "  " << data.train.size() << " RL records\n"
         << "  " << files.val << "  " << data.val.size() << " RL records (none in train)\n"
         << "  " << files.sft << "  " << data.sft.size() << " SFT records (train + response)\n";
  if (!data.sft.empty()) {
    io.out << "  e.g. prompt " << data.sft.front()["prompt"][0]["content"].dump() << " -> response "
           << data.sft.front()["response"].dump() << "\n";
  }
  return 0;
}

}  // namespace

int run_command_data(const std::vector<std::string>& args, CommandIo io) {
  for (const auto& arg : args) {
    if (arg == "--help" || arg == "-h") {
      io.out << kDataUsage << "\n";
      return 0;
    }
  }
  if (!args.empty() && args[0] == "make") return run_data_make({args.begin() + 1, args.end()}, io);
  io.err << "rlcore data: " << (args.empty() ? "missing subcommand" : "unknown subcommand '" + args[0] + "'")
         << "\n\nusage: " << kDataUsage << "\n";
  return 2;
}

}  // namespace rlcore
