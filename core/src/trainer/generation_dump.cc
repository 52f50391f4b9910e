// Responses as JSON lines (see trainer/generation_dump.h).
#include "trainer/generation_dump.h"

#include <cmath>
#include <filesystem>
#include <utility>

#include <nlohmann/json.hpp>

#include "rlcore/error.h"

namespace rlcore::trainer {

GenerationDump::GenerationDump(const std::string& dir, int64_t step, std::string key)
    : file_((std::filesystem::path(dir) / (std::to_string(step) + ".jsonl")).string()),
      step_(step),
      key_(std::move(key)) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  out_.open(file_);
  if (!out_) throw IoError(file_ + ": cannot write (" + key_ + ")");
}

void GenerationDump::add(const Rollout& rollout, const Rewards& rewards, const Tokenizer& tokenizer) {
  for (size_t i = 0; i < rollout.examples.size(); ++i) {
    const data::Example& example = *rollout.examples[i];
    nlohmann::json line = {{"input", decode_known(tokenizer, example.prompt_ids)},
                           {"output", rewards.responses[i]},
                           {"gts", example.ground_truth},
                           {"score", rewards.scores[i]},
                           {"step", step_}};
    for (const auto& [name, column] : rewards.extras) {
      if (!std::isnan(column[i])) line[name] = column[i];
    }
    out_ << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  if (!out_) throw IoError(file_ + ": write failed (" + key_ + ")");
}

void GenerationDump::close() {
  if (!out_.flush()) throw IoError(file_ + ": write failed (" + key_ + ")");
  out_.close();
}

}  // namespace rlcore::trainer
