// Responses as JSON lines (see trainer/generation_dump.h).
#include "trainer/generation_dump.h"

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "rlcore/error.h"

namespace rlcore::trainer {

void dump_generations(const std::string& dir, int64_t step, const Rollout& rollout, const Rewards& rewards,
                      const Tokenizer& tokenizer) {
  const std::filesystem::path file = std::filesystem::path(dir) / (std::to_string(step) + ".jsonl");
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  std::ofstream out(file);
  if (!out) throw IoError(file.string() + ": cannot write (trainer.rollout_data_dir)");
  for (size_t i = 0; i < rollout.examples.size(); ++i) {
    const Example& example = *rollout.examples[i];
    nlohmann::json line = {{"input", decode_known(tokenizer, example.prompt_ids)},
                           {"output", rewards.responses[i]},
                           {"gts", example.ground_truth},
                           {"score", rewards.scores[i]},
                           {"step", step}};
    for (const auto& [name, column] : rewards.extras) {
      if (!std::isnan(column[i])) line[name] = column[i];
    }
    out << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  if (!out.flush()) throw IoError(file.string() + ": write failed (trainer.rollout_data_dir)");
}

}  // namespace rlcore::trainer
