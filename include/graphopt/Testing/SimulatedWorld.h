//===- SimulatedWorld.h - Ranks of a process group as threads -*- C++ -*-===//
//
// The pass fuzzer checks data-parallel and shard-parameters on a world of
// ranks simulated in one process (docs/Robustness.md): each rank is a thread
// with its own process group, registered under the group's name in that
// thread only (c10d's thread isolation mode), whose collectives hand tensors
// to each other in memory: all_reduce (sum), all_gather_into_tensor and
// reduce_scatter_tensor (sum), what the two passes emit.
//
// The ranks run one at a time: a rank holds the world's baton while it runs
// and hands it on only while it waits for a collective, with the CPU
// generator's state saved and restored at each hand-over. So every rank draws
// the random numbers it would draw alone, whatever the interleaving, and a
// rank's results do not depend on how the threads were scheduled.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <ATen/core/Tensor.h>
#include <absl/status/status.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace graphopt::testing {

class SimulatedWorld {
public:
  /// A world of `size` ranks whose process group is named `group`.
  explicit SimulatedWorld(int size, std::string group = "0");
  ~SimulatedWorld();

  /// Runs `body(rank)` on every rank, each in its own thread with the group
  /// registered (the same threads from run to run), and returns each rank's
  /// status. One run at a time. A rank that waits for a
  /// collective a peer never reaches (the peer returned first) gets an error
  /// naming the collective, not a hang.
  std::vector<absl::Status> run(const std::function<absl::Status(int rank)> &body);

  int size() const;

  struct State; ///< the ranks' shared state (SimulatedWorld.cpp)

private:
  struct Threads;
  void serve(int rank);

  std::shared_ptr<State> state_;
  std::unique_ptr<Threads> threads_;
};

} // namespace graphopt::testing

namespace graphopt {
class Graph;
}

namespace graphopt::testing {

/// The data-parallel property with each rank on its own inputs (stand-ins
/// drawn from `seed` + 1 + the rank), run on rank `rank` of a world of `world`
/// ranks (inside SimulatedWorld::run): every gradient output of `rewritten`
/// is the mean over the ranks of `original`'s gradient on each rank's inputs
/// (this rank's shard of it where shard-parameters sharded the parameter),
/// every other output `original`'s on this rank's inputs, within
/// torch.testing's tolerances. "" when it holds, else what differs. With
/// the same inputs on every rank (as the verifier runs them) a rewrite that
/// never reduced across ranks would pass; here it cannot.
std::string checkAcrossRanks(const Graph &original, const Graph &rewritten, uint64_t seed,
                             int rank, int world);

/// What checkAcrossRanks compares with: `original` (which has no collectives)
/// on each rank's stand-in inputs. It is the same for every rank and every
/// rewrite of `original`, so a caller checking several (the pass fuzzer's
/// pipelines, on every rank) makes it once, outside the world.
struct AcrossRanksReference {
  /// Per rank: the original's outputs on its inputs (none when the step does
  /// not run on them: see `unrunnable`).
  std::vector<std::vector<at::Tensor>> outputs;
  /// Why the stand-in weights or inputs could not be made ("" when they were).
  std::string error;
  /// Why the original does not run on a rank's inputs ("" when it does): then
  /// there is nothing to compare, and the case is unrunnable, not a success
  /// (checkAcrossRanks says so).
  std::string unrunnable;
};
AcrossRanksReference referenceAcrossRanks(const Graph &original, uint64_t seed, int world);

/// checkAcrossRanks against a reference made by referenceAcrossRanks for the
/// same `original`, `seed` and `world`.
std::string checkAcrossRanks(const Graph &original, const Graph &rewritten, uint64_t seed,
                             int rank, int world, const AcrossRanksReference &reference);

} // namespace graphopt::testing
