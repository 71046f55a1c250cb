//===- Planner.h - Checkpoint planners, registered by name ------*- C++ -*-===//
//
// checkpoint{planner=NAME} looks NAME up here. A planner chooses which
// activations a plan recomputes (CheckpointPlan.h) for a budget on one
// RecomputeModel; the pass around it resolves the options, measures, reports
// and rewrites. Each planner registers itself in its own .cpp:
//
//   GRAPHOPT_REGISTER_PLANNER(GreedyPlannerEntry);
//
// with a class that has a default constructor and static `plannerName()` and
// `plannerDescription()`. The ones graph-opt has: greedy (GreedyPlanner.h),
// structured (StructuredPlanner.h), milp (MilpPlanner.h), torch
// (TorchPlanner.h). Offloading is not one of them: it chooses what to copy to
// the host before a planner chooses what to recompute (OffloadPlanner.h).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "checkpoint/CheckpointPlan.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace graphopt {

/// The pass options a planner reads besides the budget.
struct PlannerOptions {
  /// Plan on the budget ladder (BudgetLadder.h): the greedy planners.
  bool monotone = true;
  /// milp: the solver's seconds, and the gap to the optimum it may stop at.
  double timeLimitSeconds = 10;
  double gap = 0.01;
  /// activations= as a share of the unoptimised saved activations (0.3 for
  /// 30%), where it was given as one: torch's activation_memory_budget.
  std::optional<double> activationsShare;
};

/// Which bounds the pass was given, for a planner to refuse what it cannot plan.
struct PlannerBounds {
  /// "peak=" or "budget=" where one bounds the peak, else "".
  std::string peakOption;
  bool activations = false; ///< activations= given
  PlannerOptions options;
};

/// What a planner is asked for.
struct PlanRequest {
  const RecomputeModel &model;
  /// Bytes of the model's bounded memory (RecomputeModel::boundedMemory).
  int64_t target = 0;
  /// Bound on the peak above the inputs beside it (activations= with budget=).
  int64_t peakCap = kNoPeakCap;
  /// The unoptimised bounded memory: the budget ladder's rungs are shares of it.
  int64_t ladderWhole = 0;
  PlannerOptions options;
};

/// The budget ladder a plan came from (monotone=true), for the report.
struct LadderReport {
  struct Rung {
    std::string name, how;
    int64_t budgetBytes = 0, predictedBounded = 0, predictedPeak = 0;
    double predictedExtraSeconds = 0, planSeconds = 0;
    bool meets = false, asked = false;
  };
  std::vector<Rung> rungs; ///< loose to tight
  std::string from;        ///< the rung the plan came from ("" its own budget's)
  bool peaksMonotone = true;
  unsigned rungsSkipped = 0;  ///< not planned: they could not be faster
  unsigned rungsPeakRose = 0; ///< peaks above their looser rung's
};

class Planner {
public:
  virtual ~Planner() = default;
  virtual llvm::StringRef name() const = 0;
  /// Refuses bounds and options this planner cannot plan for, saying which
  /// to give instead (the pass adds its own name).
  virtual absl::Status accepts(const PlannerBounds &) const { return absl::OkStatus(); }
  /// Whether offload-bandwidth= may go with it (offloads, then its plan).
  virtual bool plansAroundOffloads() const { return false; }
  /// A plan for the request. Where the budget cannot be met, the closest
  /// plan reached (meetsBudget false); an error only where none was made.
  /// `ladder` (never null) gets the budget ladder where one was planned.
  virtual absl::StatusOr<CheckpointPlan> plan(const PlanRequest &request,
                                              LadderReport *ladder) const = 0;
};

class PlannerRegistry {
public:
  struct Entry {
    std::string name, description;
    std::unique_ptr<Planner> planner;
  };
  static PlannerRegistry &instance();
  void add(Entry entry);
  /// Takes a planner out again (a test's, a plugin's that is unloaded); false
  /// where none has the name.
  bool remove(llvm::StringRef name);
  /// The named planner, or null.
  const Planner *find(llvm::StringRef name) const;
  /// Registered planners sorted by name.
  std::vector<const Entry *> entries() const;
  /// Their names as an option lists them ("greedy, milp, structured or torch").
  std::string namesText() const;

private:
  std::vector<Entry> entries_;
};

namespace detail {
template <typename PlannerT> struct PlannerRegistration {
  PlannerRegistration() {
    PlannerRegistry::instance().add({std::string(PlannerT::plannerName()),
                                     std::string(PlannerT::plannerDescription()),
                                     std::make_unique<PlannerT>()});
  }
};
} // namespace detail

#define GRAPHOPT_REGISTER_PLANNER(PlannerT)                                                        \
  static ::graphopt::detail::PlannerRegistration<PlannerT> graphoptPlannerRegistration##PlannerT

} // namespace graphopt
