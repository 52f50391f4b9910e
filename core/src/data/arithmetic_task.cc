// The built-in arithmetic task (see arithmetic_task.h). Problems are drawn with
// the data code's platform-independent random draws, so a seed gives the same
// files everywhere.
#include "rlcore/core/data/arithmetic_task.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <tuple>

#include "data/random.h"
#include "rlcore/error.h"

namespace rlcore::data {
namespace {

constexpr int64_t kArithmeticTrainStream = 0;  // random streams of the seed, one per split
constexpr int64_t kArithmeticValStream = 1;
constexpr int64_t kArithmeticDemoStream = 2;  // which SFT records demonstrate the tool

struct OperandRange {
  int64_t low;
  int64_t count;
};

OperandRange operand_range(int digits) {
  if (digits == 1) return {0, 10};
  int64_t low = 1;
  for (int i = 1; i < digits; ++i) low *= 10;
  return {low, 9 * low};
}

void check_options(const ArithmeticTaskOptions& options) {
  if (options.digits < 1 || options.digits > 9) {
    throw ValueError("arithmetic task: digits must be 1 to 9, got " + std::to_string(options.digits));
  }
  if (options.train < 0 || options.val < 0) throw ValueError("arithmetic task: record counts must be >= 0");
  if (options.sft_tool_share < 0 || options.sft_tool_share > 1) {
    throw ValueError("arithmetic task: the SFT tool share must be in [0, 1], got " +
                     std::to_string(options.sft_tool_share));
  }
  if (options.ops.empty()) throw ValueError("arithmetic task: no operators given (use any of +, -, *)");
  for (size_t i = 0; i < options.ops.size(); ++i) {
    const std::string& op = options.ops[i];
    if (op != "+" && op != "-" && op != "*") {
      throw ValueError("arithmetic task: unknown operator '" + op + "' (use any of +, -, *)");
    }
    if (std::find(options.ops.begin(), options.ops.begin() + static_cast<std::ptrdiff_t>(i), op) !=
        options.ops.begin() + static_cast<std::ptrdiff_t>(i)) {
      throw ValueError("arithmetic task: operator '" + op + "' given twice");
    }
  }
  const OperandRange range = operand_range(options.digits);
  const double problems = static_cast<double>(options.ops.size()) * range.count * range.count;
  if (static_cast<double>(options.val) > problems / 2) {
    throw ValueError("arithmetic task: " + std::to_string(options.val) +
                     " validation problems is more than half of the " + std::to_string(static_cast<int64_t>(problems)) +
                     " possible with " + std::to_string(options.digits) + " digits; ask for fewer or use more digits");
  }
}

ArithmeticProblem draw(std::mt19937_64& engine, const ArithmeticTaskOptions& options) {
  const OperandRange range = operand_range(options.digits);
  ArithmeticProblem problem;
  problem.op = options.ops[data::random::uniform_below(engine, options.ops.size())][0];
  problem.a = range.low + static_cast<int64_t>(data::random::uniform_below(engine, static_cast<uint64_t>(range.count)));
  problem.b = range.low + static_cast<int64_t>(data::random::uniform_below(engine, static_cast<uint64_t>(range.count)));
  return problem;
}

using ProblemKey = std::tuple<char, int64_t, int64_t>;
ProblemKey key_of(const ArithmeticProblem& p) { return {p.op, p.a, p.b}; }

nlohmann::json rl_record(const ArithmeticProblem& problem, const char* split, int64_t index, bool tools) {
  nlohmann::json record = {
      {"data_source", kArithmeticDataSource},
      {"prompt", nlohmann::json::array({{{"role", "user"}, {"content", problem.prompt()}}})},
      {"ability", "math"},
      {"reward_model", {{"style", "rule"}, {"ground_truth", std::to_string(problem.answer())}}},
      {"extra_info",
       {{"split", split}, {"index", index}, {"a", problem.a}, {"b", problem.b}, {"op", std::string(1, problem.op)}}}};
  if (tools) {
    record["agent_name"] = "tool_agent";
    record["extra_info"]["tools_kwargs"] = {{kArithmeticToolName, {{"create_kwargs", nlohmann::json::object()}}}};
  }
  return record;
}

void write_jsonl(const std::string& path, const std::vector<nlohmann::json>& records) {
  std::ofstream out(path);
  for (const auto& record : records) out << record.dump() << '\n';
  out.flush();
  if (!out) throw IoError("cannot write '" + path + "'");
}

}  // namespace

int64_t ArithmeticProblem::answer() const {
  switch (op) {
    case '-':
      return a - b;
    case '*':
      return a * b;
    default:
      return a + b;
  }
}

std::string ArithmeticProblem::prompt() const { return std::to_string(a) + op + std::to_string(b) + "="; }

std::string ArithmeticProblem::response() const { return "#### " + std::to_string(answer()); }

nlohmann::json ArithmeticProblem::tool_demonstration() const {
  const nlohmann::ordered_json call = {{"name", kArithmeticToolName},
                                       {"arguments", {{"expression", std::to_string(a) + op + std::to_string(b)}}}};
  return nlohmann::json::array({{{"role", "assistant"}, {"content", "<tool_call>" + call.dump() + "</tool_call>"}},
                                {{"role", "tool"}, {"content", std::to_string(answer())}},
                                {{"role", "assistant"}, {"content", response()}}});
}

ArithmeticTaskData make_arithmetic_task(const ArithmeticTaskOptions& options) {
  check_options(options);
  ArithmeticTaskData data;
  std::set<ProblemKey> val_keys;
  std::mt19937_64 val_engine = data::random::make_engine(options.seed, kArithmeticValStream);
  while (static_cast<int64_t>(data.val.size()) < options.val) {
    const ArithmeticProblem problem = draw(val_engine, options);
    if (!val_keys.insert(key_of(problem)).second) continue;
    data.val.push_back(rl_record(problem, "val", static_cast<int64_t>(data.val.size()), options.tools));
  }
  std::mt19937_64 train_engine = data::random::make_engine(options.seed, kArithmeticTrainStream);
  std::mt19937_64 demo_engine = data::random::make_engine(options.seed, kArithmeticDemoStream);
  constexpr uint64_t kShareSteps = 1000000;
  while (static_cast<int64_t>(data.train.size()) < options.train) {
    const ArithmeticProblem problem = draw(train_engine, options);
    if (val_keys.count(key_of(problem))) continue;
    const auto index = static_cast<int64_t>(data.train.size());
    data.train.push_back(rl_record(problem, "train", index, options.tools));
    nlohmann::json sft = data.train.back();
    const bool demonstrates_tool =
        options.tools && static_cast<double>(data::random::uniform_below(demo_engine, kShareSteps)) <
                             options.sft_tool_share * static_cast<double>(kShareSteps);
    if (demonstrates_tool) {
      sft["response"] = problem.tool_demonstration();
    } else {
      sft["response"] = problem.response();
    }
    data.sft.push_back(std::move(sft));
  }
  return data;
}

ArithmeticTaskFiles write_arithmetic_task(const ArithmeticTaskData& data, const std::string& out_dir) {
  std::error_code error;
  std::filesystem::create_directories(out_dir, error);
  if (error) throw IoError("cannot create directory '" + out_dir + "': " + error.message());
  const std::filesystem::path dir(out_dir);
  ArithmeticTaskFiles files{(dir / "train.jsonl").string(), (dir / "val.jsonl").string(), (dir / "sft.jsonl").string()};
  write_jsonl(files.train, data.train);
  write_jsonl(files.val, data.val);
  write_jsonl(files.sft, data.sft);
  return files;
}

}  // namespace rlcore::data
