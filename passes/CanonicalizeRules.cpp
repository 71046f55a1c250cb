//===- CanonicalizeRules.cpp - The folds of the canonicalize pass ---------===//
//
// Each rule is a function from a node to the existing value that may replace
// its output (or null), named in allRules(). docs/RedundantOps.md shows
// every rule before and after, with the reason for each refusal.
//
//===----------------------------------------------------------------------===//
#include "CanonicalizeRules.h"


#include <llvm/ADT/STLExtras.h>
#include <llvm/ADT/SmallPtrSet.h>

#include <cmath>
#include <optional>
#include <string_view>
#include <utility>

namespace graphopt::canonicalize {

namespace {

bool isOp(const Node &n, llvm::StringRef name, llvm::StringRef overload) {
  return n.schema().name() == name && n.schema().overload_name() == overload;
}

/// Argument `name` of `n`'s schema, or null when the schema has none.
const Argument *argNamed(const Node &n, std::string_view name) {
  std::optional<int> i = n.schema().argumentIndexWithName(name);
  if (!i || *i < 0 || static_cast<unsigned>(*i) >= n.numArgs())
    return nullptr;
  return &n.arg(static_cast<unsigned>(*i));
}

/// A constant argument's value: `present` says whether the schema has the
/// argument, `constant` is null when it is not a constant (then no rule may
/// reason about it).
struct NamedConstant {
  bool present = false;
  const Constant *constant = nullptr;
  /// Absent, or a constant None.
  bool absentOrNone() const { return !present || (constant && constant->isNone()); }
  /// Given as something other than a constant: unknown before the run.
  bool unknown() const { return present && !constant; }
};

NamedConstant constantNamed(const Node &n, std::string_view name) {
  NamedConstant c;
  if (const Argument *a = argNamed(n, name)) {
    c.present = true;
    if (a->isConstant())
      c.constant = &a->getConstant();
  }
  return c;
}

/// Argument `i` when it is a tensor value, else null.
Value *tensorArg(const Node &n, unsigned i) {
  if (i >= n.numArgs() || !n.arg(i).isValue())
    return nullptr;
  Value *v = n.arg(i).getValue();
  return v && v->isTensor() ? v : nullptr;
}

/// Exactly the same known tensor type: dtype, sizes, strides, device.
bool sameTensorType(const Value &a, const Value &b) {
  return a.isTensor() && b.isTensor() && a.tensorType().isKnown() && a.type() == b.type();
}

/// A view fold: `n`'s output is a view of `x` with the same metadata.
Value *viewFold(const Node &n, Value *x) {
  return x && sameTensorType(*n.output(), *x) ? x : nullptr;
}

/// A copy fold: `n`'s output is fresh storage holding what `x` holds.
Value *copyFold(const Node &n, Value *x, const FoldContext &ctx) {
  return x && mayReplaceCopy(ctx.aliases(), *n.output(), *x) ? x : nullptr;
}

/// Dims as an operator normalises them: d in [-r, r) with r = max(rank, 1)
/// (a 0-d tensor takes dims 0 and -1); nullopt when out of range.
std::optional<int64_t> normalizeDim(int64_t d, int64_t rank) {
  int64_t r = std::max<int64_t>(rank, 1);
  if (d < -r || d >= r)
    return std::nullopt;
  return d < 0 ? d + r : d;
}

std::optional<int64_t> intConstant(const Node &n, std::string_view name) {
  NamedConstant c = constantNamed(n, name);
  if (!c.constant || c.constant->kind() != ConstantKind::Int)
    return std::nullopt;
  return c.constant->asInt();
}

// --- transpose-pair ------------------------------------------------------------

/// The two dims an aten::t / aten::transpose.int node swaps, normalised and
/// sorted; {0, 0} when it swaps nothing (t of a tensor of rank < 2, or
/// transpose of a dim with itself); nullopt for anything else.
std::optional<std::pair<int64_t, int64_t>> swappedDims(const Node &n) {
  Value *in = tensorArg(n, 0);
  if (!in || !in->tensorType().isKnown())
    return std::nullopt;
  int64_t rank = in->tensorType().rank();
  using Dims = std::pair<int64_t, int64_t>;
  if (isOp(n, "aten::t", ""))
    return rank < 2 ? Dims{0, 0} : Dims{0, 1};
  if (!isOp(n, "aten::transpose", "int"))
    return std::nullopt;
  std::optional<int64_t> a = intConstant(n, "dim0"), b = intConstant(n, "dim1");
  if (!a || !b || !(a = normalizeDim(*a, rank)) || !(b = normalizeDim(*b, rank)))
    return std::nullopt;
  return *a == *b ? Dims{0, 0} : Dims{std::min(*a, *b), std::max(*a, *b)};
}

/// t(t(x)), transpose(transpose(x, a, b), a, b) (either order, negative dims
/// normalised), and t of a 2-d transpose(x, 0, 1) -> x: swapping the same two
/// dims twice gives x's own sizes and strides back.
Value *matchTransposePair(Node &n, const FoldContext &) {
  Value *mid = tensorArg(n, 0);
  Node *inner = mid ? mid->definingNode() : nullptr;
  if (!inner)
    return nullptr;
  auto outerDims = swappedDims(n), innerDims = swappedDims(*inner);
  if (!outerDims || !innerDims || *outerDims != *innerDims)
    return nullptr;
  return viewFold(n, tensorArg(*inner, 0));
}

// --- inverse-permute -----------------------------------------------------------

/// The dims of an aten::permute node, normalised; nullopt unless they are a
/// permutation of 0..rank-1.
std::optional<llvm::SmallVector<int64_t, 6>> permutation(const Node &n) {
  Value *in = tensorArg(n, 0);
  NamedConstant dims = constantNamed(n, "dims");
  if (!in || !in->tensorType().isKnown() || !dims.constant ||
      dims.constant->kind() != ConstantKind::IntList)
    return std::nullopt;
  int64_t rank = in->tensorType().rank();
  llvm::ArrayRef<int64_t> given = dims.constant->asIntList();
  if (static_cast<int64_t>(given.size()) != rank)
    return std::nullopt;
  llvm::SmallVector<int64_t, 6> perm;
  llvm::SmallVector<uint8_t, 6> seen(rank, 0);
  for (int64_t d : given) {
    std::optional<int64_t> nd = normalizeDim(d, rank);
    if (!nd || *nd >= rank || seen[*nd]++)
      return std::nullopt;
    perm.push_back(*nd);
  }
  return perm;
}

/// permute(permute(x, p), q) -> x when q composed with p is the identity:
/// output dim i is x's dim p[q[i]].
Value *matchInversePermute(Node &n, const FoldContext &) {
  Value *mid = tensorArg(n, 0);
  Node *inner = mid ? mid->definingNode() : nullptr;
  if (!inner || !isOp(*inner, "aten::permute", ""))
    return nullptr;
  auto q = permutation(n), p = permutation(*inner);
  if (!q || !p || q->size() != p->size())
    return nullptr;
  for (size_t i = 0; i < q->size(); ++i)
    if ((*p)[(*q)[i]] != static_cast<int64_t>(i))
      return nullptr;
  return viewFold(n, tensorArg(*inner, 0));
}

// --- views of x with x's own type -----------------------------------------------

Value *matchSameTypeView(Node &n, const FoldContext &) { return viewFold(n, tensorArg(n, 0)); }

// --- clone, cat of one tensor ---------------------------------------------------

Value *matchClone(Node &n, const FoldContext &ctx) { return copyFold(n, tensorArg(n, 0), ctx); }

Value *matchCatSingle(Node &n, const FoldContext &ctx) {
  const Argument *tensors = argNamed(n, "tensors");
  if (!tensors || !tensors->isList() || tensors->getList().size() != 1)
    return nullptr;
  Value *x = tensors->getList().front();
  return x && x->isTensor() ? copyFold(n, x, ctx) : nullptr;
}

// --- arithmetic identities --------------------------------------------------------
//
// Bitwise exactness, since the output verifier compares bitwise:
//   - x * 1 and x / 1 are exact for every real x (NaN, inf and -0.0 included);
//     for complex x the constant becomes 1+0i and the product mixes parts
//     (inf * 0 is NaN, and -0.0 parts can turn into +0.0), so complex is refused;
//   - x + (+0.0) is NOT exact for floats: (-0.0) + (+0.0) is +0.0. What is
//     exact is x + (-0.0), for every x. add computes x + alpha * other (one
//     fused multiply-add, or in float for f16/bf16), and alpha * (-0.0) is
//     -0.0 for any finite alpha > 0: so a floating add folds only when other
//     is -0.0 and alpha is a finite positive constant;
//   - x - alpha * (+0.0) is x + (-0.0) for finite alpha > 0 (PyTorch computes
//     sub as add with -alpha), exact, -0.0 included: a floating sub folds when
//     other is +0.0 (or the integer 0, which becomes +0.0) and alpha is a
//     finite positive constant; sub of -0.0 is x + (+0.0), refused;
//   - for integer (and bool) x, x + alpha * 0 and x - alpha * 0 are x for any
//     integer alpha.
// Type promotion (an integer x times 1.0, a bool x plus 0) and broadcasting
// change the output's type, which the copy rule's type equality refuses.

enum class Domain { Integral, Floating, Other };

Domain domainOf(const Value &x) {
  c10::ScalarType t = x.tensorType().dtype;
  if (c10::isComplexType(t))
    return Domain::Other;
  if (c10::isIntegralType(t, /*includeBool=*/true))
    return Domain::Integral;
  if (c10::isFloatingType(t))
    return Domain::Floating;
  return Domain::Other;
}

bool isOne(const Constant &c) {
  return (c.kind() == ConstantKind::Int && c.asInt() == 1) ||
         (c.kind() == ConstantKind::Float && c.asFloat() == 1.0);
}

bool isIntZero(const Constant &c) { return c.kind() == ConstantKind::Int && c.asInt() == 0; }
bool isFloatZero(const Constant &c, bool negative) {
  return c.kind() == ConstantKind::Float && c.asFloat() == 0.0 &&
         std::signbit(c.asFloat()) == negative;
}

bool isFinitePositive(const Constant &c) {
  return (c.kind() == ConstantKind::Int && c.asInt() > 0) ||
         (c.kind() == ConstantKind::Float && std::isfinite(c.asFloat()) && c.asFloat() > 0);
}

Value *matchMulOne(Node &n, const FoldContext &ctx) {
  Value *x = tensorArg(n, 0);
  NamedConstant other = constantNamed(n, "other");
  if (!x || !other.constant || !isOne(*other.constant) || domainOf(*x) == Domain::Other)
    return nullptr;
  return copyFold(n, x, ctx);
}

Value *matchDivOne(Node &n, const FoldContext &ctx) {
  Value *x = tensorArg(n, 0);
  NamedConstant other = constantNamed(n, "other");
  if (!x || !other.constant || !isOne(*other.constant) || domainOf(*x) == Domain::Other)
    return nullptr;
  // div.Tensor_mode / div.Scalar_mode: None is plain division; trunc and floor
  // of x / 1 are x only for integers (a float x would be rounded).
  NamedConstant mode = constantNamed(n, "rounding_mode");
  if (!mode.absentOrNone()) {
    if (!mode.constant || mode.constant->kind() != ConstantKind::String ||
        (mode.constant->asString() != "trunc" && mode.constant->asString() != "floor") ||
        domainOf(*x) != Domain::Integral)
      return nullptr;
  }
  return copyFold(n, x, ctx);
}

/// add (`subtract` false) or sub of a zero: see the exactness notes above.
Value *matchAddSubZero(Node &n, const FoldContext &ctx, bool subtract) {
  Value *x = tensorArg(n, 0);
  NamedConstant other = constantNamed(n, "other"), alpha = constantNamed(n, "alpha");
  if (!x || !other.constant || !alpha.constant)
    return nullptr;
  bool exact = false;
  switch (domainOf(*x)) {
  case Domain::Integral:
    exact = isIntZero(*other.constant) && alpha.constant->kind() == ConstantKind::Int;
    break;
  case Domain::Floating:
    exact = isFinitePositive(*alpha.constant) &&
            (subtract ? isIntZero(*other.constant) || isFloatZero(*other.constant, false)
                      : isFloatZero(*other.constant, true));
    break;
  case Domain::Other:
    break;
  }
  return exact ? copyFold(n, x, ctx) : nullptr;
}

Value *matchAddZero(Node &n, const FoldContext &ctx) { return matchAddSubZero(n, ctx, false); }
Value *matchSubZero(Node &n, const FoldContext &ctx) { return matchAddSubZero(n, ctx, true); }

// --- to-same ------------------------------------------------------------------------

/// aten::_to_copy and every aten::to overload whose output has x's type.
/// Where the data goes matters beyond the type: graph-opt may run a graph on
/// CUDA whose types say cpu, so an explicit device constant (device=cpu) is a
/// real move at run time and is never folded. The symbolic execution device
/// (or `to.other`'s tensor) moves nothing when x is on the execution device,
/// i.e. x does not come from a value placed on an explicit device. A layout
/// other than strided or pinned memory are more than the type says: refused.
/// _to_copy, and `to` with copy=True, make a fresh copy: the copy rule. `to`
/// with copy=False returns x itself when nothing changes (a view fold), but
/// with a memory format other than preserve it may copy even then: refused.
Value *matchToSame(Node &n, const FoldContext &ctx) {
  Value *x = tensorArg(n, 0);
  if (!x)
    return nullptr;
  NamedConstant layout = constantNamed(n, "layout"), pin = constantNamed(n, "pin_memory"),
                device = constantNamed(n, "device"), copy = constantNamed(n, "copy"),
                format = constantNamed(n, "memory_format");
  if (!layout.absentOrNone() &&
      !(layout.constant && layout.constant->kind() == ConstantKind::Layout &&
        layout.constant->asLayout() == c10::kStrided))
    return nullptr;
  if (!pin.absentOrNone() &&
      !(pin.constant && pin.constant->kind() == ConstantKind::Bool && !pin.constant->asBool()))
    return nullptr;
  if (!device.absentOrNone()) {
    if (!device.constant || !device.constant->isExecutionDevice() || ctx.mayBeOffExecutionDevice(x))
      return nullptr;
  }
  if (const Argument *other = argNamed(n, "other")) {
    if (!other->isValue() || !other->getValue() || ctx.mayBeOffExecutionDevice(x) ||
        ctx.mayBeOffExecutionDevice(other->getValue()))
      return nullptr;
  }
  bool copies = isOp(n, "aten::_to_copy", "");
  if (!copies) {
    if (copy.unknown() || (copy.constant && copy.constant->kind() != ConstantKind::Bool))
      return nullptr;
    copies = copy.constant && copy.constant->asBool();
  }
  if (copies)
    return copyFold(n, x, ctx);
  if (!format.absentOrNone() &&
      !(format.constant && format.constant->kind() == ConstantKind::MemoryFormat &&
        format.constant->asMemoryFormat() == c10::MemoryFormat::Preserve))
    return nullptr;
  return viewFold(n, x);
}

// --- the table ------------------------------------------------------------------------

const OpName kTransposeOps[] = {{"aten::t", ""}, {"aten::transpose", "int"}};
const OpName kPermuteOps[] = {{"aten::permute", ""}};
const OpName kViewOps[] = {
    {"aten::view", ""}, {"aten::reshape", ""}, {"aten::_unsafe_view", ""}, {"aten::expand", ""}};
const OpName kAliasOps[] = {{"aten::alias", ""}};
const OpName kDetachOps[] = {{"aten::detach", ""}};
const OpName kCloneOps[] = {{"aten::clone", ""}};
const OpName kMulOps[] = {{"aten::mul", "Tensor"}, {"aten::mul", "Scalar"}};
const OpName kDivOps[] = {{"aten::div", "Tensor"},
                          {"aten::div", "Scalar"},
                          {"aten::div", "Tensor_mode"},
                          {"aten::div", "Scalar_mode"}};
const OpName kAddOps[] = {{"aten::add", "Tensor"}, {"aten::add", "Scalar"}};
const OpName kSubOps[] = {{"aten::sub", "Tensor"}, {"aten::sub", "Scalar"}};
const OpName kToOps[] = {{"aten::_to_copy", ""}, {"aten::to", "", /*anyOverload=*/true}};
const OpName kCatOps[] = {{"aten::cat", ""}};

const Rule kRules[] = {
    {"transpose-pair", kTransposeOps, matchTransposePair},
    {"inverse-permute", kPermuteOps, matchInversePermute},
    {"same-shape-view", kViewOps, matchSameTypeView},
    // graph-opt runs graphs without autograd (a joint graph carries its
    // backward explicitly), so detach is an identity view, like alias.
    {"alias", kAliasOps, matchSameTypeView},
    {"detach", kDetachOps, matchSameTypeView},
    {"clone", kCloneOps, matchClone},
    {"mul-one", kMulOps, matchMulOne},
    {"div-one", kDivOps, matchDivOne},
    {"add-zero", kAddOps, matchAddZero},
    {"sub-zero", kSubOps, matchSubZero},
    {"to-same", kToOps, matchToSame},
    {"cat-single", kCatOps, matchCatSingle},
};

} // namespace

// --- whole-graph facts ----------------------------------------------------------------

FoldContext::FoldContext(Graph &graph, EditedAliases aliases)
    : graph_(graph), aliases_(aliases), offDevice_(graph, 0) {
  for (const Node &n : graph.nodes()) {
    // Devices: an explicit device argument places the outputs there; the
    // execution device places them on it; otherwise (no device argument, or
    // None) they follow the tensor operands, and a factory given no device
    // makes them on the default device (cpu), which need not be the one the
    // graph runs on.
    bool off = false;
    NamedConstant device = constantNamed(n, "device");
    bool tensorOperands = false;
    for (Value *v : n.operandValues())
      if (v->isTensor()) {
        tensorOperands = true;
        off |= offDevice_.lookup(v) != 0;
      }
    if (device.present) {
      if (!device.constant)
        off = true;
      else if (device.constant->kind() == ConstantKind::Device)
        off = !device.constant->isExecutionDevice();
      else if (device.constant->isNone() && !tensorOperands)
        off = true;
    }
    if (off)
      for (Value *out : n.outputs())
        offDevice_[out] = 1;
  }
}

llvm::ArrayRef<Rule> allRules() { return kRules; }

bool ruleMatchesOperator(const Rule &rule, const c10::FunctionSchema &schema) {
  for (const OpName &op : rule.ops)
    if (schema.name() == op.name && (op.anyOverload || schema.overload_name() == op.overload))
      return true;
  return false;
}

} // namespace graphopt::canonicalize
