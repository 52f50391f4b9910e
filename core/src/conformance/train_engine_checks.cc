// TrainEngine checks: forward outputs and one optimizer step against the
// reference engine (fsdp) on the same tiny model, gradient accumulation,
// checkpoint round trips, the HF export, offload/reload, two dp ranks and
// gathers into the caller's buffers.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "conformance/conformance.h"
#include "conformance/tiny_model.h"
#include "rlcore/capabilities.h"
#include "rlcore/comm_context.h"
#include "rlcore/core/runtime/process_groups.h"
#include "rlcore/error.h"
#include "rlcore/safetensors/safetensors.h"
#include "rlcore/train_engine.h"

namespace rlcore::conformance {
namespace {

namespace fs = std::filesystem;

// fp32 forward outputs of two implementations of the same model agree to
// rounding (summation order); after AdamW steps, which turn rounding noise in
// near-zero gradients into steps of up to lr, to kStepTolerance.
constexpr double kForwardTolerance = 2e-5;
constexpr double kStepTolerance = 1e-4;
constexpr const char* kLearningRate = "1e-3";  // optim.lr of both engines
constexpr int64_t kTotalSteps = 4;

// The largest difference at the batch's response tokens: what an engine
// returns at padding positions is unspecified (0 from a packed forward,
// whatever the padding computes from a padded one).
double response_diff(const at::Tensor& a, const at::Tensor& b, const Batch& batch) {
  const at::Tensor mask = batch.tensor(columns::kResponseMask).to(at::kBool);
  return max_abs_diff(a.masked_select(mask), b.masked_select(mask));
}

bool declares(const ComponentEntry& entry, const std::string& key) {
  return std::any_of(entry.keys.begin(), entry.keys.end(), [&](const KeySpec& spec) { return spec.name == key; });
}

// The options the suite runs an engine with: `base` plus optim.lr when the engine declares it.
ConfigNode train_options(const ComponentEntry& entry, const ConfigNode& base) {
  ConfigNode options = base.clone();
  if (declares(entry, "optim.lr") && !options.at_path("optim.lr").defined()) {
    options.set("optim.lr", kLearningRate, "rlcore conformance");
  }
  return options;
}

std::shared_ptr<TrainEngine> make_train_candidate(CheckEnv& env, const fs::path& model) {
  return make_train_engine(env.candidate, env.candidate_options, model);
}

std::shared_ptr<TrainEngine> make_reference(CheckEnv& env, const fs::path& model) {
  return make_train_engine(*env.reference, ConfigNode(), model);
}

model::NamedTensors full_parameters(TrainEngine& engine) {
  model::NamedTensors out;
  engine.for_each_full_parameter(
      [&](const std::string& name, const at::Tensor& tensor) { out.emplace_back(name, tensor.detach().clone()); });
  return out;
}

Outcome no_reference(const CheckEnv& env) {
  return Outcome::skipped("reference train_engine '" + env.reference_name +
                          "' is not loaded (add its plugin with --plugins)");
}

Outcome check_train_create(CheckEnv& env) {
  auto engine = make_train_candidate(env, env.tiny_model);
  if (engine->step() != 0) return Outcome::fail("step() of a fresh engine is " + std::to_string(engine->step()));
  return Outcome::pass();
}

// Log-probs (at temperatures 1 and 0.7) or entropy of the candidate vs the reference.
Outcome compare_forward(CheckEnv& env, bool entropy) {
  if (!env.reference) return no_reference(env);
  auto candidate = make_train_candidate(env, env.tiny_model);
  auto reference = make_reference(env, env.tiny_model);
  const Batch batch = train_batch(3);
  Worst worst;
  for (double temperature : {1.0, 0.7}) {
    const ModelOutput got = candidate->forward(batch, forward_options(temperature, entropy));
    const ModelOutput want = reference->forward(batch, forward_options(temperature, entropy));
    const at::Tensor& g = entropy ? got.entropy : got.log_prob;
    const at::Tensor& w = entropy ? want.entropy : want.log_prob;
    if (!g.defined()) return Outcome::fail(std::string(entropy ? "entropy" : "log_prob") + " was not returned");
    if (g.sizes() != w.sizes()) {
      return Outcome::fail("shape " + c10::str(g.sizes()) + ", the reference's is " + c10::str(w.sizes()));
    }
    std::ostringstream what;
    what << (entropy ? "entropy" : "log_prob") << " at temperature " << temperature;
    worst.add(what.str(), response_diff(g, w, batch));
  }
  return Outcome::measured(worst.error, kForwardTolerance, worst.what + " vs the reference");
}

// For an engine with the sum_pi_squared capability: Σπ² vs the reference's, and the
// log-probs forward_with_sum_pi_squared returns vs its own forward()'s.
Outcome check_forward_sum_pi_squared(CheckEnv& env) {
  auto candidate = make_train_candidate(env, env.tiny_model);
  auto* with_sum = capability<ComputesSumPiSquared>(*candidate);
  if (with_sum == nullptr) return Outcome::not_applicable("does not claim the sum_pi_squared capability");
  if (!env.reference) return no_reference(env);
  auto reference = make_reference(env, env.tiny_model);
  auto* reference_sum = capability<ComputesSumPiSquared>(*reference);
  if (reference_sum == nullptr) {
    return Outcome::skipped("reference train_engine '" + env.reference_name + "' cannot compute sum_pi_squared");
  }
  const Batch batch = train_batch(3);
  Worst worst;
  for (double temperature : {1.0, 0.7}) {
    at::Tensor got, want;
    const ModelOutput output = with_sum->forward_with_sum_pi_squared(batch, forward_options(temperature, false), got);
    reference_sum->forward_with_sum_pi_squared(batch, forward_options(temperature, false), want);
    if (!got.defined()) return Outcome::fail("sum_pi_squared was not returned");
    if (got.sizes() != want.sizes()) {
      return Outcome::fail("shape " + c10::str(got.sizes()) + ", the reference's is " + c10::str(want.sizes()));
    }
    const ModelOutput plain = candidate->forward(batch, forward_options(temperature, false));
    std::ostringstream what;
    what << "at temperature " << temperature;
    worst.add("sum_pi_squared " + what.str(), response_diff(got, want, batch));
    worst.add("its log_prob vs forward()'s " + what.str(), response_diff(output.log_prob, plain.log_prob, batch));
  }
  return Outcome::measured(worst.error, kForwardTolerance, worst.what + " vs the reference");
}

Outcome check_forward_log_prob(CheckEnv& env) { return compare_forward(env, false); }
Outcome check_forward_entropy(CheckEnv& env) { return compare_forward(env, true); }

double relative_diff(double a, double b) { return std::abs(a - b) / std::max(1.0, std::abs(b)); }

// One train_step on the same data with the same loss, then parameters and log-probs vs the reference.
Outcome check_optimizer_step(CheckEnv& env) {
  if (!env.reference) return no_reference(env);
  if (!declares(env.candidate, "optim.lr")) {
    return Outcome::not_applicable(
        "the engine declares no optim.lr key, so its step cannot be set up like the reference's");
  }
  auto candidate = make_train_candidate(env, env.tiny_model);
  auto reference = make_reference(env, env.tiny_model);
  const Batch batch = train_batch(4);
  const TrainStepOutput got = candidate->train_step(batch, forward_options(1.0, false), pg_loss);
  const TrainStepOutput want = reference->train_step(batch, forward_options(1.0, false), pg_loss);
  if (candidate->step() != 1)
    return Outcome::fail("step() is " + std::to_string(candidate->step()) + " after one step");
  Worst worst;
  for (const char* metric : {"loss", "grad_norm"}) {
    if (!got.metrics.count(metric)) return Outcome::fail(std::string("train_step reported no '") + metric + "' metric");
    worst.add(std::string("metric ") + metric + " (relative)",
              relative_diff(got.metrics.at(metric), want.metrics.at(metric)));
  }
  // Compared in HF form (export_hf), the layout every engine shares.
  const fs::path got_dir = env.workdir / "candidate_after_step";
  const fs::path want_dir = env.workdir / "reference_after_step";
  candidate->export_hf(got_dir.string());
  reference->export_hf(want_dir.string());
  const std::string problem =
      compare_named(SafetensorsCheckpoint(got_dir).load_all(), SafetensorsCheckpoint(want_dir).load_all(), worst);
  if (!problem.empty()) return Outcome::fail("exported weights after the step: " + problem);
  const Batch probe = train_batch(5);
  worst.add("log_prob after the step",
            response_diff(candidate->forward(probe, forward_options(1.0, false)).log_prob,
                          reference->forward(probe, forward_options(1.0, false)).log_prob, probe));
  return Outcome::measured(worst.error, kStepTolerance, worst.what + " vs the reference");
}

// Micro-batches of one row accumulate to the step of the whole batch at once.
Outcome check_grad_accumulation(CheckEnv& env) {
  auto whole = make_train_candidate(env, env.tiny_model);
  auto micro = make_train_candidate(env, env.tiny_model);
  const Batch batch = train_batch(4);
  ForwardOptions one_row = forward_options(1.0, false);
  one_row.micro_batching.micro_batch_size = 1;
  const TrainStepOutput a = whole->train_step(batch, forward_options(1.0, false), pg_loss);
  const TrainStepOutput b = micro->train_step(batch, one_row, pg_loss);
  Worst worst;
  if (a.metrics.count("grad_norm") && b.metrics.count("grad_norm")) {
    worst.add("grad_norm (relative)", relative_diff(b.metrics.at("grad_norm"), a.metrics.at("grad_norm")));
  }
  const std::string problem = compare_named(full_parameters(*micro), full_parameters(*whole), worst);
  if (!problem.empty()) return Outcome::fail(problem);
  return Outcome::measured(worst.error, kStepTolerance, worst.what + " with micro_batch_size 1 vs the whole batch");
}

// Bit-exact equality of two engines' full parameters; "" or what differs.
std::string same_parameters(TrainEngine& candidate, TrainEngine& expected) {
  const model::NamedTensors got = full_parameters(candidate);
  const model::NamedTensors want = full_parameters(expected);
  std::map<std::string, at::Tensor> by_name(got.begin(), got.end());
  for (const auto& [name, tensor] : want) {
    auto it = by_name.find(name);
    if (it == by_name.end()) return "parameter '" + name + "' is missing";
    if (!bit_equal(it->second, tensor)) {
      return "parameter '" + name + "' differs (max |diff| " + std::to_string(max_abs_diff(it->second, tensor)) + ")";
    }
  }
  if (got.size() != want.size()) return "parameter counts differ";
  return "";
}

// Save after a step, load into a fresh engine: parameters bit-exact, step() restored.
Outcome check_checkpoint_round_trip(CheckEnv& env) {
  auto saved = make_train_candidate(env, env.tiny_model);
  saved->train_step(train_batch(4), forward_options(1.0, false), pg_loss);
  const fs::path dir = env.workdir / "checkpoint";
  saved->save_checkpoint(dir.string());
  auto loaded = make_train_candidate(env, env.tiny_model_alt);  // other weights: the load must replace them all
  loaded->load_checkpoint(dir.string());
  if (loaded->step() != saved->step()) {
    return Outcome::fail("step() is " + std::to_string(loaded->step()) + " after load_checkpoint, saved at " +
                         std::to_string(saved->step()));
  }
  const std::string problem = same_parameters(*loaded, *saved);
  if (!problem.empty()) return Outcome::fail("after load_checkpoint: " + problem);
  Outcome outcome = Outcome::measured(0, 0, "parameters");
  outcome.detail = "bit-exact";
  return outcome;
}

// Step, save, step == load, step: optimizer state, schedule and RNG are restored.
Outcome check_resume_continuity(CheckEnv& env) {
  auto first = make_train_candidate(env, env.tiny_model);
  first->train_step(train_batch(4), forward_options(1.0, false), pg_loss);
  const fs::path dir = env.workdir / "checkpoint";
  first->save_checkpoint(dir.string());
  const TrainStepOutput straight = first->train_step(train_batch(6), forward_options(1.0, false), pg_loss);
  auto resumed = make_train_candidate(env, env.tiny_model);
  resumed->load_checkpoint(dir.string());
  const TrainStepOutput after = resumed->train_step(train_batch(6), forward_options(1.0, false), pg_loss);
  // The loss, the engine's grad_norm and lr (not timings, which an engine may add).
  for (const char* key : {"loss", "grad_norm", "lr"}) {
    if (!straight.metrics.count(key)) continue;
    const double value = straight.metrics.at(key);
    auto it = after.metrics.find(key);
    if (it == after.metrics.end() || it->second != value) {
      return Outcome::fail(std::string("metric '") + key + "' of the step after resuming is " +
                           (it == after.metrics.end() ? std::string("missing") : std::to_string(it->second)) +
                           ", without the restart " + std::to_string(value));
    }
  }
  const std::string problem = same_parameters(*resumed, *first);
  if (!problem.empty())
    return Outcome::fail("the step after resuming differs from the step without the restart: " + problem);
  Outcome outcome = Outcome::measured(0, 0, "parameters");
  outcome.detail = "bit-exact";
  return outcome;
}

// export_hf of an untrained engine: the reference's names and shapes, the input checkpoint's values.
Outcome check_export_hf(CheckEnv& env) {
  auto engine = make_train_candidate(env, env.tiny_model);
  const fs::path dir = env.workdir / "export";
  engine->export_hf(dir.string());
  if (!fs::exists(dir / "config.json")) return Outcome::fail("export_hf wrote no config.json");
  const model::NamedTensors exported = SafetensorsCheckpoint(dir).load_all();
  Worst worst;
  std::string problem = compare_named(exported, tiny_model_weights(1), worst);
  if (!problem.empty()) return Outcome::fail("exported weights vs the input checkpoint: " + problem);
  if (env.reference) {
    auto reference = make_reference(env, env.tiny_model);
    const fs::path reference_dir = env.workdir / "reference_export";
    reference->export_hf(reference_dir.string());
    Worst ignored;
    problem = compare_named(exported, SafetensorsCheckpoint(reference_dir).load_all(), ignored);
    if (!problem.empty()) return Outcome::fail("exported names/shapes vs the reference's export: " + problem);
  }
  Outcome outcome = Outcome::measured(worst.error, 0, worst.what + " vs the input checkpoint");
  if (outcome.status == Status::kPass) outcome.detail = "bit-exact";
  return outcome;
}

// Two engines take a step; one offloads and reloads everything; both take a
// second step: parameters stay bit-identical (params, grads and optimizer state came back exactly).
Outcome check_offload_reload(CheckEnv& env) {
  auto moved = make_train_candidate(env, env.tiny_model);
  auto stayed = make_train_candidate(env, env.tiny_model);
  for (auto* engine : {moved.get(), stayed.get()}) {
    engine->train_step(train_batch(4), forward_options(1.0, false), pg_loss);
  }
  const std::vector<ParameterShard> before = moved->parameter_shards();
  std::vector<at::Tensor> copies;
  for (const auto& shard : before) copies.push_back(shard.local.detach().clone());
  moved->offload(OffloadSet::kAll);
  moved->reload(OffloadSet::kAll);
  const std::vector<ParameterShard> after = moved->parameter_shards();
  if (after.size() != before.size())
    return Outcome::fail("parameter_shards() changed its length across offload/reload");
  for (size_t i = 0; i < after.size(); ++i) {
    if (!bit_equal(after[i].local, copies[i]))
      return Outcome::fail("parameter '" + after[i].name + "' changed across offload/reload");
  }
  for (auto* engine : {moved.get(), stayed.get()}) {
    engine->train_step(train_batch(6), forward_options(1.0, false), pg_loss);
  }
  const std::string problem = same_parameters(*moved, *stayed);
  if (!problem.empty()) return Outcome::fail("a step after offload/reload differs from one without: " + problem);
  Outcome outcome = Outcome::measured(0, 0, "parameters");
  outcome.detail = "bit-exact";
  return outcome;
}

constexpr int64_t kWorld = 2;

// The candidate on two ranks: threads of this process with a gloo "dp" group
// over a file store, each running `body` on its engine. Empty, or what went
// wrong: `refused` when both ranks' factories refused the group.
struct TwoRanks {
  std::vector<std::string> errors = std::vector<std::string>(kWorld);
  bool refused = false;
};

TwoRanks run_two_ranks(CheckEnv& env, const std::string& prefix,
                       const std::function<void(int64_t rank, TrainEngine& engine)>& body) {
  const auto store = runtime::RendezvousStore::on_this_host();
  TwoRanks result;
  std::vector<bool> refused(kWorld, false);
  std::vector<std::thread> threads;
  for (int64_t rank = 0; rank < kWorld; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        runtime::ProcessGroupOptions options;
        options.store_file = store->file();
        options.prefix = prefix;
        options.rank = rank;
        options.local_rank = rank;
        options.world_size = kWorld;
        options.timeout = std::chrono::seconds(60);
        const std::unique_ptr<CommContext> comm = runtime::make_comm_context(options);
        ComponentContext context;
        context.model_path = env.tiny_model.string();
        context.total_training_steps = kTotalSteps;
        context.comm = comm.get();
        std::shared_ptr<TrainEngine> engine;
        try {
          engine = std::static_pointer_cast<TrainEngine>(
              env.candidate.factory(train_options(env.candidate, env.candidate_options), context));
        } catch (...) {
          refused[rank] = true;
          throw;
        }
        body(rank, *engine);
      } catch (const std::exception& e) {
        result.errors[rank] = e.what();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  result.refused = refused[0] && refused[1];
  return result;
}

// Not applicable (refused), a failure naming the rank, or nullopt when both ranks ran.
std::optional<Outcome> two_rank_problem(const TwoRanks& run) {
  if (run.refused) return Outcome::not_applicable("the engine does not take a 2-rank dp group: " + run.errors[0]);
  for (int64_t rank = 0; rank < kWorld; ++rank) {
    if (!run.errors[rank].empty()) return Outcome::fail("rank " + std::to_string(rank) + " of 2: " + run.errors[rank]);
  }
  return std::nullopt;
}

// Each of two ranks takes the step on half of the rows == one rank on all of them.
Outcome check_data_parallel(CheckEnv& env) {
  const Batch batch = train_batch(4);
  const Batch probe = train_batch(5);
  std::vector<model::NamedTensors> params(kWorld);
  std::vector<at::Tensor> log_probs(kWorld);
  const TwoRanks run = run_two_ranks(env, "conformance_dp", [&](int64_t rank, TrainEngine& engine) {
    const int64_t rows = batch.size() / kWorld;
    engine.train_step(batch.slice(rank * rows, (rank + 1) * rows), forward_options(1.0, false), pg_loss);
    log_probs[rank] = engine.forward(probe.slice(rank * rows, (rank + 1) * rows), forward_options(1.0, false)).log_prob;
    params[rank] = full_parameters(engine);
  });
  if (auto problem = two_rank_problem(run)) return *problem;
  auto single = make_train_candidate(env, env.tiny_model);
  single->train_step(batch, forward_options(1.0, false), pg_loss);
  Worst worst;
  for (int64_t rank = 0; rank < kWorld; ++rank) {
    const std::string problem = compare_named(params[rank], full_parameters(*single), worst);
    if (!problem.empty()) return Outcome::fail("rank " + std::to_string(rank) + ": " + problem);
  }
  worst.add("log_prob after the step",
            response_diff(at::cat(log_probs, 0), single->forward(probe, forward_options(1.0, false)).log_prob, probe));
  return Outcome::measured(worst.error, kStepTolerance, worst.what + " with 2 dp ranks vs 1");
}

// On one rank, what is wrong with `engine`'s gathers into bf16 buffers (empty: nothing); counts
// the gathers it landed in them.
std::string gather_into_problem(TrainEngine& engine, GathersIntoBuffers& gatherer, int64_t& landed) {
  model::NamedTensors want;
  engine.for_each_full_parameter(
      [&](const std::string& name, const at::Tensor& t) { want.emplace_back(name, t.to(at::kBFloat16)); });
  const std::vector<GathersIntoBuffers::Gather> gathers = gatherer.full_parameter_gathers();
  std::vector<at::Tensor> buffers;
  std::map<std::string, std::pair<size_t, int64_t>> place;  // name -> (gather, element offset)
  size_t listed = 0;
  for (size_t g = 0; g < gathers.size(); ++g) {
    const GathersIntoBuffers::Gather& gather = gathers[g];
    if (gather.offsets.size() != gather.names.size() || gather.numels.size() != gather.names.size()) {
      return "gather " + std::to_string(g) + " lists " + std::to_string(gather.names.size()) + " names but " +
             std::to_string(gather.offsets.size()) + " offsets and " + std::to_string(gather.numels.size()) + " sizes";
    }
    for (size_t k = 0; k < gather.names.size(); ++k, ++listed) {
      if (listed >= want.size() || gather.names[k] != want[listed].first) {
        return "full_parameter_gathers() lists '" + gather.names[k] + "' where for_each_full_parameter visits " +
               (listed < want.size() ? "'" + want[listed].first + "'" : std::string("nothing more"));
      }
      if (gather.offsets[k] < 0 || gather.offsets[k] + gather.numels[k] > gather.numel ||
          gather.numels[k] != want[listed].second.numel()) {
        return "gather " + std::to_string(g) + " places '" + gather.names[k] +
               "' outside its buffer or with the wrong size";
      }
      place[gather.names[k]] = {g, gather.offsets[k]};
    }
    buffers.push_back(at::full({gather.numel}, -7.0, at::kBFloat16));
  }
  if (listed != want.size())
    return "full_parameter_gathers() lists " + std::to_string(listed) + " of the " + std::to_string(want.size()) +
           " parameters";
  size_t asked = 0;
  size_t visited = 0;
  std::vector<bool> used(gathers.size(), false);
  std::string problem;
  gatherer.for_each_full_parameter_into(
      [&](size_t gather) {
        if (gather != asked && problem.empty())
          problem = "destination(" + std::to_string(gather) + ") asked out of order";
        ++asked;
        return gather < buffers.size() ? buffers[gather] : at::Tensor();
      },
      [&](const std::string& name, const at::Tensor& t) {
        if (!problem.empty()) return;
        if (visited >= want.size() || name != want[visited].first) {
          problem = "for_each_full_parameter_into visits '" + name + "' out of for_each_full_parameter's order";
          return;
        }
        if (!at::equal(t.to(at::kBFloat16), want[visited].second)) {
          problem = "'" + name + "' differs from for_each_full_parameter's value rounded to the buffer's dtype";
        }
        const auto [gather, offset] = place.at(name);
        const at::Tensor& buffer = buffers[gather];
        const auto* begin = static_cast<const char*>(buffer.data_ptr());
        const auto* at = static_cast<const char*>(t.data_ptr());
        if (at >= begin && at < begin + buffer.nbytes()) {
          used[gather] = true;
          if (at != begin + offset * buffer.element_size() || t.scalar_type() != at::kBFloat16 || !t.is_contiguous()) {
            problem = "'" + name + "' lies in its gather's buffer but not at its listed offset, as a bf16 view";
          }
        }
        ++visited;
      });
  if (!problem.empty()) return problem;
  if (asked != gathers.size())
    return "destination() was asked " + std::to_string(asked) + " times for " + std::to_string(gathers.size()) +
           " gathers";
  if (visited != want.size()) return "visited " + std::to_string(visited) + " of " + std::to_string(want.size());
  landed = std::count(used.begin(), used.end(), true);
  return "";
}

// For an engine with the gather_into_buffer capability, on two ranks: its
// gathers list the full parameters in visit order; gathering into the
// caller's bf16 buffers visits the same values rounded to bf16, every one it
// places in a buffer at its listed offset.
Outcome check_gather_into_buffer(CheckEnv& env) {
  auto single = make_train_candidate(env, env.tiny_model);
  if (!supports<GathersIntoBuffers>(*single))
    return Outcome::not_applicable("does not claim the gather_into_buffer capability");
  std::vector<std::string> problems(kWorld);
  std::vector<int64_t> landed(kWorld, 0);
  const TwoRanks run = run_two_ranks(env, "conformance_gather_into", [&](int64_t rank, TrainEngine& engine) {
    auto* gatherer = capability<GathersIntoBuffers>(engine);
    problems[rank] = gatherer ? gather_into_problem(engine, *gatherer, landed[rank]) : "lost the capability";
  });
  if (auto problem = two_rank_problem(run)) return *problem;
  for (int64_t rank = 0; rank < kWorld; ++rank) {
    if (!problems[rank].empty()) return Outcome::fail("rank " + std::to_string(rank) + " of 2: " + problems[rank]);
  }
  return Outcome::pass("bit-exact, " + std::to_string(landed[0]) + " gathers in the caller's buffers");
}

}  // namespace

std::shared_ptr<TrainEngine> make_train_engine(const ComponentEntry& entry, const ConfigNode& options,
                                               const fs::path& model) {
  ComponentContext context;
  context.model_path = model.string();
  context.total_training_steps = kTotalSteps;
  auto made = std::static_pointer_cast<TrainEngine>(entry.factory(train_options(entry, options), context));
  if (!made) throw ValueError("the factory of " + entry.kind + " '" + entry.name + "' returned null");
  return made;
}

// 4 rows, a 5-token prompt (row 0 left-padded) and a 4-token response (row 2
// right-padded), random ids, plus the advantages the test loss reads.
Batch train_batch(uint64_t seed) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  const int64_t rows = 4, prompt = 5, response = 4;
  at::Tensor mask = at::ones({rows, prompt + response}, at::kLong);
  mask[0][0] = 0;
  mask[0][1] = 0;
  mask[2][prompt + response - 1] = 0;
  const at::Tensor ids =
      at::randint(1, tiny_model_config().vocab_size, {rows, prompt + response}, generator, at::kLong) * mask;
  Batch batch(rows);
  batch.set(columns::kInputIds, ids);
  batch.set(columns::kAttentionMask, mask);
  batch.set(columns::kResponses, ids.slice(1, prompt).clone());
  batch.set(columns::kResponseMask, mask.slice(1, prompt).to(at::kFloat));
  batch.set("advantages", at::randn({rows, response}, generator));
  return batch;
}

// A token-mean policy-gradient loss, scaled by dp_size as the trainer's losses are
// (gradients are averaged over dp ranks).
LossOutput pg_loss(const Batch& micro, const ModelOutput& out, const GlobalBatchInfo& global) {
  const at::Tensor loss = -(out.log_prob * micro.tensor("advantages") * micro.tensor(columns::kResponseMask)).sum() /
                          global.num_tokens * static_cast<double>(global.dp_size);
  return {loss, {{"loss", loss.detach()}}};
}

ForwardOptions forward_options(double temperature, bool entropy) {
  ForwardOptions options;
  options.temperature = temperature;
  options.entropy = entropy;
  return options;
}

std::vector<Check> train_engine_checks() {
  return {
      {"create", check_train_create},
      {"forward_log_prob", check_forward_log_prob},
      {"forward_entropy", check_forward_entropy},
      {"forward_sum_pi_squared", check_forward_sum_pi_squared},
      {"optimizer_step", check_optimizer_step},
      {"grad_accumulation", check_grad_accumulation},
      {"checkpoint_round_trip", check_checkpoint_round_trip},
      {"resume_continuity", check_resume_continuity},
      {"export_hf", check_export_hf},
      {"offload_reload", check_offload_reload},
      {"data_parallel", check_data_parallel},
      {"gather_into_buffer", check_gather_into_buffer},
  };
}

}  // namespace rlcore::conformance
