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
#include <llvm/ADT/StringRef.h>
#include <llvm/ADT/iterator_range.h>
#include <llvm/ADT/simple_ilist.h>

#include <memory>
#include <string>
#include <vector>

namespace graphopt {

class Graph;
class Node;
class Value;

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
  void setType(ValueType type) { type_ = std::move(type); }
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

private:
  friend class Graph;
  friend class Node;
  Value(Graph *graph, std::string name, ValueType type, Node *def, unsigned index, unsigned id)
      : graph_(graph), name_(std::move(name)), type_(std::move(type)), def_(def),
        index_(index), id_(id) {}
  void addUse(const Use &use) { uses_.push_back(use); }
  void removeUse(const Use &use);

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

class Node : public llvm::ilist_node<Node> {
public:
  ~Node();

  const c10::OperatorHandle &op() const { return op_; }
  const c10::FunctionSchema &schema() const { return op_.schema(); }
  /// "aten::add.Tensor", or "aten::relu" for the default overload.
  std::string opName() const;

  Phase phase() const { return phase_; }
  void setPhase(Phase p) { phase_ = p; }

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

  /// Moves this node right before `other` (same graph) or to the end if null.
  void moveBefore(Node *other);

  /// A short description for messages: "%y = aten::relu" or "aten::foo (node 12)".
  std::string describe() const;

private:
  friend class Graph;
  Node(Graph *graph, c10::OperatorHandle op, Phase phase, unsigned id)
      : graph_(graph), op_(std::move(op)), phase_(phase), id_(id) {}
  void addUses(unsigned argIndex);
  void dropUses(unsigned argIndex);

  Graph *graph_;
  c10::OperatorHandle op_;
  Phase phase_;
  unsigned id_;
  llvm::SmallVector<Argument, 4> args_;
  llvm::SmallVector<std::unique_ptr<Value>, 1> outputs_;
};

struct GraphInput {
  Value *value;
  InputRole role;
  /// The parameter, buffer or optimizer-state name (e.g. "layer1.0.conv1.weight").
  std::string target;
};

struct GraphOutput {
  Value *value;
  OutputRole role;
  /// The parameter (Gradient), input (InputGradient) or buffer (BufferMutation) name.
  std::string target;
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
  void setName(std::string name) { name_ = std::move(name); }
  /// A number no other Graph of this process has had or will have (a clone
  /// gets a new one): caches key on it, since an address can be reused.
  uint64_t uid() const { return uid_; }

  /// A deep copy with the same names. `valueMap`, if given, maps old values to new.
  std::unique_ptr<Graph> clone(llvm::DenseMap<const Value *, Value *> *valueMap = nullptr) const;

  // --- inputs and outputs ---------------------------------------------------
  /// Adds a graph input; `nameHint` is made unique if it is taken.
  Value *addInput(llvm::StringRef nameHint, ValueType type, InputRole role,
                  std::string target = "");
  llvm::ArrayRef<GraphInput> inputs() const { return inputs_; }
  /// Removes input `i`; refuses while it has uses.
  absl::Status eraseInput(unsigned i);

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
  /// Deletes `node`; refuses (and changes nothing) while any output has uses.
  absl::Status eraseNode(Node *node);

  NodeList &nodes() { return nodes_; }
  const NodeList &nodes() const { return nodes_; }
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

private:
  friend class Value;
  friend class Node;
  void nameAdded(llvm::StringRef name) { ++nameCounts_[name]; }
  void nameRemoved(llvm::StringRef name);
  void removeOutputUse(unsigned i);

  std::string name_;
  uint64_t uid_;
  std::vector<std::unique_ptr<Value>> inputValues_;
  std::vector<GraphInput> inputs_;
  std::vector<GraphOutput> outputs_;
  NodeList nodes_;
  size_t numNodes_ = 0;
  llvm::StringMap<unsigned> nameCounts_;
  llvm::StringMap<unsigned> nextSuffix_;
  unsigned nextValueId_ = 0;
  unsigned nextNodeId_ = 0;
};

} // namespace graphopt
