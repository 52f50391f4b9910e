// Who reached a failed collective (see collective_inquiry.h).
#include "runtime/collective_inquiry.h"

#include <cstdio>
#include <sstream>

#include "rlcore/string_join.h"

namespace rlcore::runtime::detail {
namespace {

// One member of the group, by its rank in the group.
struct Member {
  int64_t global_rank = -1;                // -1: no worker answered for this group rank
  const nlohmann::json* record = nullptr;  // its ledger entry for the group; null: none
  const nlohmann::json* state = nullptr;   // its whole answer; null: it did not answer
};

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f s", seconds);
  return text;
}

std::string name_of(int64_t global_rank, const std::map<int64_t, PeerInfo>& peers) {
  const auto peer = peers.find(global_rank);
  if (peer == peers.end()) return "worker rank " + std::to_string(global_rank);
  return "worker rank " + std::to_string(global_rank) + " (host " + peer->second.host + ", pid " +
         std::to_string(peer->second.pid) + ")";
}

// "group 'world' of pool 'actor'" or "group 'bridge' (shared by pools)".
std::string group_text(const std::string& key, const std::string& name) {
  if (key.rfind("shared/", 0) == 0) return "group '" + name + "' (shared by pools)";
  return "group '" + name + "' of pool '" + key.substr(0, key.find('/')) + "'";
}

// The pool ranks a pool group's key lists ("actor/world/0,1" -> {0, 1}); empty for a shared group.
std::vector<int64_t> pool_members(const std::string& key) {
  std::vector<int64_t> members;
  if (key.rfind("shared/", 0) == 0) return members;
  std::stringstream list(key.substr(key.rfind('/') + 1));
  for (std::string item; std::getline(list, item, ',');) members.push_back(std::stoll(item));
  return members;
}

std::string why_not(const Member& member) {
  if (!member.state) return "it did not answer";
  std::string text;
  if (!member.record) {
    text = "it has no part in the group";
  } else if (member.record->at("started").get<int64_t>() == 0) {
    text = "it never started a collective on the group";
  } else {
    const auto& record = *member.record;
    text = "its last collective on the group was #" + std::to_string(record.at("started").get<int64_t>()) + " (" +
           record.at("op").get<std::string>() + ", " +
           (record.at("running").get<bool>()  ? "still running"
            : record.at("failed").get<bool>() ? "failed"
                                              : "done") +
           ")";
  }
  const auto& state = *member.state;
  if (state.contains("method")) {
    text += ", and it is in '" + state.at("method").get<std::string>() + "' since " +
            seconds_text(state.at("method_s").get<double>());
  } else {
    text += ", and it runs no method";
  }
  return text;
}

int64_t started(const Member& member) { return member.record ? member.record->at("started").get<int64_t>() : 0; }

}  // namespace

InquiryFinding describe(const CollectiveInquiry& inquiry, const std::map<int64_t, PeerInfo>& peers) {
  const std::string key = inquiry.failed.at("key").get<std::string>();
  std::map<int64_t, Member> members;  // by group rank
  int64_t size = 0;
  for (const auto& [global, state] : inquiry.answers) {
    if (!state.contains("groups")) continue;
    for (const auto& record : state.at("groups")) {
      if (record.value("key", std::string()) != key) continue;
      members[record.at("rank").get<int64_t>()] = Member{global, &record, &state};
      size = record.at("size").get<int64_t>();
    }
  }
  // Members of a pool group that answered without an entry for it, or did not answer.
  const std::vector<int64_t> pool_ranks = pool_members(key);
  for (std::size_t g = 0; g < pool_ranks.size(); ++g) {
    if (members.count(static_cast<int64_t>(g))) continue;
    const int64_t global = inquiry.reporter_first_rank + pool_ranks[g];
    const auto answer = inquiry.answers.find(global);
    members[static_cast<int64_t>(g)] =
        Member{global, nullptr, answer == inquiry.answers.end() ? nullptr : &answer->second};
  }
  for (int64_t g = 0; g < size; ++g) members.try_emplace(g);  // a shared group's members nobody answered for

  // The hung collective is the first one some member never started: every
  // later failure (a peer's timeout in the next collective) follows from it.
  int64_t number = inquiry.failed.at("number").get<int64_t>();
  std::string op = inquiry.failed.at("op").get<std::string>();
  for (const auto& [group_rank, member] : members) {
    if (member.state && member.record && started(member) + 1 < number) number = started(member) + 1;
  }
  for (const auto& [group_rank, member] : members) {
    if (member.record && started(member) == number) op = member.record->at("op").get<std::string>();
  }

  std::vector<std::string> reached, missing;
  InquiryFinding finding;
  for (const auto& [group_rank, member] : members) {
    const std::string who =
        member.global_rank >= 0 ? name_of(member.global_rank, peers) : "group rank " + std::to_string(group_rank);
    if (started(member) >= number) {
      reached.push_back(who);
      continue;
    }
    missing.push_back(who + ": " + why_not(member));
    if (member.state && member.state->contains("method")) finding.stuck.push_back(member.global_rank);
  }
  finding.text = "collective #" + std::to_string(number) + " (" + op + ") over " +
                 group_text(key, inquiry.failed.at("group").get<std::string>()) + " was reached by " +
                 (reached.empty() ? std::string("no member") : join(reached, ", ")) + "; not by " +
                 (missing.empty() ? std::string("any member that answered") : join(missing, "; "));
  return finding;
}

}  // namespace rlcore::runtime::detail
