//===- AcrossRanks.cpp - Data-parallel results, each rank on its own inputs -===//
#include "graphopt/Import/Importer.h"
#include "graphopt/IR/Graph.h"
#include "graphopt/Runtime/Executor.h"
#include "graphopt/Runtime/OutputVerifier.h"
#include "graphopt/Runtime/ParameterShards.h"
#include "graphopt/Testing/SimulatedWorld.h"

#include <ATen/ops/allclose.h>
#include <ATen/ops/equal.h>
#include <absl/strings/str_cat.h>

#include <map>

namespace graphopt::testing {

namespace {

std::string describe(const GraphOutput &out) {
  return out.target.empty() ? absl::StrCat("output %", out.value->name().str())
                            : absl::StrCat("output %", out.value->name().str(), " ('",
                                           out.target, "')");
}

} // namespace

AcrossRanksReference referenceAcrossRanks(const Graph &original, uint64_t seed, int world) {
  AcrossRanksReference reference;
  WeightStore weights;
  if (auto filled = fillMissingWeights(original, weights, seed); !filled.ok()) {
    reference.error = absl::StrCat("stand-in weights: ", filled.status().message());
    return reference;
  }
  for (int r = 0; r < world; ++r) {
    auto made = makeExampleInputs(original, seed + 1 + r);
    if (!made.ok()) {
      reference.error = absl::StrCat("stand-in inputs: ", made.status().message());
      return reference;
    }
    auto ran = Executor(original, weights).run(*made);
    // A step PyTorch does not run on these inputs tests nothing here.
    if (!ran.ok()) {
      reference.outputs.clear();
      reference.unrunnable = absl::StrCat("the original graph does not run on rank ", r,
                                          "'s inputs: ", ran.status().message());
      return reference;
    }
    reference.outputs.push_back(std::move(ran->outputs));
  }
  return reference;
}

std::string checkAcrossRanks(const Graph &original, const Graph &rewritten, uint64_t seed,
                             int rank, int world) {
  return checkAcrossRanks(original, rewritten, seed, rank, world,
                          referenceAcrossRanks(original, seed, world));
}

std::string checkAcrossRanks(const Graph &original, const Graph &rewritten, uint64_t seed,
                             int rank, int world, const AcrossRanksReference &ref) {
  if (!ref.error.empty())
    return ref.error;
  if (!ref.unrunnable.empty())
    return absl::StrCat("nothing compared: ", ref.unrunnable);
  if (ref.outputs.size() != static_cast<size_t>(world))
    return absl::StrCat("the reference has ", ref.outputs.size(), " ranks' outputs for a world of ",
                        world);
  WeightStore weights;
  if (auto filled = fillMissingWeights(original, weights, seed); !filled.ok())
    return absl::StrCat("stand-in weights: ", filled.status().message());
  // This rank's own copy of its inputs (the same draw): a run writes the
  // inputs it writes in place before restoring them, and the other ranks'
  // threads read the reference's.
  auto inputs = makeExampleInputs(original, seed + 1 + rank);
  if (!inputs.ok())
    return absl::StrCat("stand-in inputs: ", inputs.status().message());
  const std::vector<std::vector<at::Tensor>> &reference = ref.outputs;
  auto got = Executor(rewritten, weights).run(*inputs);
  if (!got.ok())
    return absl::StrCat("rank ", rank, " on its own inputs: the rewritten graph could not run: ",
                        got.status().message());
  const std::map<std::string, unsigned> before = outputKeys(original);
  for (const auto &[label, i] : outputKeys(rewritten)) {
    const GraphOutput &out = rewritten.outputs()[i];
    auto it = before.find(label);
    if (it == before.end())
      return absl::StrCat(describe(out), " has no counterpart in the original graph");
    at::Tensor want = reference[rank][it->second];
    if (out.role == OutputRole::Gradient && want.defined()) {
      // The mean in double, rounded once: in the gradient's own dtype the sum
      // of large gradients overflows where their mean does not.
      const at::Tensor &first = reference[0][it->second];
      const bool wide = first.is_floating_point() || first.is_complex();
      const at::ScalarType wideType = first.is_complex() ? at::kComplexDouble : at::kDouble;
      at::Tensor sum = first.to(wide ? wideType : first.scalar_type(), /*non_blocking=*/false,
                                /*copy=*/true);
      for (int r = 1; r < world; ++r)
        sum.add_(wide ? reference[r][it->second].to(wideType) : reference[r][it->second]);
      want = sum.div_(world).to(first.scalar_type());
      if (parseShardTarget(out.target))
        want = shardOf(want, world, rank);
    }
    const at::Tensor &have = got->outputs[i];
    if (!want.defined() || !have.defined()) {
      if (want.defined() != have.defined())
        return absl::StrCat(describe(out), ": one side has no tensor");
      continue;
    }
    if (have.sizes() != want.sizes() || have.scalar_type() != want.scalar_type())
      return absl::StrCat(describe(out), ": shape or dtype differs from the expected");
    if (!at::isFloatingType(want.scalar_type()) && !at::isComplexType(want.scalar_type())) {
      if (!at::equal(have, want))
        return absl::StrCat(describe(out), " on rank ", rank, " differs from the expected");
      continue;
    }
    Tolerance tol = defaultTolerance(want.scalar_type());
    if (!at::allclose(have, want, tol.rtol, tol.atol, /*equal_nan=*/true))
      return absl::StrCat(
          describe(out), " on rank ", rank, " of ", world, ", each rank on its own inputs, ",
          out.role == OutputRole::Gradient ? "is not the mean of the ranks' gradients"
                                           : "differs from the original's on the rank's inputs",
          ": max difference ",
          have.to(at::kDouble).sub(want.to(at::kDouble)).abs().nan_to_num(0).max().item<double>());
  }
  return "";
}

} // namespace graphopt::testing
