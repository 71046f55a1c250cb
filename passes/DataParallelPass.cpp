//===- DataParallelPass.cpp - A training step made data-parallel ----------===//
#include "DataParallelPass.h"

#include "ShardParametersPass.h"
#include "TaggedNodeBuilder.h"

#include "graphopt/Alias/AliasAnalysis.h"
#include "graphopt/IR/TypeInference.h"
#include "graphopt/Pass/PassRegistry.h"
#include "graphopt/Runtime/Collectives.h"

#include <absl/strings/str_cat.h>
#include <llvm/ADT/DenseSet.h>
#include <llvm/ADT/STLExtras.h>

#include <vector>

namespace graphopt {

namespace {

/// One gradient value (a value may be the gradient output of several tied parameters).
struct Gradient {
  Value *value;
  int64_t bytes;
};

struct Bucket {
  std::vector<Gradient> gradients; ///< in the order backward makes them
  int64_t bytes = 0;
};

/// True for a use the averaged gradient replaces: a gradient output, or a
/// node of the optimizer phase.
bool readsAveraged(const Graph &graph, const Use &use) {
  if (!use.user)
    return graph.outputs()[use.argIndex].role == OutputRole::Gradient;
  return use.user->phase() == Phase::Optimizer;
}

class Rewriter {
public:
  Rewriter(Graph &graph, std::string group, int64_t world)
      : g_(graph), nodes_(graph, DataParallelPass::kAttr), group_(std::move(group)),
        world_(world) {}

  absl::Status rewrite(const Bucket &bucket, unsigned number) {
    const std::string tag = absl::StrCat("bucket ", number);
    // Issued right after the bucket's last gradient is made.
    Node *last = nullptr;
    for (const Gradient &gr : bucket.gradients)
      if (Node *def = gr.value->definingNode(); !last || last->comesBefore(def))
        last = def;
    Node *issueBefore = nodeAfter(g_, last);
    const Phase issuePhase = last->phase();
    auto at = [&](Node *before, Phase phase) { return beforeOrAtEnd(g_, before, phase); };
    std::vector<Value *> flats;
    for (const Gradient &gr : bucket.gradients) {
      auto flat = nodes_.inferred("aten::reshape", {Argument::value(gr.value), Argument::constant(Constant::ofIntList({-1}))},
                       at(issueBefore, issuePhase), tag, "dp_flat");
      if (!flat.ok())
        return flat.status();
      flats.push_back(*flat);
    }
    auto buffer = nodes_.inferred("aten::cat", {Argument::list(flats), Argument::constant(Constant::ofInt(0))},
                       at(issueBefore, issuePhase), tag, "dp_bucket");
    if (!buffer.ok())
      return buffer.status();
    const ValueType bufferType = (*buffer)->type();
    // Each rank's share of the mean, divided before the sum as DDP does: a
    // sum of large gradients would overflow where their mean does not (two
    // float gradients of 2e38 sum to inf). For two ranks it is exact but in
    // float's subnormal range, where halving drops a last bit.
    Value *shares = *buffer;
    if (world_ != 1) {
      auto scaled = nodes_.inferred("aten::div.Scalar",
                                    {Argument::value(*buffer), Argument::constant(Constant::ofInt(world_))},
                                    at(issueBefore, issuePhase), tag, "dp_share");
      if (!scaled.ok())
        return scaled.status();
      shares = *scaled;
    }
    auto sum = nodes_.typed("_c10d_functional::all_reduce",
                         {Argument::value(shares), Argument::constant(Constant::ofString("sum")),
                          Argument::constant(Constant::ofString(group_))},
                         bufferType, at(issueBefore, issuePhase), tag, "dp_sum");
    if (!sum.ok())
      return sum.status();
    // The shares above divide by world_: the executor checks the group's size against it.
    (*sum)->definingNode()->setAttr(kWorldSizeAttr, Constant::ofInt(world_));

    // Waited for before the first optimizer node that reads one of them.
    Node *waitBefore = nullptr;
    for (const Gradient &gr : bucket.gradients)
      for (const Use &u : gr.value->uses())
        if (u.user && u.user->phase() == Phase::Optimizer &&
            (!waitBefore || u.user->comesBefore(waitBefore)))
          waitBefore = u.user;
    const Phase waitPhase = waitBefore ? Phase::Optimizer : g_.nodes().back().phase();
    auto waited = nodes_.typed("_c10d_functional::wait_tensor", {Argument::value(*sum)}, bufferType,
                            at(waitBefore, waitPhase), tag, "dp_waited");
    if (!waited.ok())
      return waited.status();
    Value *total = *waited;
    std::vector<int64_t> sizes;
    for (const Gradient &gr : bucket.gradients)
      sizes.push_back(gr.value->tensorType().numel());
    auto pieces = nodes_.node("aten::split_with_sizes_copy",
                              {Argument::value(total), Argument::constant(Constant::ofIntList(sizes)),
                               Argument::constant(Constant::ofInt(0))},
                              std::vector<ValueType>(sizes.size(), ValueType::unknownTensor()),
                              at(waitBefore, waitPhase), tag, "dp_piece", /*infer=*/true);
    if (!pieces.ok())
      return pieces.status();
    for (size_t i = 0; i < bucket.gradients.size(); ++i) {
      Value *local = bucket.gradients[i].value;
      auto averaged = nodes_.inferred("aten::view",
                           {Argument::value((*pieces)->output(i)),
                            Argument::constant(Constant::ofIntList(local->tensorType().sizes))},
                           at(waitBefore, waitPhase), tag, absl::StrCat(local->name().str(), "_avg"));
      if (!averaged.ok())
        return averaged.status();
      local->replaceUsesWithIf(*averaged, [&](const Use &u) { return readsAveraged(g_, u); });
    }
    return absl::OkStatus();
  }

private:
  Graph &g_;
  TaggedNodeBuilder nodes_;
  std::string group_;
  int64_t world_;
};

/// What the rewrite assumes of the gradients' storage, asked of AliasInfo: each
/// gradient is averaged into a fresh tensor and its readers in the optimizer
/// and the graph outputs redirected to it, so a gradient must not live in a
/// graph input's storage, share storage with another gradient output, or be
/// read by the optimizer through a view (that reader would keep the local,
/// unaveraged gradient).
absl::Status checkGradientStorage(const Graph &graph, llvm::ArrayRef<Gradient> gradients) {
  AliasInfo aliases(graph);
  auto named = [&](const Value *v) {
    for (const GraphOutput &out : graph.outputs())
      if (out.value == v && out.role == OutputRole::Gradient)
        return absl::StrCat("gradient %", v->name().str(), " of '", out.target, "'");
    return absl::StrCat("%", v->name().str());
  };
  for (size_t i = 0; i < gradients.size(); ++i) {
    const Value *g = gradients[i].value;
    if (aliases.isRootedInGraphInput(g))
      return absl::FailedPreconditionError(absl::StrCat(
          "data-parallel: ", named(g), " lives in a graph input's storage; averaging it over "
          "the ranks would leave that input as it is"));
    for (size_t j = i + 1; j < gradients.size(); ++j)
      if (aliases.mayShareStorage(g, gradients[j].value))
        return absl::FailedPreconditionError(absl::StrCat(
            "data-parallel: ", named(g), " and ", named(gradients[j].value),
            " share storage; each would be averaged on its own and the outputs no longer alias"));
    for (const Value *view : aliases.viewsOf(g)) {
      if (view == g)
        continue;
      for (const Use &u : view->uses())
        if (u.user && u.user->phase() == Phase::Optimizer)
          return absl::FailedPreconditionError(absl::StrCat(
              "data-parallel: the optimizer reads ", named(g), " through the view %",
              view->name().str(), " (", u.user->describe(),
              "), which would keep the local, unaveraged gradient"));
    }
  }
  return absl::OkStatus();
}

} // namespace

absl::Status DataParallelPass::validateOptions() {
  if (bucket_.get().isPercent() || bucket_.get().byteValue() <= 0)
    return absl::InvalidArgumentError("bucket must be a positive number of bytes (e.g. 25MiB)");
  if (world_.get() && *world_.get() < 1)
    return absl::InvalidArgumentError("world must be at least 1");
  if (group_.get().empty())
    return absl::InvalidArgumentError("group must name a process group");
  return absl::OkStatus();
}

absl::StatusOr<bool> DataParallelPass::transform(Graph &graph, AnalysisManager &) {
  for (const Node &n : graph.nodes())
    if (n.hasAttr(kAttr) || n.hasAttr(ShardParametersPass::kAttr))
      return absl::FailedPreconditionError(absl::StrCat(
          n.hasAttr(kAttr) ? "the graph is data-parallel already (" : "the graph's parameters are sharded (",
          n.describe(), "): its gradients are averaged over the ranks already"));
  auto worldOrError = worldSize(world_.get(), group_.get());
  if (!worldOrError.ok())
    return worldOrError.status();
  const int64_t world = *worldOrError;

  // The gradients, each value once, in the order backward makes them.
  std::vector<Gradient> gradients;
  llvm::DenseSet<const Value *> seen;
  for (const GraphOutput &out : graph.outputs()) {
    if (out.role != OutputRole::Gradient || !seen.insert(out.value).second)
      continue;
    const Value *v = out.value;
    if (!v->isTensor() || !v->tensorType().isKnown())
      return absl::InvalidArgumentError(absl::StrCat("gradient output %", v->name().str(), " of '",
                                                     out.target, "' has no known tensor type"));
    if (v->isGraphInput()) {
      addStatistic("gradients that are graph inputs (left alone)");
      continue;
    }
    // What the collective moves: every element once, whatever the layout.
    gradients.push_back({out.value, v->tensorType().numel() *
                                        static_cast<int64_t>(c10::elementSize(v->tensorType().dtype))});
  }
  if (gradients.empty())
    return false;
  if (absl::Status st = checkGradientStorage(graph, gradients); !st.ok())
    return st;
  llvm::stable_sort(gradients, [](const Gradient &a, const Gradient &b) {
    return a.value->definingNode()->comesBefore(b.value->definingNode());
  });

  // Buckets: one open per dtype and device, closed at `bucket` bytes.
  const int64_t cap = bucket_.get().byteValue();
  std::vector<Bucket> buckets;
  std::vector<std::pair<std::pair<c10::ScalarType, std::string>, size_t>> open;
  for (const Gradient &gr : gradients) {
    const TensorType &t = gr.value->tensorType();
    std::pair<c10::ScalarType, std::string> key{t.dtype, t.device.str()};
    auto it = llvm::find_if(open, [&](const auto &o) { return o.first == key; });
    if (it == open.end()) {
      buckets.emplace_back();
      open.push_back({key, buckets.size() - 1});
      it = std::prev(open.end());
    }
    Bucket &b = buckets[it->second];
    b.gradients.push_back(gr);
    b.bytes += gr.bytes;
    if (b.bytes >= cap)
      open.erase(it);
  }
  // Issued in the order their last gradients are made.
  Rewriter rewriter(graph, group_.get(), world);
  unsigned number = 0;
  for (const Bucket &b : buckets) {
    if (absl::Status st = rewriter.rewrite(b, number++); !st.ok())
      return st;
    addStatistic("gradient bytes all-reduced", b.bytes);
  }
  addStatistic("buckets", static_cast<int64_t>(buckets.size()));
  addStatistic("gradients averaged", static_cast<int64_t>(gradients.size()));
  return true;
}

GRAPHOPT_REGISTER_PASS(DataParallelPass);

} // namespace graphopt
