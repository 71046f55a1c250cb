//===- Driver.cpp - The graph-opt driver ----------------------------------===//
//
// Shaped like LLVM's opt: read a model, verify its graph, run a pass pipeline
// (-passes=), optionally execute the result (--run) and prove it computes what
// the input did (--verify), print it back. Exit codes: 0 ok, 1 verification of
// a rewrite failed, 2 bad input or usage. Outputs are written atomically; the
// input is never modified.
//
// driverMain is the whole driver: the graph-opt program (graph-opt.cpp) calls
// it, and so does `python -m graph_opt` (graph_opt._C._driver_main), in a
// process where torch.distributed has made the process groups collectives run
// on (docs/Distributed.md).
//
//===----------------------------------------------------------------------===//
#include "graphopt/Driver/Driver.h"

#include <llvm/Config/llvm-config.h>
#include <torch/headeronly/version.h>

#include "graphopt/IR/Parser.h"
#include "graphopt/Export/Pt2Writer.h"
#include "graphopt/Import/Importer.h"
#include "graphopt/IR/Printer.h"
#include "graphopt/IR/Summary.h"
#include "graphopt/IR/Verifier.h"
#include "graphopt/Analysis/Liveness.h"
#include "graphopt/Analysis/ModelRun.h"
#include "graphopt/Pass/GraphOptimizer.h"
#include "graphopt/Pass/PassRegistry.h"
#include "graphopt/Runtime/CudaBackend.h"
#include "graphopt/Runtime/Executor.h"
#include "graphopt/Runtime/CpuAllocatorScope.h"
#include "graphopt/Runtime/MemoryProbe.h"
#include "graphopt/Runtime/Benchmark.h"
#include "graphopt/Runtime/OutputVerifier.h"
#include "graphopt/Support/Bytes.h"
#include "graphopt/Support/FileIO.h"
#include "graphopt/IR/Exceptions.h"
#include "graphopt/Support/CrashContext.h"

#include "ReportStaging.h"

#include <ATen/Context.h>
#include <cmath>
#include <cstdlib>
#include <map>
#include <unistd.h>
#include <llvm/Support/Format.h>

#include <llvm/ADT/SmallString.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Program.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/WithColor.h>
#include <llvm/Support/raw_ostream.h>
#include <absl/strings/str_cat.h>

namespace cl = llvm::cl;
using namespace graphopt;

namespace {

enum ExitCode { kOk = 0, kVerificationFailed = 1, kBadInput = 2 };

cl::OptionCategory category("graph-opt options");

cl::opt<std::string> inputPath(cl::Positional, cl::desc("<input: .pt2 (torch.export), .pt (TorchScript), .gir, or - for .gir on stdin>"),
                               cl::cat(category));
cl::opt<std::string> outputPath("o", cl::desc("Write the resulting graph to <file> (- for stdout)"),
                                cl::value_desc("file"), cl::init(""), cl::cat(category));
cl::opt<bool> emitText("S", cl::desc("Write the resulting graph as .gir text (the default and, "
                                     "for now, only output form)"),
                       cl::cat(category));
cl::opt<bool> printSummaryOpt("summary",
                              cl::desc("Print a summary: nodes per phase, parameters, values, "
                                       "an operator histogram and, after a pipeline that "
                                       "computed liveness, its peak and breakdown"),
                              cl::cat(category));

cl::opt<std::string> passPipeline("passes",
                                  cl::desc("The pass pipeline, e.g. 'liveness,cse,checkpoint{budget=60%}'"),
                                  cl::value_desc("pipeline"), cl::init(""), cl::cat(category));
cl::opt<bool> listPasses("list-passes", cl::desc("List the registered passes and exit"),
                         cl::cat(category));
cl::opt<bool> verifyEach("verify-each",
                         cl::desc("Run the structural verifier after every pass, not only after "
                                  "passes that report a change"),
                         cl::cat(category));
cl::opt<bool> printAfterAll("print-after-all", cl::desc("Print the graph (.gir) after every pass"),
                            cl::cat(category));
cl::list<std::string> printAfter("print-after", cl::desc("Print the graph after the named pass"),
                                 cl::value_desc("pass"), cl::cat(category));
cl::opt<bool> timePasses("time-passes", cl::desc("Print the time each pass took"),
                         cl::cat(category));
cl::opt<bool> printStats("pass-stats", cl::desc("Print the passes' statistics"), cl::cat(category));
cl::opt<std::string> reproducerDir(
    "reproducer-dir",
    cl::desc("Where a failing pass leaves its reproducer (default: a new graph-opt-reproducer-PID "
             "folder in the system's temporary directory)"),
    cl::value_desc("dir"), cl::init(""), cl::cat(category));

cl::opt<std::string> reportDir("report-dir",
                               cl::desc("Directory where passes write their reports (CSV, JSON)"),
                               cl::value_desc("dir"), cl::init(""), cl::cat(category));

cl::opt<bool> htmlReport(
    "html",
    cl::desc("After a pipeline with `profile` and --report-dir, draw report.html there with "
             "tools/report/make_report.py (default true; --html=false skips it)"),
    cl::init(true), cl::cat(category));

cl::opt<std::string> inputTypes(
    "input-types",
    cl::desc("Types of a TorchScript module's inputs, e.g. 'f32[1, 3, 224, 224]' (TorchScript "
             "keeps no shapes; modules from tools/export carry their own)"),
    cl::value_desc("types"), cl::init(""), cl::cat(category));

cl::opt<unsigned> runSteps("run",
                           cl::desc("Execute the graph N times; print the loss, the time per step "
                                    "and the measured peak memory"),
                           cl::value_desc("N"), cl::init(0), cl::cat(category));
cl::opt<unsigned> topOperators("run-top-ops",
                               cl::desc("With --run: print the N operators that took the most time "
                                        "in the last step"),
                               cl::value_desc("N"), cl::init(0), cl::cat(category));
cl::opt<bool> verifyOutputs("verify",
                            cl::desc("Run the input and the resulting graph with the same weights, "
                                     "inputs and seed and compare every output (exit 1 if they "
                                     "differ)"),
                            cl::cat(category));
cl::opt<bool> verifyEachResult("v",
                               cl::desc("With --verify: a line per output, gradient and state "
                                        "the step writes, not only the summary (printed anyway "
                                        "when verification fails)"),
                               cl::cat(category));
cl::opt<bool> verifyBitwise("bitwise",
                            cl::desc("With --verify: every output must be bitwise identical "
                                     "(no tolerance; both graphs run with PyTorch's deterministic "
                                     "algorithms; for rewrites such as cse that must not change "
                                     "a bit)"),
                            cl::cat(category));
cl::opt<std::string> benchmarkRuns(
    "benchmark", cl::ValueOptional,
    cl::desc("Run the input graph and the graph after -passes alternately, N times each (default "
             "10) after warm-up, and print nodes, peak memory and median step time with their "
             "ratios; both graphs' outputs are compared first (as --verify), and a graph that "
             "differs is not benchmarked (exit 1)"),
    cl::value_desc("N"), cl::init(""), cl::cat(category));
cl::opt<unsigned> benchmarkWarmup("benchmark-warmup",
                                  cl::desc("Unmeasured runs of each graph before --benchmark's (default 1)"),
                                  cl::value_desc("N"), cl::init(1), cl::cat(category));
cl::opt<std::string> benchmarkJsonPath(
    "benchmark-json",
    cl::desc("With --benchmark: also write the results, the machine and the pipeline as JSON"),
    cl::value_desc("file"), cl::init(""), cl::cat(category));
cl::opt<bool> noMemoryPlan(
    "no-memory-plan",
    cl::desc("For --run and --benchmark on the CPU: allocate every buffer from the system, as "
             "eager PyTorch does, instead of from an arena planned from the first run "
             "(Runtime/CpuMemoryPlan.h)"),
    cl::cat(category));
cl::opt<std::string> deviceName("device",
                                cl::desc("Device for --run and --verify: cpu or cuda (default: cuda "
                                         "when a GPU is present, else cpu)"),
                                cl::value_desc("cpu|cuda"), cl::init(""), cl::cat(category));
cl::opt<uint64_t> seed("seed", cl::desc("RNG seed for --run and --verify (default 0)"),
                       cl::init(0), cl::cat(category));

cl::opt<std::string> maxInputSize(
    "max-input-size",
    cl::desc("Refuse an input file (or standard input) larger than this: bytes with a unit "
             "(e.g. 8GiB) or a share of physical memory (default 50%)"),
    cl::value_desc("size"), cl::init("50%"), cl::cat(category));
cl::opt<std::string> maxMemory(
    "max-memory",
    cl::desc("Refuse to make stand-ins or run a graph whose simulated peak (weights, inputs and "
             "live values) is above this: bytes with a unit or a share of physical memory "
             "(default 50%)"),
    cl::value_desc("size"), cl::init("50%"), cl::cat(category));

int fail(llvm::StringRef message, int code) {
  llvm::WithColor::error(llvm::errs(), "graph-opt") << message << '\n';
  return code;
}

absl::StatusOr<c10::Device> chosenDevice() { return graphopt::deviceFromOption(deviceName); }

/// --run N: executes the graph N times and prints what each step measured.
int runGraph(const Graph &graph, ImportedModel &model, llvm::ArrayRef<at::Tensor> inputs,
             c10::Device device, const LivenessResult *liveness) {
  ExecutionOptions options;
  options.device = device;
  options.seed = seed;
  options.planCpuMemory = !noMemoryPlan;
  int loss = -1;
  for (unsigned i = 0; i < graph.outputs().size(); ++i)
    if (graph.outputs()[i].role == OutputRole::Loss)
      loss = static_cast<int>(i);
  llvm::outs() << "running @" << graph.name() << " on " << device.str() << ", " << runSteps
               << " step" << (runSteps == 1 ? "" : "s") << ":\n";
  // Every step starts from the same weights (the executor restores what a step
  // writes in place), so the steps measure one training step N times.
  int64_t measuredPeak = 0;
  std::vector<NodeProfile> lastProfiles;
  absl::Status st = profileRuns(
      graph, model.weights, inputs, options, runSteps, [&](const ProfiledRun &run) {
        llvm::outs() << llvm::format("  step %u: %.2f ms", run.index + 1, run.seconds * 1e3);
        if (loss >= 0 && run.result->outputs[loss].defined() && run.result->outputs[loss].numel() == 1)
          llvm::outs() << llvm::format(", loss %.6f", run.result->outputs[loss].item().toDouble());
        llvm::outs() << ", peak memory " << formatMiB(run.profiler->runPeakBytes())
                     << " above weights and inputs\n";
        measuredPeak = run.profiler->runPeakBytes();
        lastProfiles = run.profiler->profiles();
        return absl::OkStatus();
      });
  if (!st.ok())
    return fail(absl::StrCat(inputPath.getValue(), ": ", st.message()), kBadInput);
  if (liveness) {
    int64_t simulated = liveness->peakBytes - liveness->inputBytes;
    llvm::outs() << "peak memory above weights and inputs: measured " << formatMiB(measuredPeak)
                 << ", simulated by liveness " << formatMiB(simulated)
                 << llvm::format(" (simulated/measured %.3f)\n",
                                 measuredPeak ? static_cast<double>(simulated) / measuredPeak : 0.0);
    if (!liveness->scratch.empty())
      llvm::outs() << "  (the simulation includes operator scratch memory measured by liveness{scratch=measured})\n";
    else if (double gap = measuredPeak ? static_cast<double>(simulated - measuredPeak) / measuredPeak : 0;
             std::abs(gap) > 0.05)
      llvm::outs() << llvm::format("note: the simulated peak is %.1f%% %s the measured one%s\n",
                                   100 * std::abs(gap), static_cast<const char *>(gap < 0 ? "below" : "above"),
                                   static_cast<const char *>(
                                       gap < 0 ? ": the graph-only simulation misses operator "
                                                 "scratch memory (workspaces, reordered copies); "
                                                 "-passes='liveness{scratch=measured}' measures it"
                                               : ""));
    printLivenessReport(llvm::outs(), *liveness);
  }
  if (topOperators > 0) {
    std::map<std::string, std::pair<double, unsigned>> byOp;
    double total = 0;
    for (const NodeProfile &p : lastProfiles) {
      auto &entry = byOp[p.node->opName()];
      entry.first += p.seconds;
      ++entry.second;
      total += p.seconds;
    }
    std::vector<std::pair<std::string, std::pair<double, unsigned>>> ops(byOp.begin(), byOp.end());
    std::sort(ops.begin(), ops.end(),
              [](const auto &a, const auto &b) { return a.second.first > b.second.first; });
    llvm::outs() << "  time by operator in the last step (" << llvm::format("%.2f", total * 1e3)
                 << " ms in operators):\n";
    for (size_t i = 0; i < ops.size() && i < topOperators; ++i)
      llvm::outs() << llvm::format("    %-45s %4u nodes %9.2f ms %5.1f%%\n", ops[i].first.c_str(),
                                   ops[i].second.second, ops[i].second.first * 1e3,
                                   100 * ops[i].second.first / total);
  }
  return kOk;
}

/// Draws report.html from the profile in `dir` with the project's Python.
absl::Status drawHtmlReport(llvm::StringRef dir) {
  llvm::StringRef python = reportPython(), script = reportScript();
  for (llvm::StringRef needed : {python, script})
    if (!llvm::sys::fs::exists(needed))
      return absl::NotFoundError(absl::StrCat("report.html: ", needed.str(),
                                              " is missing (--html=false skips the report)"));
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(python, {python, script, dir}, /*Env=*/llvm::None,
                                     /*Redirects=*/{}, /*SecondsToWait=*/0, /*MemoryLimit=*/0,
                                     &message);
  if (rc != 0)
    return absl::InternalError(absl::StrCat("report.html: ", script.str(), " failed",
                                            message.empty() ? "" : ": ", message));
  return absl::OkStatus();
}

/// True when the pipeline wrote a profile into the staged reports: whatever
/// pass did (profile at the top level, or nested: repeat{profile}), that is
/// what report.html is drawn from.
bool reportsHoldAProfile(llvm::StringRef stagingDir) {
  llvm::SmallString<256> path(stagingDir);
  llvm::sys::path::append(path, "profile.json");
  return llvm::sys::fs::exists(path);
}

int runDriver(int argc, char **argv);

} // namespace

// The build's, unless the environment names others: an installed package
// (graph_opt/__init__.py) has its own script and the interpreter it runs in.
const char *graphopt::reportPython() {
  const char *env = std::getenv("GRAPHOPT_REPORT_PYTHON");
  return env && *env ? env : GRAPHOPT_REPORT_PYTHON;
}
const char *graphopt::reportScript() {
  const char *env = std::getenv("GRAPHOPT_REPORT_SCRIPT");
  return env && *env ? env : GRAPHOPT_REPORT_SCRIPT;
}

int graphopt::driverMain(int argc, char **argv) {
  // Where a GPU may be, LibTorch's CUDA backend is loaded before anything
  // reads a device (Runtime/CudaBackend.h: it is not linked).
  graphopt::cudaAvailable();
  // Whatever escapes the statuses (a library's exception) is an error, never
  // an abort.
  try {
    return runDriver(argc, argv);
  } catch (...) {
    return fail(absl::StrCat(inputPath.getValue(), ": internal error: ", describeCurrentException(),
                             " (please report this: docs/Robustness.md)"),
                kBadInput);
  }
}

namespace {

/// The checked command line, as the driver's later steps read it.
struct Settings {
  int64_t maxInputBytes = 0;  ///< --max-input-size, resolved
  int64_t maxMemoryBytes = 0; ///< --max-memory, resolved
  bool benchmark = false;     ///< --benchmark given
  unsigned benchmarkCount = 10;
  /// A benchmark never reports a gain from a wrong graph: it verifies first.
  bool verifyRequested = false;
};

/// The driver's state once the input is read, shared by the steps after it.
struct Session {
  const Settings &settings;
  GraphOptimizer &optimizer;
  ReportStaging &staging;
  ImportedModel &model;
  /// The pipeline rewrites model.graph; --verify compares it with this copy.
  std::unique_ptr<Graph> original;
  /// Written at the end with the graph and the reports, as one set.
  std::string benchmarkJsonText;
  /// The weights the input file carried, apart from the seeded stand-ins a
  /// run adds: a .pt2 output holds only real weights.
  WeightStore importedWeights;
};

/// --list-passes: each registered pass with its options.
void printPassList() {
  for (const PassRegistry::Entry *e : PassRegistry::instance().entries()) {
    llvm::outs() << llvm::format("  %-20s %s\n", e->name.c_str(), e->description.c_str());
    std::unique_ptr<OptimizationPass> pass = e->create();
    for (const PassOptionBase *o : pass->declaredOptions())
      llvm::outs() << "      " << o->name() << "=<" << o->accepts() << ">  (default "
                   << o->printDefault() << ")  " << o->help() << "\n";
  }
}

/// --max-input-size and --max-memory, as bytes.
int resolveLimits(Settings &settings) {
  auto inputLimit = resolveLimit(absl::StrCat("--", maxInputSize.ArgStr.str()), maxInputSize);
  if (!inputLimit.ok())
    return fail(std::string(inputLimit.status().message()), kBadInput);
  auto memoryLimit = resolveLimit(absl::StrCat("--", maxMemory.ArgStr.str()), maxMemory);
  if (!memoryLimit.ok())
    return fail(std::string(memoryLimit.status().message()), kBadInput);
  settings.maxInputBytes = *inputLimit;
  settings.maxMemoryBytes = *memoryLimit;
  return kOk;
}

/// Outputs are checked before any work: none may replace the input, a
/// symlink, a fifo or a device (Support/FileIO.h, checkOutputPath).
int checkOutputPaths() {
  for (const cl::opt<std::string> *option : {&outputPath, &benchmarkJsonPath}) {
    const std::string &path = option->getValue();
    if (path.empty() || path == "-")
      continue;
    std::string name = option->ArgStr.size() == 1 ? absl::StrCat("-", option->ArgStr.str())
                                                  : absl::StrCat("--", option->ArgStr.str());
    if (absl::Status st = checkOutputPath(path); !st.ok())
      return fail(absl::StrCat(name, ": ", st.message()), kBadInput);
    if (inputPath != "-" && !isDevNull(path) && llvm::sys::fs::equivalent(inputPath, path))
      return fail(absl::StrCat(name, " ", path, " is the input file; graph-opt never overwrites its "
                               "input (write elsewhere)"),
                  kBadInput);
    // The graph's format follows the extension: .pt2 is a torch.export
    // archive, anything else .gir text. Text under another model format's
    // name would only fail later, in torch ("File is not a zip file").
    std::string ext = llvm::sys::path::extension(path).lower();
    if (option == &outputPath && (ext == ".pt" || ext == ".pth" || ext == ".onnx"))
      return fail(absl::StrCat(name, " ", path, ": graph-opt cannot write a ", ext,
                               " file; name the output .pt2 (a torch.export archive) or .gir"),
                  kBadInput);
  }
  return kOk;
}

/// The report folder is made at the end; what would stop that is refused now.
int checkReportDir() {
  if (reportDir.empty())
    return kOk;
  llvm::SmallString<256> existing(reportDir.getValue());
  llvm::sys::fs::make_absolute(existing);
  while (!llvm::sys::fs::exists(existing) && llvm::sys::path::has_parent_path(existing))
    llvm::sys::path::remove_filename(existing);
  if (!llvm::sys::fs::is_directory(existing))
    return fail(absl::StrCat("--report-dir ", reportDir.getValue(), ": cannot create: ",
                             existing == llvm::StringRef(reportDir.getValue()) ||
                                     llvm::sys::fs::equivalent(existing, reportDir.getValue())
                                 ? "it exists and is not a directory"
                                 : absl::StrCat(existing.str().str(), " is not a directory")),
                kBadInput);
  return kOk;
}

/// --benchmark's run count, and the options that only go with --benchmark or --verify.
int checkBenchmarkOptions(Settings &settings) {
  settings.benchmark = benchmarkRuns.getNumOccurrences() > 0;
  if (settings.benchmark && !benchmarkRuns.empty() &&
      (llvm::StringRef(benchmarkRuns).getAsInteger(10, settings.benchmarkCount) ||
       settings.benchmarkCount == 0))
    return fail(absl::StrCat("--benchmark=", benchmarkRuns.getValue(),
                             ": expected a number of runs of at least 1"),
                kBadInput);
  if (!benchmarkJsonPath.empty() && !settings.benchmark)
    return fail("--benchmark-json is an option of --benchmark; add --benchmark", kBadInput);
  if (verifyBitwise && !verifyOutputs && !settings.benchmark)
    return fail("--bitwise is an option of --verify (or --benchmark); add --verify", kBadInput);
  settings.verifyRequested = verifyOutputs || settings.benchmark;
  return kOk;
}

/// The optimizer's options from the command line; stages the reports when
/// --report-dir is given.
int makeOptimizerOptions(const Settings &settings, ReportStaging &staging,
                         OptimizerOptions &optimizerOptions) {
  optimizerOptions.verifyEach = verifyEach;
  optimizerOptions.keepVerificationBaseline = settings.verifyRequested;
  optimizerOptions.printAfterAll = printAfterAll;
  optimizerOptions.printAfter.insert(printAfter.begin(), printAfter.end());
  optimizerOptions.timePasses = timePasses;
  optimizerOptions.reproducerDir = reproducerDir;
  optimizerOptions.reportDir = reportDir;
  if (!reportDir.empty()) {
    if (absl::Status st = staging.create(); !st.ok())
      return fail(std::string(st.message()), kBadInput);
    optimizerOptions.reportStagingDir = staging.dir();
  }
  // A reproducer replays the pipeline on the input file; stdin is copied.
  if (inputPath != "-")
    optimizerOptions.inputPath = inputPath;
  if (reproducerDir.empty()) {
    llvm::SmallString<256> tmp;
    llvm::sys::path::system_temp_directory(/*ErasedOnReboot=*/true, tmp);
    llvm::sys::path::append(tmp, absl::StrCat("graph-opt-reproducer-", ::getpid()));
    optimizerOptions.reproducerDir = tmp.str().str();
  }
  return kOk;
}

/// Imports the input and verifies its graph; an error's message is what to print.
absl::StatusOr<ImportedModel> readModel(const Settings &settings) {
  ImportOptions options;
  options.maxInputBytes = settings.maxInputBytes;
  if (!inputTypes.empty()) {
    auto types = parseTypeList(inputTypes, "--input-types");
    if (!types.ok())
      return types.status();
    options.inputTypes = std::move(*types);
  }
  auto model = importModel(inputPath, options);
  if (!model.ok())
    return model.status();
  if (absl::Status st = verifyGraph(*model->graph); !st.ok())
    return absl::Status(st.code(), absl::StrCat(inputPath.getValue(), ": ", st.message()));
  for (const std::string &remark : model->remarks)
    llvm::errs() << "graph-opt: remark: " << inputPath << ": " << remark << "\n";
  for (const std::string &conflict : model->graph->typeConflicts())
    llvm::errs() << "graph-opt: warning: " << inputPath << ": " << conflict
                 << "; passes refuse this graph, and --verify fails at it\n";
  return model;
}

// What running the graph takes, for --run, --verify and the analyses that
// measure (liveness{scratch=measured}), made when first needed, for the
// model as read (its inputs, kept apart: a pass may change the graph's).
// A .gir carries no weights: seeded stand-ins take their place, and a note
// says so. Each graph that runs takes the example inputs its inputs name.
void installExecutionContext(Session &s) {
  const Graph &graph = *s.model.graph;
  auto signature = std::make_shared<Graph>(graph.name().str());
  for (const GraphInput &in : graph.inputs())
    signature->addInput(in.value->name(), in.value->type(), in.role, in.target);
  s.optimizer.analyses().setExecutionContextProvider(
      [&model = s.model, memoryLimit = s.settings.maxMemoryBytes,
       signature]() -> absl::StatusOr<ExecutionContext> {
        auto device = chosenDevice();
        if (!device.ok())
          return device.status();
        ModelRunOptions options;
        options.device = *device;
        options.seed = seed;
        options.memoryLimit = memoryLimit;
        size_t made = 0;
        auto context = makeModelExecutionContext(*model.graph, *signature, model.weights,
                                                 model.exampleInputs, options, &made);
        if (!context.ok())
          return absl::Status(context.status().code(),
                              absl::StrCat(inputPath.getValue(), ": ", context.status().message()));
        if (made)
          llvm::errs() << "graph-opt: note: " << inputPath << " carries no weights for " << made
                       << " inputs; using seeded random ones\n";
        return context;
      });
}

/// Runs -passes on the graph; prints the statistics and the passes' reports.
int runPipeline(Session &s) {
  auto changed = s.optimizer.run(*s.model.graph);
  if (!changed.ok())
    return fail(absl::StrCat(inputPath.getValue(), ": ", changed.status().message()), kBadInput);
  if (printStats)
    s.optimizer.printStatistics(llvm::errs());
  // The passes' reports for people (checkpoint's table); on stderr when the
  // graph itself goes to stdout.
  bool graphToStdout =
      (emitText || !outputPath.empty()) && (outputPath.empty() || outputPath == "-");
  s.optimizer.printReports(graphToStdout ? llvm::errs() : llvm::outs());
  if (htmlReport && !reportDir.empty() && reportsHoldAProfile(s.staging.dir()))
    if (absl::Status st = drawHtmlReport(s.staging.dir()); !st.ok())
      return fail(std::string(st.message()), kBadInput);
  return kOk;
}

/// --summary, on stderr when `graphToStdout`.
void printGraphSummary(Session &s, bool graphToStdout) {
  Graph &graph = *s.model.graph;
  // Keep stdout clean for the graph when both go there.
  llvm::raw_ostream &os = graphToStdout ? llvm::errs() : llvm::outs();
  printSummary(os, summarizeGraph(graph));
  // The liveness the pipeline computed (peak, breakdown by kind), unless
  // --run prints it beside the measured peak.
  if (runSteps == 0)
    if (const LivenessResult *liveness =
            s.optimizer.analyses().getLatestCachedResult<LivenessAnalysis>(graph))
      printLivenessReport(os, *liveness);
}

/// --verify, and --benchmark after it: the graph against `reference`, with the
/// same weights, seed and example inputs.
int verifyAndBenchmark(Session &s, const ExecutionContext &context, const Graph &reference,
                       llvm::ArrayRef<at::Tensor> inputs) {
  Graph &graph = *s.model.graph;
  c10::Device device = context.device;
  VerifierOptions vopts;
  vopts.device = device;
  vopts.seed = seed;
  vopts.bitwise = verifyBitwise;
  auto originalInputs = context.inputsFor(reference);
  if (!originalInputs.ok())
    return fail(absl::StrCat(inputPath.getValue(), ": ", originalInputs.status().message()),
                kBadInput);
  auto report = verifyRewrite(reference, graph, s.model.weights, *originalInputs, inputs, vopts);
  if (!report.ok())
    return fail(absl::StrCat(inputPath.getValue(), ": ", report.status().message()), kBadInput);
  llvm::outs().flush(); // keep the summary before the report
  report->print(llvm::errs(), verifyEachResult);
  if (!report->passed) {
    if (s.settings.benchmark)
      llvm::errs() << "graph-opt: not benchmarking: the optimized graph does not compute what "
                      "the input did\n";
    return kVerificationFailed;
  }
  if (!s.settings.benchmark)
    return kOk;
  BenchmarkOptions bopts;
  bopts.warmup = benchmarkWarmup;
  bopts.runs = s.settings.benchmarkCount;
  bopts.execution.device = device;
  bopts.execution.seed = seed;
  bopts.execution.planCpuMemory = !noMemoryPlan;
  auto measured =
      benchmarkRewrite(reference, graph, s.model.weights, *originalInputs, inputs, bopts);
  if (!measured.ok())
    return fail(absl::StrCat(inputPath.getValue(), ": --benchmark: ", measured.status().message()),
                kBadInput);
  printBenchmark(llvm::outs(), *measured);
  if (!benchmarkJsonPath.empty()) {
    std::string verdict = verifyBitwise ? "passed (bitwise)" : "passed (tolerance)";
    s.benchmarkJsonText =
        benchmarkJson(*measured, inputPath.getValue(), s.optimizer.pipelineText(), verdict);
  }
  return kOk;
}

/// --run, --verify and --benchmark, each as asked.
int runRequested(Session &s) {
  Graph &graph = *s.model.graph;
  CrashContext crashContext(absl::StrCat("running @", graph.name().str(), " from ",
                                         inputPath.getValue(), " (--run/--verify/--benchmark)"));
  auto made = s.optimizer.analyses().executionContext();
  if (!made.ok())
    return fail(std::string(made.status().message()), kBadInput);
  // A pass that changes what the step computes (add-optimizer) is not a
  // rewrite to prove: what follows it is verified against its output.
  const Graph *reference = s.original.get();
  if (const Graph *baseline = s.optimizer.verificationBaseline()) {
    reference = baseline;
    if (s.settings.verifyRequested)
      llvm::errs() << "graph-opt: note: verifying against the graph as "
                   << s.optimizer.verificationBaselinePass()
                   << " left it, since it changes what the step computes\n";
  }
  for (const Graph *g : {reference, static_cast<const Graph *>(&graph)})
    if (g)
      if (absl::Status st = checkRunFits(*g, s.settings.maxMemoryBytes,
                                         g == &graph ? "running" : "running the input graph");
          !st.ok())
        return fail(absl::StrCat(inputPath.getValue(), ": ", st.message()), kBadInput);
  const ExecutionContext &context = **made;
  auto inputs = context.inputsFor(graph);
  if (!inputs.ok())
    return fail(absl::StrCat(inputPath.getValue(), ": ", inputs.status().message()), kBadInput);
  c10::Device device = context.device;
  if (s.settings.verifyRequested)
    if (int rc = verifyAndBenchmark(s, context, *reference, *inputs); rc != kOk)
      return rc;
  // The liveness analysis, when the pipeline computed it, is still cached;
  // the one with measured scratch when there is one (profile also computes
  // the graph-only one).
  const LivenessResult *liveness = s.optimizer.analyses().getCachedResult<LivenessAnalysis>(
      graph, {LivenessAnalysis::Scratch::Measured});
  if (!liveness)
    liveness = s.optimizer.analyses().getLatestCachedResult<LivenessAnalysis>(graph);
  if (runSteps > 0)
    if (int rc = runGraph(graph, s.model, *inputs, device, liveness); rc != kOk)
      return rc;
  return kOk;
}

/// `-o` names a torch.export archive.
bool isPt2Output(llvm::StringRef path) {
  return llvm::sys::path::extension(path).lower() == ".pt2";
}

/// Everything succeeded: the graph, the reports and the benchmark JSON are
/// written now, as one set (renamed into place together, or none of them).
int writeOutputs(const Session &s, bool writeGraph, const std::string &out) {
  std::string text;
  if (writeGraph && isPt2Output(out)) {
    std::vector<std::string> remarks;
    auto archive =
        writePt2Archive(*s.model.graph, s.importedWeights, s.model.exampleInputs, &remarks);
    if (!archive.ok())
      return fail(absl::StrCat("-o ", out, ": ", archive.status().message()), kBadInput);
    for (const std::string &remark : remarks)
      llvm::errs() << "graph-opt: remark: -o " << out << ": " << remark << "\n";
    text = std::move(*archive);
  } else if (writeGraph) {
    text = printGraphToString(*s.model.graph);
  }
  std::vector<std::string> reportNames, reportTexts;
  if (!reportDir.empty())
    if (absl::Status st = s.staging.read(reportNames, reportTexts); !st.ok())
      return fail(std::string(st.message()), kBadInput);
  std::vector<FileToWrite> files;
  for (size_t i = 0; i < reportNames.size(); ++i) {
    llvm::SmallString<256> path(reportDir.getValue());
    llvm::sys::path::append(path, reportNames[i]);
    files.push_back({path.str().str(), reportTexts[i]});
  }
  if (!benchmarkJsonPath.empty() && !s.benchmarkJsonText.empty())
    files.push_back({benchmarkJsonPath.getValue(), s.benchmarkJsonText});
  if (writeGraph && out != "-")
    files.push_back({out, text});
  if (!reportDir.empty())
    if (std::error_code ec = llvm::sys::fs::create_directories(reportDir))
      return fail(absl::StrCat("--report-dir ", reportDir.getValue(), ": cannot create: ",
                               ec.message()),
                  kBadInput);
  if (absl::Status st = writeFilesAtomically(files); !st.ok())
    return fail(std::string(st.message()), kBadInput);
  if (writeGraph && out == "-")
    llvm::outs() << text;
  return kOk;
}

/// --version: graph-opt's own, and the LibTorch and LLVM it was built against
/// (LLVM's printer would name only LLVM and the host CPU).
void printVersion(llvm::raw_ostream &os) {
  os << "graph-opt " << GRAPHOPT_VERSION << "\n"
     << "  built against LibTorch " << TORCH_VERSION_MAJOR << "." << TORCH_VERSION_MINOR << "."
     << TORCH_VERSION_PATCH << " and LLVM " << LLVM_VERSION_STRING << "\n"
#ifdef GRAPHOPT_WITH_CUDA
     << "  CUDA kernels: built in (used where a GPU is present)\n";
#else
     << "  CUDA kernels: not built\n";
#endif
}

int runDriver(int argc, char **argv) {
  cl::HideUnrelatedOptions(category);
  cl::SetVersionPrinter(printVersion);
  if (!cl::ParseCommandLineOptions(argc, argv,
                                   "graph-opt: a compiler-style optimizer for PyTorch graphs\n\n"
                                   "Reads a model, verifies its graph and writes it back as .gir.\n",
                                   &llvm::errs()))
    return kBadInput;

  if (listPasses) {
    printPassList();
    return kOk;
  }
  if (inputPath.empty())
    return fail("no input file; see --help", kBadInput);
  Settings settings;
  if (int rc = resolveLimits(settings); rc != kOk)
    return rc;
  // Beyond the simulation checkRunFits makes before a run, every CPU
  // allocation of a tensor is held to the limit (an operator may allocate
  // more than the types it declares say).
  TrackingCpuAllocator::instance().setLimit(settings.maxMemoryBytes);
  // graph-opt's allocators are the process's for the whole run: the weights
  // and inputs it makes count against --max-memory too.
  CpuAllocatorScope allocatorHooks;
  if (int rc = checkOutputPaths(); rc != kOk)
    return rc;
  if (int rc = checkReportDir(); rc != kOk)
    return rc;
  if (int rc = checkBenchmarkOptions(settings); rc != kOk)
    return rc;
  OptimizerOptions optimizerOptions;
  ReportStaging staging;
  if (int rc = makeOptimizerOptions(settings, staging, optimizerOptions); rc != kOk)
    return rc;
  GraphOptimizer optimizer(optimizerOptions);
  if (!passPipeline.empty())
    if (absl::Status st = optimizer.addPipeline(passPipeline); !st.ok())
      return fail(absl::StrCat("-passes: ", st.message()), kBadInput);

  auto model = readModel(settings);
  if (!model.ok())
    return fail(std::string(model.status().message()), kBadInput);
  Session session{settings, optimizer, staging, *model,
                  settings.verifyRequested ? model->graph->clone() : nullptr, "", model->weights};
  installExecutionContext(session);
  if (!optimizer.passes().empty())
    if (int rc = runPipeline(session); rc != kOk)
      return rc;

  bool writeGraph = emitText || !outputPath.empty();
  std::string out = outputPath.empty() ? "-" : outputPath.getValue();
  if (printSummaryOpt)
    printGraphSummary(session, writeGraph && out == "-");

  if (runSteps > 0 || settings.verifyRequested)
    if (int rc = runRequested(session); rc != kOk)
      return rc;
  return writeOutputs(session, writeGraph, out);
}

} // namespace
