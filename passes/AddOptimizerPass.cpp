//===- AddOptimizerPass.cpp - The optimizer update inside the graph -------===//
//
// The update is the one torch.optim's fused path makes (torch/optim/adam.py
// `_fused_adam` with decoupled weight decay, torch/optim/sgd.py `_fused_sgd`),
// with the same grouping of tensors by dtype and device
// (`_group_tensors_by_device_and_dtype`). Both fused operators have CPU
// kernels on torch 2.11 (aten/src/ATen/native/FusedAdam.cpp, FusedSGD.cpp),
// so no `_foreach_*` fallback is needed.
//
// Everything is checked before the graph is touched; the edits are then
// recorded and undone if a later one fails, so a failing pass leaves the
// graph as it was.
//
//===----------------------------------------------------------------------===//
#include "AddOptimizerPass.h"

#include "graphopt/IR/IRMap.h"
#include "graphopt/Alias/AliasAnalysis.h"
#include "graphopt/IR/OpEffects.h"
#include "graphopt/IR/SchemaUtils.h"
#include "graphopt/IR/TypeInference.h"
#include "graphopt/Pass/PassRegistry.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/ADT/StringSet.h>

#include <algorithm>

namespace graphopt {

namespace {

using Kind = AddOptimizerPass::Kind;

std::string graphLabel(const Graph &g) { return absl::StrCat("graph @", g.name().str()); }

std::string typeText(const TensorType &t) {
  return absl::StrCat(dtypeName(t.dtype).str(), "[", absl::StrJoin(t.sizes, ", "), "]",
                      t.device.is_cpu() ? "" : absl::StrCat(" on ", t.device.str()));
}

/// Whether tensors of types `a` and `b` put every element at the same offset
/// from their data pointer: equal sizes, equal strides wherever a dimension
/// has more than one element.
bool sameLayout(const TensorType &a, const TensorType &b) {
  if (a.sizes != b.sizes || a.strides.size() != a.sizes.size() ||
      b.strides.size() != b.sizes.size())
    return false;
  for (size_t d = 0; d < a.sizes.size(); ++d)
    if (a.sizes[d] > 1 && a.strides[d] != b.strides[d])
      return false;
  return true;
}

/// Whether a tensor of type `t` covers its memory exactly once (dense and
/// non-overlapping, in some order of its dimensions), as the fused CPU kernels
/// assume: they walk numel() elements from the data pointer.
bool isDense(const TensorType &t) {
  if (t.strides.size() != t.sizes.size())
    return false;
  std::vector<size_t> dims;
  for (size_t d = 0; d < t.sizes.size(); ++d) {
    if (t.sizes[d] == 0)
      return true;
    if (t.sizes[d] > 1)
      dims.push_back(d);
  }
  std::stable_sort(dims.begin(), dims.end(),
                   [&](size_t a, size_t b) { return t.strides[a] < t.strides[b]; });
  int64_t expected = 1;
  for (size_t d : dims) {
    if (t.strides[d] != expected)
      return false;
    expected *= t.sizes[d];
  }
  return true;
}

/// One parameter storage to update: the input that owns it (a tied input's
/// storage belongs to the input it is tied to) and the gradient outputs that
/// reach it, in output order.
struct Update {
  Value *param;
  std::string target;
  llvm::SmallVector<Value *, 2> grads;
};

/// The state torch.optim keeps per parameter, in the order the inputs are added.
llvm::SmallVector<const char *, 3> stateNames(const AddOptimizerPass::Hyperparameters &h) {
  if (h.kind == Kind::AdamW)
    return {"exp_avg", "exp_avg_sq", "step"};
  if (h.momentum != 0)
    return {"momentum_buffer"};
  return {};
}

/// The graph's inputs by target: the parameters' input indices, and every
/// input with a target.
struct InputTargets {
  llvm::StringMap<unsigned> parameterByTarget;
  llvm::StringMap<const Value *> inputByTarget;
};

/// The inputs by target, or why the graph already has an optimizer (an
/// optimizer phase, or optimizer state).
absl::StatusOr<InputTargets> inputTargetsOf(const Graph &g, const std::string &where) {
  for (const Node &n : g.nodes())
    if (n.phase() == Phase::Optimizer)
      return absl::FailedPreconditionError(
          absl::StrCat(where, " already has an optimizer phase (node ", n.describe(),
                       "): add-optimizer adds one to a graph that has none"));
  InputTargets targets;
  for (const GraphInput &in : g.inputs()) {
    if (in.role == InputRole::OptimizerState)
      return absl::FailedPreconditionError(absl::StrCat(
          where, " already has optimizer state (input %", in.value->name().str(), " \"",
          in.target, "\"): add-optimizer adds it to a graph that has none"));
    if (in.role == InputRole::Parameter)
      targets.parameterByTarget.try_emplace(in.target, in.value->index());
    if (!in.target.empty())
      targets.inputByTarget.try_emplace(in.target, in.value);
  }
  return targets;
}

/// The value of the input that owns parameter `in`'s storage (`in`'s
/// unless tied), once `grad` (the gradient output for `target`) and the
/// parameter are checked to be what the fused kernels update.
absl::StatusOr<const Value *> checkedOwner(const Graph &g, const std::string &where,
                                                const std::string &target, const GraphInput &in,
                                                const Value *grad) {
  if (!grad->isTensor() || !grad->tensorType().isKnown() || !in.value->isTensor() ||
      !in.value->tensorType().isKnown())
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": parameter '", target, "' or its gradient %", grad->name().str(),
        " is not a tensor of known type"));
  const TensorType &pt = in.value->tensorType(), &gt = grad->tensorType();
  if (gt.dtype != pt.dtype || gt.sizes != pt.sizes || gt.device != pt.device)
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": the gradient %", grad->name().str(), " of parameter '",
                     target, "' is ", typeText(gt), ", the parameter ", typeText(pt)));
  if (!at::isFloatingType(pt.dtype))
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": parameter '", target, "' is ", typeText(pt),
                     ": the fused optimizers update floating-point parameters only"));
  // A tied input shares its owner's storage: update the owner once, with
  // every gradient that reaches the storage (autograd sums them into the
  // shared parameter's .grad).
  const Value *ownerValue = g.storageOwner(in.value);
  const GraphInput &owner = g.inputs()[ownerValue->index()];
  if (owner.role != InputRole::Parameter)
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": parameter '", target, "' is tied to input %", ownerValue->name().str(),
        ", which is a ", inputRoleName(owner.role).str(), ", not a parameter"));
  const TensorType &ot = ownerValue->tensorType();
  if (ot.dtype != pt.dtype || ot.sizes != pt.sizes || ot.device != pt.device)
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": parameter '", target, "' (", typeText(pt), ") is tied to '", owner.target,
        "' (", typeText(ot), "): their gradients cannot be summed"));
  if (!isDense(ot))
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": parameter '", owner.target,
        "' does not cover its memory densely (strides [", absl::StrJoin(ot.strides, ", "),
        "]): the fused optimizer kernels need dense parameters"));
  return ownerValue;
}

/// What to update, or why the graph cannot get an optimizer. Reads only.
absl::StatusOr<std::vector<Update>> planUpdates(const Graph &g,
                                                const AddOptimizerPass::Hyperparameters &h) {
  const std::string where = graphLabel(g);
  auto targets = inputTargetsOf(g, where);
  if (!targets.ok())
    return targets.status();
  std::vector<int> updateOf(g.inputs().size(), -1); // by owner input index
  std::vector<Update> updates;
  llvm::StringSet<> seen;
  unsigned gradients = 0;
  for (const GraphOutput &out : g.outputs()) {
    if (out.role != OutputRole::Gradient)
      continue;
    ++gradients;
    auto it = targets->parameterByTarget.find(out.target);
    if (it == targets->parameterByTarget.end())
      return absl::NotFoundError(absl::StrCat(where, ": gradient output %",
                                              out.value->name().str(), " is for parameter '",
                                              out.target, "', which is no parameter input"));
    if (!seen.insert(out.target).second)
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": parameter '", out.target, "' has more than one gradient output"));
    const GraphInput &in = g.inputs()[it->second];
    Value *grad = out.value;
    if (!grad->isTensor() && grad->type().kind == ValueKind::None)
      continue; // no gradient this step: torch.optim skips a parameter whose .grad is None
    auto ownerValue = checkedOwner(g, where, out.target, in, grad);
    if (!ownerValue.ok())
      return ownerValue.status();
    const GraphInput &owner = g.inputs()[(*ownerValue)->index()];
    int &u = updateOf[(*ownerValue)->index()];
    if (u < 0) {
      u = static_cast<int>(updates.size());
      updates.push_back({owner.value, owner.target, {}});
    }
    updates[u].grads.push_back(grad);
  }
  if (gradients == 0)
    return absl::FailedPreconditionError(
        absl::StrCat(where, " has no gradient outputs: add-optimizer needs a training graph "
                            "(a loss and the gradient of each parameter), not an eval graph"));
  if (updates.empty())
    return absl::FailedPreconditionError(
        absl::StrCat(where, ": every gradient output is None: there is nothing to update"));
  // The state's targets must be free.
  for (const Update &u : updates)
    for (const char *state : stateNames(h)) {
      std::string target = absl::StrCat(u.target, ".", state);
      if (const Value *taken = targets->inputByTarget.lookup(target))
        return absl::FailedPreconditionError(absl::StrCat(where, ": the optimizer state '", target,
                                                          "' is already the target of input %",
                                                          taken->name().str()));
    }
  // Parameter order, as model.parameters() gives them.
  std::stable_sort(updates.begin(), updates.end(), [](const Update &a, const Update &b) {
    return a.param->index() < b.param->index();
  });
  return updates;
}

/// The operators the update uses, resolved before anything changes.
struct Operators {
  c10::OperatorHandle foreachAdd, fusedAdamW, fusedSgd, add, clone, emptyLike, copy;
};

absl::StatusOr<Operators> resolveOperators() {
  static const char *const names[] = {"aten::_foreach_add_.Scalar", "aten::_fused_adamw_",
                                      "aten::_fused_sgd_",          "aten::add.Tensor",
                                      "aten::clone",                "aten::empty_like",
                                      "aten::copy_"};
  std::vector<c10::OperatorHandle> h;
  for (const char *name : names) {
    auto op = resolveOperator(name);
    if (!op.ok())
      return op.status();
    h.push_back(*op);
  }
  return Operators{h[0], h[1], h[2], h[3], h[4], h[5], h[6]};
}

/// Appends optimizer-phase nodes and optimizer-state inputs, remembering what
/// it made so that everything can be undone.
class Appender {
public:
  explicit Appender(Graph &g) : g_(g), firstNewInput_(g.inputs().size()) {}

  /// A node at the end of the graph, in the optimizer phase, with `named`
  /// arguments (the rest from the schema's defaults) and its output types
  /// inferred.
  absl::StatusOr<Node *> node(const c10::OperatorHandle &op,
                              std::initializer_list<std::pair<const char *, Argument>> named,
                              llvm::StringRef nameHint = "") {
    ArgumentSlots slots(op.schema());
    for (const auto &[name, arg] : named) {
      auto slot = slots.named(name);
      if (!slot.ok())
        return slot.status();
      slots.set(*slot, arg);
    }
    auto args = slots.finish();
    if (!args.ok())
      return args.status();
    size_t results = op.schema().returns().size();
    std::vector<ValueType> types(results, ValueType::unknownTensor());
    std::vector<std::string> names(results, nameHint.str());
    auto n = g_.createNode(op, *args, types, InsertionPoint::atEnd(g_, Phase::Optimizer), names);
    if (!n.ok())
      return n.status();
    nodes_.push_back(*n);
    if (results)
      if (absl::Status st = inferNodeTypes(**n); !st.ok())
        return st;
    return *n;
  }

  Value *stateInput(const Update &u, llvm::StringRef state, const TensorType &type) {
    Value *v = g_.addInput(absl::StrCat(u.param->name().str(), "_", state.str()),
                           ValueType::ofTensor(type), InputRole::OptimizerState,
                           absl::StrCat(u.target, ".", state.str()));
    stateBytes_ += type.storageBytes();
    return v;
  }

  /// Removes what was added, newest first.
  void undo() {
    for (auto it = nodes_.rbegin(); it != nodes_.rend(); ++it)
      (void)g_.eraseNode(*it);
    nodes_.clear();
    while (g_.inputs().size() > firstNewInput_)
      (void)g_.eraseInput(g_.inputs().size() - 1);
  }

  size_t numInputsAdded() const { return g_.inputs().size() - firstNewInput_; }
  int64_t stateBytes() const { return stateBytes_; }

private:
  Graph &g_;
  size_t firstNewInput_;
  std::vector<Node *> nodes_;
  int64_t stateBytes_ = 0;
};

Argument list(llvm::ArrayRef<Value *> values) { return Argument::list(values); }
Argument number(double v) { return Argument::constant(Constant::ofFloat(v)); }
Argument flag(bool v) { return Argument::constant(Constant::ofBool(v)); }

/// The gradient the fused kernel reads for `u`: the sum of the gradients that
/// reach a tied storage, laid out like the parameter. The CPU kernels of
/// _fused_adamw_ and _fused_sgd_ walk the gradient's memory as if it had the
/// parameter's layout and ignore its strides (torch 2.11; torch.optim's
/// fused=True gives wrong updates for a transposed .grad the same way). Eager
/// autograd never makes one (AccumulateGrad lays .grad out like the
/// parameter), but a joint graph's gradient output may well be a transposed
/// view (aten::t of an mm): copy such a gradient into the parameter's layout.
absl::StatusOr<Value *> gradientFor(const Update &u, const Operators &ops, Appender &app,
                                    unsigned &layoutCopies) {
  Value *grad = u.grads.front();
  for (size_t i = 1; i < u.grads.size(); ++i) {
    auto sum = app.node(ops.add, {{"self", Argument::value(grad)},
                                  {"other", Argument::value(u.grads[i])}},
                        absl::StrCat(u.param->name().str(), "_grad_sum"));
    if (!sum.ok())
      return sum.status();
    grad = (*sum)->output();
  }
  const TensorType &pt = u.param->tensorType();
  if (sameLayout(grad->tensorType(), pt))
    return grad;
  ++layoutCopies;
  std::string hint = absl::StrCat(grad->name().str(), "_as_param");
  if (sameLayout(pt, TensorType::contiguous(pt.dtype, pt.sizes, pt.device))) {
    auto copy = app.node(ops.clone, {{"self", Argument::value(grad)},
                                     {"memory_format", Argument::constant(Constant::ofMemoryFormat(
                                                           c10::MemoryFormat::Contiguous))}},
                         hint);
    if (!copy.ok())
      return copy.status();
    return (*copy)->output();
  }
  // Any other dense layout: empty_like keeps a dense tensor's strides.
  auto buffer = app.node(ops.emptyLike, {{"self", Argument::value(u.param)},
                                         {"memory_format", Argument::constant(Constant::ofMemoryFormat(
                                                               c10::MemoryFormat::Preserve))}},
                         hint);
  if (!buffer.ok())
    return buffer.status();
  auto copy = app.node(ops.copy, {{"self", Argument::value((*buffer)->output())},
                                  {"src", Argument::value(grad)}},
                       hint);
  if (!copy.ok())
    return copy.status();
  return (*copy)->output();
}

/// The update of one group of parameters of one dtype and device.
absl::Status appendGroup(llvm::ArrayRef<const Update *> group,
                         const AddOptimizerPass::Hyperparameters &h, const Operators &ops,
                         Appender &app, unsigned &layoutCopies) {
  llvm::SmallVector<Value *, 8> params, grads;
  for (const Update *u : group) {
    auto grad = gradientFor(*u, ops, app, layoutCopies);
    if (!grad.ok())
      return grad.status();
    params.push_back(u->param);
    grads.push_back(*grad);
  }
  if (h.kind == Kind::AdamW) {
    llvm::SmallVector<Value *, 8> expAvgs, expAvgSqs, steps;
    for (const Update *u : group) {
      const TensorType &pt = u->param->tensorType();
      expAvgs.push_back(app.stateInput(*u, "exp_avg", pt));
      expAvgSqs.push_back(app.stateInput(*u, "exp_avg_sq", pt));
      // torch.optim's step: a float32 scalar tensor, on the parameter's
      // device for the fused path (_get_scalar_dtype(is_fused=True)).
      steps.push_back(app.stateInput(*u, "step", TensorType::contiguous(at::kFloat, {}, pt.device)));
    }
    // _fused_adamw_ reads state_steps (`Tensor[]`, not written): like
    // torch.optim (`torch._foreach_add_(device_state_steps, 1)`), count the
    // step first.
    auto count = app.node(ops.foreachAdd, {{"self", list(steps)},
                                           {"scalar", Argument::constant(Constant::ofInt(1))}});
    if (!count.ok())
      return count.status();
    auto update = app.node(ops.fusedAdamW, {{"self", list(params)},
                                            {"grads", list(grads)},
                                            {"exp_avgs", list(expAvgs)},
                                            {"exp_avg_sqs", list(expAvgSqs)},
                                            {"max_exp_avg_sqs", list({})}, // amsgrad=False
                                            {"state_steps", list(steps)},
                                            {"lr", number(h.lr)},
                                            {"beta1", number(h.beta1)},
                                            {"beta2", number(h.beta2)},
                                            {"weight_decay", number(h.weightDecay)},
                                            {"eps", number(h.eps)},
                                            {"amsgrad", flag(false)},
                                            {"maximize", flag(false)}});
    return update.status();
  }
  // SGD. torch.optim.SGD makes each momentum buffer a copy of the first
  // gradient (buf = grad) and afterwards buf = momentum * buf + (1 -
  // dampening) * grad. With the buffers zero-initialised (the executor makes
  // missing optimizer state zeros) and dampening = 0, is_first_step=false
  // gives momentum * 0 + grad = grad on the first step too: exactly
  // torch.optim.SGD's result on every step, with one graph for all steps.
  // momentum = 0 keeps no buffers (an empty list, as torch.optim passes).
  llvm::SmallVector<Value *, 8> buffers;
  if (h.momentum != 0)
    for (const Update *u : group)
      buffers.push_back(app.stateInput(*u, "momentum_buffer", u->param->tensorType()));
  auto update = app.node(ops.fusedSgd, {{"self", list(params)},
                                        {"grads", list(grads)},
                                        {"momentum_buffer_list", list(buffers)},
                                        {"weight_decay", number(h.weightDecay)},
                                        {"momentum", number(h.momentum)},
                                        {"lr", number(h.lr)},
                                        {"dampening", number(0.0)},
                                        {"nesterov", flag(false)},
                                        {"maximize", flag(false)},
                                        {"is_first_step", flag(false)}});
  return update.status();
}

} // namespace

AddOptimizerPass::Hyperparameters AddOptimizerPass::hyperparameters() const {
  Hyperparameters h;
  h.kind = kind_.get();
  h.lr = lr_.get();
  h.weightDecay = weightDecay_.get().value_or(h.kind == Kind::Sgd ? 0.0 : 1e-2);
  h.momentum = momentum_.get().value_or(0.9);
  h.beta1 = beta1_.get().value_or(0.9);
  h.beta2 = beta2_.get().value_or(0.999);
  h.eps = eps_.get().value_or(1e-8);
  return h;
}

absl::Status AddOptimizerPass::validateOptions() {
  const Hyperparameters h = hyperparameters();
  const bool sgd = h.kind == Kind::Sgd;
  // Options of the other kind are refused rather than ignored.
  for (const PassOption<std::optional<double>> *o : {&beta1_, &beta2_, &eps_})
    if (sgd && o->get())
      return absl::InvalidArgumentError(
          absl::StrCat("option '", o->name().str(),
                       "' applies to kind=adamw only (kind=sgd takes lr, momentum, weight-decay)"));
  if (!sgd && momentum_.get())
    return absl::InvalidArgumentError(
        "option 'momentum' applies to kind=sgd only (kind=adamw takes lr, beta1, beta2, eps, "
        "weight-decay)");
  // The checks torch.optim makes.
  auto atLeastZero = [](llvm::StringRef name, double v) {
    return v >= 0 ? absl::OkStatus()
                  : absl::InvalidArgumentError(absl::StrCat(
                        "option '", name.str(), "' must be >= 0, got ", v));
  };
  auto beta = [](llvm::StringRef name, double v) {
    return v >= 0 && v < 1 ? absl::OkStatus()
                           : absl::InvalidArgumentError(absl::StrCat(
                                 "option '", name.str(), "' must be in [0, 1), got ", v));
  };
  for (absl::Status st :
       {atLeastZero("lr", h.lr), atLeastZero("weight-decay", h.weightDecay),
        sgd ? atLeastZero("momentum", h.momentum) : absl::OkStatus(),
        sgd ? absl::OkStatus() : beta("beta1", h.beta1),
        sgd ? absl::OkStatus() : beta("beta2", h.beta2),
        sgd ? absl::OkStatus() : atLeastZero("eps", h.eps)})
    if (!st.ok())
      return st;
  return absl::OkStatus();
}

absl::StatusOr<bool> AddOptimizerPass::transform(Graph &graph, AnalysisManager &) {
  const Hyperparameters h = hyperparameters();
  auto updates = planUpdates(graph, h);
  if (!updates.ok())
    return updates.status();
  auto ops = resolveOperators();
  if (!ops.ok())
    return ops.status();

  // Groups by (dtype, device), in parameter order, as torch.optim groups
  // tensors for its fused kernels (one kernel call per group).
  std::vector<std::vector<const Update *>> groups;
  for (const Update &u : *updates) {
    const TensorType &t = u.param->tensorType();
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto &grp) {
      const TensorType &first = grp.front()->param->tensorType();
      return first.dtype == t.dtype && first.device == t.device;
    });
    if (it == groups.end())
      groups.push_back({&u});
    else
      it->push_back(&u);
  }

  Appender app(graph);
  unsigned layoutCopies = 0;
  for (const auto &group : groups)
    if (absl::Status st = appendGroup(group, h, *ops, app, layoutCopies); !st.ok()) {
      app.undo();
      return absl::Status(st.code(), absl::StrCat(graphLabel(graph), ": ", st.message()));
    }
  addStatistic("parameters updated", static_cast<int64_t>(updates->size()));
  addStatistic("optimizer state inputs added", static_cast<int64_t>(app.numInputsAdded()));
  addStatistic("gradients copied to their parameter's layout", layoutCopies);
  setStatistic("optimizer state bytes", app.stateBytes());
  return true;
}

absl::Status AddOptimizerPass::verify(const Graph &graph) {
  // Each parameter storage with a gradient is written by exactly one
  // optimizer-phase node, and each optimizer-state input by one or two (the
  // step count and the update).
  ValueMap<unsigned> writes(graph, 0);
  AliasInfo aliases(graph);
  for (const Node &n : graph.nodes())
    if (n.phase() == Phase::Optimizer)
      for (const Value *root : aliases.rootsWrittenBy(n))
        ++writes[root];
  llvm::StringMap<const Value *> parameters;
  for (const GraphInput &in : graph.inputs()) {
    if (in.role == InputRole::Parameter)
      parameters.try_emplace(in.target, in.value);
    if (in.role == InputRole::OptimizerState && writes.lookup(in.value) == 0)
      return absl::InternalError(absl::StrCat("optimizer state %", in.value->name().str(),
                                              " is not updated by any optimizer node"));
  }
  for (const GraphOutput &out : graph.outputs()) {
    if (out.role != OutputRole::Gradient || !out.value->isTensor())
      continue;
    const Value *param = parameters.lookup(out.target);
    if (!param)
      continue;
    const Value *owner = graph.storageOwner(param);
    if (unsigned n = writes.lookup(owner); n != 1)
      return absl::InternalError(absl::StrCat("parameter %", owner->name().str(), " is written by ",
                                              n, " optimizer nodes, expected 1"));
  }
  return absl::OkStatus();
}

GRAPHOPT_REGISTER_PASS(AddOptimizerPass);

} // namespace graphopt
