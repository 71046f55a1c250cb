//===- OffloadPlanner.cpp - Activations copied to host memory and back ----===//

#include "checkpoint/OffloadPlanner.h"

#include "graphopt/Analysis/PeakTracker.h"
#include "graphopt/IR/Constant.h"
#include "graphopt/IR/GraphoptOps.h"

#include <absl/strings/str_cat.h>

#include <llvm/ADT/SmallPtrSet.h>

#include <algorithm>
#include <limits>

namespace graphopt {

CopySimulation simulateCopies(llvm::ArrayRef<double> nodeSeconds,
                              llvm::ArrayRef<Transfer> transfers) {
  const int64_t n = static_cast<int64_t>(nodeSeconds.size());
  CopySimulation out;
  out.outDoneAt.assign(transfers.size(), -1);
  out.stall.assign(transfers.size(), 0);
  // Transfers by the rank at which each event happens.
  std::vector<std::vector<size_t>> outs(n), backs(n), needs(n);
  for (size_t i = 0; i < transfers.size(); ++i) {
    const Transfer &t = transfers[i];
    outs[std::clamp<int64_t>(t.outAfter, 0, n - 1)].push_back(i);
    backs[std::clamp<int64_t>(t.backAt, 0, n - 1)].push_back(i);
    needs[std::clamp<int64_t>(t.neededAt, 0, n - 1)].push_back(i);
  }
  std::vector<double> outDone(transfers.size(), 0), backDone(transfers.size(), 0);
  std::vector<double> start(n, 0);
  double now = 0, outFree = 0, backFree = 0; // one engine each way
  for (int64_t k = 0; k < n; ++k) {
    for (size_t i : backs[k]) { // after its copy out, in issue order
      double begin = std::max({now, backFree, outDone[i]});
      backDone[i] = backFree = begin + transfers[i].seconds;
    }
    for (size_t i : needs[k])
      if (backDone[i] > now) {
        out.stall[i] += backDone[i] - now;
        out.stallSeconds += backDone[i] - now;
        now = backDone[i];
      }
    start[k] = now;
    now += nodeSeconds[k];
    for (size_t i : outs[k]) {
      double begin = std::max(now, outFree);
      outDone[i] = outFree = begin + transfers[i].seconds;
    }
  }
  // The node running when each copy out ends holds its buffer until then.
  for (size_t i = 0; i < transfers.size(); ++i) {
    int64_t k = std::lower_bound(start.begin(), start.end(), outDone[i]) - start.begin() - 1;
    out.outDoneAt[i] = std::max(k, transfers[i].outAfter);
  }
  return out;
}

int64_t prefetchPoint(llvm::ArrayRef<double> nodeSeconds, int64_t after, int64_t neededAt,
                      double seconds) {
  int64_t r = neededAt;
  double covered = 0;
  while (r > after + 1 && covered < seconds)
    covered += nodeSeconds[--r];
  return r;
}

namespace {

/// The forward nodes that make the views of `c` backward reads, in graph
/// order; false where one of them makes anything but views of `c` (then the
/// reload cannot stand in for it).
bool viewsOf(const RecomputeModel &model, const CheckpointCandidate &c,
             std::vector<const Node *> &nodes) {
  const LivenessResult &base = model.baseline();
  llvm::SmallPtrSet<const Node *, 8> seen;
  for (const Value *v : c.values) {
    if (v == c.storage)
      continue;
    const Node *def = v->definingNode();
    if (!def || !seen.insert(def).second)
      continue;
    for (const Value *out : def->outputs())
      if (base.lookup(out)->storage != c.storage)
        return false;
    nodes.push_back(def);
  }
  std::sort(nodes.begin(), nodes.end(), [&](const Node *a, const Node *b) {
    return base.rank.lookup(a) < base.rank.lookup(b);
  });
  return true;
}

/// Whether `c` may be offloaded: its reload (and views of it made again)
/// stands in for it everywhere backward reads it.
bool offloadable(const RecomputeModel &model, const CheckpointCandidate &c) {
  std::vector<const Node *> views;
  return c.bytes > 0 && c.storage->isTensor() && c.lastForwardUse < c.firstBackwardUse &&
         c.standaloneSeconds > 0 && viewsOf(model, c, views);
}

/// The ranks where offloading `c` lowers the bounded memory: its whole life
/// for the saved activations (neither it nor its reload is saved), else from
/// the end of its copy out until its copy back starts.
std::pair<int64_t, int64_t> freedRanks(const RecomputeModel &model, const CheckpointCandidate &c,
                                       const Transfer &t, int64_t outDoneAt) {
  if (model.boundedMemory() == BoundedMemory::SavedActivations)
    return freedRanksOf(model, BoundedMemory::SavedActivations, c);
  return {outDoneAt + 1, t.backAt - 1};
}

/// planOffloads' first step: which candidates may go, and their copies (the
/// same at every step). Bounding the saved activations, a reload made in
/// forward would be one: copies back start in backward at the earliest.
void eligibleTransfers(const RecomputeModel &model, double bandwidth, std::vector<bool> &eligible,
                       std::vector<Transfer> &transfers) {
  llvm::ArrayRef<double> seconds = model.seconds();
  auto candidates = model.candidates();
  const int64_t earliestBack =
      model.boundedMemory() == BoundedMemory::SavedActivations ? model.backwardStart() : 0;
  auto transferOf = [&](const CheckpointCandidate &c) {
    Transfer t;
    t.outAfter = c.lastForwardUse;
    t.neededAt = c.firstBackwardUse;
    t.seconds = static_cast<double>(c.bytes) / bandwidth;
    t.backAt = std::min(t.neededAt,
                        std::max(earliestBack, prefetchPoint(seconds, t.outAfter, t.neededAt,
                                                             t.seconds)));
    return t;
  };
  eligible.assign(candidates.size(), false);
  transfers.assign(candidates.size(), Transfer());
  for (size_t i = 0; i < candidates.size(); ++i)
    if ((eligible[i] = offloadable(model, candidates[i])))
      transfers[i] = transferOf(candidates[i]);
}

/// An offload chosen at a peak, with the copy timeline once it is added.
struct OffloadChoice {
  int32_t best = -1; ///< the candidate; -1: none is worth offloading there
  CopySimulation sim;
};

/// planOffloads' choice at the peak rank `at`: of the candidates not taken yet
/// whose copy frees the peak, the one with the most bytes per second of stall
/// (without stall, the most bytes), where the stall costs less than
/// recomputing it.
OffloadChoice chooseOffload(const RecomputeModel &model, int64_t at,
                            const std::vector<bool> &eligible,
                            const std::vector<Transfer> &transfers, const std::vector<bool> &taken,
                            std::vector<Transfer> &chosen, const CopySimulation &current) {
  llvm::ArrayRef<double> seconds = model.seconds();
  auto candidates = model.candidates();
  OffloadChoice out;
  double bestStall = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const CheckpointCandidate &c = candidates[i];
    if (taken[i] || !eligible[i])
      continue;
    const Transfer &t = transfers[i];
    // Only what the peak holds: a cheap test before simulating.
    auto [first, last] = freedRanks(model, c, t, t.outAfter);
    if (at < first || at > last)
      continue;
    chosen.push_back(t);
    CopySimulation sim = simulateCopies(seconds, chosen);
    chosen.pop_back();
    auto [simFirst, simLast] = freedRanks(model, c, t, sim.outDoneAt.back());
    if (at < simFirst || at > simLast)
      continue; // still being copied out at the peak
    double stall = sim.stallSeconds - current.stallSeconds;
    if (stall >= c.standaloneSeconds)
      continue; // recomputing it is cheaper
    // The most bytes per second of stall; without stall, the most bytes.
    bool better = out.best < 0;
    if (!better) {
      double score = c.bytes / std::max(stall, 1e-12);
      double bestScore = candidates[out.best].bytes / std::max(bestStall, 1e-12);
      better = score > bestScore || (score == bestScore && c.bytes > candidates[out.best].bytes);
    }
    if (better) {
      out.best = static_cast<int32_t>(i);
      bestStall = stall;
      out.sim = std::move(sim);
    }
  }
  return out;
}

/// planOffloads' last step: the final copy timeline, each offload's stall and
/// what is still being copied out at each rank.
void recordTimeline(const RecomputeModel &model, const CopySimulation &current,
                    OffloadPlan &plan) {
  auto candidates = model.candidates();
  plan.stallSeconds = current.stallSeconds;
  plan.inFlightBytes.assign(model.seconds().size(), 0);
  for (size_t i = 0; i < plan.offloads.size(); ++i) {
    Offload &o = plan.offloads[i];
    o.stallSeconds = current.stall[i];
    const int64_t bytes = candidates[o.candidate].bytes;
    plan.offloadedBytes += bytes;
    for (int64_t r = o.transfer.outAfter + 1; r <= current.outDoneAt[i]; ++r)
      plan.inFlightBytes[r] += bytes;
  }
}

} // namespace

OffloadPlan planOffloads(const RecomputeModel &model, int64_t budget, double bandwidth) {
  OffloadPlan plan;
  auto candidates = model.candidates();
  std::vector<bool> eligible;
  std::vector<Transfer> transfers;
  eligibleTransfers(model, bandwidth, eligible, transfers);
  PeakTracker estimate(model.boundedTimeline());
  std::vector<Transfer> chosen;
  std::vector<bool> taken(candidates.size(), false);
  CopySimulation current = simulateCopies(model.seconds(), {});
  while (estimate.peak() > budget) {
    OffloadChoice choice =
        chooseOffload(model, estimate.peakRank(), eligible, transfers, taken, chosen, current);
    const int32_t best = choice.best;
    if (best < 0)
      break; // nothing more worth offloading at this peak: recomputation's turn
    const CheckpointCandidate &c = candidates[best];
    const Transfer &t = transfers[best];
    auto [first, last] = freedRanks(model, c, t, choice.sim.outDoneAt.back());
    estimate.add(first, last, -c.bytes);
    chosen.push_back(t);
    taken[best] = true;
    plan.offloads.push_back({best, t, 0});
    current = std::move(choice.sim);
  }
  recordTimeline(model, current, plan);
  return plan;
}

absl::StatusOr<std::vector<AppliedOffload>>
applyOffloads(const RecomputeModel &model, const OffloadPlan &plan, Graph &graph) {
  std::vector<AppliedOffload> applied;
  // A node that cannot be made leaves the graph as it was: what each offload
  // made so far is recorded as it is made, and removeOffloads takes it out.
  auto undo = [&](absl::Status st) -> absl::Status {
    if (absl::Status undone = removeOffloads(applied, graph); !undone.ok())
      return undone;
    return st;
  };
  auto candidates = model.candidates();
  auto nodeAt = [&](int64_t rank) { return const_cast<Node *>(model.nodeAt(rank)); };
  for (const Offload &o : plan.offloads) {
    const CheckpointCandidate &c = candidates[o.candidate];
    Value *value = const_cast<Value *>(c.storage);
    const ValueType type = value->type();
    const std::string name = value->name().str();
    AppliedOffload &done = applied.emplace_back();
    done.value = value;
    auto out = graph.createNode(kOffloadOp, {Argument::value(value)}, {type},
                                InsertionPoint::before(nodeAt(o.transfer.outAfter + 1)),
                                {name + "_host"});
    if (!out.ok())
      return undo(out.status());
    done.out = *out;
    auto back = graph.createNode(
        kReloadOp,
        {Argument::value(done.out->output(0)), Argument::constant(Constant::ofExecutionDevice())},
        {type}, InsertionPoint::before(nodeAt(o.transfer.backAt)), {name + "_reload"});
    if (!back.ok())
      return undo(back.status());
    done.back = *back;
    auto ready = graph.createNode(kReloadWaitOp, {Argument::value(done.back->output(0))}, {type},
                                  InsertionPoint::before(nodeAt(o.transfer.neededAt)),
                                  {name + "_ready"});
    if (!ready.ok())
      return undo(ready.status());
    done.ready = *ready;
    // Backward's readers (the nodes from the first backward use on) read
    // the reloaded value, and views of it made again from it; forward's,
    // and the offload itself, the original.
    const LivenessResult &base = model.baseline();
    ValueMap<Value *> standIn;
    standIn[value] = done.ready->output(0);
    std::vector<const Node *> views;
    viewsOf(model, c, views);
    for (const Node *view : views) {
      auto made = graph.cloneNode(*view, standIn,
                                  InsertionPoint::before(nodeAt(o.transfer.neededAt)));
      if (!made.ok())
        return undo(made.status());
      done.views.push_back({*made, const_cast<Node *>(view)});
    }
    auto inBackward = [&](const Use &u) {
      return base.rank.lookup(u.user) >= o.transfer.neededAt;
    };
    value->replaceUsesWithIf(done.ready->output(0), inBackward);
    for (const Node *view : views)
      for (Value *v : view->outputs())
        v->replaceUsesWithIf(standIn.lookup(v), inBackward);
  }
  return applied;
}

absl::Status removeOffloads(llvm::ArrayRef<AppliedOffload> applied, Graph &graph) {
  for (auto it = applied.rbegin(); it != applied.rend(); ++it) {
    // The views made again first (each read only by backward and later
    // views), then the three copies; an offload cut short has fewer.
    for (auto view = it->views.rbegin(); view != it->views.rend(); ++view) {
      for (unsigned i = 0; i < view->first->numOutputs(); ++i)
        view->first->output(i)->replaceAllUsesWith(view->second->output(i));
      if (absl::Status st = graph.eraseNode(view->first); !st.ok())
        return st;
    }
    if (it->ready)
      it->ready->output(0)->replaceAllUsesWith(it->value);
    for (Node *n : {it->ready, it->back, it->out})
      if (n)
        if (absl::Status st = graph.eraseNode(n); !st.ok())
          return st;
  }
  return absl::OkStatus();
}

} // namespace graphopt
