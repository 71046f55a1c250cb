//===- TorchPlannerTests.cpp - checkpoint{planner=torch} and held values -===//
//
// torch's partitioner saves values backward never reads (the narrow end of a
// chain it recomputes from): a plan may hold such a value for its clones to
// read. planTorch's mapping of torch's answer onto graph-opt's graph is
// checked here with a stand-in helper that answers a fixed list (no torch):
// test/Checkpoint/torch-planner.test runs torch itself.
//
//===----------------------------------------------------------------------===//
#include "checkpoint/CheckpointPlan.h"
#include "checkpoint/TorchPlanner.h"

#include "graphopt/IR/IRMap.h"
#include "graphopt/Pass/GraphOptimizer.h"
#include "../TestSupport.h"
#include "CheckpointTestGraphs.h"

#include <gtest/gtest.h>
#include <llvm/Support/FileSystem.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <vector>

using namespace graphopt;
using namespace graphopt::test;

namespace {

// kChain (CheckpointTestGraphs.h): %xw = x * w is read only by %a = exp(%xw)
// in forward; backward reads %a (at %ca, %gxw) and %b = sin(%a) (at %gb1).
// Bounded here: the saved activations.
RecomputeModel savedModelOf(const Graph &graph) {
  return modelOf(graph, BoundedMemory::SavedActivations);
}

/// A stand-in for `python -m graph_opt.knapsack GRAPH BUDGET OUT`: a shell
/// script (its body given) run as $GRAPHOPT_PYTHON while alive.
class StandInHelper {
public:
  explicit StandInHelper(const std::string &body) {
    llvm::SmallString<128> path;
    EXPECT_FALSE(llvm::sys::fs::createTemporaryFile("torch-planner-helper", "sh", path));
    path_ = path.str().str();
    std::ofstream(path_) << "#!/bin/sh\n" << body << "\n";
    llvm::sys::fs::setPermissions(path_, llvm::sys::fs::all_read | llvm::sys::fs::all_exe |
                                             llvm::sys::fs::owner_write);
    ::setenv("GRAPHOPT_PYTHON", path_.c_str(), 1);
  }
  ~StandInHelper() {
    ::unsetenv("GRAPHOPT_PYTHON");
    llvm::sys::fs::remove(path_);
  }

private:
  std::string path_;
};

/// A helper that answers torch saved `names` (JSON) in its OUT argument ($5).
std::string answering(const std::string &names) {
  return "test \"$1 $2\" = \"-m graph_opt.knapsack\" || exit 9\n"
         "grep -q '^graph @chain' \"$3\" || exit 8\n"
         "printf '{\"saved\": [" + names + "], \"memory_budget\": %s}' \"$4\" > \"$5\"";
}

TEST(HeldValueTest, AHeldValueIsReadByTheClonesInsteadOfMadeAgain) {
  auto g = parseOrFail(kChain);
  ASSERT_TRUE(g);
  RecomputeModel model = savedModelOf(*g);
  const Value *xw = valueNamed(*g, "xw");
  EXPECT_EQ(model.candidateOf(xw), -1); // backward does not read it
  int32_t a = model.candidateOf(valueNamed(*g, "a"));
  ASSERT_GE(a, 0);

  // Not held: %a is made again from a clone of %xw.
  auto plain = model.closure({a});
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(clonesOf(model, *plain), (std::vector<std::string>{"xw@ca", "a@ca"}));
  // Held: %a's clone reads %xw itself, which lives until then.
  auto held = model.closure({a}, {xw});
  ASSERT_TRUE(held.ok()) << held.status().message();
  EXPECT_EQ(clonesOf(model, *held), (std::vector<std::string>{"a@ca"}));
  EXPECT_LT(held->seconds, plain->seconds);

  ValueMap<Value *> map;
  std::unique_ptr<Graph> copy = g->clone(&map);
  ASSERT_TRUE(model.apply(*held, *copy, &map).ok());
  const Value *a1 = valueNamed(*copy, "a_1");
  ASSERT_TRUE(a1);
  EXPECT_EQ(a1->definingNode()->operandValues()[0], map.lookup(xw));
  EXPECT_EQ(a1->definingNode()->phase(), Phase::Backward);
  // The simulation charges %xw as saved for backward: it took %a's place.
  auto sim = model.simulate(*held);
  ASSERT_TRUE(sim.ok()) << sim.status().message();
  EXPECT_EQ(sim->savedActivations, model.boundedPeak());
}

TEST(TorchPlannerTest, TorchsSavedValuesBecomeTheKeptAndHeldSets) {
  auto g = parseOrFail(kChain);
  ASSERT_TRUE(g);
  RecomputeModel model = savedModelOf(*g);
  // torch keeps the inputs, %xw (not read by backward) and %b: %a is dropped
  // and made from the held %xw.
  StandInHelper helper(answering("\"w\", \"x\", \"xw\", \"b\""));
  auto plan = planTorch(model, 0.25, model.boundedPeak() / 2);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->planner, "torch");
  ASSERT_EQ(plan->dropped.size(), 1u);
  EXPECT_EQ(model.candidates()[plan->dropped[0]].storage->name(), "a");
  ASSERT_EQ(plan->held.size(), 1u);
  EXPECT_EQ(plan->held[0]->name(), "xw");
  EXPECT_EQ(clonesOf(model, plan->recompute), (std::vector<std::string>{"a@ca"}));
  EXPECT_EQ(plan->solverStatus,
            "torch.compile's partitioner at activation_memory_budget=0.25");
  // Judged by graph-opt's simulation, not torch's estimate: %xw took %a's
  // place, so the saved activations are as high as before and half is not met.
  EXPECT_EQ(plan->predictedActivations, model.boundedPeak());
  EXPECT_FALSE(plan->meetsBudget);
}

// The pass judges torch's plan like any other planner's: by its simulated
// peak against the budget asked. (It once set meetsBudget = true for
// planner=torch without checking, so a plan over the budget passed silently.)
TEST(TorchPlannerTest, ThePassChecksTorchsPlanAgainstTheBudget) {
  StandInHelper helper(answering("\"w\", \"x\", \"xw\", \"b\""));
  for (const char *unmet : {"error", "closest"}) {
    auto g = parseOrFail(kChain);
    ASSERT_TRUE(g);
    GraphOptimizer opt;
    ASSERT_TRUE(opt.addPipeline(absl::StrCat("checkpoint{planner=torch,activations=50%,"
                                             "cost=flops,measure=false,unmet=",
                                             unmet, "}"))
                    .ok());
    auto ran = opt.run(*g);
    if (std::string(unmet) == "error") {
      ASSERT_FALSE(ran.ok()) << "torch's plan keeps all of the activations, over half";
      EXPECT_CONTAINS(ran.status().message(), "cannot be met");
    } else {
      ASSERT_TRUE(ran.ok()) << ran.status().message();
    }
  }
}

TEST(TorchPlannerTest, AnAnswerNamingAnUnknownValueIsAnError) {
  auto g = parseOrFail(kChain);
  ASSERT_TRUE(g);
  RecomputeModel model = savedModelOf(*g);
  StandInHelper helper(answering("\"w\", \"nope\""));
  auto plan = planTorch(model, 0.5, model.boundedPeak());
  ASSERT_FALSE(plan.ok());
  EXPECT_CONTAINS(plan.status().message(),
                  "checkpoint{planner=torch}: torch saved %nope, which @chain does not have");
}

TEST(TorchPlannerTest, AFailingHelperIsAnErrorWithWhatItSaid) {
  auto g = parseOrFail(kChain);
  ASSERT_TRUE(g);
  RecomputeModel model = savedModelOf(*g);
  StandInHelper helper("echo 'no module named torch' >&2; exit 3");
  auto plan = planTorch(model, 0.5, model.boundedPeak());
  ASSERT_FALSE(plan.ok());
  EXPECT_CONTAINS(plan.status().message(), "checkpoint{planner=torch}: the Python running "
                                           "torch's partitioner ");
  EXPECT_CONTAINS(plan.status().message(),
                  "failed (exit status 3) on @chain: no module named torch");
}

} // namespace
