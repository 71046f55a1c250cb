//===- RandomGraph.cpp - Random well-typed training graphs for pass fuzzing ===//
#include "graphopt/Testing/RandomGraph.h"

#include "graphopt/Alias/AliasAnalysis.h"
#include "graphopt/Alias/RewriteLegality.h"
#include "graphopt/IR/IRMap.h"
#include "graphopt/IR/OpEffects.h"
#include "graphopt/IR/SchemaUtils.h"
#include "graphopt/IR/TypeInference.h"
#include "graphopt/IR/Verifier.h"

#include <absl/strings/str_cat.h>

#include <vector>

namespace graphopt::testing {

namespace {
/// FNV-1a of the bytes: the engine's seed once they are used up.
uint64_t hashOf(llvm::ArrayRef<uint8_t> bytes) {
  uint64_t h = 1469598103934665603ull;
  for (uint8_t b : bytes)
    h = (h ^ b) * 1099511628211ull;
  return h;
}
} // namespace

Choices::Choices(llvm::ArrayRef<uint8_t> bytes) : bytes_(bytes), engine_(hashOf(bytes)) {}

uint32_t Choices::below(uint32_t n) {
  if (n <= 1)
    return 0;
  if (bytes_.empty())
    return static_cast<uint32_t>(engine_() % n);
  // As many bytes as n needs (one for n <= 256), little-endian.
  uint32_t value = 0;
  unsigned shift = 0;
  for (uint64_t range = 1; range < n && !bytes_.empty(); range <<= 8, shift += 8) {
    value |= static_cast<uint32_t>(bytes_.front()) << shift;
    bytes_ = bytes_.drop_front();
  }
  return value % n;
}


llvm::StringRef featureName(Feature f) {
  static const char *names[kNumFeatures] = {
      "forward node",         "backward node",        "view",
      "view of a view",       "in-place activation",  "in-place through a view",
      "in-place graph input", "random op",            "multi-output op",
      "tied input",           "aliasing outputs",     "repeated call",
      "no-op copy",           "saved for backward",   "repeated block",
      "node without results",
  };
  return names[static_cast<size_t>(f)];
}

namespace {

Argument val(Value *v) { return Argument::value(v); }
Argument i64(int64_t v) { return Argument::constant(Constant::ofInt(v)); }
Argument f64(double v) { return Argument::constant(Constant::ofFloat(v)); }
Argument ints(llvm::ArrayRef<int64_t> v) { return Argument::constant(Constant::ofIntList(v)); }

bool isFloatTensor(const Value *v) {
  return v->isTensor() && v->tensorType().isKnown() &&
         at::isFloatingType(v->tensorType().dtype);
}

class Generator {
public:
  Generator(Choices &choices, RandomGraph &out) : c_(choices), out_(out), g_(*out.graph) {}

  absl::Status run();

private:
  void count(Feature f) { ++out_.features[static_cast<size_t>(f)]; }

  /// Calls `op` with `positional` arguments (the rest from the schema's
  /// defaults) in `phase`, typed by its meta kernel; null when the call is
  /// not one the operator accepts (it is then removed again).
  Node *call(const char *op, std::vector<Argument> positional, Phase phase);
  Value *pick(const std::vector<Value *> &pool) { return pool[c_.below(pool.size())]; }
  /// A value of `pool` with `v`'s sizes, or null.
  Value *sameSizes(const std::vector<Value *> &pool, const Value *v);
  /// PyTorch runs `x.op_(y)` (an in-place binary write to x).
  bool runsInPlace(const Value *x, const Value *y) const {
    return !whyPyTorchRefusesWrite(AliasInfo(g_, AliasFacts::RootsOnly), *x, *y);
  }
  /// One node in `phase` reading from `pool`; adds what it makes to `pool`.
  void step(std::vector<Value *> &pool, Phase phase);
  // step's kinds of node, each reading `x` (drawn from `pool`) and drawing
  // its own choices after step's.
  /// Adds `n`'s float tensor outputs (if `n`) to `pool`.
  void keep(std::vector<Value *> &pool, Node *n);
  /// keep, and `n` is one a repeated call may copy.
  void keepPure(std::vector<Value *> &pool, Node *n);
  void addView(std::vector<Value *> &pool, Value *x, Phase phase);
  void addInPlace(std::vector<Value *> &pool, Value *x, Phase phase);
  void addInPlaceInput(std::vector<Value *> &pool, Phase phase);
  void addRandom(std::vector<Value *> &pool, Value *x, Phase phase);
  void addMultiOutput(std::vector<Value *> &pool, Value *x, Phase phase);
  void addNoOpCopy(std::vector<Value *> &pool, Value *x, Phase phase);
  void addRepeatedCall(std::vector<Value *> &pool, Phase phase);
  void addOutputs(const std::vector<Value *> &forward, const std::vector<Value *> &backward);
  /// The forward as a block of random steps from `pool`'s first value, then
  /// one to three copies of it, each reading the block before's last value of
  /// the first's sizes (layers of a model).
  void repeatedBlocks(std::vector<Value *> &pool);

  Choices &c_;
  RandomGraph &out_;
  Graph &g_;
  Value *buffer_ = nullptr;
  std::vector<Value *> parameters_;
  std::vector<const Node *> pure_; ///< nodes a repeated call may copy
  int64_t rows_ = 2, cols_ = 3;
};

Node *Generator::call(const char *op, std::vector<Argument> positional, Phase phase) {
  auto handle = resolveOperator(op);
  if (!handle.ok())
    return nullptr;
  ArgumentSlots slots(handle->schema());
  for (Argument &a : positional) {
    auto slot = slots.positional();
    if (!slot.ok())
      return nullptr;
    slots.set(*slot, std::move(a));
  }
  auto args = slots.finish();
  if (!args.ok())
    return nullptr;
  std::vector<ValueType> types(handle->schema().returns().size(), ValueType::unknownTensor());
  Node *node = g_.createNode(*handle, *args, types, phase);
  if (!inferNodeTypes(*node).ok()) {
    (void)g_.eraseNode(node);
    return nullptr;
  }
  count(phase == Phase::Forward ? Feature::Forward : Feature::Backward);
  return node;
}

Value *Generator::sameSizes(const std::vector<Value *> &pool, const Value *v) {
  std::vector<Value *> matches;
  for (Value *p : pool)
    if (p->tensorType().sizes == v->tensorType().sizes)
      matches.push_back(p);
  return matches.empty() ? nullptr : pick(matches);
}

void Generator::keep(std::vector<Value *> &pool, Node *n) {
  if (!n)
    return;
  for (Value *out : n->outputs())
    if (isFloatTensor(out))
      pool.push_back(out);
}

void Generator::keepPure(std::vector<Value *> &pool, Node *n) {
  if (n)
    pure_.push_back(n);
  keep(pool, n);
}

void Generator::step(std::vector<Value *> &pool, Phase phase) {
  static const char *kUnary[] = {"aten::exp", "aten::sin", "aten::cos", "aten::neg",
                                 "aten::relu", "aten::sigmoid", "aten::tanh"};
  static const char *kBinary[] = {"aten::add.Tensor", "aten::mul.Tensor", "aten::sub.Tensor",
                                  "aten::atan2", "aten::maximum"};
  Value *x = pick(pool);
  // Weights out of 40: mostly pure arithmetic, as real steps are; random
  // ops and in-place writes rarer (each makes the values it touches
  // impossible to recompute, so checkpointing may not reach its budget).
  enum Kind : uint8_t { Unary, Binary, View, InPlace, InPlaceInput, Rand, Multi, Copy, Repeat, Scale };
  static const Kind kKindOfRoll[40] = {Unary,  Unary,  Unary,  Unary,  Unary,  Unary,  Unary,
                                       Unary,  Binary, Binary, Binary, Binary, Binary, Binary,
                                       Binary, Binary, View,   View,   View,   View,   InPlace,
                                       InPlaceInput,   Rand,   Multi,  Multi,  Multi,  Copy,
                                       Copy,   Copy,   Repeat, Repeat, Repeat, Repeat, Scale,
                                       Scale,  Scale,  Scale,  Scale,  Scale,  Scale};
  switch (kKindOfRoll[c_.below(40)]) {
  case Unary:
    keepPure(pool, call(kUnary[c_.below(7)], {val(x)}, phase));
    return;
  case Binary:
    if (Value *y = sameSizes(pool, x))
      keepPure(pool, call(kBinary[c_.below(5)], {val(x), val(y)}, phase));
    return;
  case View:
    addView(pool, x, phase);
    return;
  case InPlace:
    addInPlace(pool, x, phase);
    return;
  case InPlaceInput:
    addInPlaceInput(pool, phase);
    return;
  case Rand:
    addRandom(pool, x, phase);
    return;
  case Multi:
    addMultiOutput(pool, x, phase);
    return;
  case Copy:
    addNoOpCopy(pool, x, phase);
    return;
  case Repeat:
    addRepeatedCall(pool, phase);
    return;
  case Scale:
    keepPure(pool, call("aten::mul.Tensor", {val(x), f64(0.5 + c_.below(4))}, phase));
  }
}

// Views, and views of views.
void Generator::addView(std::vector<Value *> &pool, Value *x, Phase phase) {
  Node *n = nullptr;
  switch (c_.below(5)) {
  case 0: n = call("aten::view", {val(x), ints({x->tensorType().numel()})}, phase); break;
  case 1: n = x->tensorType().rank() == 2 ? call("aten::t", {val(x)}, phase) : nullptr; break;
  case 2: n = call("aten::alias", {val(x)}, phase); break;
  case 3:
    n = x->tensorType().rank() >= 1 && x->tensorType().sizes[0] > 1
            ? call("aten::slice.Tensor", {val(x), i64(0), i64(0), i64(1)}, phase)
            : nullptr;
    break;
  default:
    n = x->tensorType().rank() == 1
            ? call("aten::view", {val(x), ints({rows_, cols_})}, phase)
            : call("aten::expand", {val(x), ints(x->tensorType().sizes)}, phase);
  }
  if (n) {
    count(Feature::View);
    if (x->definingNode() && opEffects(*x->definingNode()).isView())
      count(Feature::ViewChain);
  }
  keepPure(pool, n);
}

// An in-place write to an activation, or through a view of one.
void Generator::addInPlace(std::vector<Value *> &pool, Value *x, Phase phase) {
  // Of this phase's values: a backward that writes what the forward saved
  // is not what autograd makes.
  if (!x->definingNode() || x->definingNode()->phase() != phase)
    return;
  Value *y = sameSizes(pool, x);
  if (!y || x->tensorType().dtype != y->tensorType().dtype)
    return;
  if (!runsInPlace(x, y))
    return;
  bool throughView = opEffects(*x->definingNode()).isView();
  Node *n = c_.chance(50) ? call("aten::add_.Tensor", {val(x), val(y)}, phase)
                          : call("aten::mul_.Tensor", {val(x), val(y)}, phase);
  if (n)
    count(throughView ? Feature::InPlaceThroughView : Feature::InPlaceActivation);
  keep(pool, n);
}

// An in-place write to a graph input (a buffer, as BN statistics are).
void Generator::addInPlaceInput(std::vector<Value *> &pool, Phase phase) {
  Value *y = sameSizes(pool, buffer_);
  if (!y || phase != Phase::Forward || !runsInPlace(buffer_, y))
    return;
  Node *n = call("aten::add_.Tensor", {val(buffer_), val(y)}, phase);
  if (n)
    count(Feature::InPlaceInput);
}

// Random operators.
void Generator::addRandom(std::vector<Value *> &pool, Value *x, Phase phase) {
  Node *n = nullptr;
  switch (c_.below(3)) {
  case 0: n = call("aten::rand_like", {val(x)}, phase); break;
  case 1: n = call("aten::bernoulli.p", {val(x), f64(0.5)}, phase); break;
  default:
    n = call("aten::native_dropout", {val(x), f64(0.5), Argument::constant(Constant::ofBool(true))},
             phase);
    if (n)
      count(Feature::MultiOutput);
  }
  if (n)
    count(Feature::Random);
  keep(pool, n);
}

// Multi-output, reductions.
void Generator::addMultiOutput(std::vector<Value *> &pool, Value *x, Phase phase) {
  Node *n = x->tensorType().rank() == 2 ? call("aten::max.dim", {val(x), i64(1)}, phase)
                                        : call("aten::sum.dim_IntList", {val(x), ints({0})}, phase);
  if (n && n->numOutputs() > 1)
    count(Feature::MultiOutput);
  keepPure(pool, n);
}

// Copies that change nothing.
void Generator::addNoOpCopy(std::vector<Value *> &pool, Value *x, Phase phase) {
  Node *n = nullptr;
  switch (c_.below(3)) {
  case 0: n = call("aten::clone", {val(x)}, phase); break;
  case 1: n = call("aten::mul.Tensor", {val(x), f64(1.0)}, phase); break;
  default: n = call("aten::add.Tensor", {val(x), f64(0.0)}, phase);
  }
  if (n)
    count(Feature::NoOpCopy);
  keepPure(pool, n);
}

// The same call again (what cse merges).
void Generator::addRepeatedCall(std::vector<Value *> &pool, Phase phase) {
  if (pure_.empty())
    return;
  const Node *original = pure_[c_.below(pure_.size())];
  std::vector<Argument> args(original->args().begin(), original->args().end());
  std::vector<ValueType> types;
  for (Value *out : original->outputs())
    types.push_back(out->type());
  Node *n = g_.createNode(original->op(), args, types, phase);
  count(Feature::RepeatedCall);
  count(phase == Phase::Forward ? Feature::Forward : Feature::Backward);
  keep(pool, n);
}

void Generator::addOutputs(const std::vector<Value *> &forward,
                           const std::vector<Value *> &backward) {
  // A gradient for each parameter, of its type, computed in backward.
  for (Value *p : parameters_) {
    const std::vector<Value *> &pool = backward.empty() ? forward : backward;
    Value *g = nullptr;
    for (int attempt = 0; attempt < 8 && !g; ++attempt) {
      Value *v = pick(pool);
      if (v->tensorType().sizes == p->tensorType().sizes)
        g = v;
    }
    Node *n = call("aten::mul.Tensor", {val(g ? g : p), f64(1.0 / (1 + c_.below(3)))},
                   Phase::Backward);
    if (n)
      g_.addOutput(n->output(), OutputRole::Gradient, g_.inputs()[p->index()].target);
  }
  // User outputs: some values, mostly of the backward (a forward value
  // returned is kept to the end, and checkpointing cannot drop it); one
  // returned twice, or with a view of it.
  std::vector<Value *> owned; // backward values in storage of their own
  for (Value *v : backward)
    if (v->definingNode() && !opEffects(*v->definingNode()).mayAlias())
      owned.push_back(v);
  unsigned n = 1 + c_.below(3);
  for (unsigned i = 0; i < n; ++i) {
    Value *v = pick(owned.empty() || c_.chance(10) ? forward : owned);
    g_.addOutput(v, OutputRole::UserOutput);
    if (c_.chance(20)) {
      g_.addOutput(v, OutputRole::UserOutput);
      count(Feature::AliasingOutputs);
    } else if (c_.chance(20)) {
      // Appended after everything: in the backward phase.
      if (Node *view = call("aten::alias", {val(v)}, Phase::Backward)) {
        g_.addOutput(view->output(), OutputRole::UserOutput);
        count(Feature::AliasingOutputs);
      }
    }
  }
}

void Generator::repeatedBlocks(std::vector<Value *> &pool) {
  Value *in = pool.front();
  Node *before = g_.nodes().empty() ? nullptr : &g_.nodes().back();
  if (c_.chance(50) && call("aten::_assert_tensor_metadata",
                            {val(in), ints(in->tensorType().sizes)}, Phase::Forward))
    count(Feature::NoResultNode);
  unsigned steps = 5 + c_.below(8);
  for (unsigned i = 0; i < steps; ++i)
    step(pool, Phase::Forward);
  // The block's result: its last float value of the input's type (sizes and
  // layout: a copy reading it computes what the block did), else one made.
  Value *out = nullptr;
  for (auto it = pool.rbegin(); it != pool.rend() && !out; ++it)
    if (*it != in && (*it)->definingNode() && isFloatTensor(*it) && (*it)->type() == in->type())
      out = *it;
  if (!out) {
    Node *n = call("aten::add.Tensor", {val(in), val(in)}, Phase::Forward);
    if (!n)
      return;
    out = n->output();
    pool.push_back(out);
  }
  std::vector<Node *> block;
  for (auto it = before ? std::next(before->getIterator()) : g_.nodes().begin();
       it != g_.nodes().end(); ++it)
    block.push_back(&*it);
  Value *previous = out;
  unsigned copies = 1 + c_.below(3);
  for (unsigned k = 0; k < copies; ++k) {
    ValueMap<Value *> map(g_, nullptr);
    map[in] = previous;
    for (Node *n : block) {
      auto clone = g_.cloneNode(*n, map, InsertionPoint::atEnd(g_, Phase::Forward));
      if (!clone.ok())
        return;
      // Typed again from what it reads now (a view of the block's result may
      // be laid out otherwise than one of its input), and its writes checked
      // again: the block's input is now the result before, which may be a
      // view of a parameter or overlap what the copy writes.
      if (!inferNodeTypes(**clone).ok() ||
          whyPyTorchRefusesWrites(AliasInfo(g_, AliasFacts::RootsOnly), **clone)) {
        (void)g_.eraseNode(*clone);
        return;
      }
      count(Feature::Forward);
      for (Value *v : (*clone)->outputs())
        if (v->isTensor())
          pool.push_back(v);
      if ((*clone)->numOutputs() == 0)
        count(Feature::NoResultNode);
    }
    previous = map[out];
    count(Feature::RepeatedBlock);
  }
  // The loss reads the last block's result.
  pool.push_back(previous);
}

absl::Status Generator::run() {
  rows_ = 2 + c_.below(3);
  cols_ = 2 + c_.below(4);
  TensorType t = TensorType::contiguous(c10::kFloat, {rows_, cols_});
  Value *x = g_.addInput("x", ValueType::ofTensor(t), InputRole::UserInput);
  Value *w = g_.addInput("w", ValueType::ofTensor(t), InputRole::Parameter, "w");
  parameters_.push_back(w);
  if (c_.chance(30)) {
    Value *tied = g_.addInput("w_tied", ValueType::ofTensor(t), InputRole::Parameter, "w_tied");
    if (g_.tieInput(tied->index(), w).ok()) {
      count(Feature::TiedInput);
      parameters_.push_back(tied);
    }
  } else {
    parameters_.push_back(
        g_.addInput("v", ValueType::ofTensor(t), InputRole::Parameter, "v"));
  }
  buffer_ = g_.addInput("running", ValueType::ofTensor(t), InputRole::Buffer, "running");

  std::vector<Value *> forward{x, parameters_[0], parameters_[1]};
  if (c_.chance(25)) {
    repeatedBlocks(forward);
  } else {
    unsigned forwardSteps = 4 + c_.below(20);
    for (unsigned i = 0; i < forwardSteps; ++i)
      step(forward, Phase::Forward);
  }
  // The loss: a sum over the last forward float value (and the parameters,
  // so that every parameter feeds it).
  Value *last = forward.back();
  Node *loss = call("aten::sum", {val(last)}, Phase::Forward);
  if (!loss)
    return absl::InternalError("the generator could not make a loss");
  std::vector<Value *> backward;
  // The backward reads forward values: they are saved for it.
  std::vector<Value *> readable(forward);
  unsigned backwardSteps = 2 + c_.below(10);
  for (unsigned i = 0; i < backwardSteps; ++i) {
    size_t before = readable.size();
    step(readable, Phase::Backward);
    for (size_t j = before; j < readable.size(); ++j)
      backward.push_back(readable[j]);
  }
  for (Value *v : forward)
    for (const Use &u : v->uses())
      if (u.user && u.user->phase() == Phase::Backward && v->definingNode()) {
        count(Feature::SavedForBackward);
        break;
      }
  g_.addOutput(loss->output(), OutputRole::Loss);
  addOutputs(forward, backward);
  return verifyGraph(g_);
}

} // namespace

absl::StatusOr<RandomGraph> makeRandomGraph(Choices &choices) {
  RandomGraph out;
  out.graph = std::make_unique<Graph>("fuzz");
  Generator gen(choices, out);
  if (absl::Status st = gen.run(); !st.ok())
    return absl::InternalError(absl::StrCat("the generator made a graph the verifier refuses: ",
                                            st.message()));
  return out;
}

} // namespace graphopt::testing
