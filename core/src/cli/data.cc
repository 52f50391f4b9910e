// `rlcore data make`: writes a built-in task's datasets (arithmetic and repeated-addition:
// JSONL for RL and SFT; gsm8k-style: verl's GSM8K parquet files).
#include <ostream>
#include <sstream>

#include "cli/commands.h"
#include "rlcore/core/data/arithmetic_task.h"
#include "rlcore/core/data/gsm8k_style_task.h"
#include "rlcore/core/data/repeated_addition_task.h"
#include "rlcore/error.h"

namespace po = boost::program_options;

namespace rlcore::cli {
namespace {

constexpr const char* kDataUsage =
    "rlcore data make --task arithmetic --out DIR [--train 20000] [--val 500] [--digits 2] [--seed 1] "
    "[--ops +,-]\n"
    "rlcore data make --task arithmetic-tool --out DIR [--train 20000] [--val 500] [--digits 3] [--seed 1] "
    "[--ops *] [--sft-tool-share 0.5]\n"
    "rlcore data make --task repeated-addition --out DIR [--train 20000] [--val 300] [--max-terms 16] [--seed 1]\n"
    "rlcore data make --task gsm8k-style --out DIR [--train 7473] [--test 1319] [--seed 1]\n"
    "arithmetic: DIR/train.jsonl and DIR/val.jsonl (RL records, data_source \"arithmetic\") and DIR/sft.jsonl\n"
    "(the training prompts with their \"response\"); problems look like \"12+35=\" -> \"#### 47\".\n"
    "arithmetic-tool: the same files in verl's agent layout (agent_name tool_agent) for the calculator tool;\n"
    "a share of the SFT responses call it (docs/agent-loop.md).\n"
    "repeated-addition: the same files; \"137*4=\" -> \"137,274,411,548 #### 548\", the multiplier drawn\n"
    "long-tailed (P(k) ~ k^-1.5 up to --max-terms), so response lengths are too (docs/async.md#benchmark).\n"
    "gsm8k-style: DIR/train.parquet and DIR/test.parquet in verl's GSM8K layout (data_source \"openai/gsm8k\"):\n"
    "synthetic two- and three-step word problems with worked answers ending in \"#### N\"";

std::vector<std::string> split_ops(const std::string& text) {
  std::vector<std::string> ops;
  std::istringstream in(text);
  for (std::string op; std::getline(in, op, ',');) {
    if (!op.empty()) ops.push_back(op);
  }
  return ops;
}

void write_arithmetic(data::ArithmeticTaskOptions task, const std::string& ops, const std::string& out_dir,
                      CommandIo io) {
  task.ops = split_ops(ops);
  const data::ArithmeticTaskData data = data::make_arithmetic_task(task);
  const data::ArithmeticTaskFiles files = data::write_arithmetic_task(data, out_dir);
  io.out << "wrote the arithmetic" << (task.tools ? "-tool" : "") << " task (" << task.digits << "-digit operands, ops "
         << ops << ", seed " << task.seed << "):\n"
         << "  " << files.train << "  " << data.train.size() << " RL records\n"
         << "  " << files.val << "  " << data.val.size() << " RL records (none in train)\n"
         << "  " << files.sft << "  " << data.sft.size() << " SFT records (train + response)\n";
  if (!data.sft.empty()) {
    io.out << "  e.g. prompt " << data.sft.front()["prompt"][0]["content"].dump() << " -> response "
           << data.sft.front()["response"].dump() << "\n";
  }
}

void write_repeated_addition(const data::RepeatedAdditionTaskOptions& task, const std::string& out_dir, CommandIo io) {
  const data::ArithmeticTaskData data = data::make_repeated_addition_task(task);
  const data::ArithmeticTaskFiles files = data::write_arithmetic_task(data, out_dir);
  io.out << "wrote the repeated-addition task (multipliers 1 to " << task.max_terms << ", seed " << task.seed << "):\n"
         << "  " << files.train << "  " << data.train.size() << " RL records\n"
         << "  " << files.val << "  " << data.val.size() << " RL records (none in train)\n"
         << "  " << files.sft << "  " << data.sft.size() << " SFT records (train + response)\n";
  if (!data.sft.empty()) {
    io.out << "  e.g. prompt " << data.sft.front()["prompt"][0]["content"].dump() << " -> response "
           << data.sft.front()["response"].dump() << "\n";
  }
}

void write_gsm8k_style(const data::Gsm8kStyleTaskOptions& task, const std::string& out_dir, CommandIo io) {
  const data::Gsm8kStyleTaskData data = data::make_gsm8k_style_task(task);
  const data::Gsm8kStyleTaskFiles files = data::write_gsm8k_style_task(data, out_dir);
  io.out << "wrote the gsm8k-style task (verl's GSM8K parquet layout, seed " << task.seed << "):\n"
         << "  " << files.train << "  " << data.train.size() << " records\n"
         << "  " << files.test << "  " << data.test.size() << " records (none in train)\n";
  if (!data.train.empty()) {
    io.out << "  e.g. " << data.train.front()["extra_info"]["question"].dump() << " -> ground truth "
           << data.train.front()["reward_model"]["ground_truth"].dump() << "\n";
  }
}

int run_data_make(const std::vector<std::string>& args, CommandIo io) {
  CommonArgs common;
  data::ArithmeticTaskOptions arithmetic;
  data::RepeatedAdditionTaskOptions repeated;
  data::Gsm8kStyleTaskOptions gsm8k;
  int64_t train = -1;
  int64_t seed = 1;
  std::string task_name;
  std::string out_dir;
  std::string ops = "+";
  po::options_description options(kDataUsage);
  add_common_options(options, common);
  options.add_options()("task", po::value(&task_name)->required(),
                        "arithmetic, arithmetic-tool, repeated-addition or gsm8k-style")(
      "out", po::value(&out_dir)->required(), "directory to write (created when missing)")(
      "train", po::value(&train), "training records (default 20000 for arithmetic, 7473 for gsm8k-style)")(
      "seed", po::value(&seed), "seed (default 1): the same seed writes the same files")(
      "val", po::value<int64_t>(),
      "arithmetic: validation records (default 500; repeated-addition 300), none in train")(
      "digits", po::value(&arithmetic.digits), "arithmetic: digits per operand, 1 to 9 (default 2)")(
      "ops", po::value(&ops), "arithmetic: operators, comma-separated: any of +,-,* (default +)")(
      "max-terms", po::value(&repeated.max_terms), "repeated-addition: the largest multiplier, 1 to 64 (default 16)")(
      "test", po::value(&gsm8k.test), "gsm8k-style: test records (default 1319), none of them in train")(
      "sft-tool-share", po::value(&arithmetic.sft_tool_share),
      "arithmetic-tool: share of the SFT records that call the calculator (default 0.5)");
  std::vector<std::string> positional;
  const po::variables_map given = parse_command_line(args, options, positional);
  apply_log_level(common.log_level);
  if (!positional.empty()) throw ConfigError("rlcore data make: unexpected argument '" + positional.front() + "'");
  const auto refuse = [&](const std::vector<std::string>& names) {
    for (const auto& name : names) {
      if (given.count(name))
        throw ConfigError("rlcore data make: --" + name + " does not apply to --task " + task_name);
    }
  };
  if (given.count("val")) arithmetic.val = repeated.val = given["val"].as<int64_t>();
  if (task_name == "arithmetic-tool") {
    refuse({"test", "max-terms"});
    arithmetic.tools = true;
    if (!given.count("digits")) arithmetic.digits = 3;
    if (!given.count("ops")) ops = "*";
    if (train >= 0) arithmetic.train = train;
    arithmetic.seed = seed;
    write_arithmetic(arithmetic, ops, out_dir, io);
  } else if (task_name == "arithmetic") {
    refuse({"test", "sft-tool-share", "max-terms"});
    if (train >= 0) arithmetic.train = train;
    arithmetic.seed = seed;
    write_arithmetic(arithmetic, ops, out_dir, io);
  } else if (task_name == "repeated-addition") {
    refuse({"test", "digits", "ops", "sft-tool-share"});
    if (train >= 0) repeated.train = train;
    repeated.seed = seed;
    write_repeated_addition(repeated, out_dir, io);
  } else if (task_name == "gsm8k-style") {
    refuse({"val", "digits", "ops", "sft-tool-share", "max-terms"});
    if (train >= 0) gsm8k.train = train;
    gsm8k.seed = seed;
    write_gsm8k_style(gsm8k, out_dir, io);
  } else {
    throw ConfigError("rlcore data make: unknown task '" + task_name +
                      "'; tasks: arithmetic, arithmetic-tool, repeated-addition, gsm8k-style");
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

}  // namespace rlcore::cli
