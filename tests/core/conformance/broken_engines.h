// Deliberately broken engines for the conformance tests, each wrapping an in-tree
// engine and breaking one behaviour; each register function adds one of them:
//   register_log_probs     train_engine `broken_log_probs`: forward() adds 0.01 to every log-prob
//   register_checkpoint    train_engine `broken_checkpoint`: save_checkpoint() drops a tensor
//   register_gather_into   train_engine `broken_gather_into`: gathers one element past the offsets it lists
//   register_load_weights  inference_engine `broken_load_weights`: load_weights() keeps the old weights
//   register_wake_up       inference_engine `broken_wake_up`: after wake_up(), log-probs one fp32 ulp off
//   register_swap_bound    sharding_manager `broken_swap_bound`: the naive manager claiming BoundedSwapMemory
#pragma once

#include "rlcore/registry.h"

namespace broken {

void register_log_probs(rlcore::PluginRegistrar& registrar);
void register_checkpoint(rlcore::PluginRegistrar& registrar);
void register_gather_into(rlcore::PluginRegistrar& registrar);
void register_load_weights(rlcore::PluginRegistrar& registrar);
void register_wake_up(rlcore::PluginRegistrar& registrar);
void register_swap_bound(rlcore::PluginRegistrar& registrar);

}  // namespace broken
