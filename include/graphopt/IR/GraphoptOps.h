//===- GraphoptOps.h - The operators graph-opt's rewrites insert -*- C++ -*-===//
//
// ATen has no operator for what some rewrites need; these are registered
// with the dispatcher (namespace `graphopt`, torch.ops.graphopt in Python once
// graph_opt is imported) and run by the executor like any other:
//
//   graphopt::rng_state(Tensor like) -> Tensor
//     The state of the default generator of `like`'s device, packed as
//     kRngStateBytes bytes on the CPU (the state's length, an int64, then the
//     state), one shape on every device. It draws nothing. Tagged
//     nondeterministic_seeded, so no pass merges it or runs it again.
//   graphopt::native_dropout_replay(Tensor input, float p, bool? train,
//                                   Tensor rng_state) -> (Tensor, Tensor)
//     native_dropout drawn from `rng_state`: the generator is set to it, the
//     dropout runs, and the generator is set back, so the output and mask are
//     those of the call the state was taken before, bit for bit, and later
//     draws are unchanged. checkpoint recomputes a dropout whose mask it did
//     not keep this way, as torch.utils.checkpoint replays RNG states.
//   graphopt::offload(Tensor self) -> Tensor
//     A copy of `self` in pinned host memory, made on a copy stream of its own
//     after the work that made `self`; the device buffer goes back to the
//     allocator once the copy is done. checkpoint's offload (CUDA only).
//   graphopt::reload(Tensor host, Device device) -> Tensor
//     The host copy back on `device`, on the same copy stream (after its
//     offload). Work that reads it waits at graphopt::reload_wait, so the
//     copy overlaps the nodes between the two.
//   graphopt::reload_wait(Tensor(a) self) -> Tensor(a)
//     `self` itself, once its reload is done: the compute stream waits for
//     the copy.
//   Kernels: lib/Runtime/OffloadKernels.cpp. On a CPU device the three
//   refuse to run: there is no device memory to free, so an offload plan is
//   simulated there, not run.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

namespace graphopt {

/// The packed RNG state's size: an int64 length, then up to 5056 bytes (the
/// CPU generator's state; CUDA's is 16).
inline constexpr int64_t kRngStateBytes = 8 + 5056;

/// Links the registration in (every binary that reads graphs calls it).
void linkGraphoptOps();

class Node;
/// Whether `node` is graph-opt's copy to host memory (graphopt::offload):
/// its output does not count towards device memory.
bool isHostCopy(const Node &node);
/// The generator state a replayed random operator is drawn from again.
inline constexpr const char *kRngStateOp = "graphopt::rng_state";
inline constexpr const char *kOffloadOp = "graphopt::offload";
inline constexpr const char *kReloadOp = "graphopt::reload";
inline constexpr const char *kReloadWaitOp = "graphopt::reload_wait";

/// Links the offload kernels in (lib/Runtime/OffloadKernels.cpp: CUDA where
/// it is built; graphopt::reload's, whose input is a host tensor, for every
/// backend). The executor calls it; only the schemas and Meta kernels are here.
void linkOffloadKernels();

} // namespace graphopt
