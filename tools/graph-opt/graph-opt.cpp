//===- graph-opt.cpp - The graph-opt driver -------------------------------===//
//
// Shaped like LLVM's opt: read a graph, verify it, (later: run a pass pipeline),
// print it back. Exit codes: 0 ok, 1 verification of a rewrite failed, 2 bad
// input or usage. Outputs are written atomically; the input is never modified.
//
//===----------------------------------------------------------------------===//
#include "graphopt/IR/Parser.h"
#include "graphopt/Import/Importer.h"
#include "graphopt/IR/Printer.h"
#include "graphopt/IR/Summary.h"
#include "graphopt/IR/Verifier.h"
#include "graphopt/Support/FileIO.h"

#include <llvm/Support/CommandLine.h>
#include <llvm/Support/InitLLVM.h>
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
                               cl::Required, cl::cat(category));
cl::opt<std::string> outputPath("o", cl::desc("Write the resulting graph to <file> (- for stdout)"),
                                cl::value_desc("file"), cl::init(""), cl::cat(category));
cl::opt<bool> emitText("S", cl::desc("Write the resulting graph as .gir text (the default and, "
                                     "for now, only output form)"),
                       cl::cat(category));
cl::opt<bool> printSummaryOpt("summary",
                              cl::desc("Print a summary: nodes per phase, parameters, values and "
                                       "an operator histogram"),
                              cl::cat(category));

cl::opt<std::string> inputTypes(
    "input-types",
    cl::desc("Types of a TorchScript module's inputs, e.g. 'f32[1, 3, 224, 224]' (TorchScript "
             "keeps no shapes; modules from tools/export carry their own)"),
    cl::value_desc("types"), cl::init(""), cl::cat(category));

int fail(llvm::StringRef message, int code) {
  llvm::WithColor::error(llvm::errs(), "graph-opt") << message << '\n';
  return code;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  cl::HideUnrelatedOptions(category);
  if (!cl::ParseCommandLineOptions(argc, argv,
                                   "graph-opt: a compiler-style optimizer for PyTorch graphs\n\n"
                                   "Reads a model, verifies its graph and writes it back as .gir.\n",
                                   &llvm::errs()))
    return kBadInput;

  ImportOptions options;
  if (!inputTypes.empty()) {
    auto types = parseTypeList(inputTypes, "--input-types");
    if (!types.ok())
      return fail(std::string(types.status().message()), kBadInput);
    options.inputTypes = std::move(*types);
  }
  auto model = importModel(inputPath, options);
  if (!model.ok())
    return fail(std::string(model.status().message()), kBadInput);
  std::unique_ptr<Graph> &graph = model->graph;
  if (absl::Status st = verifyGraph(*graph); !st.ok())
    return fail(absl::StrCat(inputPath.getValue(), ": ", st.message()), kBadInput);

  bool writeGraph = emitText || !outputPath.empty();
  std::string out = outputPath.empty() ? "-" : outputPath.getValue();
  if (printSummaryOpt) {
    // Keep stdout clean for the graph when both go there.
    llvm::raw_ostream &os = writeGraph && out == "-" ? llvm::errs() : llvm::outs();
    printSummary(os, summarizeGraph(*graph));
  }
  if (writeGraph) {
    std::string text = printGraphToString(*graph);
    if (out == "-") {
      llvm::outs() << text;
    } else if (absl::Status st = writeFileAtomically(out, text); !st.ok()) {
      return fail(std::string(st.message()), kBadInput);
    }
  }
  return kOk;
}
