// `rlcore export`: a sharded train-engine checkpoint (saved with any number of
// ranks) -> a Hugging Face checkpoint directory, through a 1-rank engine.
#include <ostream>

#include "cli/commands.h"
#include "rlcore/config_node.h"
#include "rlcore/core/session.h"
#include "rlcore/device.h"
#include "rlcore/error.h"
#include "rlcore/registry.h"
#include "rlcore/train_engine.h"

namespace po = boost::program_options;

namespace rlcore::cli {
namespace {

constexpr const char* kExportUsage =
    "rlcore export --checkpoint CKPT --model MODEL_DIR --out OUT [--engine fsdp] [--head lm|value] "
    "[--device cpu] [--plugins DIR]...\n"
    "Loads a train engine's sharded checkpoint CKPT (resharded onto one process) over the HF model\n"
    "directory it was trained from, and writes OUT: config.json, model.safetensors and the tokenizer files";

struct ExportArgs {
  std::string checkpoint;
  std::string model;
  std::string out;
  std::string engine = "fsdp";
  std::string head = "lm";
  std::string device = "cpu";
};

}  // namespace

int run_command_export(const std::vector<std::string>& args, CommandIo io) {
  CommonArgs common;
  ExportArgs request;
  po::options_description options(kExportUsage);
  add_common_options(options, common);
  options.add_options()("checkpoint", po::value(&request.checkpoint)->required(), "sharded checkpoint directory")(
      "model", po::value(&request.model)->required(), "HF directory the run started from (config, tokenizer)")(
      "out", po::value(&request.out)->required(), "HF checkpoint directory to write")(
      "engine", po::value(&request.engine), "train engine that saved the checkpoint (default fsdp)")(
      "head", po::value(&request.head), "lm (actor, reference) | value (critic); default lm")(
      "device", po::value(&request.device), "auto | cpu | cuda | cuda:N (default cpu)");
  for (const auto& arg : args) {
    if (arg == "--help" || arg == "-h") {
      io.out << options << "\n";
      return 0;
    }
  }
  std::vector<std::string> positional;
  parse_command_line(args, options, positional);
  apply_log_level(common.log_level);
  if (!positional.empty()) throw ConfigError("rlcore export: unexpected argument '" + positional.front() + "'");
  if (request.head != "lm" && request.head != "value")
    throw ConfigError("rlcore export: --head must be lm or value, got '" + request.head + "'");

  const at::Device device = resolve_device(request.device, 0, "--device");  // before loading anything
  Session session(common.plugin_paths);
  ComponentContext context;
  context.device = device.str();
  context.model_path = request.model;
  context.model_head = request.head;
  context.trainable = false;  // parameters only: the optimizer state is not exported
  auto engine = session.registry().create<TrainEngine>(request.engine, ConfigNode(), context);
  engine->load_checkpoint(request.checkpoint);
  engine->export_hf(request.out);
  io.out << "exported " << request.checkpoint << " (step " << engine->step() << ") to " << request.out << "\n";
  return 0;
}

}  // namespace rlcore::cli
