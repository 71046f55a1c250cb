//===- CheckpointTestGraphs.h - What checkpoint's unit tests share -*- C++ -*-===//
#pragma once

#include "checkpoint/FlopCost.h"
#include "checkpoint/RecomputeModel.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace graphopt::test {

/// The model of `graph` with FLOP-estimated node times and no scratch.
inline RecomputeModel modelOf(const Graph &graph,
                              BoundedMemory bounded = BoundedMemory::PeakAboveInputs,
                              bool replayRngStates = true) {
  auto m = RecomputeModel::build(graph, estimatedNodeSeconds(graph), {}, bounded, replayRngStates);
  EXPECT_TRUE(m.ok()) << m.status().message();
  return std::move(*m);
}

/// The clones of a recomputation as "original@name-of-the-node-before".
inline std::vector<std::string> clonesOf(const RecomputeModel &model, const RecomputeSet &set) {
  std::vector<std::string> out;
  for (const RecomputeSet::Clone &c : set.clones)
    out.push_back(c.original->output(0)->name().str() + "@" +
                  model.nodeAt(c.before)->output(0)->name().str());
  return out;
}

// @chain (test/Checkpoint/chains.test): %a = exp(%xw) and %b = sin(%a) are
// saved for backward, %xw is not; %big makes the peak while both are kept.
// Ranks: 0 xw, 1 a, 2 b, 3 bb, 4 loss | 5 g, 6 ge, 7 big, 8 s, 9 gbb, 10 gb1,
// 11 gb, 12 ca, 13 ga, 14 gxw, 15 gxx, 16 gw. Inputs 1028 bytes; the peak is
// 11280 at %s, 10252 above the inputs.
inline const char *kChain = R"(graph @chain {
  input %w : f32[] parameter "w"
  input %x : f32[256] user_input
forward:
  %xw = aten::mul.Tensor(%x, %w) : f32[256]
  %a = aten::exp(%xw) : f32[256]
  %b = aten::sin(%a) : f32[256]
  %bb = aten::mul.Tensor(%b, %b) : f32[256]
  %loss = aten::sum(%bb) : f32[]
backward:
  %g = aten::ones_like(%loss) : f32[]
  %ge = aten::expand(%g, [256]) : f32[256]{strides=[0]}
  %big = aten::repeat(%ge, [8]) : f32[2048]
  %s = aten::sum(%big) : f32[]
  %gbb = aten::mul.Tensor(%ge, %s) : f32[256]
  %gb1 = aten::mul.Tensor(%gbb, %b) : f32[256]
  %gb = aten::mul.Scalar(%gb1, 2) : f32[256]
  %ca = aten::cos(%a) : f32[256]
  %ga = aten::mul.Tensor(%gb, %ca) : f32[256]
  %gxw = aten::mul.Tensor(%ga, %a) : f32[256]
  %gxx = aten::mul.Tensor(%gxw, %x) : f32[256]
  %gw = aten::sum(%gxx) : f32[]
  output %loss loss
  output %gw gradient "w"
})";

} // namespace graphopt::test
