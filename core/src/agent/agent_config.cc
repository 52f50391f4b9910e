// The multi_turn and agent sections' keys (see rlcore/core/agent/agent_config.h).
#include "rlcore/core/agent/agent_config.h"

namespace rlcore::agent {

OptionsSchema<MultiTurnConfig> multi_turn_schema() {
  OptionsSchema<MultiTurnConfig> schema;
  schema.key("enable", &MultiTurnConfig::enable, "Run the agent loop: multi-turn rollouts with tools.")
      .key("max_assistant_turns", &MultiTurnConfig::max_assistant_turns,
           "Model turns per trajectory (0: until it answers without a call or the response length is spent).",
           at_least(0))
      .key("max_user_turns", &MultiTurnConfig::max_user_turns, "Tool-result turns per trajectory (0: no bound).",
           at_least(0))
      .key("max_parallel_calls", &MultiTurnConfig::max_parallel_calls,
           "Tool calls run per model turn; further calls in the turn get an error result.", at_least(1))
      .key("max_tool_response_length", &MultiTurnConfig::max_tool_response_length,
           "Characters of one tool result the model sees; longer results are truncated.", at_least(1))
      .key("tool_response_truncate_side", &MultiTurnConfig::tool_response_truncate_side,
           "What a truncated result keeps: left (its start), right (its end) or middle (both ends).",
           one_of({"left", "right", "middle"}))
      .key("format", &MultiTurnConfig::format,
           "How the model writes tool calls: hermes (<tool_call>{json}</tool_call>: Qwen2.5, Qwen3) or "
           "llama3_json (Llama 3.1's JSON calls).",
           one_of({"hermes", "llama3_json"}))
      .key("tool_config_path", &MultiTurnConfig::tool_config_path,
           "YAML file listing the tools: tools: [{name: <registered tool>, config: {...}}].")
      .key("function_tool_path", &MultiTurnConfig::function_tool_path,
           "Python file whose public top-level functions become tools (the tools plugin's python_function: "
           "schema from the signature and docstring, run in a subprocess).")
      .key("tokenization_sanity_check_mode", &MultiTurnConfig::tokenization_sanity_check_mode,
           "Compare each finished trajectory's text with the chat template's rendering of its messages: strict "
           "(any difference counts), ignore_strippable (whitespace differences do not) or disable.",
           one_of({"strict", "ignore_strippable", "disable"}));
  return schema;
}

OptionsSchema<AgentSection> agent_section_schema() {
  OptionsSchema<AgentSection> schema;
  schema.key("num_workers", &AgentSection::num_workers, "Threads that run tool calls.", at_least(1))
      .key("default_agent_loop", &AgentSection::default_agent_loop,
           "Agent loop of samples without agent_name: single_turn_agent (one response) or tool_agent.",
           one_of({kSingleTurnAgent, kToolAgent}))
      .key("agent_loop_config_path", &AgentSection::agent_loop_config_path,
           "verl's file of Python agent loop classes; rlcore's loops are built in: must be empty.");
  return schema;
}

}  // namespace rlcore::agent
