//===- Graph.h - The graph-opt IR: Graph, Node, Value, Argument ---*- C++ -*-===//
//
// A Graph is a straight-line sequence of Nodes in execution order. Each Node is
// one call of an ATen (or other registered) operator, resolved against the c10
// dispatcher, with one Argument per schema argument and SSA Values as outputs.
// Graph inputs carry a role (parameter, buffer, user input, constant, optimizer
// state) and graph outputs a role (loss, gradient of a parameter, user output,
// buffer mutation). Weights live beside the graph in a WeightStore, not in it.
//
// Values know their uses, so replaceAllUsesWith and erasure checks are cheap.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Constant.h"
#include "graphopt/IR/TensorType.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/ADT/iterator_range.h>
#include <llvm/ADT/simple_ilist.h>

#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace graphopt {

class Graph;
class Node;
class Value;
template <typename T> class ValueMap;
class IRTestAccess; // unittests only

/// The part of a training step a node belongs to. Nodes appear in this order.
enum class Phase : uint8_t { Forward, Backward, Optimizer };

enum class InputRole : uint8_t { Parameter, Buffer, UserInput, Constant, OptimizerState };

enum class OutputRole : uint8_t {
  Loss,
  Gradient,       ///< target: the parameter's name
  InputGradient,  ///< target: the user input's name
  UserOutput,
  BufferMutation, ///< target: the buffer's name
};

llvm::StringRef phaseName(Phase phase);
llvm::StringRef inputRoleName(InputRole role);
llvm::StringRef outputRoleName(OutputRole role);
std::optional<Phase> parsePhaseName(llvm::StringRef name);
std::optional<InputRole> parseInputRoleName(llvm::StringRef name);
std::optional<OutputRole> parseOutputRoleName(llvm::StringRef name);

/// One place a Value is used: argument `argIndex` of `user` (element
/// `elemIndex` when that argument is a list), or graph output `argIndex` when
/// `user` is null.
struct Use {
  Node *user = nullptr;
  uint32_t argIndex = 0;
  uint32_t elemIndex = 0;
  bool operator==(const Use &o) const {
    return user == o.user && argIndex == o.argIndex && elemIndex == o.elemIndex;
  }
};

class Value {
public:
  llvm::StringRef name() const { return name_; }
  /// Renames exactly, without making the name unique: the verifier checks that.
  /// Use Graph::uniqueName for a fresh name.
  void setName(llvm::StringRef name);

  const ValueType &type() const { return type_; }
  void setType(ValueType type);
  bool isTensor() const { return type_.isTensor(); }
  const TensorType &tensorType() const { return type_.tensor; }

  /// The node that defines this value, or null for a graph input.
  Node *definingNode() const { return def_; }
  bool isGraphInput() const { return def_ == nullptr; }
  /// Output position in the defining node, or input position in the graph.
  unsigned index() const { return index_; }
  /// A number unique within the graph, given in creation order and never
  /// reused, below Graph::valueIdBound(): analyses index vectors with it
  /// instead of hashing pointers.
  unsigned id() const { return id_; }
  Graph *graph() const { return graph_; }

  llvm::ArrayRef<Use> uses() const { return uses_; }
  bool hasUses() const { return !uses_.empty(); }
  /// Points every use of this value (node arguments and graph outputs) at `to`.
  void replaceAllUsesWith(Value *to);
  /// Points the uses for which `pred` holds at `to` (a graph output is a use
  /// with a null user; a list argument has one use per element); returns how
  /// many it redirected. `to` must be another value of the same graph.
  unsigned replaceUsesWithIf(Value *to, llvm::function_ref<bool(const Use &)> pred);

private:
  friend class Graph;
  friend class Node;
  friend class IRTestAccess;
  Value(Graph *graph, std::string name, ValueType type, Node *def, unsigned index, unsigned id)
      : graph_(graph), name_(std::move(name)), type_(std::move(type)), def_(def),
        index_(index), id_(id) {}
  void addUse(const Use &use) { uses_.push_back(use); }
  /// Forgets one recorded use. A use that is not recorded means the use lists
  /// are already inconsistent: nothing is removed, the graph counts the event
  /// (Graph::useListInconsistencies, which the verifier reports) and false is
  /// returned; memory is never corrupted (no assert either, so release and
  /// debug builds behave alike).
  bool removeUse(const Use &use);

  Graph *graph_;
  std::string name_;
  ValueType type_;
  Node *def_;
  unsigned index_;
  unsigned id_;
  llvm::SmallVector<Use, 2> uses_;
};

/// One operator argument: a Value (a tensor or a scalar an operator produced),
/// a Constant, or a list of Values where null stands for None (Tensor[] and
/// Tensor?[] arguments).
class Argument {
public:
  enum class Kind : uint8_t { Value, Constant, ValueList };

  static Argument value(Value *v) { return Argument(Kind::Value, v, Constant(), {}); }
  static Argument constant(Constant c) { return Argument(Kind::Constant, nullptr, std::move(c), {}); }
  static Argument list(llvm::ArrayRef<Value *> elems) {
    return Argument(Kind::ValueList, nullptr, Constant(), elems);
  }

  Kind kind() const { return kind_; }
  bool isValue() const { return kind_ == Kind::Value; }
  bool isConstant() const { return kind_ == Kind::Constant; }
  bool isList() const { return kind_ == Kind::ValueList; }
  Value *getValue() const { return value_; }
  const Constant &getConstant() const { return constant_; }
  llvm::ArrayRef<Value *> getList() const { return list_; }

private:
  friend class Node;
  Argument(Kind k, Value *v, Constant c, llvm::ArrayRef<Value *> l)
      : kind_(k), value_(v), constant_(std::move(c)), list_(l.begin(), l.end()) {}
  Kind kind_;
  Value *value_;
  Constant constant_;
  llvm::SmallVector<Value *, 2> list_;
};

/// Structural equality of arguments: the same Value (by identity), equal
/// constants, or lists of the same Values (null for None) in order.
bool sameArgument(const Argument &a, const Argument &b);
/// Consistent with sameArgument (value numbering, CSE).
llvm::hash_code hash_value(const Argument &a);

class Node : public llvm::ilist_node<Node> {
public:
  ~Node();

  const c10::OperatorHandle &op() const { return op_; }
  const c10::FunctionSchema &schema() const { return op_.schema(); }
  /// "aten::add.Tensor", or "aten::relu" for the default overload.
  std::string opName() const;

  Phase phase() const { return phase_; }
  void setPhase(Phase p);

  llvm::ArrayRef<Argument> args() const { return args_; }
  const Argument &arg(unsigned i) const { return args_[i]; }
  unsigned numArgs() const { return static_cast<unsigned>(args_.size()); }
  /// Replaces argument `i`, keeping use lists right.
  void setArg(unsigned i, Argument a);
  /// Every Value this node reads, in argument order (duplicates kept).
  llvm::SmallVector<Value *, 4> operandValues() const;

  unsigned numOutputs() const { return static_cast<unsigned>(outputs_.size()); }
  Value *output(unsigned i = 0) const { return outputs_[i].get(); }
  llvm::SmallVector<Value *, 2> outputs() const;

  Graph *graph() const { return graph_; }
  /// A number unique within the graph, given in creation order and never
  /// reused, below Graph::nodeIdBound(): analyses index NodeMap with it.
  unsigned id() const { return id_; }

  /// Moves this node right before `other`, or to the end if `other` is null.
  /// Moving a node before itself changes nothing (OK); `other` in another
  /// graph is an error that changes nothing. Phases are not changed: set the
  /// phase yourself if the node crosses a phase boundary.
  absl::Status moveBefore(Node *other);

  /// Whether this node comes strictly before `other` in the node list (false
  /// for the node itself and for nodes of other graphs). Amortised O(1): the
  /// graph keeps order numbers, renumbered lazily after insertions in the
  /// middle and moves (like LLVM's Instruction::comesBefore).
  bool comesBefore(const Node *other) const;

  // --- attributes -----------------------------------------------------------
  /// A small dictionary of typed facts about the node that are not operator
  /// arguments: where it came from (`module`, `source`), what a rewrite made
  /// it for (`recompute_of`). Keys are kept sorted, so iteration and printing
  /// are deterministic. Attributes never change what the node computes.
  using Attribute = std::pair<std::string, Constant>;
  /// The attribute `key`, or null if the node has none.
  const Constant *attr(llvm::StringRef key) const;
  bool hasAttr(llvm::StringRef key) const { return attr(key) != nullptr; }
  /// Sets (adds or replaces) the attribute `key`.
  void setAttr(llvm::StringRef key, Constant value);
  /// Removes the attribute `key`; returns whether it was there.
  bool removeAttr(llvm::StringRef key);
  /// All attributes, sorted by key.
  llvm::ArrayRef<Attribute> attrs() const { return attrs_; }

  /// A short description for messages: "%y = aten::relu" or "aten::foo (node 12)".
  std::string describe() const;
  /// A short name for reports and plans: its first result's name ("y"), or
  /// its operator's ("aten::_assert_scalar") for a node without results.
  /// Never assume output(0) exists: assertions and in-place ops returning
  /// nothing are ordinary nodes.
  std::string label() const;
  /// label() as a plan's reasons name a node: "%y" for its first result, or
  /// the operator's name for a node without results.
  std::string valueOrOperator() const;

private:
  friend class Graph;
  Node(Graph *graph, c10::OperatorHandle op, Phase phase, unsigned id)
      : graph_(graph), op_(std::move(op)), phase_(phase), id_(id) {}
  void insertInto(Node *before); ///< links into graph_'s list (end if null)
  void addUses(unsigned argIndex);
  void dropUses(unsigned argIndex);

  Graph *graph_;
  c10::OperatorHandle op_;
  Phase phase_;
  unsigned id_;
  mutable uint64_t order_ = 0; ///< position number, valid while graph_->orderValid_
  llvm::SmallVector<Argument, 4> args_;
  llvm::SmallVector<std::unique_ptr<Value>, 1> outputs_;
  llvm::SmallVector<Attribute, 0> attrs_; ///< sorted by key
};

struct GraphInput {
  Value *value;
  InputRole role;
  /// The parameter, buffer or optimizer-state name (e.g. "layer1.0.conv1.weight").
  std::string target;
  /// An earlier graph input whose storage this one shares (tied weights, such
  /// as GPT-2's input and output embeddings), or null. Set with
  /// Graph::tieInput; the storage is counted once (Graph::storageOwner).
  Value *tiedTo = nullptr;
};

struct GraphOutput {
  Value *value;
  OutputRole role;
  /// The parameter (Gradient), input (InputGradient) or buffer (BufferMutation) name.
  std::string target;
};

/// Where a rewrite creates nodes: before a given node, or at the end of a
/// graph. It also fixes the phase of what it creates: the explicit phase if one
/// is given, else the phase of the neighbouring node (the node it inserts
/// before; at the end, the last node; forward in an empty graph), read when
/// the node is created.
class InsertionPoint {
public:
  static InsertionPoint before(Node *node, std::optional<Phase> phase = std::nullopt) {
    return InsertionPoint(nullptr, node, phase);
  }
  static InsertionPoint atEnd(Graph &graph, std::optional<Phase> phase = std::nullopt) {
    return InsertionPoint(&graph, nullptr, phase);
  }
  /// The graph it inserts into.
  Graph *graph() const;
  /// The node it inserts before, or null for the end.
  Node *insertBefore() const { return before_; }
  /// The phase a node created here gets (see above).
  Phase phase() const;

private:
  InsertionPoint(Graph *g, Node *before, std::optional<Phase> p)
      : graph_(g), before_(before), phase_(p) {}
  Graph *graph_;
  Node *before_;
  std::optional<Phase> phase_;
};

/// The name of the attribute a rewrite puts on a node it made to recompute a
/// value instead of keeping it alive: the original value's name (a string).
inline constexpr llvm::StringLiteral kRecomputeOfAttr = "recompute_of";
/// Marks `clone` as recomputing `original` (attribute recompute_of).
void markRecomputeOf(Node &clone, const Value &original);
/// The string attribute `key` of `node` (`module`, `source`), or "" when it has none.
std::string stringAttr(const Node &node, llvm::StringRef key);

/// The nodes of a graph as a range (range-for, begin/end, front/back, empty).
/// The list itself stays private to the Graph: nodes are added, moved and
/// removed only through Graph and Node, which keep use lists and order right.
template <typename It> class NodeRange : public llvm::iterator_range<It> {
public:
  using llvm::iterator_range<It>::iterator_range;
  decltype(auto) front() const { return *this->begin(); }
  decltype(auto) back() const { return *std::prev(this->end()); }
  bool empty() const { return this->begin() == this->end(); }
};

/// Looks up "ns::name.overload" (or "ns::name" for the default overload) in the
/// c10 dispatcher. An unknown operator is an error that names it.
absl::StatusOr<c10::OperatorHandle> resolveOperator(llvm::StringRef qualifiedName);

class Graph {
public:
  using NodeList = llvm::simple_ilist<Node>;

  explicit Graph(std::string name = "main");
  ~Graph();
  Graph(const Graph &) = delete;
  Graph &operator=(const Graph &) = delete;

  llvm::StringRef name() const { return name_; }
  void setName(std::string name) {
    noteEdit();
    name_ = std::move(name);
  }
  /// Counts edits: every change to the graph (nodes, arguments, uses, types,
  /// names, phases, attributes, inputs, outputs) moves it. Caches key on it
  /// (AnalysisManager), and the pass manager checks that a pass reporting
  /// "unchanged" left it where it was.
  uint64_t editEpoch() const { return editEpoch_; }
  /// A number no other Graph of this process has had or will have (a clone
  /// gets a new one): caches key on it, since an address can be reused.
  uint64_t uid() const { return uid_; }

  /// A deep copy with the same names. `valueMap`, if given, maps old values to new.
  std::unique_ptr<Graph> clone(ValueMap<Value *> *valueMap = nullptr) const;

  /// What an importer found the declared types wrong about and could not
  /// mend: a result something reads that its kernel makes with another
  /// dtype, shape or layout. Every pass reasons on the declared types, so the
  /// optimizer refuses to run one on such a graph (each entry names the node).
  /// Kept by clone; not printed.
  void addTypeConflict(std::string message) { typeConflicts_.push_back(std::move(message)); }
  llvm::ArrayRef<std::string> typeConflicts() const { return typeConflicts_; }

  // --- inputs and outputs ---------------------------------------------------
  /// Adds a graph input; `nameHint` is made unique if it is taken.
  Value *addInput(llvm::StringRef nameHint, ValueType type, InputRole role,
                  std::string target = "");
  llvm::ArrayRef<GraphInput> inputs() const { return inputs_; }
  /// Removes input `i`; refuses while it has uses or another input is tied to it.
  absl::Status eraseInput(unsigned i);
  /// Records that input `i` shares its storage with the earlier input `to`
  /// (null: unties). `to` must be an earlier input of this graph that is not
  /// tied itself; the verifier checks that both span the same storage bytes.
  absl::Status tieInput(unsigned i, Value *to);
  /// Why input `i` may not be tied to `to` (not an earlier input of this
  /// graph, or tied itself), or OK: the rule tieInput and the verifier share.
  absl::Status checkTie(unsigned i, const Value *to) const;
  /// The input whose storage graph input `input` uses: the input it is tied
  /// to, or itself. Count an input's storage only where this is the input itself.
  const Value *storageOwner(const Value *input) const;

  void addOutput(Value *value, OutputRole role, std::string target = "");
  llvm::ArrayRef<GraphOutput> outputs() const { return outputs_; }
  void setOutputValue(unsigned i, Value *value);
  void eraseOutput(unsigned i);

  // --- nodes ----------------------------------------------------------------
  /// Creates a node calling `op` with `args` (one per schema argument) and one
  /// output per entry of `outputTypes`, inserted before `insertBefore` (or at the
  /// end). Output names are hints, made unique; missing ones derive from the op.
  Node *createNode(const c10::OperatorHandle &op, llvm::ArrayRef<Argument> args,
                   llvm::ArrayRef<ValueType> outputTypes, Phase phase = Phase::Forward,
                   llvm::ArrayRef<std::string> outputNames = {}, Node *insertBefore = nullptr);
  /// Same, resolving the operator by name first.
  absl::StatusOr<Node *> createNode(llvm::StringRef qualifiedOpName, llvm::ArrayRef<Argument> args,
                                    llvm::ArrayRef<ValueType> outputTypes,
                                    Phase phase = Phase::Forward,
                                    llvm::ArrayRef<std::string> outputNames = {},
                                    Node *insertBefore = nullptr);
  /// Creates a node at `where` (which also gives its phase, see
  /// InsertionPoint). An insertion point in another graph is an error.
  absl::StatusOr<Node *> createNode(const c10::OperatorHandle &op, llvm::ArrayRef<Argument> args,
                                    llvm::ArrayRef<ValueType> outputTypes,
                                    const InsertionPoint &where,
                                    llvm::ArrayRef<std::string> outputNames = {});
  absl::StatusOr<Node *> createNode(llvm::StringRef qualifiedOpName, llvm::ArrayRef<Argument> args,
                                    llvm::ArrayRef<ValueType> outputTypes,
                                    const InsertionPoint &where,
                                    llvm::ArrayRef<std::string> outputNames = {});
  /// Copies `node` (of this graph or another) to `where`: the same operator,
  /// constants, output types and attributes; the phase from `where`. Each
  /// operand is replaced by its entry in `map` if it has one; an unmapped
  /// operand is used as is when it is a value of this graph, and is an error
  /// (changing nothing) when it belongs to another graph. Each output's clone
  /// is recorded in `map` (keyed by the original's id, so use one map per
  /// source graph) and gets a fresh name derived from the original's
  /// (`h` -> `h_1`).
  absl::StatusOr<Node *> cloneNode(const Node &node, ValueMap<Value *> &map,
                                   const InsertionPoint &where);
  /// Deletes `node`; refuses (and changes nothing) while any output has uses.
  absl::Status eraseNode(Node *node);

  using node_iterator = NodeList::iterator;
  using const_node_iterator = NodeList::const_iterator;
  /// The nodes in execution order.
  NodeRange<node_iterator> nodes() { return {nodes_.begin(), nodes_.end()}; }
  NodeRange<const_node_iterator> nodes() const { return {nodes_.begin(), nodes_.end()}; }
  size_t numNodes() const { return numNodes_; }

  // --- names ----------------------------------------------------------------
  /// `hint` (sanitized to [A-Za-z0-9_.]) if unused, else hint_1, hint_2, ...
  std::string uniqueName(llvm::StringRef hint);
  /// How many values currently carry `name` (more than one is a verifier error).
  unsigned countName(llvm::StringRef name) const;
  /// All values: inputs first, then node outputs in node order.
  std::vector<Value *> allValues() const;
  size_t numValues() const;
  /// Every Value::id() of this graph is below this.
  unsigned valueIdBound() const { return nextValueId_; }
  /// Every Node::id() of this graph is below this.
  unsigned nodeIdBound() const { return nextNodeId_; }
  /// How often an edit found the use lists inconsistent (a use to remove that
  /// was not recorded); the verifier reports a non-zero count.
  unsigned useListInconsistencies() const { return useListInconsistencies_; }

private:
  friend class Value;
  friend class Node;
  void noteEdit() { ++editEpoch_; }
  void nameAdded(llvm::StringRef name) { ++nameCounts_[name]; }
  /// A node like `node` (operator, output types, name hints, attributes) with `args`.
  Node *copyNode(const Node &node, llvm::ArrayRef<Argument> args, Phase phase, Node *insertBefore);
  void nameRemoved(llvm::StringRef name);
  void removeOutputUse(unsigned i);

  std::string name_;
  std::vector<std::string> typeConflicts_;
  uint64_t uid_;
  uint64_t editEpoch_ = 0;
  std::vector<std::unique_ptr<Value>> inputValues_;
  std::vector<GraphInput> inputs_;
  std::vector<GraphOutput> outputs_;
  NodeList nodes_;
  size_t numNodes_ = 0;
  /// Outputs of the nodes in nodes_ (numValues without walking the list).
  size_t numNodeOutputs_ = 0;
  llvm::StringMap<unsigned> nameCounts_;
  llvm::StringMap<unsigned> nextSuffix_;
  unsigned nextValueId_ = 0;
  unsigned nextNodeId_ = 0;
  unsigned useListInconsistencies_ = 0;
  /// Whether every node's order_ increases along the list (see comesBefore).
  mutable bool orderValid_ = true;
  void renumber() const;
};

} // namespace graphopt
