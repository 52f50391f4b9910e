// The agent loop (verl's tool agent loop, docs/agent-loop.md): trajectories of
// model turns and tool results kept as token ids. Each turn the model's
// sampled ids are appended as they are (mask 1); the tool results are rendered
// with the checkpoint's chat template as a delta and appended (mask 0), so the
// model's own tokens are never decoded and encoded again.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlcore/core/agent/agent_config.h"
#include "rlcore/core/agent/tool_calls.h"
#include "rlcore/core/agent/tool_set.h"
#include "rlcore/core/chat/chat_template.h"
#include "rlcore/export.h"
#include "rlcore/inference_engine.h"
#include "rlcore/tokenizer/tokenizer.h"

namespace rlcore::agent {

// One sample to roll out.
struct AgentTask {
  std::vector<int32_t> prompt_ids;  // the prompt as the model sees it (generation prompt included)
  nlohmann::json prompt_messages;   // the same prompt as chat messages
  bool use_tools = true;            // false: single_turn_agent (one response)
  nlohmann::json tools_kwargs;      // extra_info.tools_kwargs: {tool: {create_kwargs: {...}}}, or null
  std::string id;                   // for the tools' context
};

struct Trajectory {
  std::vector<int32_t> response_ids;                 // every token after the prompt: model turns and tool results
  std::vector<uint8_t> response_mask;                // 1: sampled by the model; 0: a tool result or template text
  std::vector<float> logprobs;                       // the rollout's log-prob of each model token, 0 elsewhere
  FinishReason finish_reason = FinishReason::kStop;  // kLength: the response length ran out
  int64_t assistant_turns = 0;
  int64_t user_turns = 0;   // tool-result turns
  int64_t tool_calls = 0;   // calls run (errors included)
  int64_t tool_errors = 0;  // malformed calls, unknown tools, failures, timeouts
  double tool_seconds = 0.0;
  double max_tool_seconds = 0.0;
  std::vector<double> tool_rewards;  // one per call run
  bool template_mismatch = false;    // tokenization_sanity_check_mode found a difference
  nlohmann::ordered_json messages;   // the conversation after the prompt, as chat messages

  // verl's __num_turns__: the prompt's turn, the model's and the tools'.
  int64_t num_turns() const { return 1 + assistant_turns + user_turns; }
};

// The model's reply to one context: its sampled ids and their log-probs;
// `stopped`: it ended with a stop token (else it ran out of tokens).
struct TurnReply {
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  bool stopped = false;
};

// Generates one turn for each context, up to max_tokens each (`turn` numbers
// the calls of one run, for the sampling seed). Replies in context order.
using TurnGenerator = std::function<std::vector<TurnReply>(const std::vector<std::vector<int32_t>>& contexts,
                                                           int64_t max_tokens, int64_t turn)>;

struct AgentLoopSettings {
  MultiTurnConfig multi_turn;
  int64_t num_workers = 8;                            // threads for tool calls
  std::string default_agent_loop = kSingleTurnAgent;  // for samples without agent_name
  int64_t response_length = 512;  // tokens after the prompt, tool results included (data.max_response_length)
  int32_t stop_token_id = -1;     // ends a model turn (the tokenizer's EOS)
  chat::ChatTemplateOptions template_options;  // extra variables; tools are set from the ToolSet
};

class RLCORE_API AgentLoop {
 public:
  AgentLoop(AgentLoopSettings settings, const Tokenizer& tokenizer, chat::ChatTemplate chat_template, ToolSet tools);

  // Runs the tasks turn by turn: all live trajectories go to `generate`
  // together, so they share its decode batches. Never throws for what the
  // model writes or a tool does; throws what `generate` throws.
  std::vector<Trajectory> run(const std::vector<AgentTask>& tasks, const TurnGenerator& generate) const;

  const ToolSet& tools() const { return tools_; }
  const AgentLoopSettings& settings() const { return settings_; }

  // The ids of the tool messages after a model turn `turn_ids` (its stop
  // token included) closes `history` (whose last message is that turn): the
  // text the template puts after the model's stop token, then the delta of
  // the new messages with the generation prompt.
  std::vector<int32_t> tool_turn_ids(const nlohmann::ordered_json& history, const std::vector<int32_t>& turn_ids,
                                     const nlohmann::ordered_json& tool_messages) const;

  // A demonstration (multi-turn SFT) in the agent loop's layout: each
  // assistant message's content tokenized plus the stop token (mask 1), the
  // other messages as tool_turn_ids (mask 0). Throws FormatError for a
  // message that is not {role, content} or a conversation that does not
  // start with an assistant message.
  Trajectory assemble(const nlohmann::json& prompt_messages, const nlohmann::json& response_messages) const;

 private:
  struct Live;
  void finish_turn(Live& live, const TurnReply& reply) const;
  void run_tools(Live& live, const ParsedTurn& parsed) const;
  void check_template(const AgentTask& task, Trajectory& trajectory) const;

  AgentLoopSettings settings_;
  const Tokenizer& tokenizer_;
  chat::ChatTemplate chat_template_;
  ToolSet tools_;
  ToolCallFormat format_;
};

}  // namespace rlcore::agent
