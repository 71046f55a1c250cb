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

} // namespace graphopt
