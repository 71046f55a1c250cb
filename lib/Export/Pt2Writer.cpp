//===- Pt2Writer.cpp - The IR back to a torch.export archive (.pt2) -------===//
//
// The inverse of Import/Pt2Graph.cpp and Import/Pt2Importer.cpp: the graph is
// built as LibTorch's generated serde types (the same ones the importer reads)
// and dumped with their to_json; the zip is written by PyTorchStreamWriter,
// with the records torch.export.save writes (docs/Pt2ArchiveFormat.md).
//
//===----------------------------------------------------------------------===//
#include "graphopt/Export/Pt2Writer.h"

#include "../Import/SerdeEnums.h"
#include "graphopt/IR/Exceptions.h"
#include "graphopt/IR/NodeResults.h"
#include "graphopt/IR/Printer.h"
#include "graphopt/IR/SchemaUtils.h"
#include "graphopt/Import/Importer.h"

#include <ATen/ops/zeros.h>
#include <torch/csrc/jit/operator_upgraders/utils.h>
#include <absl/strings/str_cat.h>
#include <caffe2/serialize/inline_container.h>
#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/StringSet.h>
#include <torch/csrc/export/pt2_archive_constants.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/csrc/utils/generated_serialization_types.h>
#include <torch/headeronly/version.h>

#include <cmath>
#include <map>

// torch/csrc/jit/serialization/export.h declares this, and with it the whole
// TorchScript module API, its IR and ONNX (compile time, issue 52): the one
// function used here, declared as that header declares it.
namespace torch::jit {
TORCH_API void writeArchiveAndTensors(const std::string &archive_name, const char *pickle_bytes,
                                      size_t size, const std::vector<at::Tensor> &tensors,
                                      caffe2::serialize::PyTorchStreamWriter &out);
} // namespace torch::jit

namespace graphopt {

namespace {

namespace ts = torch::_export;
using serde::fromDevice;
using serde::fromLayout;
using serde::fromMemoryFormat;
using serde::fromScalarType;

/// The serde schema version written: what torch 2.11 writes.
constexpr int64_t kSchemaMajor = 8, kSchemaMinor = 17;
/// The model name inside the archive (models/model.json); torch.export.save's.
constexpr const char *kModelName = "model";

absl::Status unsupported(const Node &n, llvm::StringRef why) {
  return absl::InvalidArgumentError(
      absl::StrCat("cannot write ", n.describe(), " to a .pt2 archive: ", why.str()));
}

ts::SymInt symInt(int64_t v) {
  ts::SymInt s;
  s.set_as_int(v);
  return s;
}

absl::StatusOr<ts::TensorMeta> tensorMeta(const TensorType &t, bool requiresGrad) {
  auto dtype = fromScalarType(t.dtype);
  if (!dtype)
    return absl::InvalidArgumentError(
        absl::StrCat("dtype ", c10::toString(t.dtype), " has no number in the export schema"));
  ts::TensorMeta m;
  m.set_dtype(*dtype);
  std::vector<ts::SymInt> sizes, strides;
  for (int64_t s : t.sizes)
    sizes.push_back(symInt(s));
  for (int64_t s : t.strides)
    strides.push_back(symInt(s));
  m.set_sizes(std::move(sizes));
  m.set_strides(std::move(strides));
  m.set_storage_offset(symInt(t.storageOffset));
  m.set_requires_grad(requiresGrad);
  m.set_device(fromDevice(t.device));
  m.set_layout(ts::Layout::Strided);
  return m;
}

ts::TensorArgument tensorArg(const Value *v) {
  ts::TensorArgument a;
  a.set_name(v->name().str());
  return a;
}

ts::Argument asTensor(const Value *v) {
  ts::Argument a;
  a.set_as_tensor(tensorArg(v));
  return a;
}

/// A constant as JSON for meta["custom"]: strings, numbers, bools and their
/// lists as themselves; None as null; the rest (dtypes, devices, non-finite
/// floats, which JSON has no literal for) as their .gir text.
nlohmann::json customValue(const Constant &c) {
  switch (c.kind()) {
  case ConstantKind::None: return nullptr;
  case ConstantKind::Bool: return c.asBool();
  case ConstantKind::Int: return c.asInt();
  case ConstantKind::Float:
    if (std::isfinite(c.asFloat()))
      return c.asFloat();
    break;
  case ConstantKind::String: return c.asString();
  case ConstantKind::IntList: return std::vector<int64_t>(c.asIntList().begin(), c.asIntList().end());
  case ConstantKind::FloatList:
    if (llvm::all_of(c.asFloatList(), [](double d) { return std::isfinite(d); }))
      return std::vector<double>(c.asFloatList().begin(), c.asFloatList().end());
    break;
  case ConstantKind::BoolList: return c.asBoolList();
  default: break;
  }
  return printConstantToString(c);
}

/// The spec of graph input `in` (a tensor, `v`) in the graph signature.
ts::InputSpec inputSpecOf(const GraphInput &in) {
  const Value *v = in.value;
  ts::InputSpec spec;
  switch (in.role) {
  case InputRole::Parameter: {
    ts::InputToParameterSpec p;
    p.set_arg(tensorArg(v));
    p.set_parameter_name(in.target);
    spec.set_parameter(std::move(p));
    break;
  }
  case InputRole::Buffer:
  case InputRole::OptimizerState: { // a persistent buffer, listed in the graph's custom
    ts::InputToBufferSpec b;
    b.set_arg(tensorArg(v));
    b.set_buffer_name(in.target);
    b.set_persistent(true);
    spec.set_buffer(std::move(b));
    break;
  }
  case InputRole::Constant: {
    ts::InputToTensorConstantSpec c;
    c.set_arg(tensorArg(v));
    c.set_tensor_constant_name(in.target);
    spec.set_tensor_constant(std::move(c));
    break;
  }
  case InputRole::UserInput: {
    ts::UserInputSpec u;
    u.set_arg(asTensor(v));
    spec.set_user_input(std::move(u));
    break;
  }
  }
  return spec;
}

/// The spec of graph output `out` (a tensor) in the graph signature.
ts::OutputSpec outputSpecOf(const GraphOutput &out) {
  const Value *v = out.value;
  ts::OutputSpec spec;
  switch (out.role) {
  case OutputRole::UserOutput: {
    ts::UserOutputSpec u;
    u.set_arg(asTensor(v));
    spec.set_user_output(std::move(u));
    break;
  }
  case OutputRole::Loss: {
    ts::LossOutputSpec l;
    l.set_arg(tensorArg(v));
    spec.set_loss_output(std::move(l));
    break;
  }
  case OutputRole::BufferMutation: {
    ts::BufferMutationSpec b;
    b.set_arg(tensorArg(v));
    b.set_buffer_name(out.target);
    spec.set_buffer_mutation(std::move(b));
    break;
  }
  case OutputRole::Gradient: {
    ts::GradientToParameterSpec p;
    p.set_arg(tensorArg(v));
    p.set_parameter_name(out.target);
    spec.set_gradient_to_parameter(std::move(p));
    break;
  }
  case OutputRole::InputGradient: {
    ts::GradientToUserInputSpec u;
    u.set_arg(tensorArg(v));
    u.set_user_input_name(out.target);
    spec.set_gradient_to_user_input(std::move(u));
    break;
  }
  }
  return spec;
}

ts::F64 f64(double d) {
  ts::F64 f;
  f.set(d);
  return f;
}

/// A list argument of `n` (for `schemaArg`): tensors, or optional ones.
absl::StatusOr<ts::Argument> listArgument(const Node &n, const Argument &arg,
                                          const c10::Argument &schemaArg) {
  ts::Argument out;
  if (argFormOf(schemaArg.real_type()) == ArgForm::OptionalTensorList) {
    std::vector<ts::OptionalTensorArgument> elems;
    for (const Value *v : arg.getList()) {
      ts::OptionalTensorArgument o;
      if (v)
        o.set_as_tensor(tensorArg(v));
      else
        o.set_as_none(true);
      elems.push_back(std::move(o));
    }
    out.set_as_optional_tensors(std::move(elems));
  } else {
    std::vector<ts::TensorArgument> elems;
    for (const Value *v : arg.getList()) {
      if (!v)
        return unsupported(n, absl::StrCat("argument '", schemaArg.name(),
                                           "' holds None in a list of tensors"));
      elems.push_back(tensorArg(v));
    }
    out.set_as_tensors(std::move(elems));
  }
  return out;
}

/// An argument of `n` (for `schemaArg`) that is the value `v`: a tensor, or
/// a symbolic int.
absl::StatusOr<ts::Argument> valueArgument(const Node &n, const Value *v,
                                           const c10::Argument &schemaArg) {
  ts::Argument out;
  if (v->isTensor()) {
    out.set_as_tensor(tensorArg(v));
  } else if (v->type().kind == ValueKind::Int) {
    ts::SymIntArgument s;
    s.set_as_name(v->name().str());
    out.set_as_sym_int(std::move(s));
  } else {
    return unsupported(n, absl::StrCat("argument '", schemaArg.name(), "' is the value %",
                                       v->name().str(), " of type ",
                                       printTypeToString(v->type())));
  }
  return out;
}

class ProgramWriter {
public:
  ProgramWriter(const Graph &g, llvm::ArrayRef<std::string> zeroFilled)
      : g_(g), zeroFilled_(zeroFilled.begin(), zeroFilled.end()) {}
  absl::StatusOr<std::string> write();

private:
  absl::Status addTensorValue(const Value *v, bool requiresGrad = false);
  absl::StatusOr<ts::Argument> argument(const Node &n, unsigned i);
  /// argument() where the argument is the constant `c`.
  absl::StatusOr<ts::Argument> constantArgument(const Node &n, unsigned i, const Constant &c);
  absl::StatusOr<ts::Node> node(const Node &n);
  std::string nodeName(const Node &n);
  absl::Status signature(ts::GraphSignature &sig, std::vector<ts::Argument> &inputs,
                         std::vector<ts::Argument> &outputs);
  // write's steps.
  /// The program's nodes, in graph order; `functional` is cleared where one writes.
  absl::StatusOr<std::vector<ts::Node>> nodes(bool &functional);
  /// graph-opt's own entry of the graph module's meta["custom"]: the graph's
  /// name, its optimizer state, ties and zero-filled state.
  nlohmann::json graphCustom() const;
  /// The -inf arguments put back into the program's JSON.
  void patchNegativeInfinities(nlohmann::json &json) const;

  const Graph &g_;
  std::vector<std::string> zeroFilled_; ///< optimizer state written as zeros
  std::unordered_map<std::string, ts::TensorMeta> tensorValues_;
  llvm::StringSet<> names_; ///< value names and node names given so far
  /// Places in the node list where a float argument is -inf: the serde
  /// type's to_json writes every infinity as "Infinity", so these are
  /// patched in the JSON ({node, input, list element or -1}).
  struct NegativeInfinity {
    size_t node, input;
    int64_t element;
  };
  std::vector<NegativeInfinity> negativeInfinities_;
  size_t nodeIndex_ = 0;
};

absl::Status ProgramWriter::addTensorValue(const Value *v, bool requiresGrad) {
  if (!v->isTensor() || !v->type().isKnown())
    return absl::OkStatus(); // the importer infers an unknown type again
  auto meta = tensorMeta(v->tensorType(), requiresGrad);
  if (!meta.ok())
    return absl::InvalidArgumentError(
        absl::StrCat("value %", v->name().str(), ": ", meta.status().message()));
  tensorValues_.emplace(v->name().str(), std::move(*meta));
  return absl::OkStatus();
}

absl::StatusOr<ts::Argument> ProgramWriter::argument(const Node &n, unsigned i) {
  const Argument &arg = n.arg(i);
  const c10::Argument &schemaArg = n.schema().arguments()[i];
  if (arg.isList())
    return listArgument(n, arg, schemaArg);
  if (arg.isValue())
    return valueArgument(n, arg.getValue(), schemaArg);
  return constantArgument(n, i, arg.getConstant());
}

absl::StatusOr<ts::Argument> ProgramWriter::constantArgument(const Node &n, unsigned i,
                                                             const Constant &c) {
  ts::Argument out;
  switch (c.kind()) {
  case ConstantKind::None: out.set_as_none(true); break;
  case ConstantKind::Bool: out.set_as_bool(c.asBool()); break;
  case ConstantKind::Int: out.set_as_int(c.asInt()); break;
  case ConstantKind::Float:
    out.set_as_float(f64(c.asFloat()));
    if (std::isinf(c.asFloat()) && c.asFloat() < 0)
      negativeInfinities_.push_back({nodeIndex_, i, -1});
    break;
  case ConstantKind::String: out.set_as_string(c.asString()); break;
  case ConstantKind::IntList:
    out.set_as_ints(std::vector<int64_t>(c.asIntList().begin(), c.asIntList().end()));
    break;
  case ConstantKind::FloatList: {
    std::vector<ts::F64> v;
    for (double d : c.asFloatList()) {
      if (std::isinf(d) && d < 0)
        negativeInfinities_.push_back({nodeIndex_, i, static_cast<int64_t>(v.size())});
      v.push_back(f64(d));
    }
    out.set_as_floats(std::move(v));
    break;
  }
  case ConstantKind::BoolList: out.set_as_bools(c.asBoolList()); break;
  case ConstantKind::Dtype: {
    auto t = fromScalarType(c.asDtype());
    if (!t)
      return unsupported(n, absl::StrCat("dtype ", c10::toString(c.asDtype()),
                                         " has no number in the export schema"));
    out.set_as_scalar_type(*t);
    break;
  }
  case ConstantKind::Layout: {
    auto l = fromLayout(c.asLayout());
    if (!l)
      return unsupported(n, "its layout has no number in the export schema");
    out.set_as_layout(*l);
    break;
  }
  case ConstantKind::MemoryFormat: {
    auto m = fromMemoryFormat(c.asMemoryFormat());
    if (!m)
      return unsupported(n, "its memory format has no number in the export schema");
    out.set_as_memory_format(*m);
    break;
  }
  case ConstantKind::Device:
    // The execution device is written as the device the graph's types
    // assume; the importer reads that device back as the execution device.
    out.set_as_device(fromDevice(c.asDevice()));
    break;
  }
  return out;
}

/// torch names a call after its result where it has one tensor result;
/// otherwise after the operator, made unique.
std::string ProgramWriter::nodeName(const Node &n) {
  if (n.numOutputs() == 1 && n.output()->isTensor()) {
    names_.insert(n.output()->name());
    return n.output()->name().str();
  }
  // The importer names a None result "<node>_none_<i>": keep that node name.
  for (unsigned i = 0; i < n.numOutputs(); ++i) {
    llvm::StringRef name = n.output(i)->name();
    std::string suffix = absl::StrCat("_none_", i);
    if (n.output(i)->type().kind == ValueKind::None && name.endswith(suffix)) {
      std::string base = name.drop_back(suffix.size()).str();
      if (!g_.countName(base) && names_.insert(base).second)
        return base;
    }
  }
  std::string base = n.schema().name();
  base = base.substr(base.find("::") + 2);
  std::string name = base;
  for (int k = 1; g_.countName(name) || !names_.insert(name).second; ++k)
    name = absl::StrCat(base, "_", k);
  return name;
}

absl::StatusOr<ts::Node> ProgramWriter::node(const Node &n) {
  ts::Node out;
  const c10::FunctionSchema &schema = n.schema();
  std::string overload = schema.overload_name().empty() ? "default" : schema.overload_name();
  std::string name = schema.name();
  size_t sep = name.find("::");
  out.set_target(absl::StrCat("torch.ops.", name.substr(0, sep), ".", name.substr(sep + 2), ".",
                              overload));
  std::vector<ts::NamedArgument> inputs;
  for (unsigned i = 0; i < n.numArgs(); ++i) {
    auto a = argument(n, i);
    if (!a.ok())
      return a.status();
    ts::NamedArgument na;
    na.set_name(schema.arguments()[i].name());
    na.set_arg(std::move(*a));
    na.set_kind(static_cast<int64_t>(schema.arguments()[i].kwarg_only()
                                         ? ts::ArgumentKind::KEYWORD
                                         : ts::ArgumentKind::POSITIONAL));
    inputs.push_back(std::move(na));
  }
  out.set_inputs(std::move(inputs));

  std::vector<ts::Argument> outputs;
  if (returnsTensorList(schema)) {
    std::vector<ts::TensorArgument> elems;
    for (const Value *v : n.outputs())
      elems.push_back(tensorArg(v));
    ts::Argument a;
    a.set_as_tensors(std::move(elems));
    outputs.push_back(std::move(a));
  } else {
    for (const Value *v : n.outputs()) {
      ts::Argument a;
      if (v->isTensor()) {
        a.set_as_tensor(tensorArg(v));
      } else if (v->type().kind == ValueKind::None) {
        a.set_as_none(true);
      } else if (v->type().kind == ValueKind::Int) {
        ts::SymIntArgument s;
        s.set_as_name(v->name().str());
        a.set_as_sym_int(std::move(s));
      } else {
        return unsupported(n, absl::StrCat("its result %", v->name().str(), " is of type ",
                                           printTypeToString(v->type())));
      }
      outputs.push_back(std::move(a));
    }
  }
  out.set_outputs(std::move(outputs));
  for (const Value *v : n.outputs())
    if (absl::Status st = addTensorValue(v); !st.ok())
      return st;

  // graph-opt's attributes and the phase, in meta["custom"].
  nlohmann::json custom = nlohmann::json::object();
  for (const auto &[key, value] : n.attrs())
    custom[key] = customValue(value);
  custom[kPt2CustomKey.str()] = {{"phase", phaseName(n.phase()).str()}};
  out.set_metadata({{"custom", custom.dump()}});
  out.set_name(nodeName(n));
  return out;
}

absl::Status ProgramWriter::signature(ts::GraphSignature &sig, std::vector<ts::Argument> &inputs,
                                      std::vector<ts::Argument> &outputs) {
  std::vector<ts::InputSpec> inputSpecs;
  for (const GraphInput &in : g_.inputs()) {
    const Value *v = in.value;
    if (!v->isTensor())
      return absl::InvalidArgumentError(
          absl::StrCat("cannot write graph input %", v->name().str(), " of type ",
                       printTypeToString(v->type()),
                       " to a .pt2 archive: torch.export's inputs are tensors"));
    if (absl::Status st = addTensorValue(v, in.role == InputRole::Parameter); !st.ok())
      return st;
    inputs.push_back(asTensor(v));
    inputSpecs.push_back(inputSpecOf(in));
  }

  // torch's verifier wants mutations first, then the other outputs; within
  // each group the graph's order is kept.
  std::vector<const GraphOutput *> ordered;
  for (const GraphOutput &out : g_.outputs())
    if (out.role == OutputRole::BufferMutation)
      ordered.push_back(&out);
  for (const GraphOutput &out : g_.outputs())
    if (out.role != OutputRole::BufferMutation)
      ordered.push_back(&out);
  std::vector<ts::OutputSpec> outputSpecs;
  for (const GraphOutput *out : ordered) {
    const Value *v = out->value;
    if (!v->isTensor())
      return absl::InvalidArgumentError(
          absl::StrCat("cannot write graph output %", v->name().str(), " of type ",
                       printTypeToString(v->type()), " to a .pt2 archive: only tensor outputs"));
    outputs.push_back(asTensor(v));
    outputSpecs.push_back(outputSpecOf(*out));
  }
  sig.set_input_specs(std::move(inputSpecs));
  sig.set_output_specs(std::move(outputSpecs));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ts::Node>> ProgramWriter::nodes(bool &functional) {
  std::vector<ts::Node> out;
  for (const Node &n : g_.nodes()) {
    auto made = node(n);
    if (!made.ok())
      return made.status();
    out.push_back(std::move(*made));
    functional &= !n.schema().is_mutable();
    ++nodeIndex_;
  }
  return out;
}

nlohmann::json ProgramWriter::graphCustom() const {
  nlohmann::json custom = nlohmann::json::object();
  std::vector<std::string> optimizerState;
  for (const GraphInput &in : g_.inputs())
    if (in.role == InputRole::OptimizerState)
      optimizerState.push_back(in.target);
  // Ties, so that a program without its weights (from_fx, to_fx) keeps them; with
  // weights, tied inputs also share a storage record.
  nlohmann::json tied = nlohmann::json::array();
  for (const GraphInput &in : g_.inputs())
    if (in.tiedTo)
      tied.push_back({in.value->name().str(), in.tiedTo->name().str()});
  custom[kPt2CustomKey.str()] = {{"graph", g_.name().str()},
                                 {"optimizer_state", optimizerState},
                                 {"tied", tied}};
  if (!zeroFilled_.empty())
    custom[kPt2CustomKey.str()]["zero_filled_state"] = zeroFilled_;
  return custom;
}

void ProgramWriter::patchNegativeInfinities(nlohmann::json &json) const {
  nlohmann::json &jsonNodes = json["graph_module"]["graph"]["nodes"];
  for (const NegativeInfinity &ni : negativeInfinities_) {
    nlohmann::json &arg = jsonNodes[ni.node]["inputs"][ni.input]["arg"];
    if (ni.element < 0)
      arg["as_float"] = "-Infinity";
    else
      arg["as_floats"][ni.element] = "-Infinity";
  }
}

absl::StatusOr<std::string> ProgramWriter::write() {
  for (const GraphInput &in : g_.inputs())
    names_.insert(in.value->name());
  for (const Node &n : g_.nodes())
    for (const Value *out : n.outputs())
      names_.insert(out->name());

  ts::GraphSignature sig;
  std::vector<ts::Argument> inputs, outputs;
  if (absl::Status st = signature(sig, inputs, outputs); !st.ok())
    return st;
  bool functional = true;
  auto programNodes = nodes(functional);
  if (!programNodes.ok())
    return programNodes.status();

  ts::Graph graph;
  graph.set_inputs(std::move(inputs));
  graph.set_outputs(std::move(outputs));
  graph.set_nodes(std::move(*programNodes));
  graph.set_tensor_values(std::move(tensorValues_));
  graph.set_sym_int_values({});
  graph.set_sym_bool_values({});
  graph.set_sym_float_values({});
  graph.set_custom_obj_values({});
  graph.set_is_single_tensor_return(false);

  ts::GraphModule module;
  module.set_graph(std::move(graph));
  module.set_signature(std::move(sig));
  module.set_module_call_graph({});
  module.set_metadata({{"custom", graphCustom().dump()}});
  module.set_treespec_namedtuple_fields({});

  ts::ExportedProgram ep;
  ep.set_graph_module(std::move(module));
  // The operator version this torch writes (torch._C._get_max_operator_version(), what
  // torch.export's serializer puts here), not a number fixed when this was written.
  ep.set_opset_version({{"aten", static_cast<int64_t>(torch::jit::getMaxOperatorVersion())}});
  ep.set_range_constraints({});
  ts::SchemaVersion version;
  version.set_major(kSchemaMajor);
  version.set_minor(kSchemaMinor);
  ep.set_schema_version(version);
  ep.set_verifiers({functional ? "ATEN" : "TRAINING"});
  ep.set_torch_version(absl::StrCat(TORCH_VERSION_MAJOR, ".", TORCH_VERSION_MINOR, ".",
                                  TORCH_VERSION_PATCH));
  ep.set_guards_code({});

  nlohmann::json json = ep;
  patchNegativeInfinities(json);
  return json.dump();
}

/// Writes the weights of `roles` into `dir` and returns the payload config.
class PayloadWriter {
public:
  PayloadWriter(caffe2::serialize::PyTorchStreamWriter &zip, std::string dir, std::string prefix)
      : zip_(zip), dir_(std::move(dir)), prefix_(std::move(prefix)) {}

  absl::Status add(const std::string &fqn, at::Tensor t, bool isParam) {
    if (!t.device().is_cpu())
      t = t.cpu();
    // One record per storage: tied weights share it as in torch's writer.
    auto [it, inserted] = records_.emplace(t.storage().unsafeGetStorageImpl(), "");
    if (inserted) {
      it->second = absl::StrCat(prefix_, records_.size() - 1);
      keepAlive_.push_back(t);
      // The whole storage, straight from its memory (no copy of the weights).
      zip_.writeRecord(dir_ + it->second, t.storage().data(), t.storage().nbytes());
    }
    TensorType type(t.scalar_type(), t.sizes().vec(), t.strides().vec());
    type.storageOffset = t.storage_offset();
    auto meta = tensorMeta(type, isParam && t.requires_grad());
    if (!meta.ok())
      return absl::InvalidArgumentError(absl::StrCat("weight '", fqn, "': ", meta.status().message()));
    ts::PayloadMeta p;
    p.set_path_name(it->second);
    p.set_is_param(isParam);
    p.set_use_pickle(false);
    p.set_tensor_meta(std::move(*meta));
    config_[fqn] = std::move(p);
    return absl::OkStatus();
  }

  std::string configJson() const {
    ts::PayloadConfig c;
    c.set_config(config_);
    nlohmann::json j = c;
    return j.dump();
  }

private:
  caffe2::serialize::PyTorchStreamWriter &zip_;
  std::string dir_, prefix_;
  std::map<const c10::StorageImpl *, std::string> records_;
  std::vector<at::Tensor> keepAlive_; ///< so no storage address is reused meanwhile
  std::unordered_map<std::string, ts::PayloadMeta> config_;
};

/// What torch.save writes for `v`, as torch::pickle_save does, but without
/// the TorchScript type tags on tuples and dicts (pickle_save tags them with
/// torch.jit._pickle.restore_type_tag, which torch.load(weights_only=True),
/// the way torch.export.load reads example inputs, refuses).
std::string torchSave(const c10::IValue &v) {
  std::vector<char> pickleBytes;
  torch::jit::Pickler pickler(
      [&](const char *bytes, size_t n) { pickleBytes.insert(pickleBytes.end(), bytes, bytes + n); },
      /*tensor_table=*/nullptr, /*type_renamer=*/nullptr, /*memoized_class_types=*/nullptr,
      /*get_tensor_id=*/nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(v);
  pickler.stop();
  std::string out;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void *data, size_t n) {
    out.append(static_cast<const char *>(data), n);
    return n;
  });
  torch::jit::writeArchiveAndTensors("data", pickleBytes.data(), pickleBytes.size(),
                                     pickler.tensorData(), writer);
  writer.writeEndOfFile();
  return out;
}

std::string formatName(std::string_view format) {
  std::string s(format);
  s.replace(s.find("{}"), 2, kModelName);
  return s;
}

namespace spec = torch::_export::archive_spec;

/// A text record of the archive.
void writeText(caffe2::serialize::PyTorchStreamWriter &zip, const std::string &name,
               const std::string &contents) {
  zip.writeRecord(name, contents.data(), contents.size());
}

/// writePt2Archive's first step: the optimizer state that has no value yet,
/// written as zeros (with a remark each).
std::vector<std::string> zeroFilledState(const Graph &graph, const WeightStore &weights,
                                         std::vector<std::string> *remarks) {
  std::vector<std::string> zeroFilled;
  for (const GraphInput &in : graph.inputs())
    if (in.role == InputRole::OptimizerState && !weights.lookup(in.target)) {
      zeroFilled.push_back(in.target);
      if (remarks)
        remarks->push_back(absl::StrCat(
            "optimizer state '", in.target, "' has no value yet: written as zeros, the state "
            "torch.optim starts from (listed in the archive as zero_filled_state)"));
    }
  return zeroFilled;
}

/// writePt2Archive's weights step: every input that is not a user input, as a
/// weight or a constant record, and the two payload configs.
absl::Status writeWeights(caffe2::serialize::PyTorchStreamWriter &zip, const Graph &graph,
                          const WeightStore &weights) {
  PayloadWriter weightFiles(zip, std::string(spec::WEIGHTS_DIR),
                            std::string(spec::WEIGHT_FILENAME_PREFIX));
  PayloadWriter constantFiles(zip, std::string(spec::CONSTANTS_DIR),
                              std::string(spec::TENSOR_CONSTANT_FILENAME_PREFIX));
  for (const GraphInput &in : graph.inputs()) {
    if (in.role == InputRole::UserInput)
      continue;
    // A tied input is its owner's storage: written as the owner's weight where the two
    // have one type, so that the archive shares the record.
    const at::Tensor *w = weights.lookup(in.target);
    if (in.tiedTo) {
      const GraphInput &owner = graph.inputs()[in.tiedTo->index()];
      const at::Tensor *ownerWeight = weights.lookup(owner.target);
      if (ownerWeight && owner.value->type() == in.value->type())
        w = ownerWeight;
    }
    at::Tensor zeros;
    if (!w && in.role == InputRole::OptimizerState) {
      const TensorType &t = in.value->tensorType();
      zeros = at::zeros(t.sizes, at::TensorOptions().dtype(t.dtype));
      w = &zeros;
    }
    if (!w)
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot write a .pt2 archive: ", inputRoleName(in.role).str(), " '", in.target,
          "' (graph input %", in.value->name().str(),
          ") has no weight (a .gir input carries none: write .gir, or start from the .pt2)"));
    PayloadWriter &files = in.role == InputRole::Constant ? constantFiles : weightFiles;
    if (absl::Status st = files.add(in.target, *w, in.role == InputRole::Parameter); !st.ok())
      return st;
  }
  writeText(zip, formatName(spec::WEIGHTS_CONFIG_FILENAME_FORMAT), weightFiles.configJson());
  writeText(zip, formatName(spec::CONSTANTS_CONFIG_FILENAME_FORMAT), constantFiles.configJson());
  return absl::OkStatus();
}

/// writePt2Archive's last record: torch.save((args, kwargs)) of the example inputs.
void writeExampleInputs(caffe2::serialize::PyTorchStreamWriter &zip,
                        const std::vector<at::Tensor> &inputs) {
  std::vector<c10::IValue> args;
  for (const at::Tensor &t : inputs)
    args.emplace_back(t.device().is_cpu() ? t : t.cpu());
  c10::impl::GenericDict kwargs(c10::StringType::get(), c10::AnyType::get());
  c10::IValue sample = c10::ivalue::Tuple::create(
      {c10::ivalue::Tuple::create(std::move(args)), c10::IValue(kwargs)});
  std::string pickled = torchSave(sample);
  zip.writeRecord(formatName(spec::SAMPLE_INPUTS_FILENAME_FORMAT), pickled.data(),
                  pickled.size());
}

} // namespace

absl::StatusOr<std::string> serializeExportedProgram(const Graph &graph,
                                                     llvm::ArrayRef<std::string> zeroFilledState) {
  try {
    return ProgramWriter(graph, zeroFilledState).write();
  } catch (...) {
    return absl::InternalError(
        absl::StrCat("writing the graph as a torch.export program: ", describeCurrentException()));
  }
}

absl::StatusOr<std::string> writePt2Archive(const Graph &graph, const WeightStore &weights,
                                            llvm::ArrayRef<at::Tensor> exampleInputs,
                                            std::vector<std::string> *remarks) {
  std::vector<std::string> zeroFilled = zeroFilledState(graph, weights, remarks);
  auto program = serializeExportedProgram(graph, zeroFilled);
  if (!program.ok())
    return program.status();
  std::vector<at::Tensor> inputs(exampleInputs.begin(), exampleInputs.end());
  if (inputs.empty()) {
    auto made = makeExampleInputs(graph, /*seed=*/0);
    if (!made.ok())
      return made.status();
    inputs = std::move(*made);
  }

  std::string bytes;
  try {
    caffe2::serialize::PyTorchStreamWriter zip([&](const void *data, size_t size) {
      bytes.append(static_cast<const char *>(data), size);
      return size;
    });
    zip.setMinVersion(6); // what torch's PT2ArchiveWriter sets
    writeText(zip, std::string(spec::ARCHIVE_FORMAT_PATH),
              std::string(spec::ARCHIVE_FORMAT_VALUE));
    writeText(zip, std::string(spec::ARCHIVE_VERSION_PATH),
              std::string(spec::ARCHIVE_VERSION_VALUE));
    writeText(zip, formatName(spec::MODELS_FILENAME_FORMAT), *program);
    if (absl::Status st = writeWeights(zip, graph, weights); !st.ok())
      return st;
    writeExampleInputs(zip, inputs);
    zip.writeEndOfFile();
  } catch (...) {
    return absl::InternalError(absl::StrCat("writing the .pt2 archive: ", describeCurrentException()));
  }
  return bytes;
}

} // namespace graphopt
