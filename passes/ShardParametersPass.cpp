//===- ShardParametersPass.cpp - Parameters sharded over the ranks --------===//
#include "ShardParametersPass.h"

#include "DataParallelPass.h"
#include "TaggedNodeBuilder.h"
#include "graphopt/Alias/AliasAnalysis.h"
#include "graphopt/IR/IRMap.h"
#include "graphopt/IR/OpEffects.h"
#include "graphopt/IR/TypeInference.h"
#include "graphopt/Pass/PassRegistry.h"
#include "graphopt/Runtime/Collectives.h"
#include "graphopt/Runtime/ParameterShards.h"

#include <absl/strings/str_cat.h>
#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/STLExtras.h>
#include <llvm/ADT/SmallPtrSet.h>
#include <llvm/ADT/StringMap.h>

#include <vector>

namespace graphopt {

namespace {

/// A graph input of a storage to shard: the owner, or an input tied to it.
struct Member {
  Value *input;
  std::string target;
  int gradientOutput = -1; ///< the index of its gradient output; -1: none
  Value *shard = nullptr;
  Value *scattered = nullptr;     ///< its gradient's reduce-scatter, not waited for
  Value *gradientShard = nullptr; ///< the rank's shard of its averaged gradient
};

/// One parameter storage to shard, and what the rewrite needs to know of its uses.
struct Parameter {
  Value *whole = nullptr;  ///< the input that owns the storage
  std::string target;
  /// The owner first, then the inputs tied to it (tied weights: one storage,
  /// gathered once, each with its own gradient and shard, the shards tied).
  std::vector<Member> members;
  int64_t chunk = 0;         ///< elements per rank
  int64_t gatheredBytes = 0; ///< the all-gathered buffer: world * chunk elements
  /// Forward nodes that view the parameter (t, permute, view, ...; chains of
  /// them), in graph order: backward often reads such a view, not the
  /// parameter, and a parameter gathered again rebuilds them.
  std::vector<Node *> views;
  /// The first forward use of the parameter, the last forward use of it or a
  /// view of it (beyond the views themselves), the first backward use of either.
  Node *firstForward = nullptr, *lastForward = nullptr, *firstBackward = nullptr;
  bool keep = false;      ///< the forward gather stays alive for backward
  bool returned = false;  ///< the step returns it: its forward gather lives to the end
  Value *forwardWhole = nullptr; ///< the parameter rebuilt in forward
};

class Rewriter {
public:
  Rewriter(Graph &graph, std::string group, int64_t world)
      : g_(graph), nodes_(graph, ShardParametersPass::kAttr), group_(std::move(group)),
        world_(world) {}

  /// The parameter rebuilt from every rank's shard: the all-gather issued
  /// before `issueBefore`, its wait and the rebuild before `waitBefore`.
  absl::StatusOr<Value *> gather(const Parameter &p, Node *issueBefore, Node *waitBefore,
                                 Phase phase, const std::string &tag) {
    const TensorType &t = p.whole->tensorType();
    const ValueType buffer = ValueType::ofTensor(
        TensorType::contiguous(t.dtype, {world_ * p.chunk}, t.device));
    const std::string name = p.whole->name().str();
    auto gathered = nodes_.typed("_c10d_functional::all_gather_into_tensor",
                          {Argument::value(p.members.front().shard), Argument::constant(Constant::ofInt(world_)),
                           Argument::constant(Constant::ofString(group_))},
                          buffer, beforeOrAtEnd(g_, issueBefore, phase), tag, name + "_gathered");
    if (!gathered.ok())
      return gathered.status();
    auto ready = nodes_.typed("_c10d_functional::wait_tensor", {Argument::value(*gathered)}, buffer,
                       beforeOrAtEnd(g_, waitBefore, phase), tag, name + "_ready");
    if (!ready.ok())
      return ready.status();
    Value *flat = *ready;
    if (world_ * p.chunk != t.numel()) {
      auto cut = nodes_.inferred("aten::slice.Tensor",
                          {Argument::value(flat), Argument::constant(Constant::ofInt(0)),
                           Argument::constant(Constant::ofInt(0)),
                           Argument::constant(Constant::ofInt(t.numel())),
                           Argument::constant(Constant::ofInt(1))},
                          beforeOrAtEnd(g_, waitBefore, phase), tag, name + "_cut");
      if (!cut.ok())
        return cut.status();
      flat = *cut;
    }
    return nodes_.inferred("aten::view",
                    {Argument::value(flat), Argument::constant(Constant::ofIntList(t.sizes))},
                    beforeOrAtEnd(g_, waitBefore, phase), tag, name + "_whole");
  }

  /// The gradient reduce-scattered right after backward makes it; returns the
  /// collective's (unwaited) result.
  absl::StatusOr<Value *> reduceScatter(const Parameter &p, const Member &m, Value *gradient) {
    Node *def = gradient->definingNode();
    Node *before = nodeAfter(g_, def);
    const Phase phase = def->phase();
    const std::string tag = absl::StrCat("reduce-scatter ", m.target);
    const std::string name = gradient->name().str();
    auto flat = nodes_.inferred("aten::reshape",
                         {Argument::value(gradient), Argument::constant(Constant::ofIntList({-1}))},
                         beforeOrAtEnd(g_, before, phase), tag, name + "_flat");
    if (!flat.ok())
      return flat.status();
    Value *whole = *flat;
    if (const int64_t pad = world_ * p.chunk - gradient->tensorType().numel(); pad > 0) {
      auto padded = nodes_.inferred("aten::constant_pad_nd",
                             {Argument::value(whole), Argument::constant(Constant::ofIntList({0, pad})),
                              Argument::constant(Constant::ofInt(0))},
                             beforeOrAtEnd(g_, before, phase), tag, name + "_padded");
      if (!padded.ok())
        return padded.status();
      whole = *padded;
    }
    // Each rank's share of the mean, divided before the sum (as in
    // data-parallel): a sum of large gradients would overflow.
    if (world_ != 1) {
      auto scaled = nodes_.inferred("aten::div.Scalar",
                                    {Argument::value(whole), Argument::constant(Constant::ofInt(world_))},
                                    beforeOrAtEnd(g_, before, phase), tag, name + "_share");
      if (!scaled.ok())
        return scaled.status();
      whole = *scaled;
    }
    const TensorType &t = gradient->tensorType();
    return nodes_.typed("_c10d_functional::reduce_scatter_tensor",
                 {Argument::value(whole), Argument::constant(Constant::ofString("sum")),
                  Argument::constant(Constant::ofInt(world_)),
                  Argument::constant(Constant::ofString(group_))},
                 ValueType::ofTensor(TensorType::contiguous(t.dtype, {p.chunk}, t.device)),
                 beforeOrAtEnd(g_, before, phase), tag, name + "_scattered");
  }

  /// The wait for a reduce-scatter (of shares already divided by the world:
  /// its result is this rank's shard of the mean), before `before` (null: at
  /// the end of the step).
  absl::StatusOr<Value *> finish(const Member &m, Value *scattered, Node *before) {
    const std::string tag = absl::StrCat("reduce-scatter ", m.target);
    const Phase phase = before ? before->phase() : g_.nodes().back().phase();
    return nodes_.typed("_c10d_functional::wait_tensor", {Argument::value(scattered)},
                        scattered->type(), beforeOrAtEnd(g_, before, phase), tag,
                        m.input->name().str() + "_grad_shard");
  }

private:
  Graph &g_;
  TaggedNodeBuilder nodes_;
  std::string group_;
  int64_t world_;
};

/// The parameter's views and its first and last uses (Parameter). A view
/// here is a forward node that writes nothing and whose every tensor operand
/// is the parameter or another of its views (so its results live in the
/// parameter's storage): what backward may read instead of the parameter.
void findUses(Parameter &p, const AliasInfo &aliasInfo) {
  llvm::SmallPtrSet<const Value *, 8> aliases;
  llvm::SmallPtrSet<const Node *, 8> isView;
  std::vector<const Value *> candidates;
  for (const Member &m : p.members) {
    aliases.insert(m.input);
    for (const Value *v : aliasInfo.viewsOf(m.input))
      if (v->definingNode())
        candidates.push_back(v);
  }
  // In graph order, so that a view's operands are settled before it.
  llvm::stable_sort(candidates, [](const Value *a, const Value *b) {
    return a->definingNode()->comesBefore(b->definingNode());
  });
  for (const Value *v : candidates) {
    Node *n = v->definingNode();
    if (isView.count(n) || n->phase() != Phase::Forward || !opEffects(*n).isView())
      continue;
    bool onlyViews = true;
    for (const Value *operand : n->operandValues())
      if (operand->isTensor() && !aliases.count(operand))
        onlyViews = false;
    if (!onlyViews)
      continue;
    isView.insert(n);
    p.views.push_back(n);
    for (unsigned o = 0; o < n->numOutputs(); ++o)
      aliases.insert(n->output(o));
  }
  llvm::sort(p.views, [](const Node *a, const Node *b) { return a->comesBefore(b); });
  for (const Member &m : p.members)
    for (const Use &u : m.input->uses())
      if (u.user && u.user->phase() == Phase::Forward &&
          (!p.firstForward || u.user->comesBefore(p.firstForward)))
        p.firstForward = u.user;
  for (const Value *v : aliases)
    for (const Use &u : v->uses()) {
      Node *n = u.user;
      if (!n || isView.count(n))
        continue;
      if (n->phase() == Phase::Forward) {
        if (!p.lastForward || p.lastForward->comesBefore(n))
          p.lastForward = n;
      } else if (!p.firstBackward || n->comesBefore(p.firstBackward)) {
        p.firstBackward = n;
      }
    }
  if (!p.lastForward && !p.views.empty())
    p.lastForward = p.views.back();
}

/// Why the graph cannot be sharded as a whole, or OK.
absl::Status checkGraph(const Graph &graph) {
  for (const Node &n : graph.nodes()) {
    if (n.phase() == Phase::Optimizer)
      return absl::FailedPreconditionError(absl::StrCat(
          "the graph has an optimizer already (", n.describe(),
          "): run shard-parameters before add-optimizer, which then updates each rank's shard"));
    if (n.hasAttr(ShardParametersPass::kAttr))
      return absl::FailedPreconditionError(
          absl::StrCat("the graph's parameters are sharded already (", n.describe(), ")"));
    if (n.hasAttr(DataParallelPass::kAttr))
      return absl::FailedPreconditionError(absl::StrCat(
          "the graph is data-parallel already (", n.describe(),
          "): shard-parameters averages the gradients itself (reduce-scatter)"));
  }
  for (const GraphInput &in : graph.inputs())
    if (in.role == InputRole::OptimizerState)
      return absl::FailedPreconditionError(absl::StrCat(
          "the graph has optimizer state (input %", in.value->name().str(),
          "): run shard-parameters before add-optimizer"));
  return absl::OkStatus();
}

} // namespace

absl::Status ShardParametersPass::validateOptions() {
  if (world_.get() && *world_.get() < 1)
    return absl::InvalidArgumentError("world must be at least 1");
  if (group_.get().empty())
    return absl::InvalidArgumentError("group must name a process group");
  if (keep_.get().isPercent() ? keep_.get().percentValue() < 0 : keep_.get().byteValue() < 0)
    return absl::InvalidArgumentError("keep must not be negative");
  return absl::OkStatus();
}

namespace {

/// Why member `m` of `p` (a parameter of type `t`) cannot be sharded, or OK.
absl::Status checkMember(const Graph &graph, const Parameter &p, const Member &m,
                         const TensorType &t) {
  const GraphInput &mi = graph.inputs()[m.input->index()];
  const std::string what =
      absl::StrCat("parameter '", m.target, "' (input %", m.input->name().str(), ")");
  if (mi.role != InputRole::Parameter)
    return absl::InvalidArgumentError(absl::StrCat(
        what, " is a ", inputRoleName(mi.role).str(), " tied to parameter '", p.target,
        "': only parameters are sharded"));
  const TensorType &mt = m.input->tensorType();
  if (!m.input->isTensor() || !mt.isKnown() || !mt.isContiguous() || mt.storageOffset != 0)
    return absl::InvalidArgumentError(absl::StrCat(
        what, " is not a contiguous tensor of known type: its shards could not be put "
              "back together with a view"));
  if (mt != t)
    return absl::InvalidArgumentError(absl::StrCat(
        what, " is tied to parameter '", p.target, "' with another type: one gathered "
              "tensor cannot stand for both"));
  if (m.gradientOutput >= 0) {
    const Value *g = graph.outputs()[m.gradientOutput].value;
    const TensorType &gt = g->tensorType();
    if (!gt.isKnown() || gt.dtype != t.dtype || gt.sizes != t.sizes || gt.device != t.device)
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": its gradient %", g->name().str(), " has another type than the parameter"));
  }
  return absl::OkStatus();
}

/// What to shard: every parameter storage with a gradient (the owner and the
/// inputs tied to it together), checked and with its uses found. `whole`
/// counts the parameters left whole (no gradient).
absl::StatusOr<std::vector<Parameter>> collectParameters(const Graph &graph, int64_t world,
                                                         int64_t &whole) {
  llvm::StringMap<unsigned> gradientOf;
  for (unsigned i = 0; i < graph.outputs().size(); ++i)
    if (graph.outputs()[i].role == OutputRole::Gradient)
      gradientOf.try_emplace(graph.outputs()[i].target, i);
  const AliasInfo aliasInfo(graph);
  std::vector<Parameter> params;
  for (const GraphInput &in : graph.inputs()) {
    if (in.role != InputRole::Parameter || graph.storageOwner(in.value) != in.value)
      continue;
    Parameter p;
    p.whole = in.value;
    p.target = in.target;
    for (const GraphInput &other : graph.inputs())
      if (graph.storageOwner(other.value) == in.value) {
        Member m{other.value, other.target};
        auto grad = gradientOf.find(other.target);
        if (grad != gradientOf.end()) {
          const Value *g = graph.outputs()[grad->second].value;
          if (g->isTensor() && !g->isGraphInput())
            m.gradientOutput = static_cast<int>(grad->second);
        }
        p.members.push_back(std::move(m));
      }
    if (llvm::none_of(p.members, [](const Member &m) { return m.gradientOutput >= 0; })) {
      ++whole;
      continue;
    }
    const TensorType &t = in.value->tensorType();
    for (const Member &m : p.members)
      if (absl::Status st = checkMember(graph, p, m, t); !st.ok())
        return st;
    // A step that writes the parameter itself would write a rank's gathered
    // copy, and the write would never reach the shards.
    for (const Node &n : graph.nodes())
      for (const Value *root : aliasInfo.rootsWrittenBy(n))
        if (root->isGraphInput() && graph.storageOwner(root) == in.value)
          return absl::InvalidArgumentError(absl::StrCat(
              "parameter '", p.target, "' (input %", in.value->name().str(),
              ") is written in place by node ", n.describe(),
              ": the write would go to a rank's gathered copy, not to its shard"));
    p.chunk = shardElements(t.numel(), world);
    p.gatheredBytes = world * p.chunk * static_cast<int64_t>(c10::elementSize(t.dtype));
    findUses(p, aliasInfo);
    params.push_back(std::move(p));
  }
  return params;
}

bool isGraphOutput(const Value *v) {
  return llvm::any_of(v->uses(), [](const Use &u) { return !u.user; });
}

/// A parameter the step returns (itself, not a view: views of it are
/// rebuilt from the gathered whole already) is returned as a view of its
/// forward gather, made at the end of forward: after the rewrite the whole
/// parameter exists only gathered. The output is then a copy of the
/// parameter, no longer its storage. Returns how many parameters are.
absl::StatusOr<int64_t> returnGatheredParameters(Graph &graph, std::vector<Parameter> &params) {
  Node *endOfForward = nullptr;
  for (Node &n : graph.nodes())
    if (n.phase() != Phase::Forward) {
      endOfForward = &n;
      break;
    }
  TaggedNodeBuilder nodes(graph, ShardParametersPass::kAttr);
  std::vector<Parameter *> changed;
  for (Parameter &p : params) {
    bool returned = false;
    for (Member &m : p.members) {
      if (!isGraphOutput(m.input))
        continue;
      auto copy = nodes.inferred("aten::alias", {Argument::value(m.input)},
                                 beforeOrAtEnd(graph, endOfForward, Phase::Forward),
                                 absl::StrCat("returned whole ", m.target),
                                 m.input->name().str() + "_returned");
      if (!copy.ok())
        return copy.status();
      m.input->replaceUsesWithIf(*copy, [](const Use &u) { return !u.user; });
      returned = true;
    }
    if (returned) {
      p.returned = true;
      changed.push_back(&p);
    }
  }
  if (!changed.empty()) { // the new views change where the parameters are used
    const AliasInfo aliasInfo(graph);
    for (Parameter *p : changed) {
      p->views.clear();
      p->firstForward = p->lastForward = p->firstBackward = nullptr;
      findUses(*p, aliasInfo);
    }
  }
  return static_cast<int64_t>(changed.size());
}

/// Which gathers stay alive for backward: a returned parameter's (alive to
/// the end anyway, not counted), then the shortest waits first, up to `keep`
/// of the bytes that could stay. Returns the bytes kept.
int64_t chooseKept(const Graph &graph, std::vector<Parameter> &params, const MemoryAmount &keep) {
  llvm::DenseMap<const Node *, int64_t> position;
  for (const Node &n : graph.nodes())
    position[&n] = static_cast<int64_t>(position.size());
  std::vector<Parameter *> candidates;
  int64_t candidateBytes = 0;
  for (Parameter &p : params)
    if (p.firstForward && p.firstBackward && p.returned)
      p.keep = true; // alive to the end anyway: backward reads it at no cost
    else if (p.firstForward && p.firstBackward) {
      candidates.push_back(&p);
      candidateBytes += p.gatheredBytes;
    }
  llvm::stable_sort(candidates, [&](const Parameter *a, const Parameter *b) {
    return position[a->firstBackward] - position[a->lastForward] <
           position[b->firstBackward] - position[b->lastForward];
  });
  const int64_t keepBytes = keep.resolve(candidateBytes);
  int64_t kept = 0;
  for (Parameter *p : candidates)
    if (kept + p->gatheredBytes <= keepBytes) {
      p->keep = true;
      kept += p->gatheredBytes;
    }
  return kept;
}

/// The shards: new inputs, named for the whole parameters; a tied
/// parameter's shard is tied to its owner's (one storage).
absl::Status addShardInputs(Graph &graph, std::vector<Parameter> &params,
                            const std::string &group) {
  for (Parameter &p : params) {
    const TensorType &t = p.whole->tensorType();
    const ValueType type =
        ValueType::ofTensor(TensorType::contiguous(t.dtype, {p.chunk}, t.device));
    for (Member &m : p.members) {
      m.shard = graph.addInput(m.input->name().str() + "_shard", type, InputRole::Parameter,
                               shardTarget(m.target, group));
      if (&m != &p.members.front())
        if (absl::Status st = graph.tieInput(m.shard->index(), p.members.front().shard); !st.ok())
          return absl::InternalError(absl::StrCat("tying the shard of '", m.target, "': ",
                                                  st.message()));
    }
  }
  return absl::OkStatus();
}

/// Where the whole parameters come back: all-gathers in forward and, for the
/// parameters not kept, again in backward.
class GatherPlacer {
public:
  GatherPlacer(Graph &graph, Rewriter &rewriter) : graph_(graph), rewriter_(rewriter) {}

  absl::Status placeAll(std::vector<Parameter> &params) {
    std::vector<Parameter *> forward, backward;
    for (Parameter &p : params) {
      if (p.firstForward)
        forward.push_back(&p);
      // A kept parameter is gathered once, in forward; one that forward
      // never reads is gathered in backward, kept or not.
      if (p.firstBackward && (!p.keep || !p.firstForward))
        backward.push_back(&p);
    }
    if (absl::Status st = gatherAll(forward, Phase::Forward,
                                    [](const Parameter &p) { return p.firstForward; }, "gather");
        !st.ok())
      return st;
    for (Parameter &p : params)
      if (p.keep && p.forwardWhole)
        for (Member &m : p.members)
          m.input->replaceAllUsesWith(p.forwardWhole);
    return gatherAll(backward, Phase::Backward,
                     [](const Parameter &p) { return p.firstBackward; }, "gather again");
  }
  int64_t gathers() const { return gathers_; }

private:
  /// Backward reads of the parameter's forward views (t, permute, ...) read
  /// the same views of the parameter gathered again, made before `before`.
  absl::Status rebuildViews(const Parameter &p, Value *again, Node *before) {
    if (!p.forwardWhole) // forward never read it: it has no forward views
      return absl::OkStatus();
    llvm::SmallPtrSet<const Node *, 8> needed;
    for (auto it = p.views.rbegin(); it != p.views.rend(); ++it)
      for (unsigned o = 0; o < (*it)->numOutputs(); ++o)
        for (const Use &u : (*it)->output(o)->uses())
          if (u.user && (u.user->phase() != Phase::Forward || needed.count(u.user)))
            needed.insert(*it);
    ValueMap<Value *> map(graph_, nullptr);
    map[p.forwardWhole] = again;
    for (Node *n : p.views) {
      if (!needed.count(n))
        continue;
      auto clone = graph_.cloneNode(*n, map, InsertionPoint::before(before, Phase::Backward));
      if (!clone.ok())
        return clone.status();
      (*clone)->setAttr(ShardParametersPass::kAttr,
                        Constant::ofString(absl::StrCat("gather again ", p.target)));
      for (unsigned o = 0; o < n->numOutputs(); ++o)
        n->output(o)->replaceUsesWithIf((*clone)->output(o), [&](const Use &u) {
          return u.user && u.user->phase() != Phase::Forward && u.user != *clone;
        });
    }
    return absl::OkStatus();
  }

  /// One phase's gathers, in the order of first use; each issued before the
  /// previous parameter's first use, so that it moves while that one is used.
  absl::Status gatherAll(std::vector<Parameter *> order, Phase phase,
                         llvm::function_ref<Node *(const Parameter &)> firstUse,
                         const char *what) {
    llvm::stable_sort(order, [&](const Parameter *a, const Parameter *b) {
      return firstUse(*a)->comesBefore(firstUse(*b));
    });
    Node *previousUse = nullptr;
    for (Parameter *p : order) {
      Node *use = firstUse(*p);
      auto whole = rewriter_.gather(*p, previousUse ? previousUse : use, use, phase,
                                    absl::StrCat(what, " ", p->target));
      if (!whole.ok())
        return whole.status();
      const bool forward = phase == Phase::Forward;
      for (Member &m : p->members)
        m.input->replaceUsesWithIf(*whole, [&](const Use &u) {
          return u.user && u.user != (*whole)->definingNode() &&
                 (u.user->phase() == Phase::Forward) == forward;
        });
      if (forward)
        p->forwardWhole = *whole;
      else if (absl::Status st = rebuildViews(*p, *whole, use); !st.ok())
        return st;
      previousUse = use;
      ++gathers_;
    }
    return absl::OkStatus();
  }

  Graph &graph_;
  Rewriter &rewriter_;
  int64_t gathers_ = 0;
};

/// Gradients: reduce-scattered as backward makes them. The backend holds a
/// reduce-scatter's input (the whole gradient) until its wait, so each is
/// waited for once the next one is issued: two whole gradients in flight at
/// most, as FSDP's post-backward does, and the last at the end. Returns the
/// members whose gradients were scattered, in the order they are.
absl::StatusOr<std::vector<Member *>> scatterGradients(Graph &graph, Rewriter &rewriter,
                                                       std::vector<Parameter> &params) {
  std::vector<Member *> scattered;
  for (Parameter &p : params)
    for (Member &m : p.members) {
      if (m.gradientOutput < 0)
        continue;
      auto s = rewriter.reduceScatter(p, m, graph.outputs()[m.gradientOutput].value);
      if (!s.ok())
        return s.status();
      m.scattered = *s;
      scattered.push_back(&m);
    }
  llvm::stable_sort(scattered, [](const Member *a, const Member *b) {
    return a->scattered->definingNode()->comesBefore(b->scattered->definingNode());
  });
  for (size_t k = 0; k < scattered.size(); ++k) {
    Node *before = k + 1 < scattered.size()
                       ? nodeAfter(graph, scattered[k + 1]->scattered->definingNode())
                       : nullptr;
    auto shard = rewriter.finish(*scattered[k], scattered[k]->scattered, before);
    if (!shard.ok())
      return shard.status();
    scattered[k]->gradientShard = *shard;
  }
  return scattered;
}

/// The outputs, in their order, the sharded gradients under the shards'
/// targets; then the whole parameters are no input any more.
absl::Status replaceWholeParameters(Graph &graph, const std::vector<Parameter> &params,
                                    llvm::ArrayRef<Member *> scattered, const std::string &group) {
  std::vector<GraphOutput> outputs(graph.outputs().begin(), graph.outputs().end());
  for (const Member *m : scattered) {
    outputs[m->gradientOutput].value = m->gradientShard;
    outputs[m->gradientOutput].target = shardTarget(m->target, group);
  }
  for (unsigned i = outputs.size(); i-- > 0;)
    graph.eraseOutput(i);
  for (GraphOutput &o : outputs)
    graph.addOutput(o.value, o.role, std::move(o.target));
  std::vector<unsigned> erase;
  for (const Parameter &p : params)
    for (const Member &m : p.members)
      erase.push_back(m.input->index());
  llvm::sort(erase, std::greater<unsigned>());
  for (unsigned i : erase)
    if (absl::Status st = graph.eraseInput(i); !st.ok())
      return absl::InternalError(absl::StrCat("removing the whole parameter: ", st.message()));
  return absl::OkStatus();
}

} // namespace

absl::StatusOr<bool> ShardParametersPass::transform(Graph &graph, AnalysisManager &) {
  if (absl::Status st = checkGraph(graph); !st.ok())
    return st;
  auto worldOrError = worldSize(world_.get(), group_.get());
  if (!worldOrError.ok())
    return worldOrError.status();
  const int64_t world = *worldOrError;

  int64_t whole = 0;
  auto collected = collectParameters(graph, world, whole);
  if (!collected.ok())
    return collected.status();
  std::vector<Parameter> &params = *collected;
  if (whole)
    addStatistic("parameters left whole (no gradient)", whole);
  for (const Parameter &p : params)
    if (p.members.size() > 1)
      addStatistic("tied parameters sharded with their owner",
                   static_cast<int64_t>(p.members.size() - 1));
  if (params.empty())
    return false;

  auto returned = returnGatheredParameters(graph, params);
  if (!returned.ok())
    return returned.status();
  if (*returned)
    addStatistic("parameters returned as a gathered copy", *returned);
  const int64_t kept = chooseKept(graph, params, keep_.get());
  if (absl::Status st = addShardInputs(graph, params, group_.get()); !st.ok())
    return st;
  Rewriter rewriter(graph, group_.get(), world);
  GatherPlacer gathers(graph, rewriter);
  if (absl::Status st = gathers.placeAll(params); !st.ok())
    return st;
  if (gathers.gathers())
    addStatistic("all-gathers", gathers.gathers());
  auto scattered = scatterGradients(graph, rewriter, params);
  if (!scattered.ok())
    return scattered.status();
  if (absl::Status st = replaceWholeParameters(graph, params, *scattered, group_.get()); !st.ok())
    return st;

  int64_t perRank = 0;
  for (const Parameter &p : params)
    perRank += p.gatheredBytes / world;
  addStatistic("parameters sharded", static_cast<int64_t>(params.size()));
  addStatistic("parameter bytes per rank", perRank);
  addStatistic("parameters kept gathered for backward",
               static_cast<int64_t>(llvm::count_if(params, [](const Parameter &p) { return p.keep; })));
  addStatistic("bytes kept gathered for backward", kept);
  return true;
}

GRAPHOPT_REGISTER_PASS(ShardParametersPass);

} // namespace graphopt
