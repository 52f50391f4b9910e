// Registry bookkeeping and its error messages.
#include "rlcore/registry.h"

#include <algorithm>

#include "rlcore/advantage_estimator.h"
#include "rlcore/error.h"
#include "rlcore/grader.h"
#include "rlcore/inference_engine.h"
#include "rlcore/policy_loss.h"
#include "rlcore/sharding_manager.h"
#include "rlcore/string_join.h"
#include "rlcore/tool.h"
#include "rlcore/train_engine.h"

namespace rlcore {

const std::vector<std::string>& component_kinds() {
  static const std::vector<std::string> kinds = {
      TrainEngine::kKind, InferenceEngine::kKind,    WeightAdaptor::kKind, Offloader::kKind, ShardingManager::kKind,
      Grader::kKind,      AdvantageEstimator::kKind, PolicyLoss::kKind,    Tool::kKind};
  return kinds;
}

namespace {
std::string describe_origin(const PluginOrigin& origin) {
  if (origin.file.empty()) return "'" + origin.plugin + "'";
  return "plugin '" + origin.plugin + "' (" + origin.file + ")";
}
}  // namespace

void Registry::add(ComponentEntry entry) {
  const auto& kinds = component_kinds();
  if (std::find(kinds.begin(), kinds.end(), entry.kind) == kinds.end()) {
    throw PluginError(describe_origin(entry.origin) + " registers unknown kind '" + entry.kind +
                      "'; kinds are: " + join_or_none(kinds));
  }
  if (entry.name.empty())
    throw PluginError(describe_origin(entry.origin) + " registers a " + entry.kind + " with an empty name");
  auto key = std::make_pair(entry.kind, entry.name);
  auto existing = entries_.find(key);
  if (existing != entries_.end()) {
    throw PluginError("duplicate " + entry.kind + " '" + entry.name + "': registered by " +
                      describe_origin(existing->second.origin) + " and by " + describe_origin(entry.origin));
  }
  entries_.emplace(std::move(key), std::move(entry));
}

const ComponentEntry* Registry::find(const std::string& kind, const std::string& name) const {
  auto it = entries_.find({kind, name});
  return it == entries_.end() ? nullptr : &it->second;
}

const ComponentEntry& Registry::get(const std::string& kind, const std::string& name) const {
  if (const ComponentEntry* entry = find(kind, name)) return *entry;
  throw PluginError("no " + kind + " named '" + name + "' is registered; registered " + kind +
                    " names: " + join_or_none(names(kind)) +
                    ". Run `rlcore plugins` to see what was loaded and why anything was refused.");
}

std::vector<const ComponentEntry*> Registry::entries(const std::string& kind) const {
  std::vector<const ComponentEntry*> result;
  for (const auto& [key, entry] : entries_) {
    if (key.first == kind) result.push_back(&entry);
  }
  return result;
}

std::vector<const ComponentEntry*> Registry::all() const {
  std::vector<const ComponentEntry*> result;
  for (const auto& [key, entry] : entries_) result.push_back(&entry);
  return result;
}

std::vector<std::string> Registry::names(const std::string& kind) const {
  std::vector<std::string> result;
  for (const auto* entry : entries(kind)) result.push_back(entry->name);
  return result;
}

void Registry::set_capabilities(const std::string& kind, const std::string& name,
                                std::vector<std::string> capabilities) {
  get(kind, name);  // throws for an unregistered component
  capabilities_[{kind, name}] = std::move(capabilities);
}

std::vector<std::string> Registry::capabilities(const std::string& kind, const std::string& name) const {
  auto it = capabilities_.find({kind, name});
  return it == capabilities_.end() ? std::vector<std::string>{} : it->second;
}

void Registry::set_parallel_sizes(const std::string& kind, const std::string& name, ParallelSizesOf sizes) {
  get(kind, name);  // throws for an unregistered component
  parallel_sizes_[{kind, name}] = std::move(sizes);
}

ParallelSizes Registry::parallel_sizes(const std::string& kind, const std::string& name,
                                       const ConfigNode& options) const {
  get(kind, name);  // throws for an unregistered component
  auto it = parallel_sizes_.find({kind, name});
  return it == parallel_sizes_.end() ? ParallelSizes{} : it->second(options);
}

PluginRegistrar::PluginRegistrar(Registry& registry, PluginOrigin origin)
    : registry_(registry), origin_(std::move(origin)) {}

void PluginRegistrar::add_entry(ComponentEntry entry) {
  entry.origin = origin_;
  registry_.add(std::move(entry));
}

void PluginRegistrar::add_capabilities(const std::string& kind, const std::string& name,
                                       std::vector<std::string> capabilities) {
  registry_.set_capabilities(kind, name, std::move(capabilities));
}

void PluginRegistrar::set_parallel_sizes(const std::string& kind, const std::string& name, ParallelSizesOf sizes) {
  registry_.set_parallel_sizes(kind, name, std::move(sizes));
}

}  // namespace rlcore
