//===- GraphOptimizer.cpp - Running a pipeline of passes ------------------===//
#include "graphopt/Pass/GraphOptimizer.h"

#include "graphopt/Alias/AliasAnalysis.h"

#include "graphopt/IR/Exceptions.h"
#include "graphopt/IR/Printer.h"
#include "graphopt/IR/Verifier.h"
#include "graphopt/Pass/PassRegistry.h"
#include "graphopt/Support/CrashContext.h"
#include "graphopt/Support/FileIO.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Format.h>
#include <llvm/Support/Path.h>

#include <chrono>

namespace graphopt {

absl::StatusOr<std::unique_ptr<OptimizationPass>>
GraphOptimizer::createPass(const PipelineEntry &entry) {
  auto pass = PassRegistry::instance().create(entry.name);
  if (!pass.ok())
    return pass.status();
  auto *group = dynamic_cast<PassGroup *>(pass->get());
  if (!group && !entry.nested.empty())
    return absl::InvalidArgumentError(absl::StrCat("pass '", entry.name,
                                                   "' runs no nested passes, got '",
                                                   entry.nested.front().name, "'"));
  if (group && entry.nested.empty())
    return absl::InvalidArgumentError(absl::StrCat("pass '", entry.name,
                                                   "' needs nested passes, e.g. ", entry.name,
                                                   "{cse,canonicalize,dce}"));
  for (const PipelineEntry &n : entry.nested) {
    auto nested = createPass(n);
    if (!nested.ok())
      return nested.status();
    group->addNested(std::move(*nested));
  }
  if (absl::Status st = (*pass)->setOptions(entry.options); !st.ok())
    return st;
  return std::move(*pass);
}

absl::Status GraphOptimizer::addPipeline(llvm::StringRef pipeline) {
  auto entries = parsePipeline(pipeline);
  if (!entries.ok())
    return entries.status();
  for (const PipelineEntry &e : *entries) {
    auto pass = createPass(e);
    if (!pass.ok())
      return pass.status();
    passes_.push_back(std::move(*pass));
  }
  return absl::OkStatus();
}

namespace {
PipelineEntry entryOf(const OptimizationPass &pass) {
  PipelineEntry e{pass.name().str(), pass.options(), {}};
  if (const auto *group = dynamic_cast<const PassGroup *>(&pass))
    for (const auto &n : group->nested())
      e.nested.push_back(entryOf(*n));
  return e;
}

void printStatisticsOf(const OptimizationPass &pass, llvm::raw_ostream &os) {
  for (const auto &[name, stat] : pass.statistics())
    os << llvm::format("  %10lld  %s - %s\n", static_cast<long long>(stat.value),
                       pass.name().str().c_str(), name.c_str());
  if (const auto *group = dynamic_cast<const PassGroup *>(&pass))
    for (const auto &n : group->nested())
      printStatisticsOf(*n, os);
}
void printReportOf(const OptimizationPass &pass, llvm::raw_ostream &os) {
  pass.printReport(os);
  if (const auto *group = dynamic_cast<const PassGroup *>(&pass))
    for (const auto &n : group->nested())
      printReportOf(*n, os);
}
} // namespace

void GraphOptimizer::printReports(llvm::raw_ostream &os) const {
  for (const auto &p : passes_)
    printReportOf(*p, os);
}

std::string GraphOptimizer::pipelineText() const {
  std::vector<PipelineEntry> entries;
  for (const auto &p : passes_)
    entries.push_back(entryOf(*p));
  return printPipeline(entries);
}

absl::Status GraphOptimizer::failure(const Graph *start, size_t passIndex,
                                     const absl::Status &cause) {
  std::vector<std::string> done;
  for (size_t i = 0; i < passIndex; ++i)
    done.push_back(passes_[i]->name().str());
  std::string message = absl::StrCat(
      "pass '", passes_[passIndex]->name().str(), "' failed",
      done.empty() ? " (the first pass)" : absl::StrCat(" after ", absl::StrJoin(done, ", ")), ": ",
      cause.message());
  // OUT_OF_RANGE: the pass was asked for what cannot be had (a memory budget
  // below what any plan reaches); the input is fine, there is no bug to reproduce.
  if (options_.reproducerDir.empty() || cause.code() == absl::StatusCode::kOutOfRange)
    return absl::Status(cause.code(), message);
  // The pipeline up to the failing pass, replayed on the pipeline's input.
  llvm::sys::fs::create_directories(options_.reproducerDir);
  std::vector<FileToWrite> files;
  std::string graphText, input;
  if (start) {
    llvm::SmallString<256> graphPath(options_.reproducerDir);
    llvm::sys::path::append(graphPath, "reproducer.gir");
    graphText = printGraphToString(*start);
    input = graphPath.str().str();
    files.push_back({input, graphText});
  } else {
    llvm::SmallString<256> absolute(options_.inputPath);
    llvm::sys::fs::make_absolute(absolute);
    input = absolute.str().str();
  }
  std::string command = reproduceCommand(input, passIndex);
  // A pass that failed writing its reports fails again only with them.
  if (!options_.reportDir.empty())
    absl::StrAppend(&command, " --report-dir '", options_.reportDir, "'");
  llvm::SmallString<256> scriptPath(options_.reproducerDir);
  llvm::sys::path::append(scriptPath, "reproduce.sh");
  std::string script = absl::StrCat("#!/bin/sh\n", command, "\n");
  files.push_back({scriptPath.str().str(), script});
  absl::Status written = writeFilesAtomically(files);
  absl::StrAppend(&message, written.ok() ? absl::StrCat("\nreproduce with: ", command)
                                         : absl::StrCat("\n(no reproducer: ", written.message(), ")"));
  return absl::Status(cause.code(), message);
}

absl::StatusOr<bool> GraphOptimizer::runPass(OptimizationPass &pass, Graph &graph) {
  using Clock = std::chrono::steady_clock;
  pass.setReportDirectory(options_.reportStagingDir.empty() ? options_.reportDir
                                                          : options_.reportStagingDir);
  pass.setVerifyingEach(options_.verifyEach);
  pass.setRemarkStream(options_.out);
  auto begin = Clock::now();
  // A group's nested runs come first in the timings; its own row goes before them.
  size_t timingRow = timings_.size();
  timings_.push_back(PassTiming{pass.name().str(), depth_});
  absl::StatusOr<bool> changed = false;
  const uint64_t epochBefore = graph.editEpoch();
  auto *group = dynamic_cast<PassGroup *>(&pass);
  if (group) {
    ++depth_;
    changed = group->run(graph, *this);
    --depth_;
  } else {
    // Which outputs share storage before the pass: what the last check
    // found, unless the graph was edited since (one walk over the graph).
    if (outputSharing_.graph != graph.uid() || outputSharing_.epoch != graph.editEpoch())
      outputSharing_ = {graph.uid(), graph.editEpoch(), graph.outputs().size(),
                        outputsSharingStorage(graph, cachedStorageRoots(graph))};
    if (absl::Status st = pass.analyze(graph, analyses_); !st.ok())
      return st;
    changed = pass.transform(graph, analyses_);
    if (changed.ok() && *changed) {
      PreservedAnalyses preserved = pass.preservedAnalyses();
      analyses_.invalidate(graph, preserved);
      // A wrong claim would be served to every later pass: checked where
      // each pass is checked (all() included: the likeliest wrong claim).
      if (options_.verifyEach)
        if (absl::Status st = analyses_.checkPreserved(graph, preserved); !st.ok()) {
          analyses_.invalidate(graph);
          analyses_.releaseRetired();
          return st;
        }
    }
  }
  const bool edited = graph.editEpoch() != epochBefore;
  // A pass that failed half-way, or edited and said it did not: nothing
  // cached for this graph may be trusted (the cache would not serve it
  // anyway, the epoch having moved; this also frees it).
  if ((!changed.ok() || !*changed) && edited)
    analyses_.invalidate(graph);
  analyses_.releaseRetired();
  if (!changed.ok())
    return changed.status();
  if (!*changed && edited)
    return absl::InternalError(absl::StrCat(
        "it reported no change but edited the graph (edit epoch ", epochBefore, " -> ",
        graph.editEpoch(), "): a pass that edits must return true, or what was computed "
        "before the edit would be trusted after it"));
  if (*changed && !group)
    if (absl::Status st = checkOutputSharing(graph); !st.ok())
      return st;
  if (absl::Status st = pass.verify(graph); !st.ok())
    return absl::Status(st.code(), absl::StrCat("its own verification failed: ", st.message()));
  auto passEnd = Clock::now();
  // A group's nested passes were each verified after their own changes.
  if ((*changed && !group) || options_.verifyEach)
    if (absl::Status st = verifyGraph(graph); !st.ok())
      return absl::Status(st.code(),
                          absl::StrCat("the graph it left does not verify: ", st.message()));
  if (*changed && !group && pass.changesWhatTheStepComputes() && options_.keepVerificationBaseline) {
    baseline_ = graph.clone();
    baselinePass_ = pass.name().str();
  }
  PassTiming &timing = timings_[timingRow];
  timing.seconds = std::chrono::duration<double>(passEnd - begin).count();
  timing.verifySeconds = std::chrono::duration<double>(Clock::now() - passEnd).count();
  timing.changed = *changed;
  if (options_.printAfterAll || options_.printAfter.count(pass.name().str())) {
    llvm::raw_ostream &out = options_.out ? *options_.out : llvm::errs();
    out << "# graph after " << pass.name() << (*changed ? "" : " (unchanged)") << "\n";
    printGraph(out, graph);
  }
  return *changed;
}

const AliasInfo &GraphOptimizer::cachedStorageRoots(const Graph &graph) {
  // Cached for the passes after (liveness asks the same), unless the pass
  // that edited preserved them. It cannot fail.
  return **analyses_.getResult<StorageRootsAnalysis>(graph);
}

absl::Status GraphOptimizer::checkOutputSharing(const Graph &graph) {
  std::set<std::pair<unsigned, unsigned>> after = outputsSharingStorage(graph, cachedStorageRoots(graph));
  // Outputs are only appended by passes (add-optimizer); pairs among the
  // outputs the graph had are compared.
  if (graph.outputs().size() >= outputSharing_.outputs)
    for (const auto &[i, j] : after)
      if (j < outputSharing_.outputs && !outputSharing_.pairs.count({i, j})) {
        const GraphOutput &a = graph.outputs()[i], &b = graph.outputs()[j];
        return absl::InternalError(absl::StrCat(
            "it made graph outputs ", i, " (%", a.value->name().str(), ") and ", j, " (%",
            b.value->name().str(),
            ") share storage, which they did not before: the caller would get two tensors "
            "that are one"));
      }
  outputSharing_ = {graph.uid(), graph.editEpoch(), graph.outputs().size(), std::move(after)};
  return absl::OkStatus();
}

std::string GraphOptimizer::reproduceCommand(llvm::StringRef input, size_t passIndex) const {
  std::vector<PipelineEntry> prefix;
  for (size_t i = 0; i <= passIndex; ++i)
    prefix.push_back(entryOf(*passes_[i]));
  return absl::StrCat("graph-opt '", input.str(), "' -passes='", printPipeline(prefix),
                      "' --verify-each -S");
}

std::string GraphOptimizer::crashContext(const Graph &graph, size_t passIndex) const {
  std::string input = "<the .gir read from standard input, saved to a file>";
  if (!options_.inputPath.empty()) {
    llvm::SmallString<256> absolute(options_.inputPath);
    llvm::sys::fs::make_absolute(absolute);
    input = absolute.str().str();
  }
  return absl::StrCat("running pass '", passes_[passIndex]->name().str(), "' (", passIndex + 1,
                      " of ", passes_.size(), ") on @", graph.name().str(),
                      "; reproduce with: ", reproduceCommand(input, passIndex));
}

absl::StatusOr<bool> GraphOptimizer::run(Graph &graph) {
  bool anyChange = false;
  timings_.clear();
  depth_ = 0;
  baseline_.reset();
  baselinePass_.clear();
  for (auto &pass : passes_)
    pass->startNewRun();
  analyses_.replacements(graph).begin(graph); // the values the caller's copy has
  // A reproducer needs the pipeline's input: the caller's file, or one copy.
  // Every pass reasons on the declared types; where the importer found one
  // the kernel contradicts and could not mend it, no pass may start.
  if (!passes_.empty() && !graph.typeConflicts().empty())
    return absl::FailedPreconditionError(absl::StrCat(
        "pass '", passes_.front()->name().str(), "' refused @", graph.name().str(),
        ": it would rely on a declared type the kernel contradicts: ",
        graph.typeConflicts().front(),
        graph.typeConflicts().size() > 1
            ? absl::StrCat(" (and ", graph.typeConflicts().size() - 1, " more)")
            : ""));
  std::unique_ptr<Graph> start;
  if (!options_.reproducerDir.empty() && options_.inputPath.empty() && !passes_.empty())
    start = graph.clone();
  for (size_t i = 0; i < passes_.size(); ++i) {
    CrashContext context(crashContext(graph, i));
    absl::StatusOr<bool> changed;
    // A pass that throws (a library's exception it did not turn into a
    // status) fails like one that returned an error, with a reproducer.
    try {
      changed = runPass(*passes_[i], graph);
    } catch (...) {
      changed = absl::InternalError(absl::StrCat("threw: ", describeCurrentException()));
    }
    if (!changed.ok())
      return failure(start.get(), i, changed.status());
    anyChange |= *changed;
  }
  if (options_.timePasses)
    printTimings(options_.out ? *options_.out : llvm::errs());
  return anyChange;
}

void GraphOptimizer::printTimings(llvm::raw_ostream &os) const {
  double total = 0, verifying = 0;
  for (const PassTiming &t : timings_) {
    if (t.depth != 0)
      continue; // inside a group's row already
    total += t.seconds + t.verifySeconds;
    verifying += t.verifySeconds;
  }
  os << "===-------------------------------------------------------------------------===\n"
     << "                          pass execution timing report\n"
     << "===-------------------------------------------------------------------------===\n";
  os << llvm::format("  total: %.4f s (structural verifier: %.4f s)\n", total, verifying);
  os << "    wall (s)   share   verify (s)  changed  pass\n";
  for (const PassTiming &t : timings_)
    os << llvm::format("  %10.4f  %5.1f%%   %10.4f  %-7s  %s%s\n", t.seconds,
                       total > 0 ? 100 * t.seconds / total : 0.0, t.verifySeconds,
                       t.changed ? "yes" : "no", std::string(2 * t.depth, ' ').c_str(),
                       t.pass.c_str());
}

void GraphOptimizer::printStatistics(llvm::raw_ostream &os) const {
  os << "statistics:\n";
  for (const auto &p : passes_)
    printStatisticsOf(*p, os);
}

} // namespace graphopt
