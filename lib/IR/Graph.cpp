//===- Graph.cpp - Graph, Node, Value -------------------------------------===//
#include "graphopt/IR/Graph.h"
#include "graphopt/IR/GraphoptOps.h"

#include "graphopt/IR/IRMap.h"
#include "graphopt/IR/OperatorSupport.h"

#include <absl/strings/str_cat.h>
#include <llvm/ADT/STLExtras.h>

#include <algorithm>
#include <atomic>

namespace graphopt {

// --- names of enums ----------------------------------------------------------

namespace {
constexpr const char *kPhaseNames[] = {"forward", "backward", "optimizer"};
constexpr const char *kInputRoleNames[] = {"parameter", "buffer", "user_input", "constant",
                                           "optimizer_state"};
constexpr const char *kOutputRoleNames[] = {"loss", "gradient", "input_gradient", "user_output",
                                            "buffer_mutation"};

template <typename E, size_t N>
std::optional<E> parseEnumName(llvm::StringRef name, const char *const (&names)[N]) {
  for (size_t i = 0; i < N; ++i)
    if (name == names[i])
      return static_cast<E>(i);
  return std::nullopt;
}
} // namespace

llvm::StringRef phaseName(Phase p) { return kPhaseNames[static_cast<int>(p)]; }
llvm::StringRef inputRoleName(InputRole r) { return kInputRoleNames[static_cast<int>(r)]; }
llvm::StringRef outputRoleName(OutputRole r) { return kOutputRoleNames[static_cast<int>(r)]; }
std::optional<Phase> parsePhaseName(llvm::StringRef n) { return parseEnumName<Phase>(n, kPhaseNames); }
std::optional<InputRole> parseInputRoleName(llvm::StringRef n) {
  return parseEnumName<InputRole>(n, kInputRoleNames);
}
std::optional<OutputRole> parseOutputRoleName(llvm::StringRef n) {
  return parseEnumName<OutputRole>(n, kOutputRoleNames);
}

// --- operators ---------------------------------------------------------------

absl::StatusOr<c10::OperatorHandle> resolveOperator(llvm::StringRef qualifiedName) {
  linkGraphoptOps(); // graphopt::* must be registered wherever graphs are read
  if (!qualifiedName.contains("::"))
    return absl::InvalidArgumentError(
        absl::StrCat("operator name '", qualifiedName.str(),
                     "' is not qualified with a namespace (expected e.g. aten::add.Tensor)"));
  auto [base, overload] = qualifiedName.split('.');
  auto handle = c10::Dispatcher::singleton().findSchema({base.str(), overload.str()});
  if (!handle)
    return absl::NotFoundError(absl::StrCat("unknown operator '", qualifiedName.str(),
                                            "': no such operator or overload is registered"));
  if (absl::Status st = checkOperatorSchema(handle->schema()); !st.ok())
    return st;
  return *handle;
}

absl::Status checkOperatorSchema(const c10::FunctionSchema &schema) {
  auto objectType = [](const c10::TypePtr &type) -> std::string {
    // Script objects (ProcessGroup, Work, ReduceOp), also inside lists and optionals.
    for (const c10::TypePtr &t : {type, type->containedTypes().empty()
                                            ? c10::TypePtr()
                                            : type->containedTypes()[0]})
      if (t && t->kind() == c10::TypeKind::ClassType)
        return t->str();
    return "";
  };
  std::string found;
  for (const c10::Argument &a : schema.arguments())
    if (found.empty())
      found = objectType(a.type());
  for (const c10::Argument &r : schema.returns())
    if (found.empty())
      found = objectType(r.type());
  if (found.empty())
    return absl::OkStatus();
  std::string name = schema.name();
  if (!schema.overload_name().empty())
    absl::StrAppend(&name, ".", schema.overload_name());
  std::string why = absl::StrCat("operator '", name, "' takes or returns a ", found,
                                 " object, which a graph's values cannot hold");
  if (llvm::StringRef(schema.name()).startswith("c10d::"))
    absl::StrAppend(&why, ": it is torch.distributed's in-place collective (a ProcessGroup in, "
                          "a Work handle out). graph-opt runs the functional collectives "
                          "(_c10d_functional::all_reduce and the others, then wait_tensor), "
                          "which torch.compile and torch.export emit for "
                          "torch.distributed._functional_collectives (docs/Distributed.md)");
  return absl::InvalidArgumentError(why);
}

// --- Value -------------------------------------------------------------------

void Value::setName(llvm::StringRef name) {
  graph_->noteEdit();
  graph_->nameRemoved(name_);
  name_ = name.str();
  graph_->nameAdded(name_);
}

bool Value::removeUse(const Use &use) {
  auto it = llvm::find(uses_, use);
  if (it == uses_.end()) {
    ++graph_->useListInconsistencies_;
    return false;
  }
  uses_.erase(it);
  return true;
}

void Value::replaceAllUsesWith(Value *to) {
  graph_->noteEdit();
  replaceUsesWithIf(to, [](const Use &) { return true; });
}

unsigned Value::replaceUsesWithIf(Value *to, llvm::function_ref<bool(const Use &)> pred) {
  if (!to || to == this || to->graph_ != graph_)
    return 0;
  // setArg/setOutputValue edit uses_, so work on a copy.
  llvm::SmallVector<Use, 4> uses(uses_.begin(), uses_.end());
  unsigned replaced = 0;
  for (const Use &u : uses) {
    if (!pred(u))
      continue;
    if (!u.user) {
      if (graph_->outputs_[u.argIndex].value != this)
        continue;
      graph_->setOutputValue(u.argIndex, to);
      ++replaced;
      continue;
    }
    const Argument &a = u.user->arg(u.argIndex);
    if (a.isValue()) {
      if (a.getValue() != this)
        continue;
      u.user->setArg(u.argIndex, Argument::value(to));
    } else {
      if (u.elemIndex >= a.getList().size() || a.getList()[u.elemIndex] != this)
        continue;
      llvm::SmallVector<Value *, 4> elems(a.getList().begin(), a.getList().end());
      elems[u.elemIndex] = to;
      u.user->setArg(u.argIndex, Argument::list(elems));
    }
    ++replaced;
  }
  return replaced;
}

// --- Node --------------------------------------------------------------------

Node::~Node() {
  for (auto &out : outputs_)
    graph_->nameRemoved(out->name());
}

std::string Node::opName() const {
  const auto &n = op_.operator_name();
  return n.overload_name.empty() ? n.name : absl::StrCat(n.name, ".", n.overload_name);
}

void Node::addUses(unsigned i) {
  const Argument &a = args_[i];
  if (a.isValue() && a.getValue())
    a.getValue()->addUse({this, i, 0});
  else if (a.isList())
    for (unsigned e = 0; e < a.getList().size(); ++e)
      if (Value *v = a.getList()[e])
        v->addUse({this, i, e});
}

void Node::dropUses(unsigned i) {
  const Argument &a = args_[i];
  if (a.isValue() && a.getValue())
    a.getValue()->removeUse({this, i, 0});
  else if (a.isList())
    for (unsigned e = 0; e < a.getList().size(); ++e)
      if (Value *v = a.getList()[e])
        v->removeUse({this, i, e});
}

void Node::setArg(unsigned i, Argument a) {
  graph_->noteEdit();
  dropUses(i);
  args_[i] = std::move(a);
  addUses(i);
}

llvm::SmallVector<Value *, 4> Node::operandValues() const {
  llvm::SmallVector<Value *, 4> vals;
  for (const Argument &a : args_) {
    if (a.isValue() && a.getValue())
      vals.push_back(a.getValue());
    else if (a.isList())
      for (Value *v : a.getList())
        if (v)
          vals.push_back(v);
  }
  return vals;
}

llvm::SmallVector<Value *, 2> Node::outputs() const {
  llvm::SmallVector<Value *, 2> outs;
  for (const auto &o : outputs_)
    outs.push_back(o.get());
  return outs;
}

void Node::insertInto(Node *before) {
  graph_->noteEdit();
  auto &list = graph_->nodes_;
  if (before) {
    list.insert(before->getIterator(), *this);
    graph_->orderValid_ = false;
    return;
  }
  // Appending keeps the numbering valid: the common case stays O(1).
  if (graph_->orderValid_)
    order_ = list.empty() ? 0 : list.back().order_ + 1;
  list.push_back(*this);
}

absl::Status Node::moveBefore(Node *other) {
  graph_->noteEdit();
  if (other == this)
    return absl::OkStatus();
  if (other && other->graph_ != graph_)
    return absl::InvalidArgumentError(
        absl::StrCat("cannot move node ", describe(), " before node ", other->describe(),
                     ": that node belongs to another graph"));
  auto next = std::next(getIterator());
  if (next == graph_->nodes_.end() ? other == nullptr : &*next == other)
    return absl::OkStatus(); // already there
  graph_->nodes_.remove(*this);
  insertInto(other);
  return absl::OkStatus();
}

bool Node::comesBefore(const Node *other) const {
  if (!other || other == this || other->graph_ != graph_)
    return false;
  if (!graph_->orderValid_)
    graph_->renumber();
  return order_ < other->order_;
}

void markRecomputeOf(Node &clone, const Value &original) {
  clone.setAttr(kRecomputeOfAttr, Constant::ofString(original.name().str()));
}

std::string stringAttr(const Node &node, llvm::StringRef key) {
  const Constant *c = node.attr(key);
  return c && c->kind() == ConstantKind::String ? c->asString() : std::string();
}

// --- InsertionPoint ----------------------------------------------------------

Graph *InsertionPoint::graph() const { return before_ ? before_->graph() : graph_; }

Phase InsertionPoint::phase() const {
  if (phase_)
    return *phase_;
  if (before_)
    return before_->phase();
  return graph_ && !graph_->nodes().empty() ? graph_->nodes().back().phase() : Phase::Forward;
}

namespace {
auto attrLowerBound(llvm::ArrayRef<Node::Attribute> attrs, llvm::StringRef key) {
  return std::lower_bound(attrs.begin(), attrs.end(), key,
                          [](const Node::Attribute &a, llvm::StringRef k) { return a.first < k; });
}
} // namespace

const Constant *Node::attr(llvm::StringRef key) const {
  auto it = attrLowerBound(attrs_, key);
  return it != attrs_.end() && it->first == key ? &it->second : nullptr;
}

void Node::setAttr(llvm::StringRef key, Constant value) {
  graph_->noteEdit();
  auto pos = attrLowerBound(attrs_, key) - attrs_.begin();
  if (pos < static_cast<ptrdiff_t>(attrs_.size()) && attrs_[pos].first == key)
    attrs_[pos].second = std::move(value);
  else
    attrs_.insert(attrs_.begin() + pos, Attribute(key.str(), std::move(value)));
}

bool Node::removeAttr(llvm::StringRef key) {
  graph_->noteEdit();
  auto pos = attrLowerBound(attrs_, key) - attrs_.begin();
  if (pos >= static_cast<ptrdiff_t>(attrs_.size()) || attrs_[pos].first != key)
    return false;
  attrs_.erase(attrs_.begin() + pos);
  return true;
}

std::string Node::label() const {
  return outputs_.empty() ? opName() : outputs_[0]->name().str();
}

std::string Node::valueOrOperator() const {
  return outputs_.empty() ? label() : absl::StrCat("%", label());
}

std::string Node::describe() const {
  if (!outputs_.empty())
    return absl::StrCat("%", outputs_[0]->name().str(), " = ", opName());
  size_t position = 0;
  for (const Node &n : graph_->nodes()) {
    if (&n == this)
      break;
    ++position;
  }
  return absl::StrCat(opName(), " (node ", position, ")");
}

// --- Graph -------------------------------------------------------------------

Graph::Graph(std::string name) : name_(std::move(name)) {
  static std::atomic<uint64_t> nextUid{1};
  uid_ = nextUid.fetch_add(1, std::memory_order_relaxed);
}

Graph::~Graph() {
  // Delete back to front: no node outlives a user, so no dangling-use asserts.
  while (!nodes_.empty()) {
    Node &n = nodes_.back();
    nodes_.pop_back();
    delete &n;
  }
}

void Graph::nameRemoved(llvm::StringRef name) {
  auto it = nameCounts_.find(name);
  if (it == nameCounts_.end())
    return;
  if (--it->second == 0)
    nameCounts_.erase(it);
}

unsigned Graph::countName(llvm::StringRef name) const {
  auto it = nameCounts_.find(name);
  return it == nameCounts_.end() ? 0 : it->second;
}

std::string Graph::uniqueName(llvm::StringRef hint) {
  std::string base;
  for (char c : hint)
    base.push_back(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' ? c : '_');
  if (base.empty())
    base = "v";
  if (!countName(base))
    return base;
  // The counter only moves past names in use, so asking twice gives the same answer.
  unsigned &next = nextSuffix_[base];
  for (;;) {
    std::string candidate = absl::StrCat(base, "_", next + 1);
    if (!countName(candidate))
      return candidate;
    ++next;
  }
}

Value *Graph::addInput(llvm::StringRef nameHint, ValueType type, InputRole role,
                       std::string target) {
  noteEdit();
  std::string name = uniqueName(nameHint);
  nameAdded(name);
  unsigned index = static_cast<unsigned>(inputs_.size());
  inputValues_.push_back(
      std::unique_ptr<Value>(new Value(this, std::move(name), std::move(type), nullptr, index, nextValueId_++)));
  inputs_.push_back({inputValues_.back().get(), role, std::move(target)});
  return inputValues_.back().get();
}

absl::Status Graph::eraseInput(unsigned i) {
  noteEdit();
  Value *v = inputs_.at(i).value;
  if (v->hasUses())
    return absl::FailedPreconditionError(
        absl::StrCat("cannot erase graph input %", v->name().str(), ": it still has uses"));
  for (const GraphInput &in : inputs_)
    if (in.tiedTo == v)
      return absl::FailedPreconditionError(
          absl::StrCat("cannot erase graph input %", v->name().str(), ": input %",
                       in.value->name().str(), " is tied to it"));
  nameRemoved(v->name());
  inputs_.erase(inputs_.begin() + i);
  inputValues_.erase(inputValues_.begin() + i);
  for (unsigned j = i; j < inputs_.size(); ++j)
    inputs_[j].value->index_ = j;
  return absl::OkStatus();
}

absl::Status Graph::checkTie(unsigned i, const Value *to) const {
  if (i >= inputs_.size())
    return absl::OutOfRangeError(absl::StrCat("graph @", name_, " has no input ", i));
  std::string what = absl::StrCat("cannot tie graph input %", inputs_[i].value->name().str(),
                                  " to %", to->name().str());
  if (to->graph() != this || !to->isGraphInput() || to->index() >= inputs_.size() ||
      inputs_[to->index()].value != to)
    return absl::InvalidArgumentError(absl::StrCat(what, ": not an input of this graph"));
  if (to->index() >= i)
    return absl::InvalidArgumentError(absl::StrCat(what, ": it must be an earlier input"));
  if (const Value *next = inputs_[to->index()].tiedTo)
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": it is tied to %", next->name().str(), " itself; tie to that"));
  return absl::OkStatus();
}

absl::Status Graph::tieInput(unsigned i, Value *to) {
  noteEdit();
  if (i >= inputs_.size())
    return absl::OutOfRangeError(absl::StrCat("graph @", name_, " has no input ", i));
  if (to)
    if (absl::Status st = checkTie(i, to); !st.ok())
      return st;
  inputs_[i].tiedTo = to;
  return absl::OkStatus();
}

const Value *Graph::storageOwner(const Value *input) const {
  if (!input || input->graph() != this || !input->isGraphInput() ||
      input->index() >= inputs_.size() || inputs_[input->index()].value != input)
    return input;
  const Value *to = inputs_[input->index()].tiedTo;
  return to ? to : input;
}

void Graph::addOutput(Value *value, OutputRole role, std::string target) {
  noteEdit();
  unsigned index = static_cast<unsigned>(outputs_.size());
  outputs_.push_back({value, role, std::move(target)});
  value->addUse({nullptr, index, 0});
}

void Graph::setOutputValue(unsigned i, Value *value) {
  noteEdit();
  outputs_.at(i).value->removeUse({nullptr, i, 0});
  outputs_[i].value = value;
  value->addUse({nullptr, i, 0});
}

void Graph::eraseOutput(unsigned i) {
  noteEdit();
  for (unsigned j = i; j < outputs_.size(); ++j)
    outputs_[j].value->removeUse({nullptr, j, 0});
  outputs_.erase(outputs_.begin() + i);
  for (unsigned j = i; j < outputs_.size(); ++j)
    outputs_[j].value->addUse({nullptr, j, 0});
}

Node *Graph::createNode(const c10::OperatorHandle &op, llvm::ArrayRef<Argument> args,
                        llvm::ArrayRef<ValueType> outputTypes, Phase phase,
                        llvm::ArrayRef<std::string> outputNames, Node *insertBefore) {
  Node *node = new Node(this, op, phase, nextNodeId_++);
  node->args_.assign(args.begin(), args.end());
  for (unsigned i = 0; i < node->args_.size(); ++i)
    node->addUses(i);
  llvm::StringRef fallback = op.operator_name().name;
  fallback = fallback.substr(fallback.rfind(':') + 1);
  for (unsigned i = 0; i < outputTypes.size(); ++i) {
    std::string name =
        uniqueName(i < outputNames.size() && !outputNames[i].empty() ? llvm::StringRef(outputNames[i])
                                                                     : fallback);
    nameAdded(name);
    node->outputs_.push_back(
        std::unique_ptr<Value>(new Value(this, std::move(name), outputTypes[i], node, i, nextValueId_++)));
  }
  node->insertInto(insertBefore);
  ++numNodes_;
  numNodeOutputs_ += node->outputs_.size();
  return node;
}

absl::StatusOr<Node *> Graph::createNode(const c10::OperatorHandle &op,
                                         llvm::ArrayRef<Argument> args,
                                         llvm::ArrayRef<ValueType> outputTypes,
                                         const InsertionPoint &where,
                                         llvm::ArrayRef<std::string> outputNames) {
  if (where.graph() != this)
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot create a ", op.operator_name().name, " node in graph @", name_,
        ": the insertion point is in another graph"));
  return createNode(op, args, outputTypes, where.phase(), outputNames, where.insertBefore());
}

absl::StatusOr<Node *> Graph::createNode(llvm::StringRef qualifiedOpName,
                                         llvm::ArrayRef<Argument> args,
                                         llvm::ArrayRef<ValueType> outputTypes,
                                         const InsertionPoint &where,
                                         llvm::ArrayRef<std::string> outputNames) {
  auto op = resolveOperator(qualifiedOpName);
  if (!op.ok())
    return op.status();
  return createNode(*op, args, outputTypes, where, outputNames);
}

namespace {
/// `node`'s arguments with each value operand replaced by `remap(v)` (null
/// stays null): the one operand-remapping rule of clone and cloneNode.
absl::StatusOr<llvm::SmallVector<Argument, 8>>
remapArguments(const Node &node, llvm::function_ref<absl::StatusOr<Value *>(Value *)> remap) {
  llvm::SmallVector<Argument, 8> args;
  for (const Argument &a : node.args()) {
    if (a.isValue()) {
      auto v = a.getValue() ? remap(a.getValue()) : absl::StatusOr<Value *>(nullptr);
      if (!v.ok())
        return v.status();
      args.push_back(Argument::value(*v));
    } else if (a.isList()) {
      llvm::SmallVector<Value *, 4> elems;
      for (Value *e : a.getList()) {
        auto v = e ? remap(e) : absl::StatusOr<Value *>(nullptr);
        if (!v.ok())
          return v.status();
        elems.push_back(*v);
      }
      args.push_back(Argument::list(elems));
    } else {
      args.push_back(a);
    }
  }
  return args;
}
} // namespace

Node *Graph::copyNode(const Node &node, llvm::ArrayRef<Argument> args, Phase phase,
                      Node *insertBefore) {
  llvm::SmallVector<ValueType, 2> types;
  std::vector<std::string> names;
  for (const auto &o : node.outputs_) {
    types.push_back(o->type());
    names.push_back(o->name().str());
  }
  Node *copy = createNode(node.op_, args, types, phase, names, insertBefore);
  copy->attrs_ = node.attrs_;
  return copy;
}

absl::StatusOr<Node *> Graph::cloneNode(const Node &node, ValueMap<Value *> &map,
                                        const InsertionPoint &where) {
  if (where.graph() != this)
    return absl::InvalidArgumentError(absl::StrCat("cannot clone node ", node.describe(),
                                                   " into graph @", name_,
                                                   ": the insertion point is in another graph"));
  auto args = remapArguments(node, [&](Value *v) -> absl::StatusOr<Value *> {
    if (Value *mapped = map.lookup(v))
      return mapped;
    if (v->graph() == this)
      return v;
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot clone node ", node.describe(), " into graph @", name_, ": its operand %",
        v->name().str(), " belongs to another graph and has no entry in the value map"));
  });
  if (!args.ok())
    return args.status();
  Node *copy = copyNode(node, *args, where.phase(), where.insertBefore());
  for (unsigned i = 0; i < node.outputs_.size(); ++i)
    map[node.outputs_[i].get()] = copy->output(i);
  return copy;
}

void Graph::renumber() const {
  uint64_t n = 0;
  for (const Node &node : nodes_)
    node.order_ = n++;
  orderValid_ = true;
}

absl::StatusOr<Node *> Graph::createNode(llvm::StringRef qualifiedOpName,
                                         llvm::ArrayRef<Argument> args,
                                         llvm::ArrayRef<ValueType> outputTypes, Phase phase,
                                         llvm::ArrayRef<std::string> outputNames,
                                         Node *insertBefore) {
  auto op = resolveOperator(qualifiedOpName);
  if (!op.ok())
    return op.status();
  return createNode(*op, args, outputTypes, phase, outputNames, insertBefore);
}

absl::Status Graph::eraseNode(Node *node) {
  noteEdit();
  for (const auto &out : node->outputs_) {
    if (!out->hasUses())
      continue;
    const Use &u = out->uses().front();
    std::string user = u.user ? u.user->describe() : absl::StrCat("graph output ", u.argIndex);
    return absl::FailedPreconditionError(absl::StrCat("cannot erase node ", node->describe(),
                                                      ": its output %", out->name().str(),
                                                      " is still used by ", user));
  }
  for (unsigned i = 0; i < node->args_.size(); ++i)
    node->dropUses(i);
  nodes_.remove(*node);
  --numNodes_;
  numNodeOutputs_ -= node->outputs_.size();
  delete node;
  return absl::OkStatus();
}

std::vector<Value *> Graph::allValues() const {
  std::vector<Value *> vals;
  vals.reserve(numValues());
  for (const auto &v : inputValues_)
    vals.push_back(v.get());
  for (const Node &n : nodes_)
    for (const auto &o : n.outputs_)
      vals.push_back(o.get());
  return vals;
}

size_t Graph::numValues() const { return inputValues_.size() + numNodeOutputs_; }

std::unique_ptr<Graph> Graph::clone(ValueMap<Value *> *valueMap) const {
  auto g = std::make_unique<Graph>(name_);
  g->typeConflicts_ = typeConflicts_;
  ValueMap<Value *> localMap;
  if (!valueMap)
    localMap = ValueMap<Value *>(*this, nullptr);
  auto &map = valueMap ? *valueMap : localMap;
  auto copyValue = [&](Value *newV, const Value *oldV) {
    // Keep the exact name even if the original graph (wrongly) had duplicates.
    newV->setName(oldV->name());
    map[oldV] = newV;
  };
  for (const GraphInput &in : inputs_) {
    copyValue(g->addInput(in.value->name(), in.value->type(), in.role, in.target), in.value);
    if (in.tiedTo)
      g->inputs_.back().tiedTo = map.lookup(in.tiedTo);
  }
  for (const Node &n : nodes_) {
    // An operand not mapped (a graph that does not verify) becomes null, for
    // the verifier to report on the copy too.
    auto args = remapArguments(n, [&](Value *v) -> absl::StatusOr<Value *> { return map.lookup(v); });
    Node *copy = g->copyNode(n, *args, n.phase_, nullptr);
    for (unsigned i = 0; i < n.outputs_.size(); ++i)
      copyValue(copy->output(i), n.outputs_[i].get());
  }
  for (const GraphOutput &out : outputs_)
    g->addOutput(map.lookup(out.value), out.role, out.target);
  return g;
}

// --- Argument ----------------------------------------------------------------

bool sameArgument(const Argument &a, const Argument &b) {
  if (a.kind() != b.kind())
    return false;
  switch (a.kind()) {
  case Argument::Kind::Value:
    return a.getValue() == b.getValue();
  case Argument::Kind::Constant:
    return a.getConstant() == b.getConstant();
  case Argument::Kind::ValueList:
    return llvm::equal(a.getList(), b.getList());
  }
  return false;
}

llvm::hash_code hash_value(const Argument &a) {
  auto kind = static_cast<unsigned>(a.kind());
  switch (a.kind()) {
  case Argument::Kind::Value:
    return llvm::hash_combine(kind, a.getValue());
  case Argument::Kind::Constant:
    return llvm::hash_combine(kind, hash_value(a.getConstant()));
  case Argument::Kind::ValueList:
    return llvm::hash_combine(kind, llvm::hash_combine_range(a.getList().begin(), a.getList().end()));
  }
  return llvm::hash_combine(kind);
}

} // namespace graphopt

namespace graphopt {

void Value::setType(ValueType type) {
  graph_->noteEdit();
  type_ = std::move(type);
}

void Node::setPhase(Phase p) {
  graph_->noteEdit();
  phase_ = p;
}

} // namespace graphopt
