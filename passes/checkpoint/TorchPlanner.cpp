//===- TorchPlanner.cpp - torch.compile's own choice, on graph-opt's graph ===//
//
// checkpoint{planner=torch}: what torch.compile's partitioner saves for
// backward (min_cut_rematerialization_partition, its knapsack under
// activation_memory_budget), applied to graph-opt's graph and run by
// graph-opt's executor, so that planners are compared on the same kernels.
//
// torch's function runs in a helper process, `python -m graph_opt.knapsack
// GRAPH.gir BUDGET OUT.json` (python/graph_opt/knapsack.py): the graph as
// this pass sees it goes there in .gir, torch's saved values come back by
// name. It checks that torch's knapsack really chose (on a graph it finds no
// backward in, torch silently takes its default partition).
//
// The plan keeps every activation storage torch saves a value of and drops
// the rest; a saved value backward never read (torch often saves the narrow
// end of a chain and recomputes the rest from it) is held for the clones to
// read. What graph-opt cannot recompute (random operators, in-place writes)
// is an error naming it: torch would not have dropped it either.
//
//===----------------------------------------------------------------------===//
#include "checkpoint/TorchPlanner.h"

#include "checkpoint/HelperProcess.h"
#include "checkpoint/Planner.h"

#include "graphopt/IR/Printer.h"
#include "graphopt/Support/FileIO.h"

#include <absl/strings/str_cat.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/Support/JSON.h>

#include <chrono>
#include <cstdlib>

namespace graphopt {

namespace {

const char *const kPlannerName = "checkpoint{planner=torch}";

/// torch's partitioner on BERT-base takes seconds; Python and torch start in
/// a few more.
constexpr double kDeadlineSeconds = 600;

/// Rounds of sharing recomputed values (each may expose repeats further up a chain).
constexpr unsigned kMaxShareRounds = 16;

std::string envOr(const char *name, const char *fallback) {
  const char *v = std::getenv(name);
  return v && *v ? v : fallback;
}

/// The names torch saves (graph inputs among them), from the helper's answer.
absl::StatusOr<std::vector<std::string>> readSaved(const std::string &path) {
  auto text = readFile(path);
  if (!text.ok())
    return text.status();
  auto parsed = llvm::json::parse(*text);
  if (!parsed)
    return absl::InternalError(absl::StrCat("its answer ", path, " is not JSON: ",
                                            llvm::toString(parsed.takeError())));
  const llvm::json::Array *saved =
      parsed->getAsObject() ? parsed->getAsObject()->getArray("saved") : nullptr;
  if (!saved)
    return absl::InternalError(absl::StrCat("its answer ", path, " has no \"saved\" list"));
  std::vector<std::string> names;
  for (const llvm::json::Value &v : *saved) {
    auto s = v.getAsString();
    if (!s)
      return absl::InternalError(absl::StrCat("its answer ", path, " names a non-string"));
    names.push_back(s->str());
  }
  return names;
}

/// The budget as the helper reads it: the shortest text that reads back
/// (0.3, not 0.2999...).
std::string budgetText(double memoryBudget) {
  std::string text;
  llvm::raw_string_ostream os(text);
  printFloat(os, memoryBudget);
  os.flush();
  return text;
}

/// planTorch's first step: torch's partitioner run on the graph in the helper
/// process at activation_memory_budget `budget`; the names it saves.
absl::StatusOr<std::vector<std::string>> runTorchPartitioner(const Graph &graph,
                                                             const std::string &budget) {
  auto gir = TempFile::make("graph-opt-knapsack-graph", ".gir");
  auto answer = TempFile::make("graph-opt-knapsack-answer", ".json");
  auto errors = TempFile::make("graph-opt-knapsack-stderr");
  for (const absl::StatusOr<TempFile> *file : {&gir, &answer, &errors})
    if (!file->ok())
      return absl::InternalError(absl::StrCat(kPlannerName, ": ", file->status().message()));
  if (absl::Status st = writeFileAtomically(gir->path(), printGraphToString(graph)); !st.ok())
    return absl::InternalError(absl::StrCat(kPlannerName, ": ", st.message()));

  std::string python = envOr("GRAPHOPT_PYTHON", GRAPHOPT_DEFAULT_PYTHON);
  std::string packageDir = envOr("GRAPHOPT_PYTHONPATH", GRAPHOPT_DEFAULT_PYTHONPATH);
  std::string pythonPath = packageDir;
  if (const char *p = std::getenv("PYTHONPATH"); p && *p)
    pythonPath = absl::StrCat(packageDir, ":", p);
  const HelperProgram program{
      kPlannerName, "Python running torch's partitioner",
      " (set GRAPHOPT_PYTHON to a Python with torch, and GRAPHOPT_PYTHONPATH to the directory "
      "holding graph-opt's package graph_opt)"};
  if (absl::Status st = runHelper(
          program, {python, "-m", "graph_opt.knapsack", gir->path(), budget, answer->path()},
          {absl::StrCat("PYTHONPATH=", pythonPath)}, errors->path(), kDeadlineSeconds,
          absl::StrCat(" on @", graph.name().str()), "the other planners do not need it");
      !st.ok())
    return st;
  auto saved = readSaved(answer->path());
  if (!saved.ok())
    return absl::InternalError(absl::StrCat(kPlannerName, ": ", saved.status().message()));
  return std::move(*saved);
}

/// planTorch's second step: what torch saves, as a plan: the candidates it
/// saves a value of are kept, the rest dropped; a forward storage it saves
/// that is no candidate is held for its recomputations to read.
absl::StatusOr<CheckpointPlan> planOfSaved(const RecomputeModel &model,
                                           const std::vector<std::string> &saved) {
  const Graph &graph = model.graph();
  llvm::StringMap<const Value *> byName;
  for (const GraphInput &in : graph.inputs())
    byName[in.value->name()] = in.value;
  for (const Node &n : graph.nodes())
    for (const Value *v : n.outputs())
      byName[v->name()] = v;
  const LivenessResult &live = model.baseline();
  std::vector<uint8_t> kept(model.candidates().size(), 0);
  CheckpointPlan plan;
  for (const std::string &name : saved) {
    const Value *v = byName.lookup(name);
    if (!v)
      return absl::InternalError(absl::StrCat(kPlannerName, ": torch saved %", name, ", which @",
                                              graph.name().str(), " does not have"));
    const ValueLiveness *l = live.lookup(v);
    const ValueLiveness *s = l ? live.lookup(l->storage) : nullptr;
    if (!s || s->created < 0)
      continue; // a graph input or a view of one: live throughout
    const Value *storage = s->value;
    if (int32_t c = model.candidateOf(storage); c >= 0)
      kept[c] = 1;
    else if (storage->definingNode()->phase() == Phase::Forward)
      plan.held.push_back(storage); // read by torch's recomputation, not by backward
  }
  std::sort(plan.held.begin(), plan.held.end(), [&](const Value *a, const Value *b) {
    return live.rank.lookup(a->definingNode()) < live.rank.lookup(b->definingNode());
  });
  plan.held.erase(std::unique(plan.held.begin(), plan.held.end()), plan.held.end());
  for (size_t c = 0; c < kept.size(); ++c)
    if (!kept[c]) {
      plan.dropped.push_back(static_cast<int32_t>(c));
      plan.why[static_cast<int32_t>(c)] = "torch saves no value of it";
    }
  return plan;
}

} // namespace

absl::StatusOr<CheckpointPlan> planTorch(const RecomputeModel &model, double memoryBudget,
                                         int64_t budget, int64_t peakCap) {
  auto begin = std::chrono::steady_clock::now();
  const std::string budgetString = budgetText(memoryBudget);
  auto saved = runTorchPartitioner(model.graph(), budgetString);
  if (!saved.ok())
    return saved.status();
  auto made = planOfSaved(model, *saved);
  if (!made.ok())
    return made.status();
  CheckpointPlan plan = std::move(*made);
  plan.planner = "torch";
  plan.solverStatus = absl::StrCat("torch.compile's partitioner at activation_memory_budget=",
                                   budgetString);
  PlanState state(model);
  for (const Value *v : plan.held)
    state.hold(v);
  for (int32_t c : plan.dropped)
    if (absl::Status st = state.add(c); !st.ok())
      return absl::Status(st.code(), absl::StrCat(kPlannerName,
                                                  ": torch's plan does not hold in graph-opt: ",
                                                  st.message()));
  // torch's backward makes each value it recomputes once and keeps it to its
  // last use: every dropped activation's own clone is shared from the first
  // point that needs it, as far as the closure allows.
  plan.hoists += state.hoistEveryRepeat(kMaxShareRounds);
  plan.recompute = state.result();
  if (absl::Status st = predictPlan(model, budget, plan, peakCap); !st.ok())
    return st;
  plan.solveSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return plan;
}

namespace {
/// planner=torch.
class TorchPlannerEntry : public Planner {
public:
  static llvm::StringRef plannerName() { return "torch"; }
  static llvm::StringRef plannerDescription() {
    return "torch.compile's own partitioner and knapsack at activation_memory_budget = "
           "activations=, in a Python helper process";
  }
  llvm::StringRef name() const override { return plannerName(); }
  absl::Status accepts(const PlannerBounds &bounds) const override {
    const std::optional<double> &share = bounds.options.activationsShare;
    if (!bounds.peakOption.empty() || !bounds.activations || !share || *share > 1.0)
      return absl::InvalidArgumentError(
          "planner=torch runs torch.compile's partitioner, whose one bound is its "
          "activation_memory_budget: give activations= as a share up to 100% "
          "(activations=30%), without budget= or peak=");
    return absl::OkStatus();
  }
  absl::StatusOr<CheckpointPlan> plan(const PlanRequest &request, LadderReport *) const override {
    return planTorch(request.model, *request.options.activationsShare, request.target,
                     request.peakCap);
  }
};
} // namespace
GRAPHOPT_REGISTER_PLANNER(TorchPlannerEntry);

} // namespace graphopt
