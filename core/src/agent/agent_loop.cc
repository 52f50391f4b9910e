// The agent loop (see rlcore/core/agent/agent_loop.h).
#include "rlcore/core/agent/agent_loop.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <thread>

#include <spdlog/spdlog.h>

#include "rlcore/core/agent/chat_delta.h"
#include "rlcore/error.h"

namespace rlcore::agent {
namespace {

nlohmann::ordered_json ordered(const nlohmann::json& value) { return nlohmann::ordered_json::parse(value.dump()); }

// Runs work(i) for i in [0, count) on up to `threads` threads.
template <class Work>
void run_on_threads(size_t count, int64_t threads, Work&& work) {
  const size_t workers = std::min<size_t>(count, static_cast<size_t>(std::max<int64_t>(threads, 1)));
  if (workers <= 1) {
    for (size_t i = 0; i < count; ++i) work(i);
    return;
  }
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  std::exception_ptr failure;
  std::mutex failure_mutex;
  for (size_t w = 0; w < workers; ++w) {
    pool.emplace_back([&] {
      for (size_t i = next++; i < count; i = next++) {
        try {
          work(i);
        } catch (...) {
          const std::lock_guard<std::mutex> lock(failure_mutex);
          if (!failure) failure = std::current_exception();
        }
      }
    });
  }
  for (auto& thread : pool) thread.join();
  if (failure) std::rethrow_exception(failure);
}

// The text of ids a model sampled: ids past the tokenizer's vocabulary (a
// model's padded embedding rows) stand for nothing and are dropped.
std::string decode_sampled(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  std::vector<int32_t> known;
  known.reserve(ids.size());
  for (int32_t id : ids) {
    if (id >= 0 && id < tokenizer.vocab_size()) known.push_back(id);
  }
  return tokenizer.decode_lossy(known);
}

std::string without_whitespace(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (!std::isspace(static_cast<unsigned char>(c))) out += c;
  }
  return out;
}

}  // namespace

struct AgentLoop::Live {
  const AgentTask* task = nullptr;
  Trajectory trajectory;
  nlohmann::ordered_json history;  // prompt messages, then the trajectory's
  bool done = false;
};

AgentLoop::AgentLoop(AgentLoopSettings settings, const Tokenizer& tokenizer, chat::ChatTemplate chat_template,
                     ToolSet tools)
    : settings_(std::move(settings)),
      tokenizer_(tokenizer),
      chat_template_(std::move(chat_template)),
      tools_(std::move(tools)),
      format_(tool_call_format(settings_.multi_turn.format)) {
  if (settings_.stop_token_id < 0) throw ConfigError("the agent loop needs a stop token: the tokenizer has no EOS");
  if (settings_.response_length < 1) throw ConfigError("the agent loop needs data.max_response_length >= 1");
  if (!tools_.empty()) settings_.template_options.tools = tools_.schemas();
}

std::vector<int32_t> AgentLoop::tool_turn_ids(const nlohmann::ordered_json& history,
                                              const std::vector<int32_t>& turn_ids,
                                              const nlohmann::ordered_json& tool_messages) const {
  chat::ChatTemplateOptions closed = settings_.template_options;
  closed.add_generation_prompt = false;
  const std::string before = chat_template_.render(history, closed);
  // What the template writes after the model's stop token (ChatML: a newline) belongs to this turn.
  const std::string model_text = decode_sampled(tokenizer_, turn_ids);
  std::string text;
  const size_t at = model_text.empty() ? std::string::npos : before.rfind(model_text);
  if (at != std::string::npos) text = before.substr(at + model_text.size());
  text += chat_delta_text(chat_template_, history, tool_messages, settings_.template_options);
  return tokenizer_.encode(text);
}

void AgentLoop::run_tools(Live& live, const ParsedTurn& parsed) const {
  Trajectory& trajectory = live.trajectory;
  const MultiTurnConfig& config = settings_.multi_turn;
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  auto add_result = [&](ToolResult result) {
    ++trajectory.tool_calls;
    if (result.error) ++trajectory.tool_errors;
    trajectory.tool_rewards.push_back(result.reward);
    messages.push_back({{"role", "tool"},
                        {"content", truncate_tool_text(to_valid_utf8(result.text), config.max_tool_response_length,
                                                       config.tool_response_truncate_side)}});
  };
  for (size_t k = 0; k < parsed.calls.size(); ++k) {
    if (static_cast<int64_t>(k) >= config.max_parallel_calls) {
      add_result({"error: at most " + std::to_string(config.max_parallel_calls) + " tool call(s) per turn", true, 0.0});
      continue;
    }
    ToolCallContext context;
    context.trajectory_id = live.task->id;
    const nlohmann::json& kwargs = live.task->tools_kwargs;
    if (kwargs.is_object() && kwargs.contains(parsed.calls[k].name)) {
      const nlohmann::json& entry = kwargs[parsed.calls[k].name];
      if (entry.is_object() && entry.contains("create_kwargs")) context.create_kwargs = entry["create_kwargs"];
    }
    const ToolOutcome outcome = tools_.call(parsed.calls[k], context);
    trajectory.tool_seconds += outcome.seconds;
    trajectory.max_tool_seconds = std::max(trajectory.max_tool_seconds, outcome.seconds);
    add_result(outcome.result);
  }
  for (const ToolCallError& error : parsed.errors) add_result({"error: " + error.message, true, 0.0});
  const std::vector<int32_t> turn_ids = [&] {
    // The model's last turn: the ids after the previous tool turn.
    std::vector<int32_t> ids;
    for (size_t t = trajectory.response_ids.size(); t > 0 && trajectory.response_mask[t - 1] == 1; --t) {
      ids.insert(ids.begin(), trajectory.response_ids[t - 1]);
    }
    return ids;
  }();
  const std::vector<int32_t> ids = tool_turn_ids(live.history, turn_ids, messages);
  for (const auto& message : messages) {
    live.history.push_back(message);
    trajectory.messages.push_back(message);
  }
  ++trajectory.user_turns;
  const auto room = static_cast<size_t>(settings_.response_length) - trajectory.response_ids.size();
  const size_t kept = std::min(room, ids.size());
  trajectory.response_ids.insert(trajectory.response_ids.end(), ids.begin(), ids.begin() + static_cast<long>(kept));
  trajectory.response_mask.insert(trajectory.response_mask.end(), kept, 0);
  trajectory.logprobs.insert(trajectory.logprobs.end(), kept, 0.0f);
  if (kept == room) {  // no room left for the model to answer
    trajectory.finish_reason = FinishReason::kLength;
    live.done = true;
  }
}

void AgentLoop::finish_turn(Live& live, const TurnReply& reply) const {
  Trajectory& trajectory = live.trajectory;
  const MultiTurnConfig& config = settings_.multi_turn;
  const auto room = static_cast<size_t>(settings_.response_length) - trajectory.response_ids.size();
  const size_t kept = std::min(room, reply.ids.size());
  const bool stopped = reply.stopped && kept == reply.ids.size();
  std::vector<int32_t> ids(reply.ids.begin(), reply.ids.begin() + static_cast<long>(kept));
  trajectory.response_ids.insert(trajectory.response_ids.end(), ids.begin(), ids.end());
  trajectory.response_mask.insert(trajectory.response_mask.end(), kept, 1);
  for (size_t t = 0; t < kept; ++t) trajectory.logprobs.push_back(t < reply.logprobs.size() ? reply.logprobs[t] : 0.0f);
  ++trajectory.assistant_turns;
  if (stopped && !ids.empty() && ids.back() == settings_.stop_token_id) ids.pop_back();
  const std::string content = decode_sampled(tokenizer_, ids);
  const nlohmann::ordered_json message = {{"role", "assistant"}, {"content", content}};
  live.history.push_back(message);
  trajectory.messages.push_back(message);
  if (!stopped) {
    trajectory.finish_reason = FinishReason::kLength;
    live.done = true;
    return;
  }
  trajectory.finish_reason = FinishReason::kStop;
  if (!live.task->use_tools) {
    live.done = true;
    return;
  }
  const ParsedTurn parsed = parse_tool_calls(content, format_);
  const bool turns_spent =
      (config.max_assistant_turns > 0 && trajectory.assistant_turns >= config.max_assistant_turns) ||
      (config.max_user_turns > 0 && trajectory.user_turns >= config.max_user_turns);
  if ((parsed.calls.empty() && parsed.errors.empty()) || turns_spent) {
    live.done = true;
    return;
  }
  run_tools(live, parsed);
}

void AgentLoop::check_template(const AgentTask& task, Trajectory& trajectory) const {
  const std::string& mode = settings_.multi_turn.tokenization_sanity_check_mode;
  if (mode == "disable") return;
  nlohmann::ordered_json conversation = ordered(task.prompt_messages);
  for (const auto& message : trajectory.messages) conversation.push_back(message);
  chat::ChatTemplateOptions closed = settings_.template_options;
  closed.add_generation_prompt = false;
  std::string rendered;
  try {
    rendered = chat_template_.render(conversation, closed);
  } catch (const chat::ChatTemplateError&) {
    trajectory.template_mismatch = true;
    return;
  }
  std::vector<int32_t> all = task.prompt_ids;
  all.insert(all.end(), trajectory.response_ids.begin(), trajectory.response_ids.end());
  std::string ours = decode_sampled(tokenizer_, all);
  if (mode == "ignore_strippable") {
    ours = without_whitespace(ours);
    rendered = without_whitespace(rendered);
  }
  // A trajectory that ran out of tokens stops inside what the template renders.
  trajectory.template_mismatch =
      rendered.compare(0, ours.size(), ours) != 0 ||
      (trajectory.finish_reason == FinishReason::kStop &&
       without_whitespace(rendered.substr(std::min(ours.size(), rendered.size()))).size() > 0);
}

std::vector<Trajectory> AgentLoop::run(const std::vector<AgentTask>& tasks, const TurnGenerator& generate) const {
  std::vector<Live> lives(tasks.size());
  for (size_t i = 0; i < tasks.size(); ++i) {
    lives[i].task = &tasks[i];
    lives[i].history = ordered(tasks[i].prompt_messages);
    lives[i].trajectory.messages = nlohmann::ordered_json::array();
  }
  for (int64_t turn = 0;; ++turn) {
    std::vector<size_t> active;
    std::vector<std::vector<int32_t>> contexts;
    int64_t max_tokens = 0;
    for (size_t i = 0; i < lives.size(); ++i) {
      if (lives[i].done) continue;
      active.push_back(i);
      std::vector<int32_t> context = tasks[i].prompt_ids;
      const auto& response = lives[i].trajectory.response_ids;
      context.insert(context.end(), response.begin(), response.end());
      contexts.push_back(std::move(context));
      max_tokens = std::max(max_tokens, settings_.response_length - static_cast<int64_t>(response.size()));
    }
    if (active.empty()) break;
    const std::vector<TurnReply> replies = generate(contexts, max_tokens, turn);
    if (replies.size() != active.size()) {
      throw ValueError("the agent loop's turn " + std::to_string(turn) + " got " + std::to_string(replies.size()) +
                       " replies for " + std::to_string(active.size()) + " contexts");
    }
    run_on_threads(active.size(), settings_.num_workers, [&](size_t k) { finish_turn(lives[active[k]], replies[k]); });
  }
  std::vector<Trajectory> trajectories;
  trajectories.reserve(lives.size());
  int64_t mismatches = 0;
  for (Live& live : lives) {
    check_template(*live.task, live.trajectory);
    mismatches += live.trajectory.template_mismatch ? 1 : 0;
    trajectories.push_back(std::move(live.trajectory));
  }
  if (mismatches > 0 && settings_.multi_turn.tokenization_sanity_check_mode == "strict") {
    spdlog::warn(
        "agent loop: {} of {} trajectories differ from the chat template's rendering of their messages "
        "(multi_turn.tokenization_sanity_check_mode: strict; metric agent/template_mismatch)",
        mismatches, lives.size());
  }
  return trajectories;
}

Trajectory AgentLoop::assemble(const nlohmann::json& prompt_messages, const nlohmann::json& response_messages) const {
  if (!response_messages.is_array() || response_messages.empty() || !response_messages[0].is_object() ||
      response_messages[0].value("role", "") != "assistant") {
    throw FormatError("a multi-turn response must be a list of messages starting with the assistant's");
  }
  Trajectory trajectory;
  trajectory.messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json history = ordered(prompt_messages);
  std::vector<int32_t> turn_ids;
  for (size_t i = 0; i < response_messages.size();) {
    const nlohmann::json& message = response_messages[i];
    if (!message.is_object() || !message.contains("role") || !message["role"].is_string() ||
        !message.contains("content") || !message["content"].is_string()) {
      throw FormatError("response message " + std::to_string(i) + " must be an object with string role and content");
    }
    if (message["role"] == "assistant") {
      turn_ids = tokenizer_.encode(message["content"].get<std::string>());
      turn_ids.push_back(settings_.stop_token_id);
      trajectory.response_ids.insert(trajectory.response_ids.end(), turn_ids.begin(), turn_ids.end());
      trajectory.response_mask.insert(trajectory.response_mask.end(), turn_ids.size(), 1);
      history.push_back(ordered(message));
      trajectory.messages.push_back(ordered(message));
      ++trajectory.assistant_turns;
      ++i;
      continue;
    }
    nlohmann::ordered_json others = nlohmann::ordered_json::array();
    for (; i < response_messages.size() && response_messages[i].is_object() &&
           response_messages[i].value("role", "") != "assistant";
         ++i) {
      others.push_back(ordered(response_messages[i]));
    }
    if (i == response_messages.size()) {
      throw FormatError("a multi-turn response must end with an assistant message");
    }
    const std::vector<int32_t> ids = tool_turn_ids(history, turn_ids, others);
    trajectory.response_ids.insert(trajectory.response_ids.end(), ids.begin(), ids.end());
    trajectory.response_mask.insert(trajectory.response_mask.end(), ids.size(), 0);
    for (const auto& other : others) {
      history.push_back(other);
      trajectory.messages.push_back(other);
    }
    ++trajectory.user_turns;
  }
  trajectory.logprobs.assign(trajectory.response_ids.size(), 0.0f);
  return trajectory;
}

}  // namespace rlcore::agent
