//===- OffloadPlanner.h - Activations copied to host memory and back -*- C++ -*-===//
//
// checkpoint{offload-bandwidth=...}: beside keeping and recomputing, an
// activation may be offloaded (μ-TWO's swap): copied to host memory after its
// last forward use, on a copy stream of its own, and copied back before its
// first backward use, so that it holds no device memory in between. The copy
// costs no compute time where it hides behind the nodes that run meanwhile;
// where it does not, the step waits for it.
//
// The planner chooses offloads first, then the greedy plans recomputation for
// what is still over the budget, on the graph with the offloads in it:
//
//   1. the copies are simulated (simulateCopies): one engine each way, in the
//      order they are issued; a device-to-host copy starts when the node that
//      last reads the value in forward ends, a host-to-device copy at its
//      prefetch point (the latest node from which the nodes before the first
//      backward use take at least the copy's time), and the step waits where
//      a copy back is not done when its value is needed (the stall);
//   2. while the bounded memory's estimated peak is over the budget, among the
//      candidates it holds at that peak, the one that frees the most bytes
//      per second of added stall is offloaded, when that stall is less than
//      recomputing it alone would take (else recomputation is the better
//      choice, and it is left to the greedy);
//   3. the graph gets, per offload, graphopt::offload after the last forward
//      use, graphopt::reload at the prefetch point and graphopt::reload_wait
//      before the first backward use, which reads the reloaded value instead.
//
// A device buffer being copied out is still held until its copy ends: those
// bytes are charged as the scratch of the nodes that run meanwhile, so the
// simulated peak counts them. The predicted step time adds the stall.
//
// Views of an offloaded value that backward reads are made again from the
// reload (views cost no compute); a value whose storage forward nodes also
// share in other ways is not offloaded. Only on CUDA can an offload plan run (GraphoptOps.h); on the CPU it is
// planned and simulated.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "checkpoint/RecomputeModel.h"

#include <llvm/ADT/ArrayRef.h>

#include <string>
#include <vector>

namespace graphopt {

/// One copy out and back, in the ranks of the graph without offloads.
struct Transfer {
  int64_t outAfter = -1; ///< the copy out starts when this node ends
  int64_t backAt = -1;   ///< the copy back starts when this node starts
  int64_t neededAt = -1; ///< this node waits for the copy back
  double seconds = 0;    ///< each way
};

struct CopySimulation {
  double stallSeconds = 0; ///< the step's waits for copies back
  /// Per transfer: the rank running when its copy out ends (its device
  /// buffer is held until then), and its own wait.
  std::vector<int64_t> outDoneAt;
  std::vector<double> stall;
};

/// The copy engines' timeline for `transfers` (in any order) beside nodes
/// taking `nodeSeconds`, one rank after another.
CopySimulation simulateCopies(llvm::ArrayRef<double> nodeSeconds,
                              llvm::ArrayRef<Transfer> transfers);

/// The latest rank from which the nodes up to `neededAt` take at least
/// `seconds`, and not before `after` + 1.
int64_t prefetchPoint(llvm::ArrayRef<double> nodeSeconds, int64_t after, int64_t neededAt,
                      double seconds);

struct Offload {
  int32_t candidate = -1;
  Transfer transfer;
  double stallSeconds = 0; ///< its share of the stall
};

struct OffloadPlan {
  std::vector<Offload> offloads;
  double stallSeconds = 0;
  int64_t offloadedBytes = 0;
  /// Per rank of the graph without offloads: device bytes still being copied out.
  std::vector<int64_t> inFlightBytes;
};

/// Chooses offloads at `bandwidth` bytes per second each way, until the
/// estimated bounded memory is within `budget` or nothing more is worth it.
OffloadPlan planOffloads(const RecomputeModel &model, int64_t budget, double bandwidth);

/// What applyOffloads inserted, per offload: the value, and its offload,
/// reload and reload_wait nodes.
struct AppliedOffload {
  Value *value = nullptr;
  Node *out = nullptr, *back = nullptr, *ready = nullptr;
  /// Views of the value backward reads, made again from the reload: (clone, original).
  std::vector<std::pair<Node *, Node *>> views;
};

/// Inserts the plan's offload, reload and reload_wait nodes into the model's
/// graph (which `model` no longer describes afterwards).
absl::StatusOr<std::vector<AppliedOffload>> applyOffloads(const RecomputeModel &model,
                                                          const OffloadPlan &plan, Graph &graph);
/// Takes them out again: the graph is as it was before applyOffloads.
absl::Status removeOffloads(llvm::ArrayRef<AppliedOffload> applied, Graph &graph);

} // namespace graphopt
