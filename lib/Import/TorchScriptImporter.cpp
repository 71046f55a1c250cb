//===- TorchScriptImporter.cpp - TorchScript modules (.pt) ----------------===//
//
// Loads a module with torch::jit::load, inlines its forward method, and lowers
// the TorchScript graph to a forward-only IR of operator calls:
//   prim::Constant                -> IR constants (tensor constants become
//                                    constant inputs with a weight)
//   prim::GetAttr chains on self  -> parameter and buffer inputs, by FQN
//   prim::ListConstruct           -> list arguments (int lists, tensor lists)
//   prim::ListUnpack/TupleUnpack  -> the outputs of a list-returning operator
//   prim::TupleConstruct returned -> several graph outputs
//   registered operators          -> Nodes
// Control flow and TorchScript-only operators are errors naming the node.
// TorchScript keeps no tensor shapes, so input types come from the caller or
// from the extra file "graphopt/input_types" that tools/export writes, and
// every other type is inferred on meta tensors.
//
//===----------------------------------------------------------------------===//
#include "graphopt/IR/OperatorSupport.h"
#include "graphopt/IR/IValueConversion.h"
#include "graphopt/IR/Parser.h"
#include "graphopt/IR/SchemaUtils.h"
#include "graphopt/IR/TypeInference.h"
#include "graphopt/Import/Importer.h"

#include <absl/strings/str_cat.h>
#include <llvm/ADT/DenseMap.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/freeze_module.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/passes/peephole.h>
#include <torch/csrc/jit/passes/shape_analysis.h>
#include <torch/csrc/jit/serialization/import.h>

#include <sstream>

namespace graphopt {

namespace {

namespace jit = torch::jit;

constexpr const char *kInputTypesFile = "graphopt/input_types";

class TorchScriptLowering {
public:
  TorchScriptLowering(std::string path, jit::Module module)
      : path_(std::move(path)), module_(std::move(module)) {}

  absl::StatusOr<ImportedModel> lower(const std::vector<ValueType> &inputTypes);

private:
  absl::Status error(llvm::StringRef message) const {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": ", message.str()));
  }
  absl::Status nodeError(const jit::Node *n, llvm::StringRef message) const {
    std::ostringstream os;
    os << *n;
    // The node's first line: a prim::If would print its whole blocks.
    std::string text = llvm::StringRef(os.str()).split('\n').first.rtrim().str();
    return error(absl::StrCat("node '", text, "': ", message.str()));
  }

  // lower's steps.
  /// Reads the parameters and buffers, and the device the model was saved on.
  void readWeights(const std::vector<ValueType> &inputTypes);
  /// forward's graph of a frozen eval-mode copy (`frozen`), inlined and, with
  /// the input types, specialised to them.
  std::shared_ptr<jit::Graph> frozenForward(const std::vector<ValueType> &inputTypes,
                                            jit::Module &frozen);
  /// Binds self to the frozen module and adds the tensor inputs.
  absl::Status addInputs(const jit::Graph &graph, const jit::Module &frozen,
                         const std::vector<ValueType> &inputTypes);
  /// Adds the return value as the graph's outputs: a tensor, or a tuple/list of tensors.
  absl::Status addOutputs(const jit::Graph &graph);
  absl::Status lowerNode(const jit::Node *n);
  absl::Status lowerGetAttr(const jit::Node *n);
  absl::Status lowerConstant(const jit::Node *n);
  absl::Status lowerOperator(const jit::Node *n);
  absl::StatusOr<Argument> argumentFor(const jit::Node *n, const jit::Value *v,
                                       const c10::Argument &schemaArg);
  Value *weightInput(const std::string &fqn, const at::Tensor &t, InputRole role);

  std::string path_;
  jit::Module module_;
  ImportedModel model_;
  llvm::DenseMap<const jit::Value *, Value *> values_;       ///< tensors and scalars
  llvm::DenseMap<const jit::Value *, Constant> constants_;   ///< non-tensor constants
  llvm::DenseMap<const jit::Value *, std::string> modules_;  ///< submodule paths ("" = self)
  /// The (frozen) module objects those values are, to read other attributes.
  std::map<const jit::Value *, c10::intrusive_ptr<c10::ivalue::Object>> attributes_;
  llvm::DenseMap<const jit::Value *, const jit::Node *> lists_; ///< ListConstruct outputs
  /// Outputs of list-returning operators, filled by the ListUnpack that reads them.
  llvm::DenseMap<const jit::Value *, std::vector<Value *>> unpacked_;
  std::map<std::string, at::Tensor> parameters_, buffers_;
  std::map<std::string, Value *> weightInputs_;
  unsigned tensorConstants_ = 0;
  /// The device the model was saved on: its weights' (else its inputs').
  c10::Device modelDevice_{c10::DeviceType::CPU};
};

Value *TorchScriptLowering::weightInput(const std::string &fqn, const at::Tensor &t, InputRole role) {
  auto it = weightInputs_.find(fqn);
  if (it != weightInputs_.end())
    return it->second;
  llvm::ArrayRef<int64_t> sizes(t.sizes().data(), t.sizes().size());
  llvm::ArrayRef<int64_t> strides(t.strides().data(), t.strides().size());
  Value *v = model_.graph->addInput(
      fqn, ValueType::ofTensor(TensorType(t.scalar_type(), sizes, strides, t.device())), role, fqn);
  model_.weights.set(fqn, t);
  weightInputs_[fqn] = v;
  return v;
}

absl::Status TorchScriptLowering::lowerGetAttr(const jit::Node *n) {
  auto base = modules_.find(n->input(0));
  if (base == modules_.end())
    return nodeError(n, "attribute access on something other than the module");
  std::string name = n->s(c10::attr::name);
  std::string fqn = base->second.empty() ? name : base->second + "." + name;
  if (n->output()->type()->cast<c10::ClassType>()) {
    modules_[n->output()] = fqn;
    if (attributes_.count(n->input(0)))
      attributes_[n->output()] = attributes_[n->input(0)]->getAttr(name).toObject();
    return absl::OkStatus();
  }
  if (auto p = parameters_.find(fqn); p != parameters_.end()) {
    values_[n->output()] = weightInput(fqn, p->second, InputRole::Parameter);
    return absl::OkStatus();
  }
  if (auto b = buffers_.find(fqn); b != buffers_.end()) {
    values_[n->output()] = weightInput(fqn, b->second, InputRole::Buffer);
    return absl::OkStatus();
  }
  // Another attribute that freezing kept: an absent optional tensor (a
  // convolution's bias=None) or a plain tensor attribute.
  c10::IValue value = attributes_.count(n->input(0))
                          ? attributes_[n->input(0)]->getAttr(name)
                          : c10::IValue();
  if (value.isNone()) {
    constants_[n->output()] = Constant::none();
    return absl::OkStatus();
  }
  if (value.isTensor()) {
    values_[n->output()] = weightInput(fqn, value.toTensor(), InputRole::Constant);
    return absl::OkStatus();
  }
  return nodeError(n, absl::StrCat("attribute '", fqn, "' is neither a parameter, a buffer, a "
                                   "tensor nor None"));
}

absl::Status TorchScriptLowering::lowerConstant(const jit::Node *n) {
  const jit::Value *out = n->output();
  auto iv = jit::toIValue(out);
  if (!iv)
    return nodeError(n, "constant without a value");
  if (iv->isTensor()) {
    std::string name = absl::StrCat("_tensor_constant", tensorConstants_++);
    values_[out] = weightInput(name, iv->toTensor(), InputRole::Constant);
    return absl::OkStatus();
  }
  auto c = constantFromIValue(*iv, out->type());
  if (!c)
    return nodeError(n, absl::StrCat("constant of type ", out->type()->str(), " is not supported"));
  if (c->kind() == ConstantKind::Device)
    c = importedDeviceConstant(c->asDevice(), modelDevice_);
  constants_[out] = std::move(*c);
  return absl::OkStatus();
}

absl::StatusOr<Argument> TorchScriptLowering::argumentFor(const jit::Node *n, const jit::Value *v,
                                                          const c10::Argument &schemaArg) {
  if (auto it = values_.find(v); it != values_.end())
    return Argument::value(it->second);
  ArgForm form = argFormOf(schemaArg.real_type());
  if (auto it = constants_.find(v); it != constants_.end()) {
    if (form == ArgForm::TensorList || form == ArgForm::OptionalTensorList)
      if (it->second.kind() == ConstantKind::IntList && it->second.asIntList().empty())
        return Argument::list({}); // an empty list constant
    auto coerced = coerceConstant(it->second, schemaArg.real_type());
    return Argument::constant(coerced.ok() ? *coerced : it->second);
  }
  auto list = lists_.find(v);
  if (list == lists_.end())
    return nodeError(n, absl::StrCat("argument '", schemaArg.name(), "' (%", v->debugName(),
                                     ") comes from a construct graph-opt does not lower"));
  if (form == ArgForm::TensorList || form == ArgForm::OptionalTensorList) {
    std::vector<Value *> elems;
    for (const jit::Value *e : list->second->inputs()) {
      if (auto it = values_.find(e); it != values_.end()) {
        elems.push_back(it->second);
      } else if (auto c = constants_.find(e); c != constants_.end() && c->second.isNone()) {
        elems.push_back(nullptr);
      } else {
        return nodeError(n, absl::StrCat("argument '", schemaArg.name(), "': list element %",
                                         e->debugName(), " is not a tensor"));
      }
    }
    return Argument::list(elems);
  }
  // A list of scalars: every element must be a constant (no shape arithmetic).
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<bool> bools;
  for (const jit::Value *e : list->second->inputs()) {
    auto c = constants_.find(e);
    if (c == constants_.end())
      return nodeError(n, absl::StrCat("argument '", schemaArg.name(), "': list element %",
                                       e->debugName(),
                                       " is computed at run time; only constant lists are supported"));
    switch (c->second.kind()) {
    case ConstantKind::Int: ints.push_back(c->second.asInt()); break;
    case ConstantKind::Float: floats.push_back(c->second.asFloat()); break;
    case ConstantKind::Bool: bools.push_back(c->second.asBool()); break;
    default:
      return nodeError(n, absl::StrCat("argument '", schemaArg.name(), "': unsupported list element"));
    }
  }
  Constant c = !floats.empty() ? Constant::ofFloatList(floats)
               : !bools.empty() ? Constant::ofBoolList(bools)
                                : Constant::ofIntList(ints);
  auto coerced = coerceConstant(c, schemaArg.real_type());
  return Argument::constant(coerced.ok() ? *coerced : c);
}

absl::Status TorchScriptLowering::lowerOperator(const jit::Node *n) {
  const c10::FunctionSchema *schema = n->maybeSchema();
  if (!schema)
    return nodeError(n, "no operator schema matches this call");
  auto handle = c10::Dispatcher::singleton().findSchema(schema->operator_name());
  if (!handle)
    return nodeError(n, absl::StrCat("operator ", c10::toString(schema->operator_name()),
                                     " is TorchScript-only (not registered with the dispatcher); "
                                     "not supported"));
  if (absl::Status st = checkOperatorSchema(handle->schema()); !st.ok())
    return nodeError(n, std::string(st.message()));
  const auto &schemaArgs = handle->schema().arguments();
  if (n->inputs().size() != schemaArgs.size())
    return nodeError(n, "argument count differs from the operator schema");
  // TorchScript passes every schema argument, keyword-only ones included, in order.
  ArgumentSlots slots(handle->schema());
  for (unsigned i = 0; i < schemaArgs.size(); ++i) {
    auto a = argumentFor(n, n->input(i), schemaArgs[i]);
    if (!a.ok())
      return a.status();
    slots.set(i, std::move(*a));
  }
  auto filled = slots.finish();
  if (!filled.ok())
    return nodeError(n, std::string(filled.status().message()));
  std::vector<Argument> args = std::move(*filled);
  // Outputs: a Tensor[] result becomes as many outputs as its ListUnpack has.
  std::vector<const jit::Value *> outs;
  bool listResult = returnsTensorList(handle->schema());
  const jit::Node *unpack = nullptr;
  if (listResult) {
    const jit::Value *list = n->output();
    if (list->uses().size() != 1 || list->uses()[0].user->kind() != c10::prim::ListUnpack)
      return nodeError(n, "a list-returning operator whose result is not unpacked once is not supported");
    unpack = list->uses()[0].user;
    for (const jit::Value *o : unpack->outputs())
      outs.push_back(o);
  } else {
    for (const jit::Value *o : n->outputs())
      outs.push_back(o);
  }
  std::vector<ValueType> types;
  std::vector<std::string> names;
  for (const jit::Value *o : outs) {
    names.push_back(o->debugName());
    auto kind = o->type()->kind() == c10::TypeKind::IntType     ? ValueKind::Int
                : o->type()->kind() == c10::TypeKind::FloatType ? ValueKind::Float
                : o->type()->kind() == c10::TypeKind::BoolType  ? ValueKind::Bool
                                                                : ValueKind::Tensor;
    types.push_back(kind == ValueKind::Tensor ? ValueType::unknownTensor() : ValueType::ofScalar(kind));
  }
  Node *node = model_.graph->createNode(*handle, args, types, Phase::Forward, names);
  for (size_t i = 0; i < outs.size(); ++i)
    values_[outs[i]] = node->output(i);
  if (absl::Status st = inferNodeTypes(*node); !st.ok())
    return error(std::string(st.message()));
  return absl::OkStatus();
}

absl::Status TorchScriptLowering::lowerNode(const jit::Node *n) {
  switch (n->kind()) {
  case c10::prim::Constant:
    return lowerConstant(n);
  case c10::prim::GetAttr:
    return lowerGetAttr(n);
  case c10::prim::ListConstruct:
    lists_[n->output()] = n;
    return absl::OkStatus();
  case c10::prim::ListUnpack:
    // Handled with the list-returning operator that feeds it.
    if (n->input()->node()->maybeSchema())
      return absl::OkStatus();
    return nodeError(n, "unpacking a list that no operator returned is not supported");
  case c10::prim::TupleConstruct:
    return absl::OkStatus(); // only supported as the graph's return value
  case c10::prim::If:
  case c10::prim::Loop:
    return nodeError(n, "control flow is not supported; script without data-dependent branches "
                        "and loops, or export with torch.export");
  default:
    break;
  }
  if (n->kind().is_prim())
    return nodeError(n, absl::StrCat(n->kind().toQualString(), " is not supported"));
  return lowerOperator(n);
}

void TorchScriptLowering::readWeights(const std::vector<ValueType> &inputTypes) {
  for (const auto &p : module_.named_parameters(/*recurse=*/true))
    parameters_[p.name] = p.value;
  for (const auto &b : module_.named_buffers(/*recurse=*/true))
    buffers_[b.name] = b.value;
  if (!parameters_.empty())
    modelDevice_ = parameters_.begin()->second.device();
  else if (!buffers_.empty())
    modelDevice_ = buffers_.begin()->second.device();
  else
    for (const ValueType &t : inputTypes)
      if (t.isTensor() && t.isKnown()) {
        modelDevice_ = t.tensor.device;
        break;
      }
}

std::shared_ptr<jit::Graph>
TorchScriptLowering::frozenForward(const std::vector<ValueType> &inputTypes, jit::Module &frozen) {
  // Scripted modules check ranks and flags (`if input.dim() != 4: raise`,
  // `if self.training`). Freezing an eval-mode copy turns non-parameter
  // attributes into constants (parameters stay attributes, so they keep their
  // names); with the input shapes known, rank checks fold, and constant
  // propagation removes the branches they guarded.
  module_.eval();
  frozen = jit::freeze_module(module_, {}, /*freezeInterfaces=*/true,
                              /*preserveParameters=*/true);
  std::shared_ptr<jit::Graph> graph = frozen.get_method("forward").graph()->copy();
  jit::Inline(*graph);
  if (graph->inputs().size() == inputTypes.size() + 1) {
    for (size_t i = 0; i < inputTypes.size(); ++i) {
      if (!inputTypes[i].isTensor() || !inputTypes[i].isKnown())
        continue;
      const TensorType &t = inputTypes[i].tensor;
      graph->inputs()[i + 1]->setType(c10::TensorType::create(
          t.dtype, t.device, c10::IntArrayRef(t.sizes.data(), t.sizes.size()),
          c10::IntArrayRef(t.strides.data(), t.strides.size()), /*requires_grad=*/false));
    }
    jit::PropagateInputShapes(graph);
    jit::PeepholeOptimize(graph);
    jit::ConstantPropagation(graph);
    jit::EliminateDeadCode(graph);
  }
  return graph;
}

absl::Status TorchScriptLowering::addInputs(const jit::Graph &graph, const jit::Module &frozen,
                                            const std::vector<ValueType> &inputTypes) {
  auto inputs = graph.inputs();
  if (inputs.empty())
    return error("forward takes no self argument");
  modules_[inputs[0]] = "";
  attributes_[inputs[0]] = frozen._ivalue();
  if (inputTypes.size() != inputs.size() - 1)
    return error(absl::StrCat("forward takes ", inputs.size() - 1, " inputs but ", inputTypes.size(),
                              " input types were given (--input-types, or the archive's ",
                              kInputTypesFile, ")"));
  for (size_t i = 1; i < inputs.size(); ++i) {
    if (!inputs[i]->type()->cast<c10::TensorType>())
      return error(absl::StrCat("input '", inputs[i]->debugName(), "' is a ",
                                inputs[i]->type()->str(), "; only tensor inputs are supported"));
    values_[inputs[i]] = model_.graph->addInput(inputs[i]->debugName(), inputTypes[i - 1],
                                                InputRole::UserInput);
  }
  return absl::OkStatus();
}

absl::Status TorchScriptLowering::addOutputs(const jit::Graph &graph) {
  std::vector<const jit::Value *> results;
  const jit::Value *ret = graph.outputs()[0];
  const jit::Node *producer = ret->node();
  if (producer->kind() == c10::prim::TupleConstruct || producer->kind() == c10::prim::ListConstruct) {
    for (const jit::Value *v : producer->inputs())
      results.push_back(v);
  } else {
    results.push_back(ret);
  }
  for (const jit::Value *v : results) {
    auto it = values_.find(v);
    if (it == values_.end() || !it->second->isTensor())
      return error(absl::StrCat("forward returns %", v->debugName(),
                                ", which is not a tensor; only tensors (or tuples of them) are supported"));
    model_.graph->addOutput(it->second, OutputRole::UserOutput);
  }
  return absl::OkStatus();
}

absl::StatusOr<ImportedModel> TorchScriptLowering::lower(const std::vector<ValueType> &inputTypes) {
  if (!module_.find_method("forward"))
    return error("the TorchScript module has no forward method");
  readWeights(inputTypes);
  jit::Module frozen;
  std::shared_ptr<jit::Graph> graph = frozenForward(inputTypes, frozen);

  std::string name = llvm::sys::path::stem(path_).str();
  for (char &c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.')
      c = '_';
  model_.graph = std::make_unique<Graph>(name);

  // Control flow that did not fold away cannot be lowered: say so first, not
  // whatever node computes its condition.
  for (const jit::Node *n : graph->nodes())
    if (n->kind() == c10::prim::If || n->kind() == c10::prim::Loop)
      return nodeError(n, "control flow is not supported; script without data-dependent branches "
                          "and loops, or export with torch.export");

  if (absl::Status st = addInputs(*graph, frozen, inputTypes); !st.ok())
    return st;
  for (const jit::Node *n : graph->nodes())
    if (absl::Status st = lowerNode(n); !st.ok())
      return st;
  if (absl::Status st = addOutputs(*graph); !st.ok())
    return st;
  return std::move(model_);
}

} // namespace

absl::StatusOr<ImportedModel> importTorchScript(llvm::StringRef path, const ImportOptions &options) {
  std::string file = path.str();
  if (!llvm::sys::fs::exists(file))
    return absl::NotFoundError(absl::StrCat(file, ": no such file"));
  jit::ExtraFilesMap extra{{kInputTypesFile, ""}};
  jit::Module module;
  try {
    module = jit::load(file, std::nullopt, extra, /*load_debug_files=*/false);
  } catch (const c10::Error &e) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": not a loadable TorchScript module: ",
                                                   e.what_without_backtrace()));
  } catch (const std::exception &e) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": not a loadable TorchScript module: ", e.what()));
  }
  std::vector<ValueType> types = options.inputTypes;
  if (types.empty() && !extra[kInputTypesFile].empty()) {
    auto parsed = parseTypeList(extra[kInputTypesFile], absl::StrCat(file, ":", kInputTypesFile));
    if (!parsed.ok())
      return parsed.status();
    types = std::move(*parsed);
  }
  try {
    return TorchScriptLowering(file, std::move(module)).lower(types);
  } catch (const c10::Error &e) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": ", e.what_without_backtrace()));
  }
}

} // namespace graphopt
