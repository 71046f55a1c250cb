//===- Pt2Graph.cpp - torch.export's serialized graph to the IR -----------===//
//
// Converts the deserialized `ExportedProgram` (LibTorch's own generated serde
// types) into a Graph: placeholders and the graph signature become graph
// inputs and outputs with roles, every call_function node becomes a Node
// resolved to its operator overload, arguments the export left at their
// schema default are filled from the schema, and tensor metadata becomes
// TensorType. The higher-order wrappers that only set a mode around a body
// subgraph (wrap_with_set_grad_enabled; wrap_with_autocast where its casts are
// explicit in the body) are inlined; every other higher-order op is an error.
//
//===----------------------------------------------------------------------===//
#include "Pt2Graph.h"

#include "SerdeEnums.h"
#include "graphopt/Import/Pt2Format.h"
#include "graphopt/Import/Importer.h"
#include "graphopt/IR/SchemaUtils.h"
#include "graphopt/IR/TypeInference.h"

#include <absl/strings/str_cat.h>
#include <llvm/ADT/DenseSet.h>
#include <llvm/ADT/StringMap.h>

#include <cctype>
#include <set>

namespace graphopt::serde {

namespace {

using Tag = ts::Argument::Tag;

struct InlinedWrapper;
struct InlinedCall;

/// A call's results as addNode reads them: one value per tensor (a Tensor[]
/// return lists several), a name and a type each.
struct NodeResults {
  std::vector<std::string> names; ///< serialized names, the keys of values_
  std::vector<ValueType> types;
  bool needsInference = false; ///< some result's type is unknown: inferred from the kernel
};

class GraphBuilder {
public:
  GraphBuilder(const ts::ExportedProgram &ep, llvm::StringRef where)
      : ep_(ep), graph_(&ep.get_graph_module().get_graph()), where_(where.str()) {}

  absl::StatusOr<std::unique_ptr<Graph>> build(llvm::StringRef name);

private:
  absl::Status error(llvm::StringRef message) const {
    return absl::InvalidArgumentError(absl::StrCat(where_, ": ", message.str()));
  }
  absl::Status nodeError(const ts::Node &n, llvm::StringRef message) const {
    return error(absl::StrCat("node '", n.get_name().value_or("?"), "' (", n.get_target(), ")",
                              context_, ": ", message.str()));
  }

  absl::StatusOr<ValueType> tensorType(const std::string &name) const;
  absl::Status addInputs();
  absl::Status addNode(const ts::Node &n);
  // addNode's steps.
  /// The call's arguments in schema order, defaults filled from the schema.
  absl::StatusOr<std::vector<Argument>> callArguments(const ts::Node &n,
                                                      const c10::OperatorHandle &op);
  /// The call's results: a serialized name and a type per value.
  absl::StatusOr<NodeResults> callResults(const ts::Node &n);
  /// Adds the node for the call, its results under their serialized names.
  absl::StatusOr<Node *> createCallNode(const ts::Node &n, const c10::OperatorHandle &op,
                                        std::vector<Argument> args, const NodeResults &results);
  absl::Status inlineHigherOrder(const ts::Node &n);
  // inlineHigherOrder's steps.
  absl::StatusOr<InlinedCall> inlinedCallOf(const ts::Node &n);
  /// What autocast_ is inside the call's body (none: no enabled autocast).
  absl::StatusOr<std::optional<std::string>> autocastInside(const InlinedCall &call) const;
  /// Binds, in `scope`, the body's inputs to the call's operands (also
  /// gathered in `operands`).
  absl::Status bindOperands(const InlinedCall &call, llvm::StringMap<Value *> &scope,
                            llvm::DenseSet<Value *> &operands);
  /// Adds the body's nodes in `scope`, `autocast` in force; the body's outputs.
  absl::StatusOr<std::vector<Value *>> addBody(const InlinedCall &call,
                                               llvm::StringMap<Value *> &scope,
                                               std::optional<std::string> autocast);
  /// Binds the call's results to the body's outputs `results`.
  absl::Status bindResults(const InlinedCall &call, const std::vector<Value *> &results,
                           const llvm::DenseSet<Value *> &operands);
  absl::Status checkNoImplicitCast(const ts::Node &n, Node &node);
  void countDefinitions(const ts::Graph &g, bool top);
  absl::StatusOr<Argument> convertArgument(const ts::Node &n, const ts::Argument &a,
                                           const c10::Argument &schemaArg);
  /// convertArgument of a tensor, an optional one, or a list of either.
  absl::StatusOr<Argument> convertTensorArgument(const ts::Node &n, const ts::Argument &a);
  /// convertArgument of a dtype, layout, memory format or device.
  absl::StatusOr<Argument> convertEnumArgument(const ts::Node &n, const ts::Argument &a,
                                               const c10::Argument &schemaArg);
  absl::StatusOr<Value *> lookup(const ts::Node *n, const std::string &name) const;
  absl::Status addOutputs();
  void assignPhases();
  absl::Status readGraphCustom();

  const ts::ExportedProgram &ep_;
  const ts::Graph *graph_; ///< the graph whose nodes are being added (a body while inlining)
  std::string where_;
  std::unique_ptr<Graph> g_;
  llvm::StringMap<Value *> topValues_;
  llvm::StringMap<Value *> *values_ = &topValues_; ///< serialized name -> value, this scope
  Value *loss_ = nullptr;

  // Inlining state. A body's values keep their serialized names where these are
  // defined once in the whole archive, else they get the prefix "<wrapper>." (a
  // '.' never occurs in an FX name, so the prefixed names cannot collide).
  llvm::StringMap<unsigned> definitions_;
  std::string prefix_;  ///< "" at top level, "outer.inner." in nested bodies
  std::string context_; ///< ", in the body of ..." for error messages
  /// Set inside the body of an enabled wrap_with_autocast: the wrapper's description.
  std::optional<std::string> autocast_;
  /// The device the model was exported on: its weights' (else its inputs').
  c10::Device modelDevice_{c10::DeviceType::CPU};
  /// From the graph module's meta["custom"] (readGraphCustom).
  bool writtenByGraphOpt_ = false;
  std::string storedName_;
  std::set<std::string> optimizerState_;
  std::vector<std::pair<std::string, std::string>> ties_; ///< (input, owner) value names
};

/// The higher-order ops the importer inlines: their operand layout.
struct InlinedWrapper {
  llvm::StringRef name;
  unsigned bodyIndex; ///< positional input holding the body graph; the operands follow it
};
constexpr llvm::StringLiteral kHigherOrderPrefix = "torch.ops.higher_order.";
const InlinedWrapper kInlinedWrappers[] = {
    // (enabled, body, *operands)
    {"wrap_with_set_grad_enabled", 1},
    // (device_type, dtype, enabled, cache_enabled, body, *operands)
    {"wrap_with_autocast", 4},
};

/// A call of an inlined wrapper, its body checked to be there.
struct InlinedCall {
  const ts::Node &n;
  const InlinedWrapper &wrapper;
  llvm::StringRef hop; ///< the wrapper's name
  std::string hopName; ///< the call's node name
  const ts::Graph &body;
  std::string bodyName;
  const std::vector<ts::NamedArgument> &inputs() const { return n.get_inputs(); }
};

absl::StatusOr<ValueType> GraphBuilder::tensorType(const std::string &name) const {
  const auto &metas = graph_->get_tensor_values();
  auto it = metas.find(name);
  if (it == metas.end())
    return error(absl::StrCat("tensor '", name, "' has no entry in tensor_values"));
  const ts::TensorMeta &m = it->second;
  auto dtype = toScalarType(m.get_dtype());
  if (!dtype)
    return error(absl::StrCat("tensor '", name, "' has an unknown dtype (serde number ",
                              static_cast<int>(m.get_dtype()), ")"));
  if (toLayout(m.get_layout()) != c10::kStrided)
    return error(absl::StrCat("tensor '", name, "' is not strided; only strided tensors are supported"));
  auto device = toDevice(m.get_device());
  if (!device)
    return error(absl::StrCat("tensor '", name, "' is on unknown device '", m.get_device().get_type(), "'"));
  auto ints = [&](const std::vector<ts::SymInt> &syms, const char *what) -> absl::StatusOr<std::vector<int64_t>> {
    std::vector<int64_t> out;
    for (const ts::SymInt &s : syms) {
      if (s.tag() != ts::SymInt::Tag::AS_INT)
        return error(absl::StrCat(
            "tensor '", name, "' has symbolic ", what, " (",
            s.tag() == ts::SymInt::Tag::AS_EXPR ? s.get_as_expr().get_expr_str() : "no value",
            "); dynamic shapes are not supported: export with static shapes"));
      out.push_back(s.get_as_int());
    }
    return out;
  };
  auto sizes = ints(m.get_sizes(), "sizes");
  if (!sizes.ok())
    return sizes.status();
  auto strides = ints(m.get_strides(), "strides");
  if (!strides.ok())
    return strides.status();
  auto offset = ints({m.get_storage_offset()}, "storage offset");
  if (!offset.ok())
    return offset.status();
  TensorType type(*dtype, *sizes, *strides, *device);
  type.storageOffset = offset->front();
  if (absl::Status st = validateTensorType(type); !st.ok())
    return error(absl::StrCat("tensor '", name, "' has an invalid type: ", st.message()));
  return ValueType::ofTensor(std::move(type));
}

absl::StatusOr<Value *> GraphBuilder::lookup(const ts::Node *n, const std::string &name) const {
  auto it = values_->find(name);
  if (it != values_->end())
    return it->second;
  std::string msg = absl::StrCat("uses '", name, "', which is not defined before it");
  return n ? nodeError(*n, msg) : error(absl::StrCat("an output ", msg));
}

absl::Status GraphBuilder::addInputs() {
  using ITag = ts::InputSpec::Tag;
  bool sawWeight = false, sawInput = false;
  for (const ts::InputSpec &spec : ep_.get_graph_module().get_signature().get_input_specs()) {
    std::string name, target;
    InputRole role = InputRole::UserInput;
    switch (spec.tag()) {
    case ITag::PARAMETER:
      name = spec.get_parameter().get_arg().get_name();
      target = spec.get_parameter().get_parameter_name();
      role = InputRole::Parameter;
      break;
    case ITag::BUFFER:
      name = spec.get_buffer().get_arg().get_name();
      target = spec.get_buffer().get_buffer_name();
      role = optimizerState_.count(target) ? InputRole::OptimizerState : InputRole::Buffer;
      break;
    case ITag::TENSOR_CONSTANT:
      name = spec.get_tensor_constant().get_arg().get_name();
      target = spec.get_tensor_constant().get_tensor_constant_name();
      role = InputRole::Constant;
      break;
    case ITag::USER_INPUT: {
      const ts::Argument &a = spec.get_user_input().get_arg();
      if (a.tag() != Tag::AS_TENSOR)
        return error("a user input that is not a tensor is not supported (export with tensor inputs only)");
      name = a.get_as_tensor().get_name();
      role = InputRole::UserInput;
      break;
    }
    case ITag::CUSTOM_OBJ:
      return error("custom-object inputs (torchbind) are not supported");
    case ITag::TOKEN:
      return error("effect-token inputs are not supported");
    case ITag::CONSTANT_INPUT:
      return error(absl::StrCat("constant input '", spec.get_constant_input().get_name(),
                                "' is not supported (export with tensor inputs only)"));
    }
    auto type = tensorType(name);
    if (!type.ok())
      return type.status();
    // The first weight's device; the first input's if there are no weights.
    bool weight = role != InputRole::UserInput;
    if (type->isTensor() && (weight ? !sawWeight : !sawWeight && !sawInput)) {
      modelDevice_ = type->tensor.device;
      (weight ? sawWeight : sawInput) = true;
    }
    Value *v = g_->addInput(name, std::move(*type), role, target);
    if (v->name() != name)
      return error(absl::StrCat("input name '", name, "' is not unique"));
    (*values_)[name] = v;
  }
  return absl::OkStatus();
}

/// "L['self'].layer1[0].conv1" (strict export), "L['fn'].layer1[0].conv1"
/// (torch.compile: dynamo names the root after the local that holds it) or
/// "layer1.0.conv1" (non-strict) -> "layer1.0.conv1".
std::string normalizeModulePath(llvm::StringRef path) {
  path = path.trim();
  if (path.startswith("L[") && path.contains(']'))
    path = path.drop_front(path.find(']') + 1);
  else
    path.consume_front("self");
  std::string out;
  while (!path.empty()) {
    if (path.consume_front(".")) {
      continue;
    }
    std::string part;
    if (path.startswith("[")) {
      size_t close = path.find(']');
      if (close == llvm::StringRef::npos)
        break;
      part = path.slice(1, close).trim("'\"").str();
      path = path.drop_front(close + 1);
    } else {
      size_t end = path.find_first_of(".[");
      part = path.take_front(end).str();
      path = path.drop_front(part.size());
    }
    if (!out.empty())
      out += '.';
    out += part;
  }
  return out;
}

/// The innermost module's path from `nn_module_stack` ("key,path,type"
/// entries joined by ';', outermost first); "" for the root module or none.
std::string innermostModule(llvm::StringRef stack) {
  llvm::SmallVector<llvm::StringRef, 8> entries;
  stack.split(entries, ';', -1, /*KeepEmpty=*/false);
  if (entries.empty())
    return "";
  llvm::StringRef entry = entries.back();
  // The key has no commas; the type is after the last one; the path between.
  size_t first = entry.find(','), last = entry.rfind(',');
  if (first == llvm::StringRef::npos || first == last)
    return "";
  return normalizeModulePath(entry.slice(first + 1, last));
}

/// The source line a report should name, from a `stack_trace` (frames
/// outermost first, each 'File "<path>", line <n>, in <function>'): the last
/// frame outside PyTorch itself (torch.nn's module wrappers say nothing about
/// the model), else the last frame; "" if there is none. Frames of generated
/// code (`File "<eval_with_key>..."`) are skipped. The path is shortened
/// to what follows "site-packages/" (an installed package's files), otherwise
/// kept as written: "torchvision/models/resnet.py:92", "/home/me/model.py:42".
std::string sourceLine(llvm::StringRef trace) {
  std::string last, lastOutsideTorch;
  for (size_t at = trace.find("File \""); at != llvm::StringRef::npos;
       at = trace.find("File \"", at + 1)) {
    llvm::StringRef rest = trace.drop_front(at + 6);
    size_t quote = rest.find("\", line ");
    if (quote == llvm::StringRef::npos)
      continue;
    llvm::StringRef file = rest.take_front(quote);
    llvm::StringRef line = rest.drop_front(quote + 8).take_while(
        [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    // Generated code ("<eval_with_key>.13 from ...", what joint graphs record)
    // is no place in the model.
    if (file.empty() || line.empty() || file.startswith("<"))
      continue;
    size_t pkg = file.rfind("site-packages/");
    llvm::StringRef shown = pkg == llvm::StringRef::npos ? file : file.drop_front(pkg + 14);
    last = absl::StrCat(shown.str(), ":", line.str());
    bool inTorch = shown.startswith("torch/") || file.contains("/torch/nn/") ||
                   file.contains("/torch/_") || file.contains("/torch/autograd/");
    if (!inTorch)
      lastOutsideTorch = last;
  }
  return lastOutsideTorch.empty() ? last : lastOutsideTorch;
}

/// An attribute from a meta["custom"] entry: JSON strings, numbers, bools
/// and lists of one kind of them as themselves, null as None; anything else
/// as its JSON text (a string).
Constant attributeFromJson(const nlohmann::json &j) {
  if (j.is_null())
    return Constant::none();
  if (j.is_boolean())
    return Constant::ofBool(j.get<bool>());
  if (j.is_number_integer())
    return Constant::ofInt(j.get<int64_t>());
  if (j.is_number())
    return Constant::ofFloat(j.get<double>());
  if (j.is_string())
    return Constant::ofString(j.get<std::string>());
  if (j.is_array() && !j.empty()) {
    auto all = [&](auto pred) { return std::all_of(j.begin(), j.end(), pred); };
    if (all([](const nlohmann::json &e) { return e.is_number_integer(); }))
      return Constant::ofIntList(j.get<std::vector<int64_t>>());
    if (all([](const nlohmann::json &e) { return e.is_number(); }))
      return Constant::ofFloatList(j.get<std::vector<double>>());
    if (all([](const nlohmann::json &e) { return e.is_boolean(); }))
      return Constant::ofBoolList(j.get<std::vector<bool>>());
  }
  if (j.is_array() && j.empty())
    return Constant::ofIntList({});
  return Constant::ofString(j.dump());
}

/// Keeps what torch.export recorded that reports need: the module path
/// (attribute `module`) and the source line (attribute `source`). Every entry
/// of meta["custom"] becomes an attribute of its name (what graph-opt's .pt2
/// writer stores there, and what a user put there), except graph-opt's own
/// key, which holds the node's phase.
absl::Status copyMetadata(const ts::Node &n, Node &node) {
  const auto &meta = n.get_metadata();
  if (auto it = meta.find("nn_module_stack"); it != meta.end()) {
    std::string module = innermostModule(it->second);
    if (!module.empty())
      node.setAttr("module", Constant::ofString(std::move(module)));
  }
  if (auto it = meta.find("stack_trace"); it != meta.end()) {
    std::string source = sourceLine(it->second);
    if (!source.empty())
      node.setAttr("source", Constant::ofString(std::move(source)));
  }
  auto it = meta.find("custom");
  if (it == meta.end())
    return absl::OkStatus();
  nlohmann::json custom = nlohmann::json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  if (!custom.is_object())
    return absl::InvalidArgumentError("meta[\"custom\"] is not a JSON object");
  for (const auto &[key, value] : custom.items()) {
    if (key != kPt2CustomKey) {
      node.setAttr(key, attributeFromJson(value));
      continue;
    }
    if (!value.is_object() || !value.contains("phase") || !value["phase"].is_string())
      return absl::InvalidArgumentError(absl::StrCat("meta[\"custom\"][\"", key.c_str(),
                                                     "\"] has no phase"));
    auto phase = parsePhaseName(value["phase"].get<std::string>());
    if (!phase)
      return absl::InvalidArgumentError(absl::StrCat("unknown phase '",
                                                     value["phase"].get<std::string>(), "'"));
    node.setPhase(*phase);
  }
  return absl::OkStatus();
}

/// The c10 name of a serialized target: "torch.ops.aten.add.Tensor" ->
/// "aten::add.Tensor"; the overload "default" is c10's empty overload.
std::optional<std::string> operatorName(llvm::StringRef target) {
  if (!target.consume_front("torch.ops."))
    return std::nullopt;
  auto [ns, rest] = target.split('.');
  auto [name, overload] = rest.rsplit('.');
  if (ns.empty() || name.empty() || overload.empty())
    return std::nullopt;
  std::string out = absl::StrCat(ns.str(), "::", name.str());
  if (overload != "default")
    absl::StrAppend(&out, ".", overload.str());
  return out;
}

/// A constant for `schemaArg`: coerced to its scalar type where it takes a
/// scalar, else as it is (the verifier names a mismatch).
Argument constantFor(Constant c, const c10::Argument &schemaArg) {
  if (argFormOf(schemaArg.real_type()) == ArgForm::Scalar) {
    auto coerced = coerceConstant(c, schemaArg.real_type());
    if (coerced.ok())
      return Argument::constant(*coerced);
  }
  return Argument::constant(std::move(c)); // the verifier names a mismatch
}

absl::StatusOr<Argument> GraphBuilder::convertArgument(const ts::Node &n, const ts::Argument &a,
                                                       const c10::Argument &schemaArg) {
  auto constant = [&](Constant c) -> absl::StatusOr<Argument> {
    return constantFor(std::move(c), schemaArg);
  };
  auto symInt = [&](const ts::SymIntArgument &s) -> absl::StatusOr<std::optional<int64_t>> {
    if (s.tag() == ts::SymIntArgument::Tag::AS_INT)
      return std::optional<int64_t>(s.get_as_int());
    return std::optional<int64_t>();
  };
  switch (a.tag()) {
  case Tag::AS_NONE:
    return Argument::constant(Constant::none());
  case Tag::AS_TENSOR:
  case Tag::AS_OPTIONAL_TENSOR:
  case Tag::AS_TENSORS:
  case Tag::AS_OPTIONAL_TENSORS:
    return convertTensorArgument(n, a);
  case Tag::AS_INT:
    return constant(Constant::ofInt(a.get_as_int()));
  case Tag::AS_INTS:
    return constant(Constant::ofIntList(a.get_as_ints()));
  case Tag::AS_FLOAT:
    return constant(Constant::ofFloat(a.get_as_float().get()));
  case Tag::AS_FLOATS: {
    std::vector<double> v;
    for (const auto &f : a.get_as_floats())
      v.push_back(f.get());
    return constant(Constant::ofFloatList(v));
  }
  case Tag::AS_STRING:
    return constant(Constant::ofString(a.get_as_string()));
  case Tag::AS_BOOL:
    return constant(Constant::ofBool(a.get_as_bool()));
  case Tag::AS_BOOLS:
    return constant(Constant::ofBoolList(a.get_as_bools()));
  case Tag::AS_SCALAR_TYPE:
  case Tag::AS_LAYOUT:
  case Tag::AS_MEMORY_FORMAT:
  case Tag::AS_DEVICE:
    return convertEnumArgument(n, a, schemaArg);
  case Tag::AS_SYM_INT: {
    const auto &s = a.get_as_sym_int();
    if (s.tag() == ts::SymIntArgument::Tag::AS_INT)
      return constant(Constant::ofInt(s.get_as_int()));
    auto v = lookup(&n, s.get_as_name());
    if (!v.ok())
      return v.status();
    return Argument::value(*v);
  }
  case Tag::AS_SYM_INTS: {
    std::vector<int64_t> ints;
    for (const auto &s : a.get_as_sym_ints()) {
      auto i = symInt(s);
      if (!i.ok())
        return i.status();
      if (!*i)
        return nodeError(n, absl::StrCat("argument '", schemaArg.name(),
                                         "' holds symbolic sizes; dynamic shapes are not supported"));
      ints.push_back(**i);
    }
    return constant(Constant::ofIntList(ints));
  }
  default:
    return nodeError(n, absl::StrCat("argument '", schemaArg.name(), "' is of a kind graph-opt does not support (serde tag ",
                                     static_cast<int>(a.tag()), ")"));
  }
}

absl::StatusOr<Argument> GraphBuilder::convertTensorArgument(const ts::Node &n,
                                                             const ts::Argument &a) {
  switch (a.tag()) {
  case Tag::AS_TENSOR: {
    auto v = lookup(&n, a.get_as_tensor().get_name());
    if (!v.ok())
      return v.status();
    return Argument::value(*v);
  }
  case Tag::AS_OPTIONAL_TENSOR: {
    const auto &o = a.get_as_optional_tensor();
    if (o.tag() == ts::OptionalTensorArgument::Tag::AS_NONE)
      return Argument::constant(Constant::none());
    auto v = lookup(&n, o.get_as_tensor().get_name());
    if (!v.ok())
      return v.status();
    return Argument::value(*v);
  }
  case Tag::AS_TENSORS: {
    std::vector<Value *> elems;
    for (const auto &t : a.get_as_tensors()) {
      auto v = lookup(&n, t.get_name());
      if (!v.ok())
        return v.status();
      elems.push_back(*v);
    }
    return Argument::list(elems);
  }
  case Tag::AS_OPTIONAL_TENSORS:
  default: { // convertArgument passes only the tensors' tags
    std::vector<Value *> elems;
    for (const auto &o : a.get_as_optional_tensors()) {
      if (o.tag() == ts::OptionalTensorArgument::Tag::AS_NONE) {
        elems.push_back(nullptr);
        continue;
      }
      auto v = lookup(&n, o.get_as_tensor().get_name());
      if (!v.ok())
        return v.status();
      elems.push_back(*v);
    }
    return Argument::list(elems);
  }
  }
}

absl::StatusOr<Argument> GraphBuilder::convertEnumArgument(const ts::Node &n,
                                                           const ts::Argument &a,
                                                           const c10::Argument &schemaArg) {
  switch (a.tag()) {
  case Tag::AS_SCALAR_TYPE: {
    auto t = toScalarType(a.get_as_scalar_type());
    if (!t)
      return nodeError(n, absl::StrCat("argument '", schemaArg.name(), "' has an unknown dtype"));
    return constantFor(Constant::ofDtype(*t), schemaArg);
  }
  case Tag::AS_LAYOUT: {
    auto l = toLayout(a.get_as_layout());
    if (!l)
      return nodeError(n, absl::StrCat("argument '", schemaArg.name(), "' has an unknown layout"));
    return constantFor(Constant::ofLayout(*l), schemaArg);
  }
  case Tag::AS_MEMORY_FORMAT: {
    auto m = toMemoryFormat(a.get_as_memory_format());
    if (!m)
      return nodeError(n, absl::StrCat("argument '", schemaArg.name(), "' has an unknown memory format"));
    return constantFor(Constant::ofMemoryFormat(*m), schemaArg);
  }
  case Tag::AS_DEVICE:
  default: { // convertArgument passes only the enums' tags
    auto d = toDevice(a.get_as_device());
    if (!d)
      return nodeError(n, absl::StrCat("argument '", schemaArg.name(), "' has an unknown device"));
    return constantFor(importedDeviceConstant(*d, modelDevice_), schemaArg);
  }
  }
}

absl::StatusOr<std::vector<Argument>> GraphBuilder::callArguments(const ts::Node &n,
                                                                   const c10::OperatorHandle &op) {
  const auto &schemaArgs = op.schema().arguments();
  ArgumentSlots slots(op.schema());
  for (const ts::NamedArgument &na : n.get_inputs()) {
    auto slot = slots.named(na.get_name());
    if (!slot.ok())
      return nodeError(n, std::string(slot.status().message()));
    auto arg = convertArgument(n, na.get_arg(), schemaArgs[*slot]);
    if (!arg.ok())
      return arg.status();
    slots.set(*slot, std::move(*arg));
  }
  auto filled = slots.finish();
  if (!filled.ok())
    return nodeError(n, std::string(filled.status().message()));
  return std::move(*filled);
}

absl::StatusOr<NodeResults> GraphBuilder::callResults(const ts::Node &n) {
  // A result nothing reads may be missing from tensor_values ("<node>_unused_<i>"):
  // its type is inferred (createCallNode). A None result is an undefined tensor.
  NodeResults r;
  auto addTensor = [&](const std::string &name) -> absl::Status {
    r.names.push_back(name);
    if (!graph_->get_tensor_values().count(name)) {
      r.types.push_back(ValueType::unknownTensor());
      r.needsInference = true;
      return absl::OkStatus();
    }
    auto t = tensorType(name);
    if (!t.ok())
      return t.status();
    r.types.push_back(std::move(*t));
    return absl::OkStatus();
  };
  for (const ts::Argument &out : n.get_outputs()) {
    absl::Status st;
    switch (out.tag()) {
    case Tag::AS_TENSOR:
      st = addTensor(out.get_as_tensor().get_name());
      break;
    case Tag::AS_TENSORS:
      for (const auto &t : out.get_as_tensors())
        if (st = addTensor(t.get_name()); !st.ok())
          break;
      break;
    case Tag::AS_SYM_INT:
      if (out.get_as_sym_int().tag() != ts::SymIntArgument::Tag::AS_NAME)
        return nodeError(n, "an integer output without a name is not supported");
      r.names.push_back(out.get_as_sym_int().get_as_name());
      r.types.push_back(ValueType::ofScalar(ValueKind::Int));
      break;
    case Tag::AS_NONE:
      r.names.push_back(absl::StrCat(n.get_name().value_or("result"), "_none_", r.names.size()));
      r.types.push_back(ValueType::ofScalar(ValueKind::None));
      break;
    default:
      return nodeError(n, absl::StrCat("output of serde tag ", static_cast<int>(out.tag()),
                                       " is not supported"));
    }
    if (!st.ok())
      return st;
  }
  return r;
}

absl::StatusOr<Node *> GraphBuilder::createCallNode(const ts::Node &n,
                                                    const c10::OperatorHandle &op,
                                                    std::vector<Argument> args,
                                                    const NodeResults &results) {
  const std::vector<std::string> &names = results.names;
  const std::vector<ValueType> &types = results.types;
  // In an inlined body a name defined more than once in the archive gets the
  // wrapper's prefix.
  std::vector<std::string> hints = names;
  if (!prefix_.empty())
    for (std::string &h : hints)
      if (definitions_.lookup(h) != 1)
        h = absl::StrCat(prefix_, h);
  Node *node = g_->createNode(op, args, types, Phase::Forward, hints);
  if (absl::Status st = copyMetadata(n, *node); !st.ok())
    return nodeError(n, std::string(st.message()));
  for (unsigned i = 0; i < node->numOutputs(); ++i) {
    if (node->output(i)->name() != hints[i] && types[i].kind != ValueKind::None)
      return nodeError(n, absl::StrCat("output name '", names[i], "' is defined twice"));
    (*values_)[names[i]] = node->output(i);
  }
  if (results.needsInference) {
    if (absl::Status st = inferNodeTypes(*node); !st.ok())
      return error(std::string(st.message()));
    // Keep the exported metadata where there is some.
    for (unsigned i = 0; i < node->numOutputs(); ++i)
      if (types[i].isKnown())
        node->output(i)->setType(types[i]);
  }
  return node;
}

absl::Status GraphBuilder::addNode(const ts::Node &n) {
  if (llvm::StringRef(n.get_target()).startswith(kHigherOrderPrefix))
    return inlineHigherOrder(n);
  auto opName = operatorName(n.get_target());
  if (!opName)
    return nodeError(n, "only calls of registered operators (torch.ops.*) are supported");
  auto op = resolveOperator(*opName);
  if (!op.ok())
    return nodeError(n, std::string(op.status().message()));
  auto args = callArguments(n, *op);
  if (!args.ok())
    return args.status();
  // Outputs: one value per tensor (a Tensor[] return lists several).
  auto results = callResults(n);
  if (!results.ok())
    return results.status();
  auto node = createCallNode(n, *op, std::move(*args), *results);
  if (!node.ok())
    return node.status();
  if (autocast_)
    return checkNoImplicitCast(n, **node);
  return absl::OkStatus();
}

/// Inside an enabled autocast region the recorded result dtypes are autocast's:
/// the body is only exact without autocast if every node computes, from its
/// operands' dtypes alone, the dtypes the export recorded (the casts autocast
/// implies are explicit `aten::to` / `_to_copy` nodes of the body).
absl::Status GraphBuilder::checkNoImplicitCast(const ts::Node &n, Node &node) {
  std::vector<ValueType> recorded;
  for (unsigned i = 0; i < node.numOutputs(); ++i)
    recorded.push_back(node.output(i)->type());
  absl::Status inferred = inferNodeTypes(node);
  std::string mismatch;
  for (unsigned i = 0; inferred.ok() && i < node.numOutputs() && mismatch.empty(); ++i) {
    const ValueType &want = recorded[i], &got = node.output(i)->type();
    if (want.isTensor() && want.isKnown() && got.isTensor() && got.isKnown() &&
        want.tensor.dtype != got.tensor.dtype)
      mismatch = absl::StrCat("its result '", node.output(i)->name().str(), "' is ",
                              c10::toString(want.tensor.dtype), " under autocast, but ",
                              node.opName(), " computes ", c10::toString(got.tensor.dtype),
                              " from its operands");
  }
  for (unsigned i = 0; i < node.numOutputs(); ++i)
    node.output(i)->setType(recorded[i]);
  if (!inferred.ok())
    mismatch = absl::StrCat(node.opName(), " does not run on its operands without autocast (",
                            inferred.message(), ")");
  if (mismatch.empty())
    return absl::OkStatus();
  return nodeError(n, absl::StrCat(
      "cannot inline ", *autocast_, ": autocast casts implicitly here and the body does not "
      "hold the casts (", mismatch, "); export the model without torch.autocast, or with "
      "the casts written out (.to(dtype))"));
}

/// wrap_with_set_grad_enabled(enabled, body, *operands) and
/// wrap_with_autocast(device_type, dtype, enabled, cache_enabled, body, *operands):
/// the body's nodes are added in place of the call, with the body's inputs bound
/// to the operands and the call's results to the body's outputs. Grad mode means
/// nothing in an explicit graph; autocast is inlined when it is disabled or when
/// its casts are explicit in the body (checkNoImplicitCast).
absl::Status GraphBuilder::inlineHigherOrder(const ts::Node &n) {
  auto call = inlinedCallOf(n);
  if (!call.ok())
    return call.status();
  auto autocast = autocastInside(*call);
  if (!autocast.ok())
    return autocast.status();
  llvm::StringMap<Value *> scope;
  llvm::DenseSet<Value *> operands;
  if (absl::Status st = bindOperands(*call, scope, operands); !st.ok())
    return st;
  auto results = addBody(*call, scope, std::move(*autocast));
  if (!results.ok())
    return results.status();
  return bindResults(*call, *results, operands);
}

/// The wrapper `n` calls, its body found (an error for any other
/// higher-order op, or a call of the wrong shape).
absl::StatusOr<InlinedCall> GraphBuilder::inlinedCallOf(const ts::Node &n) {
  llvm::StringRef hop = llvm::StringRef(n.get_target()).drop_front(kHigherOrderPrefix.size());
  const InlinedWrapper *wrapper = nullptr;
  for (const InlinedWrapper &w : kInlinedWrappers)
    if (w.name == hop)
      wrapper = &w;
  if (!wrapper)
    return nodeError(n, absl::StrCat(
        "the higher-order operator ", n.get_target(), " is not supported: graph-opt inlines "
        "only wrap_with_set_grad_enabled and wrap_with_autocast (control flow such as cond, "
        "map or while_loop, and other higher-order ops, cannot be imported; see "
        "docs/Importing.md)"));
  std::string hopName = n.get_name().value_or(hop.str());
  const std::vector<ts::NamedArgument> &inputs = n.get_inputs();
  for (const ts::NamedArgument &na : inputs)
    if (na.get_kind() == static_cast<int64_t>(ts::ArgumentKind::KEYWORD))
      return nodeError(n, absl::StrCat("keyword argument '", na.get_name(), "' is not expected"));
  if (inputs.size() <= wrapper->bodyIndex ||
      inputs[wrapper->bodyIndex].get_arg().tag() != Tag::AS_GRAPH)
    return nodeError(n, absl::StrCat("expected the body graph as argument ", wrapper->bodyIndex));
  const ts::Graph &body = *inputs[wrapper->bodyIndex].get_arg().get_as_graph().get_graph();
  std::string bodyName = inputs[wrapper->bodyIndex].get_arg().get_as_graph().get_name();
  return InlinedCall{n, *wrapper, hop, std::move(hopName), body, std::move(bodyName)};
}

// An enabled autocast region: its body must hold its casts explicitly.
absl::StatusOr<std::optional<std::string>>
GraphBuilder::autocastInside(const InlinedCall &call) const {
  const ts::Node &n = call.n;
  const std::vector<ts::NamedArgument> &inputs = call.inputs();
  std::optional<std::string> autocast = autocast_;
  if (call.hop == "wrap_with_autocast") {
    const ts::Argument &enabled = inputs[2].get_arg();
    if (enabled.tag() != Tag::AS_BOOL)
      return nodeError(n, "argument 2 (enabled) is not a bool");
    if (!enabled.get_as_bool()) {
      autocast.reset(); // a disabled region casts nothing, even inside an enabled one
    } else if (!autocast) {
      std::string device = inputs[0].get_arg().tag() == Tag::AS_STRING
                               ? inputs[0].get_arg().get_as_string()
                               : std::string("?");
      std::string dtype = "the default dtype";
      if (inputs[1].get_arg().tag() == Tag::AS_SCALAR_TYPE)
        if (auto t = toScalarType(inputs[1].get_arg().get_as_scalar_type()))
          dtype = c10::toString(*t);
      autocast = absl::StrCat("wrap_with_autocast node '", call.hopName, "' (device '", device,
                              "', ", dtype, ")");
    }
  } else if (inputs[0].get_arg().tag() != Tag::AS_BOOL) {
    return nodeError(n, "argument 0 (enabled) is not a bool");
  }
  return autocast;
}

absl::Status GraphBuilder::bindOperands(const InlinedCall &call, llvm::StringMap<Value *> &scope,
                                        llvm::DenseSet<Value *> &operands) {
  const ts::Node &n = call.n;
  const std::vector<ts::NamedArgument> &inputs = call.inputs();
  const unsigned bodyIndex = call.wrapper.bodyIndex;
  size_t numOperands = inputs.size() - bodyIndex - 1;
  if (call.body.get_inputs().size() != numOperands)
    return nodeError(n, absl::StrCat("the body '", call.bodyName, "' has ",
                                     call.body.get_inputs().size(), " inputs for ", numOperands,
                                     " operands"));
  for (size_t i = 0; i < numOperands; ++i) {
    const ts::Argument &operand = inputs[bodyIndex + 1 + i].get_arg();
    const ts::Argument &param = call.body.get_inputs()[i];
    if (operand.tag() != Tag::AS_TENSOR || param.tag() != Tag::AS_TENSOR)
      return nodeError(n, absl::StrCat("operand ", i, " is not a tensor (serde tag ",
                                       static_cast<int>(operand.tag()), ")"));
    auto v = lookup(&n, operand.get_as_tensor().get_name());
    if (!v.ok())
      return v.status();
    scope[param.get_as_tensor().get_name()] = *v;
    operands.insert(*v);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Value *>> GraphBuilder::addBody(const InlinedCall &call,
                                                           llvm::StringMap<Value *> &scope,
                                                           std::optional<std::string> autocast) {
  const ts::Node &n = call.n;
  const ts::Graph &body = call.body;
  const ts::Graph *savedGraph = graph_;
  llvm::StringMap<Value *> *savedValues = values_;
  std::string savedPrefix = prefix_, savedContext = context_;
  std::optional<std::string> savedAutocast = autocast_;
  graph_ = &body;
  values_ = &scope;
  prefix_ = absl::StrCat(prefix_, call.hopName, ".");
  context_ = absl::StrCat(", in the body '", call.bodyName, "' of ", call.hop.str(), " node '",
                          call.hopName, "'", context_);
  autocast_ = autocast;
  absl::Status st;
  for (const ts::Node &inner : body.get_nodes())
    if (st = addNode(inner); !st.ok())
      break;
  std::vector<Value *> results;
  for (size_t i = 0; st.ok() && i < body.get_outputs().size(); ++i) {
    const ts::Argument &out = body.get_outputs()[i];
    if (out.tag() != Tag::AS_TENSOR) {
      st = nodeError(n, absl::StrCat("output ", i, " of the body is not a tensor (serde tag ",
                                     static_cast<int>(out.tag()), ")"));
      break;
    }
    auto v = lookup(nullptr, out.get_as_tensor().get_name());
    if (!v.ok())
      st = v.status();
    else
      results.push_back(*v);
  }
  graph_ = savedGraph;
  values_ = savedValues;
  prefix_ = savedPrefix;
  context_ = savedContext;
  autocast_ = savedAutocast;
  if (!st.ok())
    return st;
  return results;
}

// A body value gets the call's result name (what the rest of the graph, and
// the signature, call it).
absl::Status GraphBuilder::bindResults(const InlinedCall &call,
                                       const std::vector<Value *> &results,
                                       const llvm::DenseSet<Value *> &operands) {
  const ts::Node &n = call.n;
  std::vector<std::string> resultNames;
  for (const ts::Argument &out : n.get_outputs()) {
    if (out.tag() == Tag::AS_TENSOR) {
      resultNames.push_back(out.get_as_tensor().get_name());
    } else if (out.tag() == Tag::AS_TENSORS) {
      for (const auto &t : out.get_as_tensors())
        resultNames.push_back(t.get_name());
    } else {
      return nodeError(n, absl::StrCat("a result of serde tag ", static_cast<int>(out.tag()),
                                       " is not supported"));
    }
  }
  if (resultNames.size() != results.size())
    return nodeError(n, absl::StrCat("the call has ", resultNames.size(), " results, its body '",
                                     call.bodyName, "' returns ", results.size()));
  llvm::DenseSet<Value *> renamed;
  for (size_t i = 0; i < results.size(); ++i) {
    Value *v = results[i];
    const std::string &name = resultNames[i];
    if (values_->count(name))
      return nodeError(n, absl::StrCat("result name '", name, "' is defined twice"));
    (*values_)[name] = v;
    if (!operands.count(v) && !renamed.count(v) && !g_->countName(name)) {
      v->setName(name);
      renamed.insert(v);
    }
  }
  return absl::OkStatus();
}

/// How often each name is defined: the top-level inputs and every node's
/// results, in the graph and in every body (recursively). Body inputs are not
/// definitions: they are bound to the call's operands.
void GraphBuilder::countDefinitions(const ts::Graph &g, bool top) {
  auto define = [&](const ts::Argument &a) {
    if (a.tag() == Tag::AS_TENSOR)
      ++definitions_[a.get_as_tensor().get_name()];
    else if (a.tag() == Tag::AS_TENSORS)
      for (const auto &t : a.get_as_tensors())
        ++definitions_[t.get_name()];
  };
  if (top)
    for (const ts::Argument &a : g.get_inputs())
      define(a);
  for (const ts::Node &n : g.get_nodes()) {
    for (const ts::Argument &a : n.get_outputs())
      define(a);
    for (const ts::NamedArgument &na : n.get_inputs())
      if (na.get_arg().tag() == Tag::AS_GRAPH)
        countDefinitions(*na.get_arg().get_as_graph().get_graph(), false);
  }
}

absl::Status GraphBuilder::addOutputs() {
  using OTag = ts::OutputSpec::Tag;
  for (const ts::OutputSpec &spec : ep_.get_graph_module().get_signature().get_output_specs()) {
    std::string name, target;
    OutputRole role = OutputRole::UserOutput;
    switch (spec.tag()) {
    case OTag::USER_OUTPUT: {
      const ts::Argument &a = spec.get_user_output().get_arg();
      if (a.tag() != Tag::AS_TENSOR)
        return error("a user output that is not a tensor (a constant or None) is not supported");
      name = a.get_as_tensor().get_name();
      role = OutputRole::UserOutput;
      break;
    }
    case OTag::LOSS_OUTPUT:
      name = spec.get_loss_output().get_arg().get_name();
      role = OutputRole::Loss;
      break;
    case OTag::BUFFER_MUTATION:
      name = spec.get_buffer_mutation().get_arg().get_name();
      target = spec.get_buffer_mutation().get_buffer_name();
      role = OutputRole::BufferMutation;
      break;
    case OTag::GRADIENT_TO_PARAMETER:
      name = spec.get_gradient_to_parameter().get_arg().get_name();
      target = spec.get_gradient_to_parameter().get_parameter_name();
      role = OutputRole::Gradient;
      break;
    case OTag::GRADIENT_TO_USER_INPUT:
      name = spec.get_gradient_to_user_input().get_arg().get_name();
      target = spec.get_gradient_to_user_input().get_user_input_name();
      role = OutputRole::InputGradient;
      break;
    case OTag::USER_INPUT_MUTATION:
      return error("user-input mutations are not supported");
    case OTag::PARAMETER_MUTATION:
      return error("parameter mutations are not supported");
    case OTag::TOKEN:
      return error("effect-token outputs are not supported");
    }
    auto v = lookup(nullptr, name);
    if (!v.ok())
      return v.status();
    g_->addOutput(*v, role, target);
    if (role == OutputRole::Loss)
      loss_ = *v;
  }
  return absl::OkStatus();
}

/// In a joint graph the forward pass ends with the node that computes the
/// loss; everything after it is backward. Without a loss, all is forward.
void GraphBuilder::assignPhases() {
  if (!loss_ || loss_->isGraphInput())
    return;
  bool backward = false;
  for (Node &n : g_->nodes()) {
    if (backward)
      n.setPhase(Phase::Backward);
    if (&n == loss_->definingNode())
      backward = true;
  }
}

/// What graph-opt's .pt2 writer left in the graph module's meta["custom"]:
/// the graph's name and which buffers are optimizer state. Absent in
/// archives torch wrote.
absl::Status GraphBuilder::readGraphCustom() {
  const auto &meta = ep_.get_graph_module().get_metadata();
  auto it = meta.find("custom");
  if (it == meta.end())
    return absl::OkStatus();
  nlohmann::json custom = nlohmann::json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  if (!custom.is_object())
    return error("the graph module's meta[\"custom\"] is not a JSON object");
  if (!custom.contains(kPt2CustomKey.str()))
    return absl::OkStatus();
  const nlohmann::json &mine = custom[kPt2CustomKey.str()];
  if (!mine.is_object() || !mine.value("graph", nlohmann::json()).is_string() ||
      !mine.value("optimizer_state", nlohmann::json()).is_array())
    return error(absl::StrCat("the graph module's meta[\"custom\"][\"", kPt2CustomKey.str(),
                              "\"] lacks the graph name or the optimizer-state list"));
  writtenByGraphOpt_ = true;
  storedName_ = mine["graph"].get<std::string>();
  if (mine.contains("tied")) {
    if (!mine["tied"].is_array())
      return error("the graph module's graph_opt ties are not a list");
    for (const nlohmann::json &pair : mine["tied"]) {
      if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string() || !pair[1].is_string())
        return error("a graph_opt tie is not a pair of input names");
      ties_.emplace_back(pair[0].get<std::string>(), pair[1].get<std::string>());
    }
  }
  for (const nlohmann::json &target : mine["optimizer_state"]) {
    if (!target.is_string())
      return error("an optimizer-state entry is not a string");
    optimizerState_.insert(target.get<std::string>());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Graph>> GraphBuilder::build(llvm::StringRef name) {
  if (absl::Status st = readGraphCustom(); !st.ok())
    return st;
  g_ = std::make_unique<Graph>(storedName_.empty() ? name.str() : storedName_);
  countDefinitions(*graph_, /*top=*/true);
  if (absl::Status st = addInputs(); !st.ok())
    return st;
  for (const auto &[input, owner] : ties_) {
    Value *in = topValues_.lookup(input), *to = topValues_.lookup(owner);
    if (!in || !to || !in->isGraphInput() || !to->isGraphInput())
      return error(absl::StrCat("graph_opt tie of '", input, "' to '", owner,
                                "': both must be graph inputs"));
    if (absl::Status st = g_->tieInput(in->index(), to); !st.ok())
      return error(absl::StrCat("graph_opt tie of '", input, "' to '", owner, "': ",
                                st.message()));
  }
  for (const ts::Node &n : graph_->get_nodes())
    if (absl::Status st = addNode(n); !st.ok())
      return st;
  if (absl::Status st = addOutputs(); !st.ok())
    return st;
  // graph-opt's writer stores each node's phase; torch's archives have none.
  if (!writtenByGraphOpt_)
    assignPhases();
  return std::move(g_);
}

} // namespace

absl::StatusOr<std::unique_ptr<Graph>> buildGraph(const ts::ExportedProgram &ep, llvm::StringRef graphName,
                                                  llvm::StringRef where) {
  return GraphBuilder(ep, where).build(graphName);
}

} // namespace graphopt::serde
