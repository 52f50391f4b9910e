// The agent loop's config: verl's actor_rollout_ref.rollout.multi_turn and
// actor_rollout_ref.rollout.agent sections (docs/agent-loop.md).
#pragma once

#include <cstdint>
#include <string>

#include "rlcore/export.h"
#include "rlcore/options.h"

namespace rlcore::agent {

struct MultiTurnConfig {
  bool enable = false;
  int64_t max_assistant_turns = 0;                     // 0: bounded by the response length only (verl's null)
  int64_t max_user_turns = 0;                          // tool-result turns; 0: no bound
  int64_t max_parallel_calls = 1;                      // calls run per assistant turn; more are answered with an error
  int64_t max_tool_response_length = 256;              // characters of one tool result the model sees
  std::string tool_response_truncate_side = "middle";  // left | right | middle: what is kept
  std::string format = "hermes";                       // hermes | llama3_json
  std::string tool_config_path;                        // YAML: tools: [{name, config}]
  std::string function_tool_path;                      // Python functions as tools (python_function)
  std::string tokenization_sanity_check_mode = "strict";  // strict | ignore_strippable | disable
};

struct AgentSection {
  int64_t num_workers = 8;                               // threads that run tool calls
  std::string default_agent_loop = "single_turn_agent";  // for samples without agent_name
  std::string agent_loop_config_path;                    // verl's Python agent loops: refused
};

RLCORE_API OptionsSchema<MultiTurnConfig> multi_turn_schema();
RLCORE_API OptionsSchema<AgentSection> agent_section_schema();

// The agent loops a sample's agent_name may pick.
constexpr const char* kSingleTurnAgent = "single_turn_agent";
constexpr const char* kToolAgent = "tool_agent";

}  // namespace rlcore::agent
