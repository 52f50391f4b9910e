// `rlcore model init`: writes a randomly initialised HF checkpoint directory
// (Llama / Qwen2 / Qwen3 / Qwen3-MoE / DeepSeek-V3 preset + the built-in tokenizer) for runs and tests.
#include <cstdio>
#include <ostream>

#include "cli/commands.h"
#include "rlcore/core/checkpoint_init.h"
#include "rlcore/error.h"

namespace po = boost::program_options;

namespace rlcore::cli {
namespace {

constexpr const char* kModelUsage =
    "rlcore model init --arch llama|qwen2|qwen3|qwen3_moe|deepseek_v3 --size tiny|100m|1b --out DIR [--seed N] "
    "[--dtype float32|bfloat16] [--force]\n"
    "Writes a randomly initialised Hugging Face checkpoint directory (config.json, model.safetensors,\n"
    "tokenizer.json, tokenizer_config.json, generation_config.json) with the built-in tokenizer";

std::string human_bytes(std::uint64_t bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1000.0 && unit < 4) value /= 1000.0, ++unit;
  char text[32];
  std::snprintf(text, sizeof(text), unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return text;
}

int run_model_init(const std::vector<std::string>& args, CommandIo io) {
  CommonArgs common;
  ModelInitOptions init;
  std::string out_dir;
  po::options_description options(kModelUsage);
  add_common_options(options, common);
  options.add_options()("arch", po::value(&init.arch)->required(), "llama | qwen2 | qwen3 | qwen3_moe | deepseek_v3")(
      "size", po::value(&init.size)->required(), "tiny (~1M params) | 100m | 1b")(
      "out", po::value(&out_dir)->required(), "checkpoint directory to create")(
      "seed", po::value(&init.seed), "random-init seed (default 0)")("dtype", po::value(&init.dtype),
                                                                     "float32 | bfloat16 (default: the preset's)")(
      "force", po::bool_switch(&init.force), "write into a non-empty directory");
  std::vector<std::string> positional;
  parse_command_line(args, options, positional);
  apply_log_level(common.log_level);
  if (!positional.empty()) throw ConfigError("rlcore model init: unexpected argument '" + positional.front() + "'");
  init.out = out_dir;

  const ModelInitResult result = init_random_checkpoint(init);
  io.out << "wrote " << init.arch << "/" << init.size << " checkpoint to " << init.out.string() << ": "
         << result.num_parameters << " parameters (" << result.config.torch_dtype << "), vocab "
         << result.config.vocab_size << ", " << human_bytes(result.bytes) << "\n";
  for (const auto& file : result.files) {
    io.out << "  " << file.filename().string() << "  " << human_bytes(std::filesystem::file_size(file)) << "\n";
  }
  return 0;
}

}  // namespace

int run_command_model(const std::vector<std::string>& args, CommandIo io) {
  for (const auto& arg : args) {
    if (arg == "--help" || arg == "-h") {
      io.out << kModelUsage << "\n";
      return 0;
    }
  }
  if (!args.empty() && args[0] == "init") return run_model_init({args.begin() + 1, args.end()}, io);
  io.err << "rlcore model: " << (args.empty() ? "missing subcommand" : "unknown subcommand '" + args[0] + "'")
         << "\n\nusage: " << kModelUsage << "\n";
  return 2;
}

}  // namespace rlcore::cli
