//===- RewriteLegality.cpp - What a rewrite may do, asked one way ----------===//
#include "graphopt/Alias/RewriteLegality.h"

#include "graphopt/IR/OpEffects.h"

#include <absl/strings/str_cat.h>

namespace graphopt {

const char *whyNotErasable(const Node &node) {
  const OpEffects &e = opEffects(node);
  if (e.sideEffects)
    return "side effects";
  if (e.random)
    return "random op";
  // Writes include writes to graph inputs (through views too): what
  // hasExternalEffect adds to the side effects.
  if (!writtenValues(node).empty())
    return "writes in place";
  return nullptr;
}

const char *whyNotMovable(const Node &node) {
  // The same three: a write or a draw is ordered against every other access
  // to its storage or to the generator, and a side effect against the world.
  return whyNotErasable(node);
}

const char kOutputsWouldShareStorage[] = "two graph outputs would share storage";

std::string whyNotMergeable(const AliasInfo &aa, const Node &earlier, const Node &later) {
  for (const Node *n : {&earlier, &later}) {
    const OpEffects &e = opEffects(*n);
    if (e.random)
      return "random op";
    if (e.sideEffects)
      return "side effects";
    if (!writtenValues(*n).empty())
      return "writes in place";
  }
  for (const Value *v : later.operandValues())
    if (aa.writtenBetween(v, aa.rankOf(&earlier), aa.rankOf(&later)))
      return "an operand is written in place between them";
  if (earlier.numOutputs() != later.numOutputs())
    return "result counts differ";
  for (unsigned i = 0; i < later.numOutputs(); ++i) {
    const Value *a = earlier.output(i), *b = later.output(i);
    if (aa.isWrittenThrough(a) || aa.isWrittenThrough(b))
      return "a result is written in place";
    if (!(a->type() == b->type()))
      return "result types differ";
  }
  for (unsigned i = 0; i < later.numOutputs(); ++i) {
    const Value *a = earlier.output(i), *b = later.output(i);
    if (a->isTensor() && aa.reachesGraphOutput(a) && aa.reachesGraphOutput(b) &&
        !aa.mayShareStorage(a, b))
      return kOutputsWouldShareStorage;
  }
  return "";
}

namespace {

bool sameKnownTensorType(const Value &a, const Value &b) {
  return a.isTensor() && b.isTensor() && a.tensorType().isKnown() && a.type() == b.type();
}

bool isAsStrided(const Node &n) {
  return llvm::StringRef(n.schema().name()).startswith("aten::as_strided");
}

} // namespace

// The copy-elision rule. y owns fresh storage holding what x holds when y is
// made; every later reader of y (or of a view of y) will read x's storage
// instead. That is the same only if:
//  (a) y's type is x's exactly (dtype, sizes, strides, device): readers see
//      the same elements at the same places;
//  (b) y's storage is never written in place (through y or any view of y): the
//      write would now change x, which other readers still see;
//  (c) x's storage is not written by any node after y's definition: y holds
//      x's value from before that write, x would not (a write before y's
//      definition is already in what y copied);
//  (d) if y's storage is a graph output: x's storage is not a graph input (the
//      output would alias a parameter or input that the caller or an
//      optimizer step may update in place later) and not another graph
//      output's (two outputs would share storage, and a caller may update one
//      in place);
//  (e) if x is a view: its base may hold more bytes than y, and folding would
//      keep that whole base alive until y's last use: refused unless every
//      base is a graph input (alive for the whole run anyway) or spans no more
//      bytes than y (then holding it is no worse than holding y, and x is
//      alive when y is made, so the peak cannot rise). Also refused when y's
//      storage is read by aten::as_strided*, which addresses storage by
//      absolute offset: x's offset into its base would shift it.
bool mayReplaceCopy(const AliasInfo &aa, const Value &y, const Value &x) {
  const Node *def = y.definingNode();
  if (!def || &y == &x || !sameKnownTensorType(y, x)) // (a)
    return false;
  if (aa.isWrittenThrough(&y)) // (b)
    return false;
  if (aa.lastWriteOf(&x) > aa.rankOf(def)) // (c)
    return false;
  llvm::SmallVector<const Value *, 8> sharers = aa.viewsOf(&y);
  const Graph &graph = aa.graph();
  bool yIsOutput = llvm::any_of(
      graph.outputs(), [&](const GraphOutput &o) { return llvm::is_contained(sharers, o.value); });
  if (yIsOutput) { // (d)
    if (aa.isRootedInGraphInput(&x))
      return false;
    for (const GraphOutput &o : graph.outputs())
      if (!llvm::is_contained(sharers, o.value) && aa.mayShareStorage(o.value, &x))
        return false;
  }
  if (!aa.ownsStorage(&x)) { // (e)
    int64_t bytes = y.tensorType().storageBytes();
    for (const Value *root : aa.roots(&x))
      if (!root->isGraphInput() && root->isTensor() && root->tensorType().storageBytes() > bytes)
        return false;
    for (const Value *v : sharers)
      for (const Use &u : v->uses())
        if (u.user && isAsStrided(*u.user))
          return false;
  }
  return true;
}

const char *whyNotWritableInPlace(const AliasInfo &aa, const Node &node, const Value &self) {
  llvm::SmallVector<const Value *, 2> roots = aa.roots(&self);
  if (roots.size() != 1)
    return "first operand may share several storages";
  const Value *root = roots[0];
  if (root->isGraphInput())
    return "first operand is a graph input or a view of one";
  if (aa.reachesGraphOutput(root))
    return "first operand's storage is returned";
  if (!aa.isLastReader(root, node))
    return "first operand's storage is read later";
  if (aa.readsOf(node, root) != 1)
    return "the node reads its first operand's storage twice";
  // The result would keep the whole storage alive; a fresh result holds only its own bytes.
  if (self.isTensor() && aa.storageBytesKeptAlive(&self) > self.tensorType().storageBytes())
    return "first operand is a view of a larger storage";
  return nullptr;
}

const char *whyPyTorchRefusesWrite(const AliasInfo &aa, const Value &written,
                                   const Value &operand) {
  const Graph &g = aa.graph();
  llvm::SmallVector<const Value *, 2> roots = aa.roots(&written);
  for (const Value *root : roots)
    if (root->isGraphInput() && g.inputs()[root->index()].role == InputRole::Parameter)
      return "the written tensor is a parameter or a view of one (a leaf that requires grad)";
  if (!written.isTensor() || !operand.isTensor())
    return nullptr;
  const TensorType &a = written.tensorType(), &b = operand.tensorType();
  for (int64_t d = 0; d < a.rank(); ++d)
    if (a.sizes[d] > 1 && a.strides[d] == 0)
      return "the written tensor overlaps itself (a stride of 0)";
  if (&written == &operand || !aa.mayOverlap(&written, &operand))
    return nullptr;
  if (aa.roots(&operand) == roots && a.sizes == b.sizes && a.strides == b.strides &&
      a.storageOffset == b.storageOffset)
    return nullptr; // the same bytes in the same layout: a full overlap
  return "an operand overlaps the written tensor in part";
}

const char *whyPyTorchRefusesWrites(const AliasInfo &aa, const Node &node) {
  for (const Value *written : writtenValues(node))
    for (const Value *operand : node.operandValues())
      if (const char *why = whyPyTorchRefusesWrite(aa, *written, *operand))
        return why;
  return nullptr;
}

bool isReplayableDropout(const Node &node) {
  if (node.schema().name() != "aten::native_dropout" || node.numOutputs() != 2 ||
      node.numArgs() < 3 || !node.arg(0).isValue() || !node.arg(1).isConstant())
    return false;
  const Argument &train = node.arg(2);
  if (!train.isConstant())
    return false;
  const Constant &t = train.getConstant();
  // `train` is optional: None means training, as in the CPU kernel.
  bool training = t.kind() == ConstantKind::None || (t.kind() == ConstantKind::Bool && t.asBool());
  ConstantKind p = node.arg(1).getConstant().kind();
  return training && (p == ConstantKind::Float || p == ConstantKind::Int);
}

std::string whyNotRecomputable(const Node &node) {
  const OpEffects &fx = opEffects(node);
  if (fx.sideEffects)
    return absl::StrCat(node.opName(), " has side effects");
  if (!writtenValues(node).empty())
    return absl::StrCat(node.opName(), " writes its argument in place");
  if (fx.random && !isReplayableDropout(node))
    return absl::StrCat(node.opName(), " is random: a second call would draw differently");
  return "";
}

} // namespace graphopt
