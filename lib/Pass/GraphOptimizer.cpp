//===- GraphOptimizer.cpp - Running a pipeline of passes ------------------===//
#include "graphopt/Pass/GraphOptimizer.h"

#include "graphopt/IR/Printer.h"
#include "graphopt/IR/Verifier.h"
#include "graphopt/Pass/PassRegistry.h"
#include "graphopt/Support/FileIO.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Format.h>
#include <llvm/Support/Path.h>

#include <chrono>

namespace graphopt {

absl::Status GraphOptimizer::addPipeline(llvm::StringRef pipeline) {
  auto entries = parsePipeline(pipeline);
  if (!entries.ok())
    return entries.status();
  for (const PipelineEntry &e : *entries) {
    auto pass = PassRegistry::instance().create(e.name);
    if (!pass.ok())
      return pass.status();
    if (absl::Status st = (*pass)->setOptions(e.options); !st.ok())
      return st;
    passes_.push_back(std::move(*pass));
  }
  return absl::OkStatus();
}

std::string GraphOptimizer::pipelineText() const {
  std::vector<PipelineEntry> entries;
  for (const auto &p : passes_)
    entries.push_back({p->name().str(), p->options()});
  return printPipeline(entries);
}

absl::Status GraphOptimizer::failure(const Graph &before, size_t passIndex,
                                     const absl::Status &cause) {
  std::vector<std::string> done;
  for (size_t i = 0; i < passIndex; ++i)
    done.push_back(passes_[i]->name().str());
  std::string message = absl::StrCat(
      "pass '", passes_[passIndex]->name().str(), "' failed",
      done.empty() ? " (the first pass)" : absl::StrCat(" after ", absl::StrJoin(done, ", ")), ": ",
      cause.message());
  if (!options_.reproducerDir.empty()) {
    // The graph as the failing pass saw it, and the command that replays it.
    llvm::sys::fs::create_directories(options_.reproducerDir);
    llvm::SmallString<256> graphPath(options_.reproducerDir);
    llvm::sys::path::append(graphPath, "reproducer.gir");
    std::vector<PipelineEntry> failing = {{passes_[passIndex]->name().str(), passes_[passIndex]->options()}};
    std::string command = absl::StrCat("graph-opt ", graphPath.str().str(), " -passes='",
                                       printPipeline(failing), "' --verify-each -S");
    // A pass that failed writing its reports fails again only with them.
    if (!options_.reportDir.empty())
      absl::StrAppend(&command, " --report-dir '", options_.reportDir, "'");
    llvm::SmallString<256> scriptPath(options_.reproducerDir);
    llvm::sys::path::append(scriptPath, "reproduce.sh");
    std::string graphText = printGraphToString(before);
    std::string script = absl::StrCat("#!/bin/sh\n", command, "\n");
    absl::Status written =
        writeFilesAtomically({{graphPath.str().str(), graphText}, {scriptPath.str().str(), script}});
    absl::StrAppend(&message, written.ok() ? absl::StrCat("\nreproduce with: ", command)
                                           : absl::StrCat("\n(no reproducer: ", written.message(), ")"));
  }
  return absl::Status(cause.code(), message);
}

absl::StatusOr<bool> GraphOptimizer::run(Graph &graph) {
  llvm::raw_ostream &out = options_.out ? *options_.out : llvm::errs();
  bool anyChange = false;
  timings_.clear();
  for (size_t i = 0; i < passes_.size(); ++i) {
    OptimizationPass &pass = *passes_[i];
    pass.setReportDirectory(options_.reportDir);
    // Keep the input of this pass for a reproducer, only when one is wanted.
    std::unique_ptr<Graph> before = options_.reproducerDir.empty() ? nullptr : graph.clone();
    auto start = std::chrono::steady_clock::now();
    auto fail = [&](const absl::Status &st) { return failure(before ? *before : graph, i, st); };
    if (absl::Status st = pass.analyze(graph, analyses_); !st.ok())
      return fail(st);
    absl::StatusOr<bool> changed = pass.transform(graph, analyses_);
    if (!changed.ok())
      return fail(changed.status());
    if (*changed)
      analyses_.invalidate();
    if (absl::Status st = pass.verify(graph); !st.ok())
      return fail(absl::Status(st.code(), absl::StrCat("its own verification failed: ", st.message())));
    if (*changed || options_.verifyEach)
      if (absl::Status st = verifyGraph(graph); !st.ok())
        return fail(absl::Status(st.code(), absl::StrCat("the graph it left does not verify: ",
                                                          st.message())));
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    timings_.push_back({pass.name().str(), seconds, *changed});
    anyChange |= *changed;
    if (options_.printAfterAll || options_.printAfter.count(pass.name().str())) {
      out << "# graph after " << pass.name() << (*changed ? "" : " (unchanged)") << "\n";
      printGraph(out, graph);
    }
  }
  if (options_.timePasses)
    printTimings(out);
  return anyChange;
}

void GraphOptimizer::printTimings(llvm::raw_ostream &os) const {
  double total = 0;
  for (const PassTiming &t : timings_)
    total += t.seconds;
  os << "===-------------------------------------------------------------------------===\n"
     << "                          pass execution timing report\n"
     << "===-------------------------------------------------------------------------===\n";
  os << llvm::format("  total: %.4f s\n", total);
  os << "    wall (s)   share   changed  pass\n";
  for (const PassTiming &t : timings_)
    os << llvm::format("  %10.4f  %5.1f%%   %-7s  %s\n", t.seconds,
                       total > 0 ? 100 * t.seconds / total : 0.0, t.changed ? "yes" : "no",
                       t.pass.c_str());
}

void GraphOptimizer::printStatistics(llvm::raw_ostream &os) const {
  os << "statistics:\n";
  for (const auto &p : passes_)
    for (const auto &[name, value] : p->statistics())
      os << llvm::format("  %10lld  %s - %s\n", static_cast<long long>(value), p->name().str().c_str(),
                         name.c_str());
}

} // namespace graphopt
