//===- GraphOptModule.cpp - graph_opt._C: the C++ library from Python ------===//
//
// The extension module of the `graph_opt` package (python/graph_opt): a model
// (graph, weights, example inputs), pipelines, execution and verification, on
// the same library as the graph-opt driver. Tensors cross as torch.Tensor
// without copies (torch's own pybind11 casters, libtorch_python). Every error
// is a graph_opt.Error carrying the driver's exit code (2: bad input or a
// failed pass; 1: a verification that failed); nothing aborts the interpreter.
//
//===----------------------------------------------------------------------===//
#include "graphopt/Analysis/ModelRun.h"
#include "graphopt/Export/Pt2Writer.h"
#include "graphopt/IR/Exceptions.h"
#include "graphopt/IR/GraphoptOps.h"
#include "graphopt/IR/OpEffects.h"
#include "graphopt/IR/Parser.h"
#include "graphopt/IR/Printer.h"
#include "graphopt/IR/Summary.h"
#include "graphopt/IR/Verifier.h"
#include "graphopt/Import/Importer.h"
#include "graphopt/Pass/GraphOptimizer.h"
#include "graphopt/Pass/PassOption.h"
#include "graphopt/Pass/PassRegistry.h"
#include "graphopt/Runtime/CpuAllocatorScope.h"
#include "graphopt/Runtime/CpuMemoryPlan.h"
#include "graphopt/Runtime/Executor.h"
#include "graphopt/Runtime/MemoryProbe.h"
#include "graphopt/Runtime/OutputVerifier.h"

#include <torch/csrc/utils/pybind.h>

#include "graphopt/Driver/Driver.h"
#include "checkpoint/BoundSearch.h" // passes/

#include <absl/strings/str_cat.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/raw_ostream.h>

#include <memory>
#include <mutex>
#include <string>

namespace py = pybind11;
using namespace graphopt;

namespace {

constexpr int kVerificationFailed = 1;
constexpr int kBadInput = 2;

/// Raises graph_opt.Error(message) with `exit_code` set, as the driver would exit.
[[noreturn]] void raise(const absl::Status &status, int exitCode = kBadInput) {
  py::object errorType = py::module_::import("graph_opt._C").attr("Error");
  py::object error = errorType(std::string(status.message()));
  error.attr("exit_code") = exitCode;
  error.attr("status") = absl::StatusCodeToString(status.code());
  PyErr_SetObject(errorType.ptr(), error.ptr());
  throw py::error_already_set();
}

template <typename T> T orRaise(absl::StatusOr<T> value) {
  if (!value.ok())
    raise(value.status());
  return std::move(*value);
}

/// The bytes `value` ("6GiB", "700 MiB", "8GB", "4096") is, through the pass
/// options' own parser; an error naming `option` for a share, a non-positive
/// amount or anything else.
int64_t bytesOption(const std::string &option, const std::string &value) {
  auto amount = MemoryAmount::parse(value);
  if (!amount.ok() || amount->isPercent() || amount->byteValue() <= 0)
    raise(absl::InvalidArgumentError(absl::StrCat(
        option, "='", value, "': bytes, as an int or a string with a unit (\"6GiB\", "
        "\"700MiB\", \"8GB\")", amount.ok() ? "" : absl::StrCat(": ", amount.status().message()))));
  return amount->byteValue();
}

/// A graph with what running it takes: the model as imported, or a parsed
/// graph (no weights: seeded stand-ins are made when it runs).
struct Model {
  ImportedModel imported;
  /// The file it was read from ("" if none): save_pt2 never overwrites it.
  std::string sourcePath;
  /// The weights the source carried, without the seeded stand-ins a run
  /// adds to imported.weights: what save_pt2 writes.
  WeightStore sourceWeights;
  Graph &graph() const { return *imported.graph; }

  /// execute()'s executor, kept between calls so that its CPU memory plan
  /// replays (docs/Runtime.md): without it every step's buffers came fresh
  /// from the allocator, page faults and all (a RoBERTa step 1.085x eager's).
  /// Made again when the graph was edited or the options differ.
  struct KeptExecutor {
    const Graph *graph = nullptr;
    uint64_t epoch = 0;
    uint64_t seed = 0;
    bool written = false;
    std::unique_ptr<Executor> executor;
  };
  KeptExecutor kept;
  std::mutex keptMutex; ///< held while the kept executor runs

  /// The kept executor for `options` (keptMutex held).
  Executor &keptExecutor(const ExecutionOptions &options) {
    if (!kept.executor || kept.graph != &graph() || kept.epoch != graph().editEpoch() ||
        kept.seed != options.seed || kept.written != options.captureWrittenInputs)
      kept = KeptExecutor{&graph(), graph().editEpoch(), options.seed,
                          options.captureWrittenInputs,
                          std::make_unique<Executor>(graph(), imported.weights, options)};
    return *kept.executor;
  }
};
using ModelPtr = std::shared_ptr<Model>;

ModelPtr wrap(ImportedModel imported, std::string sourcePath = "") {
  if (absl::Status st = verifyGraph(*imported.graph); !st.ok())
    raise(st);
  auto m = std::make_shared<Model>();
  m->imported = std::move(imported);
  m->sourcePath = std::move(sourcePath);
  m->sourceWeights = m->imported.weights;
  return m;
}

/// graph.save_pt2(path): the archive written atomically; never over the
/// file the graph came from.
void savePt2(const Model &m, const std::string &path) {
  if (absl::Status st = checkOutputPath(path); !st.ok())
    raise(st);
  if (!m.sourcePath.empty() && llvm::sys::fs::equivalent(m.sourcePath, path))
    raise(absl::InvalidArgumentError(absl::StrCat(
        path, " is the file this graph was read from; graph-opt never overwrites its input "
              "(write elsewhere)")));
  std::string bytes = orRaise(writePt2Archive(m.graph(), m.sourceWeights, m.imported.exampleInputs));
  if (absl::Status st = writeFileAtomically(path, bytes); !st.ok())
    raise(st);
}

/// A WeightStore as {target: tensor} (the tensors themselves, no copies).
py::dict weightsDict(const Graph &g, const WeightStore &weights, bool constants) {
  py::dict out;
  for (const GraphInput &in : g.inputs())
    if (in.role != InputRole::UserInput && (in.role == InputRole::Constant) == constants)
      if (const at::Tensor *t = weights.lookup(in.target))
        out[py::str(in.target)] = *t;
  return out;
}

/// What graph_opt.to_fx deserializes: the program's JSON, its weights and
/// constants by target (those the source carried, and with `standInWeights`
/// a seeded stand-in for each the source lacks, as graph-opt runs a .gir
/// graph), and the example inputs.
py::tuple program(const Model &m, bool standInWeights) {
  std::string json = orRaise(serializeExportedProgram(m.graph()));
  WeightStore weights = m.sourceWeights;
  if (standInWeights)
    orRaise(fillMissingWeights(m.graph(), weights, /*seed=*/0));
  return py::make_tuple(py::bytes(json), weightsDict(m.graph(), weights, false),
                        weightsDict(m.graph(), weights, true), m.imported.exampleInputs);
}

/// The program JSON graph_opt.from_fx wrote (program_json.py, or torch's serializer),
/// its types checked against the kernels `typeCheck` names ("cpu" or "meta").
ModelPtr fromProgram(const std::string &json, const py::dict &weights, const std::string &name,
                     const std::vector<at::Tensor> &exampleInputs, const std::string &typeCheck) {
  if (typeCheck != "cpu" && typeCheck != "meta")
    throw py::value_error(absl::StrCat("from_fx: type_check='", typeCheck,
                                       "': expected 'cpu' or 'meta'"));
  WeightStore store;
  for (const auto &[key, value] : weights)
    store.set(py::str(key).cast<std::string>(), value.cast<at::Tensor>());
  ImportedModel m = orRaise(importProgramJson(
      json, std::move(store), name, absl::StrCat("from_fx(", name, ")"),
      typeCheck == "meta" ? TypeCheckKernels::Meta : TypeCheckKernels::Cpu));
  m.exampleInputs = exampleInputs;
  return wrap(std::move(m));
}

/// A graph input or output: its value's name and type, its role and target.
py::dict describePort(const Value *value, llvm::StringRef role, const std::string &target) {
  return py::dict(py::arg("name") = value->name().str(),
                  py::arg("type") = printTypeToString(value->type()),
                  py::arg("role") = role.str(), py::arg("target") = target);
}

/// A pass's statistics, and those of the passes it runs (repeat{...}), in
/// pipeline order: a pass named twice in a pipeline is two entries.
py::dict describePassRun(const OptimizationPass &pass) {
  py::dict stats;
  for (const auto &[name, stat] : pass.statistics())
    stats[py::str(name)] = stat.value;
  py::list nested;
  if (const auto *group = dynamic_cast<const PassGroup *>(&pass))
    for (const auto &n : group->nested())
      nested.append(describePassRun(*n));
  return py::dict(py::arg("pass") = pass.name().str(), py::arg("statistics") = stats,
                  py::arg("nested") = nested);
}

/// Each JSON report the passes (nested ones too) left as a value, by name;
/// a later pass's replaces an earlier one's, as its file would.
void collectJsonReports(const OptimizationPass &pass, py::dict &out) {
  for (const auto &[name, text] : pass.jsonReports())
    out[py::str(name)] = text;
  if (const auto *group = dynamic_cast<const PassGroup *>(&pass))
    for (const auto &n : group->nested())
      collectJsonReports(*n, out);
}

py::dict describeNode(const Node &n) {
  py::dict d;
  d["op"] = n.opName();
  d["phase"] = phaseName(n.phase()).str();
  py::list operands, outputs, types;
  for (Value *v : n.operandValues())
    operands.append(v->name().str());
  for (Value *v : n.outputs()) {
    outputs.append(v->name().str());
    types.append(printTypeToString(v->type()));
  }
  d["operands"] = operands;
  d["outputs"] = outputs;
  d["types"] = types;
  py::dict attrs;
  for (const auto &[key, value] : n.attrs())
    attrs[py::str(key)] = printConstantToString(value);
  d["attributes"] = attrs;
  return d;
}

/// The bytes `max_memory` allows: None is the driver's default, half of
/// physical memory; an int is bytes; a string is "8GiB", "512MB" or "50%".
int64_t memoryLimit(const py::object &spec) {
  if (spec.is_none())
    return orRaise(resolveLimit("max_memory", "50%"));
  if (py::isinstance<py::int_>(spec)) {
    int64_t bytes = spec.cast<int64_t>();
    if (bytes <= 0)
      raise(absl::InvalidArgumentError(absl::StrCat("max_memory=", bytes, ": must be positive")));
    return bytes;
  }
  return orRaise(resolveLimit("max_memory", py::str(spec).cast<std::string>()));
}

/// For the duration of one call, every CPU allocation graph-opt's tensors
/// make is held to `bytes`, as the driver holds its whole run to --max-memory.
class MemoryLimitScope {
public:
  explicit MemoryLimitScope(int64_t bytes)
      : tracker_(TrackingCpuAllocator::instance()), saved_(tracker_.limit()) {
    tracker_.setLimit(bytes);
  }
  ~MemoryLimitScope() { tracker_.setLimit(saved_); }

private:
  TrackingCpuAllocator &tracker_;
  int64_t saved_;
};

/// What running the model's graph takes, as the driver makes it
/// (Analysis/ModelRun.h): weights completed with seeded stand-ins, the
/// archive's example inputs or seeded stand-ins. `signature`: the inputs as
/// read, where a pipeline may change the graph's.
absl::StatusOr<ExecutionContext> modelContext(
    Model &m, const Graph &signature, uint64_t seed, int64_t limit,
    const std::optional<std::vector<at::Tensor>> &inputs = std::nullopt) {
  ModelRunOptions options;
  options.seed = seed;
  options.memoryLimit = limit;
  return makeModelExecutionContext(m.graph(), signature, m.imported.weights,
                                   inputs ? *inputs : m.imported.exampleInputs, options);
}

/// A graph with `graph`'s inputs alone.
std::shared_ptr<Graph> signatureOf(const Graph &graph) {
  auto signature = std::make_shared<Graph>(graph.name().str());
  for (const GraphInput &in : graph.inputs())
    signature->addInput(in.value->name(), in.value->type(), in.role, in.target);
  return signature;
}

py::dict runPipeline(Model &m, const std::string &pipeline, bool verifyEach, uint64_t seed,
                     const std::string &reportDir, const py::object &maxMemory) {
  const int64_t limit = memoryLimit(maxMemory);
  std::string remarks;
  llvm::raw_string_ostream remarkStream(remarks);
  OptimizerOptions options;
  options.verifyEach = verifyEach;
  options.out = &remarkStream;
  options.reportDir = reportDir;
  GraphOptimizer optimizer(options);
  if (absl::Status st = optimizer.addPipeline(pipeline); !st.ok())
    raise(st);
  // Passes that run the graph (profile, measured liveness and checkpoint)
  // run it with the model's weights and example inputs.
  std::shared_ptr<Graph> signature = signatureOf(m.graph());
  optimizer.analyses().setExecutionContextProvider(
      [&m, signature, seed, limit]() { return modelContext(m, *signature, seed, limit); });
  absl::StatusOr<bool> changed = false;
  {
    py::gil_scoped_release release;
    MemoryLimitScope held(limit);
    changed = optimizer.run(m.graph());
  }
  if (!changed.ok())
    raise(changed.status());
  py::list statistics;
  py::dict reportValues;
  for (const auto &pass : optimizer.passes()) {
    statistics.append(describePassRun(*pass));
    collectJsonReports(*pass, reportValues);
  }
  py::list remarkLines;
  llvm::SmallVector<llvm::StringRef, 8> lines;
  llvm::StringRef(remarkStream.str()).split(lines, '\n', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef line : lines)
    if (!line.trim().empty())
      remarkLines.append(line.str());
  py::dict result;
  result["changed"] = *changed;
  result["pipeline"] = optimizer.pipelineText();
  result["statistics"] = statistics;
  result["remarks"] = remarkLines;
  result["report_values"] = reportValues; // JSON text by report name
  // {a value cse merged or canonicalize folded: the equal value read in its place}
  py::dict replaced;
  if (const ValueReplacements *record = optimizer.analyses().replacementsIfAny(m.graph()))
    for (const auto &[old, now] : record->composed())
      replaced[py::str(old)] = now;
  result["replaced"] = replaced;
  return result;
}

py::object execute(Model &m, std::optional<std::vector<at::Tensor>> inputs, uint64_t seed,
                   const py::object &maxMemory, bool written) {
  const int64_t limit = memoryLimit(maxMemory);
  // The caller's inputs where given, else the model's (no stand-ins made for nothing).
  std::vector<at::Tensor> userInputs =
      orRaise(modelContext(m, m.graph(), seed, limit, inputs)).inputs;
  ExecutionOptions options;
  options.seed = seed;
  options.captureWrittenInputs = written;
  absl::StatusOr<ExecutionResult> result = absl::InternalError("not run");
  {
    py::gil_scoped_release release;
    MemoryLimitScope held(limit);
    // Another thread running this graph: a fresh executor of its own.
    std::unique_lock<std::mutex> lock(m.keptMutex, std::try_to_lock);
    if (lock.owns_lock()) {
      result = m.keptExecutor(options).run(userInputs);
      if (!result.ok())
        m.kept = {};
    } else {
      Executor executor(m.graph(), m.imported.weights, options);
      result = executor.run(userInputs);
    }
  }
  if (!result.ok())
    raise(result.status());
  py::list outputs = py::cast(std::move(result->outputs));
  if (!written)
    return std::move(outputs);
  // What the step wrote in place (an optimizer's parameters and state, batch
  // norm's running statistics), by target; the model's weights are left as they were.
  py::dict states;
  for (auto &[i, t] : result->writtenInputs) {
    const GraphInput &in = m.graph().inputs()[i];
    states[py::str(in.role == InputRole::UserInput ? in.value->name().str() : in.target)] = t;
  }
  return py::make_tuple(outputs, states);
}

/// The verifier's report as Python objects; with `check`, a failed
/// verification raises graph_opt.Error with exit code 1, as --verify exits.
py::dict verifyRewritePy(Model &original, Model &rewritten, bool bitwise,
                         std::optional<double> rtol, std::optional<double> atol, uint64_t seed,
                         bool check, const py::object &maxMemory) {
  const int64_t limit = memoryLimit(maxMemory);
  if (absl::Status st = checkRunFits(rewritten.graph(), limit, "running"); !st.ok())
    raise(st);
  std::vector<at::Tensor> inputs =
      orRaise(modelContext(original, original.graph(), seed, limit)).inputs;
  VerifierOptions options;
  options.bitwise = bitwise;
  options.rtol = rtol;
  options.atol = atol;
  options.seed = seed;
  absl::StatusOr<VerificationReport> report = absl::InternalError("not run");
  {
    py::gil_scoped_release release;
    MemoryLimitScope held(limit);
    report = verifyRewrite(original.graph(), rewritten.graph(), original.imported.weights, inputs,
                           options);
  }
  if (!report.ok())
    raise(report.status());
  std::string text;
  llvm::raw_string_ostream os(text);
  report->print(os, /*eachResult=*/true);
  if (check && !report->passed)
    raise(absl::FailedPreconditionError(os.str()), kVerificationFailed);
  py::list outputs;
  for (const OutputComparison &c : report->outputs)
    outputs.append(py::dict(py::arg("label") = c.label, py::arg("passed") = c.passed,
                            py::arg("max_abs_error") = c.maxAbsError,
                            py::arg("max_rel_error") = c.maxRelError,
                            py::arg("bitwise") = c.bitwise, py::arg("spread") = c.spread,
                            py::arg("problem") = c.problem));
  return py::dict(py::arg("passed") = report->passed, py::arg("device") = report->device.str(),
                  py::arg("outputs") = outputs,
                  py::arg("first_divergence") = report->firstDivergence,
                  py::arg("note") = report->note, py::arg("text") = os.str());
}

} // namespace

/// CPU bytes held by tensors made inside a `with` block, counted by graph-opt's
/// tracking allocator (the one its profiles use), so that a peer run in Python
/// (DDP, FSDP) is measured as graph-opt measures itself.
class CpuMemoryTracker {
public:
  void enter() {
    scope_ = std::make_unique<CpuAllocatorScope>();
    start_ = TrackingCpuAllocator::instance().currentBytes();
    TrackingCpuAllocator::instance().resetPeak();
  }
  void exit() {
    peak_ = peakBytes();
    scope_.reset();
  }
  /// The highest level above the one at entry (while inside, so far).
  int64_t peakBytes() const {
    return scope_ ? TrackingCpuAllocator::instance().peakBytes() - start_ : peak_;
  }

private:
  std::unique_ptr<CpuAllocatorScope> scope_;
  int64_t start_ = 0, peak_ = 0;
};

namespace {

// PYBIND11_MODULE's steps: the bindings by topic, in the order they are registered
// (the classes before the functions whose signatures name them).

using GraphClass = py::class_<Model, ModelPtr>;

/// The module's docstring, constants and small helpers.
void bindConstants(py::module_ &module) {
  module.doc() = "graph-opt's C++ library: graphs, pipelines, execution (see docs/Python.md)";
  // The meta["custom"] key under which graph-opt keeps a node's phase in a program.
  module.attr("PT2_CUSTOM_KEY") = kPt2CustomKey.str();
  module.def("_bytes_option", &bytesOption, py::arg("option"), py::arg("value"),
             "The bytes VALUE (\"6GiB\") is, as a pass option of bytes reads it; Error "
             "naming OPTION where it is not a positive amount of bytes.");
  module.def("declare_random_operator", [](const std::string &name) { declareRandomOperator(name); },
             py::arg("name"),
             "Treat operator NAME (\"prims::inductor_seeds\") as random: its tag exists only "
             "in Python");
  // The attribute checkpoint puts on a recomputation: the value it makes again.
  module.attr("RECOMPUTE_OF_ATTR") = kRecomputeOfAttr.str();
  module.attr("RNG_STATE_OP") = std::string(kRngStateOp);
}

/// graph_opt.Error, and the translation of every C++ exception to it.
void bindErrors(py::module_ &module) {
  static py::exception<std::runtime_error> error(module, "Error");
  // No std::exception escapes as anything but graph_opt.Error.
  // Local: pybind11 shares its translators across modules (torch's included), and a
  // global catch-all would turn torch's own errors into graph_opt.Error.
  py::register_local_exception_translator([](std::exception_ptr p) {
    try {
      if (p)
        std::rethrow_exception(p);
    } catch (const py::error_already_set &) {
      throw;
    } catch (const py::builtin_exception &) {
      throw;
    } catch (...) {
      py::object errorType = py::reinterpret_borrow<py::object>(error.ptr());
      py::object e = errorType(describeCurrentException());
      e.attr("exit_code") = kBadInput;
      e.attr("status") = "INTERNAL";
      PyErr_SetObject(errorType.ptr(), e.ptr());
    }
  });
}

/// Graph's static constructors: .gir text, and the files graph-opt reads.
void bindGraphReaders(GraphClass &cls) {
  cls.def_static(
         "parse",
         [](const std::string &text, const std::string &name) {
           ImportedModel m;
           m.graph = orRaise(parseGraph(text, name));
           return wrap(std::move(m));
         },
         py::arg("text"), py::arg("name") = "<string>", "A graph from .gir text.")
      .def_static(
          "load", [](const std::string &path) { return wrap(orRaise(importModel(path)), path); },
          py::arg("path"), "A .pt2 archive, a TorchScript .pt or a .gir file, by its extension.")
      .def_static(
          "import_pt2",
          [](const std::string &path) { return wrap(orRaise(importPt2(path)), path); },
          py::arg("path"))
      .def_static(
          "import_torchscript",
          [](const std::string &path) { return wrap(orRaise(importTorchScript(path)), path); },
          py::arg("path"));
}

/// Graph's name, text, summary, verification and copy.
void bindGraphText(GraphClass &cls) {
  cls.def_property_readonly("name", [](const Model &m) { return m.graph().name().str(); })
      .def(
          "print", [](const Model &m) { return printGraphToString(m.graph()); },
          "The graph as .gir text.")
      .def("__str__", [](const Model &m) { return printGraphToString(m.graph()); })
      .def("summary",
           [](const Model &m) {
             std::string out;
             llvm::raw_string_ostream os(out);
             printSummary(os, summarizeGraph(m.graph()));
             return os.str();
           })
      .def(
          "verify",
          [](const Model &m) {
            if (absl::Status st = verifyGraph(m.graph()); !st.ok())
              raise(st);
          },
          "Raises graph_opt.Error naming what is malformed.")
      .def("clone", [](const Model &m) {
        auto copy = std::make_shared<Model>();
        copy->imported.graph = m.graph().clone();
        copy->imported.weights = m.imported.weights;
        copy->imported.exampleInputs = m.imported.exampleInputs;
        copy->imported.remarks = m.imported.remarks;
        copy->sourcePath = m.sourcePath;
        copy->sourceWeights = m.sourceWeights;
        return copy;
      });
}

/// Graph's nodes, inputs and outputs, described.
void bindGraphPorts(GraphClass &cls) {
  cls.def_property_readonly("nodes",
                            [](const Model &m) {
                              py::list nodes;
                              for (const Node &n : m.graph().nodes())
                                nodes.append(describeNode(n));
                              return nodes;
                            })
      .def_property_readonly("inputs",
                             [](const Model &m) {
                               py::list inputs;
                               for (const GraphInput &in : m.graph().inputs())
                                 inputs.append(
                                     describePort(in.value, inputRoleName(in.role), in.target));
                               return inputs;
                             })
      .def_property_readonly("outputs", [](const Model &m) {
        py::list outputs;
        for (const GraphOutput &out : m.graph().outputs())
          outputs.append(describePort(out.value, outputRoleName(out.role), out.target));
        return outputs;
      });
}

/// Graph's archive (save_pt2, _from_program) and what it carries: example
/// inputs, weights, remarks and type conflicts.
void bindGraphData(GraphClass &cls) {
  cls.def("save_pt2", &savePt2, py::arg("path"),
          "Writes the graph, its weights and example inputs as a torch.export archive "
          "(torch.export.load reads it; docs/Pt2ArchiveFormat.md), atomically.")
      .def_static("_from_program", &fromProgram, py::arg("json"), py::arg("weights"),
                  py::arg("name"), py::arg("example_inputs"), py::arg("type_check") = "cpu")
      .def_property_readonly(
          "example_inputs", [](const Model &m) { return m.imported.exampleInputs; },
          "The user inputs the source carried (a .pt2's example inputs), in input order; "
          "empty when it carried none.")
      .def_property_readonly(
          "weights",
          [](const Model &m) { return weightsDict(m.graph(), m.imported.weights, false); },
          "The graph's parameters, buffers and optimizer state by target, as a run starts "
          "from them (the source's, with any seeded stand-in a run made); a copy of the dict, "
          "the tensors themselves.")
      .def_property_readonly("remarks", [](const Model &m) { return m.imported.remarks; })
      .def_property_readonly("type_conflicts", [](const Model &m) {
        return std::vector<std::string>(m.graph().typeConflicts().begin(),
                                        m.graph().typeConflicts().end());
      });
}

/// The Graph class.
void bindGraph(py::module_ &module) {
  GraphClass cls(module, "Graph",
                 "A graph with its weights and example inputs, read-only from Python.");
  bindGraphReaders(cls);
  bindGraphText(cls);
  bindGraphPorts(cls);
  bindGraphData(cls);
}

/// The pass registry.
void bindPasses(py::module_ &module) {
  module.def(
      "registered_passes",
      [] {
        py::list out;
        for (const PassRegistry::Entry *e : PassRegistry::instance().entries(/*includeHidden=*/true)) {
          py::list fuzz;
          for (const FuzzPipeline &f : e->traits.fuzz)
            fuzz.append(f.pipeline);
          py::dict d;
          d["name"] = e->name;
          d["description"] = e->description;
          d["hidden"] = e->hidden;
          d["inside_compile"] = e->traits.insideCompile;
          d["not_inside_compile"] = e->traits.notInsideCompile;
          d["fuzz"] = fuzz;
          out.append(d);
        }
        return out;
      },
      "Every registered pass (test passes too, `hidden`) with what it declares of itself "
      "(PassTraits.h): whether it runs inside torch.compile, why not where it could, the "
      "pipelines the pass fuzzer checks it in.");
}

/// checkpoint's bound search.
void bindCheckpoint(py::module_ &module) {
  module.def(
      "search_bound",
      [](int64_t bound, double margin, std::optional<double> slack, unsigned maxRounds,
         int64_t firstKnob, int64_t leastKnob, const py::function &probe,
         std::optional<int64_t> aim) {
        BoundSearchOptions options{bound, margin, aim, slack, maxRounds, firstKnob, leastKnob};
        // The probe returns (peak, used, key, at_least, at_loosest); a Python
        // exception in it propagates as itself.
        BoundProbeFn call = [&](int64_t knob) -> absl::StatusOr<BoundProbe> {
          py::tuple t = probe(knob);
          return BoundProbe{t[0].cast<int64_t>(), t[1].cast<int64_t>(),
                            py::str(t[2]).cast<std::string>(), t[3].cast<bool>(),
                            t[4].cast<bool>()};
        };
        BoundSearchResult r = orRaise(searchBound(options, call));
        py::list rounds;
        for (const BoundSearchRound &round : r.rounds)
          rounds.append(py::dict(py::arg("knob") = round.knob, py::arg("peak") = round.probe.peak,
                                 py::arg("used") = round.probe.used,
                                 py::arg("within_aim") = round.withinAim));
        return py::dict(py::arg("aim") = r.aim, py::arg("rounds") = rounds,
                        py::arg("best") = r.best ? py::cast(*r.best) : py::none(),
                        py::arg("closest") = r.closest, py::arg("ended") = r.ended);
      },
      py::arg("bound"), py::arg("margin"), py::arg("slack"), py::arg("max_rounds"),
      py::arg("first_knob"), py::arg("least_knob"), py::arg("probe"),
      py::arg("aim") = py::none(),
      "graph-opt's one bound search (passes/checkpoint/BoundSearch.h): probe(knob) plans at "
      "the knob and returns (peak, bytes used of the knob, a key naming the plan, whether it is "
      "the planner's least, whether nothing is recomputed); returns the rounds, the best "
      "round within the aim (or None), the closest and why the search ended.");
}

/// Pipelines run on a graph, and the verification of a rewrite.
void bindPipelines(py::module_ &module) {
  module.def("run_pipeline", &runPipeline, py::arg("graph"), py::arg("pipeline"),
             py::arg("verify_each") = false, py::arg("seed") = 0, py::arg("report_dir") = "",
             py::arg("max_memory") = py::none(),
             "Runs a textual pipeline on `graph` in place; returns its statistics and remarks "
             "(graph_opt.run_pipeline adds the passes' reports).");
  module.def("verify_rewrite", &verifyRewritePy, py::arg("original"), py::arg("rewritten"),
             py::arg("bitwise") = false, py::arg("rtol") = py::none(), py::arg("atol") = py::none(),
             py::arg("seed") = 0, py::arg("check") = false, py::arg("max_memory") = py::none(),
             "Runs both graphs on the original's weights and inputs and compares every output "
             "and every input written in place (graph-opt --verify); `check` raises "
             "graph_opt.Error (exit_code 1) when they differ.");
}

/// What the package's own Python calls: to_fx's program, the allocator hooks,
/// the driver (python -m graph_opt) and the report's tools.
void bindInternals(py::module_ &module) {
  module.def("_program", &program, py::arg("graph"), py::arg("stand_in_weights") = false,
             "(program JSON, weights, constants, example inputs) for graph_opt.to_fx.");
  module.def(
      "_memory_plan_stats",
      [](Model &m) -> py::object {
        std::lock_guard<std::mutex> lock(m.keptMutex);
        const CpuMemoryPlan *plan = m.kept.executor ? m.kept.executor->memoryPlan() : nullptr;
        if (!plan)
          return py::none();
        CpuMemoryPlan::Stats s = plan->stats();
        return py::dict(py::arg("records") = s.records, py::arg("served") = s.served,
                        py::arg("fell_back") = s.fellBack, py::arg("arena_bytes") = s.arenaBytes);
      },
      py::arg("graph"),
      "The CPU memory plan of the executor execute() keeps for this graph (None: none "
      "kept): runs recorded, allocations served from its arena, the arena's bytes.");
  module.def("_cpu_allocator_hooks_active", &CpuAllocatorScope::active,
             "Whether graph-opt's CPU allocators are the process's now (only inside its calls).");
  module.def(
      "_driver_main",
      [](std::vector<std::string> argv) {
        std::vector<char *> pointers;
        for (std::string &a : argv)
          pointers.push_back(a.data());
        pointers.push_back(nullptr);
        int rc;
        {
          // The driver calls no Python; collectives wait on other threads.
          py::gil_scoped_release release;
          rc = driverMain(static_cast<int>(argv.size()), pointers.data());
        }
        llvm::outs().flush();
        llvm::errs().flush();
        return rc;
      },
      py::arg("argv"),
      "The graph-opt driver on a command line (argv[0] the program name); returns its exit "
      "code. Once per process (its options are global): python -m graph_opt.");
  module.def(
      "_report_tools", [] { return py::make_tuple(reportPython(), reportScript()); },
      "(python, make_report.py) the driver draws report.html with.");
}

/// Running a graph, and measuring the CPU memory of a block of Python.
void bindExecution(py::module_ &module) {
  py::class_<CpuMemoryTracker>(
      module, "_CpuMemoryTracker",
      "with _CpuMemoryTracker() as t: ...; t.peak_bytes: the most CPU bytes tensors made in "
      "the block held at once, above the level at its start (graph-opt's tracking allocator; "
      "benchmarks/distributed measures DDP and FSDP with it).")
      .def(py::init<>())
      .def("__enter__", [](CpuMemoryTracker &t) { t.enter(); return &t; },
           py::return_value_policy::reference)
      .def("__exit__", [](CpuMemoryTracker &t, py::args) { t.exit(); return false; })
      .def_property_readonly("peak_bytes", &CpuMemoryTracker::peakBytes);
  module.def("execute", &execute, py::arg("graph"), py::arg("inputs") = py::none(),
             py::arg("seed") = 0, py::arg("max_memory") = py::none(), py::arg("written") = false,
             "Runs the graph once; returns its outputs (user inputs: the given tensors, else "
             "the model's examples, else seeded stand-ins). With written=True, returns "
             "(outputs, {target: tensor}) with every input the step wrote in place, as it left "
             "it (the model's weights stay as they were).");
}

} // namespace

PYBIND11_MODULE(_C, module) {
  bindConstants(module);
  bindErrors(module);
  bindGraph(module);
  bindPasses(module);
  bindCheckpoint(module);
  bindPipelines(module);
  bindInternals(module);
  bindExecution(module);
}
