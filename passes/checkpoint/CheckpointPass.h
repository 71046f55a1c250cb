//===- CheckpointPass.h - Fit a training step into a memory budget -*- C++ -*-===//
//
// checkpoint{budget=...}: drops activations after their last forward use and
// recomputes them just before backward needs them (cloned nodes marked
// recompute_of), choosing which so that the step's peak memory above the graph
// inputs (weights, optimizer state, the batch) fits the budget at the least
// recomputation time (docs/Checkpointing.md).
//
//   budget=1.5GiB | budget=60%   bytes, or a share of the unoptimised peak above the inputs
//   peak=6GiB | peak=80%         the whole step's peak instead: weights, gradients, optimizer
//                                state and the batch included, as the allocator sees them
//   activations=50%              the activations saved for backward: half the unoptimised;
//                                with budget= as well, the peak is bounded too
//   planner=greedy|milp|torch    μ-TWO's greedy (default), the best of it and CBC's
//                                programs with its proven gap to the optimum, or
//                                torch.compile's own partitioner (activations= as its
//                                activation_memory_budget; a Python helper process)
//   cost=profile|flops|db        measured node times (runs the graph), a static estimate,
//                                or the operator cost database's (db=FILE or
//                                $GRAPHOPT_COSTDB; docs/CostDB.md): no run
//   scratch=auto|measured|none   operator scratch in the simulation (auto: the profile's
//                                with cost=profile, none with cost=flops or db)
//   time-limit=10                seconds for the MILP solver
//   gap=0.01                     milp: stop once the plan is proven within 1% of the
//                                optimum (RecomputeRelaxation.h's bound)
//   measure=true                 with cost=profile: run the rewritten graph and check
//                                its measured peak; tighten and plan again if it is over
//   offload-bandwidth=12GB/s     also offload activations to host memory where the copies
//                                hide behind compute (OffloadPlanner.h); runs on CUDA only
//   monotone=true                greedy: plan on the budget ladder (BudgetLadder.h), so
//                                that a looser budget is never slower and a tighter one
//                                never peaks higher
//
// A budget no plan meets is refused (the error gives the smallest the planner
// reaches) and the graph is left as it was. With --report-dir it writes
// checkpoint.json; the table of what was recomputed goes with the pass reports.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "checkpoint/CheckpointCosts.h"
#include "checkpoint/CheckpointReport.h"
#include "checkpoint/Planner.h"

#include "graphopt/Pass/Pass.h"

#include <optional>
#include <string>
#include <vector>

namespace graphopt {


class CheckpointPass : public OptimizationPass {
public:
  static llvm::StringRef passName() { return "checkpoint"; }
  static llvm::StringRef passDescription() {
    return "recompute activations in backward so the step fits a memory budget, at the least "
           "extra time";
  }
  /// Runs inside torch.compile (cost=flops, measure=false there). Fuzzed on
  /// FLOP costs (the measured default would profile every graph) with
  /// unmet=closest (a third of the generated graphs save activations written
  /// in place, which no plan may drop; the refusal itself is tested in lit):
  /// the greedy, the block-structured planner, and a peak budget (the budget
  /// ladder). planner=milp and planner=torch run a helper process per plan
  /// and are fuzzed by test/Checkpoint's lit tests instead.
  static PassTraits passTraits() {
    return {/*insideCompile=*/true,
            "",
            {{"checkpoint{activations=30%,cost=flops,unmet=closest}"},
             {"checkpoint{activations=30%,cost=flops,unmet=closest,planner=structured}"},
             {"checkpoint{budget=60%,cost=flops,unmet=closest}"}}};
  }
  llvm::StringRef name() const override { return passName(); }
  llvm::StringRef description() const override { return passDescription(); }
  absl::StatusOr<bool> transform(Graph &graph, AnalysisManager &analyses) override;
  void printReport(llvm::raw_ostream &os) const override;
  /// checkpoint.json's document, as a value.
  std::vector<std::pair<std::string, std::string>> jsonReports() const override;

  using Outcome = CheckpointOutcome;
  using Activation = CheckpointOutcome::Activation;
  using RecomputedNode = CheckpointOutcome::RecomputedNode;
  const std::optional<Outcome> &outcome() const { return outcome_; }

protected:
  absl::Status validateOptions() override;

protected:
  void reset() override { outcome_.reset(); }

private:
  enum class Unmet { Error, Closest };
  PassOption<std::optional<MemoryAmount>> budget_{
      this, "budget",
      "peak memory above weights and inputs allowed: bytes (1.5GiB) or a share of the "
      "unoptimised peak (60%)",
      std::nullopt};
  PassOption<std::optional<MemoryAmount>> peak_{
      this, "peak",
      "the whole step's peak allowed instead, weights, gradients, optimizer state and the batch "
      "included: bytes (6GiB) or a share of the unoptimised step's peak (80%)",
      std::nullopt};
  PassOption<std::optional<MemoryAmount>> activations_{
      this, "activations",
      "bound the activations saved for backward instead: bytes (64MiB) or a share of the "
      "unoptimised (50%); with budget= too, both bounds hold",
      std::nullopt};
  // The registered planners (Planner.h), by name.
  PassOption<std::string> planner_{this, "planner", "how the plan is chosen", "greedy",
                                   registeredPlanners()};
  PassOption<CostSource> cost_{this, "cost",
                         "node times: measured by the profile analysis, estimated from FLOPs, "
                         "predicted by the operator cost database (db=), or as Inductor runs "
                         "them (fusing operators by the bytes they read, kernels by db= or a "
                         "roofline, at this machine's measured rates)",
                         CostSource::Profile,
                         {{"profile", CostSource::Profile},
                          {"flops", CostSource::Flops},
                          {"db", CostSource::Db},
                          {"inductor", CostSource::Inductor}}};
  PassOption<std::string> db_{this, "db",
                              "cost=db, cost=inductor: the cost database (graph-opt-costdb "
                              "measure makes it); cost=db's default $GRAPHOPT_COSTDB",
                              ""};
  PassOption<ScratchSource> scratch_{
      this, "scratch",
      "operator scratch memory in the simulation: auto (the profile's with cost=profile, none "
      "with cost=flops or db), measured (runs the graph, deterministic), none",
      ScratchSource::Auto,
      {{"auto", ScratchSource::Auto},
       {"measured", ScratchSource::Measured},
       {"none", ScratchSource::None}}};
  PassOption<double> timeLimit_{this, "time-limit", "seconds the milp planner may take", 10.0};
  PassOption<double> gap_{this, "gap",
                          "milp: stop once the plan is proven within this share of the optimum "
                          "(0.01: 1%; 0: prove the optimum)",
                          0.01};
  PassOption<Unmet> unmet_{this, "unmet",
                           "when no plan meets the budget: fail (error), or apply the plan that "
                           "comes closest and say so (closest)",
                           Unmet::Error, {{"error", Unmet::Error}, {"closest", Unmet::Closest}}};
  PassOption<bool> measure_{this, "measure",
                            "run the rewritten graph to check its measured peak (cost=profile)",
                            true};
  PassOption<std::optional<Bandwidth>> offloadBandwidth_{
      this, "offload-bandwidth",
      "also offload activations to host memory, copied each way at this rate; planned and "
      "simulated anywhere, run on CUDA only",
      std::nullopt};
  PassOption<bool> monotone_{
      this, "monotone",
      "greedy: plan on a ladder of budgets (50, 30, 10, 5%) so that a looser budget is never slower "
      "and a tighter one never peaks higher",
      true};
  std::optional<Outcome> outcome_;

  /// planner=: each registered planner's name, as the option's choices.
  static std::vector<std::pair<std::string, std::string>> registeredPlanners();

  // transform's steps, in order.
  struct Planned;   ///< the plan, and its measurement when one was made
  struct Offloaded; ///< offload-bandwidth=: the offloads put in, and the model after them
  CostOptions costOptions() const;
  PlannerOptions plannerOptions() const;
  /// The planner named by planner= (validateOptions checked it is registered).
  const Planner &planner() const;
  /// What the planner is asked for at `target` and `peakCap` on `model`.
  PlanRequest planRequest(const RecomputeModel &model, int64_t target, int64_t peakCap,
                          const Outcome &out) const;
  /// Resolves budget= (or peak=) and activations= against the unoptimised
  /// step, into `out`; returns what budget= or peak= allows the peak above
  /// the inputs (-1: neither given).
  int64_t resolveBudgets(const RecomputeModel &model, Outcome &out);
  /// budget= or peak=, whichever bounds the peak ("" neither), as written.
  std::string peakOptionText() const;
  /// A peak above the inputs as the option states it: itself for budget=,
  /// with the inputs' bytes for peak=.
  int64_t asStated(const Outcome &out, int64_t aboveInputs) const;
  /// offload-bandwidth=: chooses offloads for the budget, puts them into
  /// `graph`, and models the graph with them (nothing without the option).
  absl::StatusOr<Offloaded> planAndApplyOffloads(Graph &graph, const RecomputeModel &original,
                                                 const NodeCosts &costs, BoundedMemory bounded,
                                                 Outcome &out) const;
  /// Why `plan` (made at `target`, the `attempt`-th) falls short of the budget or
  /// the peak cap, naming the option; OK where it meets them.
  absl::Status plannerUnmet(const RecomputeModel &model, const CheckpointPlan &plan,
                            int64_t target, unsigned attempt, const Outcome &out) const;
  /// Plans within the budget; when measuring, checks the rewrite's measured
  /// peak and plans again, tightened, while it is over.
  absl::StatusOr<Planned> planWithinBudget(const Graph &graph, const RecomputeModel &model,
                                           AnalysisManager &analyses, int64_t peakBudget,
                                           Outcome &out) const;
  /// planWithinBudget's measured search (BoundSearch.h) from its `first` plan:
  /// each round plans at the knob and measures, the budget met or the closest
  /// plan applied (unmet=closest) or refused.
  absl::StatusOr<Planned> searchMeasured(const Graph &graph, const RecomputeModel &model,
                                         AnalysisManager &analyses, int64_t peakBudget,
                                         Planned first, Outcome &out) const;
  /// offload-bandwidth=: the offloads' plan (planAndApplyOffloads, then
  /// planWithinBudget on the graph with them) taken in place of `planned`
  /// and `out` where predicted faster, else the offloads taken out again
  /// (out.offloadRejected says why); the seconds of the plan not taken.
  absl::StatusOr<double> preferOffloadsIfFaster(Graph &graph, AnalysisManager &analyses,
                                                const RecomputeModel &built,
                                                const NodeCosts &costs, BoundedMemory bounded,
                                                int64_t peakBudget,
                                                absl::StatusOr<Planned> &planned,
                                                Offloaded &offloaded, Outcome &out) const;
};

} // namespace graphopt
