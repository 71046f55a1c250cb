//===- ProfileTest.cpp - The profile analysis, its metrics and reports ----===//
#include "graphopt/Analysis/Profile.h"
#include "graphopt/IR/Parser.h"
#include "graphopt/Import/Importer.h"
#include "graphopt/Pass/PassRegistry.h"
#include "graphopt/Runtime/CudaBackend.h"
#include "graphopt/Support/FileIO.h"
#include "../ZooArchives.h"

#include <ATen/Context.h>
#include <absl/strings/str_join.h>
#include <absl/strings/str_split.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <llvm/Support/FileSystem.h>

#include <cmath>

using namespace graphopt;
using namespace graphopt::test;

namespace {

// mm -> relu -> exp -> sum in forward; backward reads %e and %r.
constexpr const char *kSmallStep = R"(graph @g {
  input %x : f32[4, 4] user_input
  input %w : f32[4, 4] parameter "w"
forward:
  %h = aten::mm(%x, %w) : f32[4, 4]
  %r = aten::relu(%h) : f32[4, 4]
  %e = aten::exp(%r) : f32[4, 4]
  %loss = aten::sum(%e) : f32[]
backward:
  %g = aten::mul.Tensor(%e, %r) : f32[4, 4]
  %gw = aten::mm(%g, %x) : f32[4, 4]
  output %loss loss
  output %gw gradient "w"
})";

const ActivationStats *find(const std::vector<ActivationStats> &acts, llvm::StringRef name) {
  for (const ActivationStats &a : acts)
    if (a.value->name() == name)
      return &a;
  return nullptr;
}

} // namespace

// Node times 1, 2, 4, 8, 16, 32 ms by rank; scratch 100 bytes on relu.
TEST(ProfileTest, ActivationMetricsFollowLivenessAndTheCheapestRecompute) {
  auto g = parseGraph(kSmallStep);
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto live = LivenessAnalysis::compute(**g);
  ASSERT_TRUE(live.ok()) << live.status().message();
  std::vector<NodeStats> nodes;
  double t = 1e-3;
  for (const Node &n : (*g)->nodes()) {
    NodeStats s;
    s.node = &n;
    s.seconds = t;
    t *= 2;
    s.outputStorageBytes.assign(n.numOutputs(), 64);
    nodes.push_back(s);
  }
  nodes[1].scratchBytes = 100;
  std::vector<ActivationStats> acts = computeActivationStats(**g, *live, nodes);
  ASSERT_EQ(acts.size(), 2u); // %r and %e; %h dies in forward
  const ActivationStats *e = find(acts, "e"), *r = find(acts, "r");
  ASSERT_TRUE(e && r);

  // %e: made at 2, read at 3, then at 4; %r is still live at 4, so only exp reruns.
  EXPECT_EQ(e->creationRank, 2);
  EXPECT_EQ(e->lastForwardUseRank, 3);
  EXPECT_EQ(e->firstBackwardUseRank, 4);
  EXPECT_EQ(e->lastBackwardUseRank, 4);
  EXPECT_EQ(e->bytes, 64);
  EXPECT_DOUBLE_EQ(e->inactiveSeconds, 0);
  EXPECT_EQ(e->recomputeNodes, 1u);
  EXPECT_DOUBLE_EQ(e->recomputeSeconds, 4e-3);
  EXPECT_EQ(e->recomputeMemoryBytes, 0);
  EXPECT_TRUE(e->recomputable);
  EXPECT_DOUBLE_EQ(e->recomputeRatio, 64 / 4e-3);

  // %r: last read in forward by exp (2), idle through the sum (3); %h was
  // freed after relu, so mm and relu rerun, holding %h (64 bytes) and relu's
  // scratch (100) beside %r.
  EXPECT_EQ(r->lastForwardUseRank, 2);
  EXPECT_EQ(r->firstBackwardUseRank, 4);
  EXPECT_DOUBLE_EQ(r->inactiveSeconds, 8e-3);
  EXPECT_EQ(r->recomputeNodes, 2u);
  EXPECT_DOUBLE_EQ(r->recomputeSeconds, 3e-3);
  EXPECT_EQ(r->recomputeMemoryBytes, 64 + 100);
}

// A recomputation through an in-place write cannot simply run again.
TEST(ProfileTest, InPlaceWritesMakeAnActivationNotRecomputable) {
  auto g = parseGraph(R"(graph @g {
  input %x : f32[4] user_input
  input %w : f32[4] parameter "w"
forward:
  %a = aten::mul.Tensor(%x, %w) : f32[4]
  %b = aten::relu_(%a) : f32[4]
  %c = aten::exp(%b) : f32[4]
  %loss = aten::sum(%c) : f32[]
backward:
  %g = aten::mul.Tensor(%c, %x) : f32[4]
  output %loss loss
  output %g gradient "w"
})");
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto live = LivenessAnalysis::compute(**g);
  ASSERT_TRUE(live.ok());
  std::vector<NodeStats> nodes;
  for (const Node &n : (*g)->nodes()) {
    NodeStats s;
    s.node = &n;
    s.seconds = 1e-3;
    nodes.push_back(s);
  }
  std::vector<ActivationStats> acts = computeActivationStats(**g, *live, nodes);
  const ActivationStats *c = find(acts, "c");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->recomputeNodes, 3u); // exp, relu_, mul
  EXPECT_FALSE(c->recomputable);
  EXPECT_EQ(c->recomputeRatio, 0);
}

TEST(ProfileTest, NeedsAModelToRunAndAtLeastOneRun) {
  auto g = parseGraph(kSmallStep);
  ASSERT_TRUE(g.ok());
  AnalysisManager analyses;
  auto r = analyses.getResult<ProfileAnalysis>(**g, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("profiling runs the graph"), std::string::npos)
      << r.status().message();

  auto pass = PassRegistry::instance().create("profile");
  ASSERT_TRUE(pass.ok());
  EXPECT_FALSE((*pass)->setOptions({{"runs", "0"}}).ok());
  EXPECT_FALSE((*pass)->setOptions({{"memory-limit", "50%"}}).ok());
  EXPECT_TRUE((*pass)->setOptions({{"warmup", "0"}, {"runs", "3"}, {"memory-limit", "2GiB"}}).ok());
}

// --- the fidelity checks, on every tiny zoo training graph -------------------

namespace {

std::vector<std::vector<std::string>> readCsv(const std::string &path) {
  auto text = readFile(path);
  EXPECT_TRUE(text.ok()) << path;
  std::vector<std::vector<std::string>> rows;
  if (!text.ok())
    return rows;
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty()))
    rows.push_back(absl::StrSplit(std::string(line), ','));
  return rows;
}

} // namespace

class ProfileZooTest : public testing::TestWithParam<std::string> {
protected:
  void SetUp() override {
    ASSERT_FALSE(zooDir().empty()) << "GRAPHOPT_ZOO_DIR is not set";
    auto m = importPt2(zooDir() + "/" + GetParam() + ".pt2");
    ASSERT_TRUE(m.ok()) << m.status().message();
    model_ = std::make_unique<ImportedModel>(std::move(*m));
    context_.weights = &model_->weights;
    context_.inputs = model_->exampleInputs;
  }
  absl::StatusOr<const ProfileResult *> profile(AnalysisManager &analyses,
                                                ProfileAnalysis::Options options = {1, 5}) {
    analyses.setExecutionContext(context_);
    return analyses.getResult<ProfileAnalysis>(*model_->graph, options);
  }
  /// The model's profile at the default options, made once for the tests
  /// that only read it (the breakdown and the activation ranks: one profile
  /// of ResNet-152 instead of two, issue 52), with the model and the
  /// analyses it was made with (liveness included), kept for the process.
  struct SharedProfile {
    std::unique_ptr<ImportedModel> model;
    AnalysisManager analyses;
    absl::StatusOr<const ProfileResult *> result = absl::UnknownError("not profiled");
  };
  SharedProfile &sharedProfile() {
    static std::map<std::string, std::unique_ptr<SharedProfile>> profiles;
    std::unique_ptr<SharedProfile> &shared = profiles[GetParam()];
    if (!shared) {
      shared = std::make_unique<SharedProfile>();
      shared->model = std::move(model_); // context_ points into it: kept alive here
      shared->analyses.setExecutionContext(context_);
      shared->result = shared->analyses.getResult<ProfileAnalysis>(*shared->model->graph,
                                                                   ProfileAnalysis::Options{1, 5});
    }
    return *shared;
  }
  std::unique_ptr<ImportedModel> model_;
  ExecutionContext context_;
};

// The breakdown at the measured peak adds up to it exactly: liveness accounts
// for every byte the step holds there, the node's measured scratch for the rest.
TEST_P(ProfileZooTest, BreakdownAtThePeakAddsUpToTheMeasuredPeak) {
  SharedProfile &shared = sharedProfile();
  auto &r = shared.result;
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ProfileResult &p = **r;
  ASSERT_EQ(p.nodes.size(), shared.model->graph->numNodes());
  int64_t sum = 0;
  for (int64_t b : p.breakdownAtPeak)
    sum += b;
  EXPECT_EQ(p.unattributedAtPeak, 0);
  EXPECT_EQ(sum, p.peakBytes);
  EXPECT_GE(p.peakBytes, p.simulatedPeakBytes - p.inputBytes);
}

// Each activation's ranks are the liveness analysis' for its storage.
TEST_P(ProfileZooTest, ActivationRanksAgreeWithLiveness) {
  SharedProfile &shared = sharedProfile();
  auto &r = shared.result;
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto live = shared.analyses.getResult<LivenessAnalysis>(*shared.model->graph, {});
  ASSERT_TRUE(live.ok());
  EXPECT_FALSE((*r)->activations.empty());
  for (const ActivationStats &a : (*r)->activations) {
    const ValueLiveness *l = (*live)->lookup(a.value);
    ASSERT_TRUE(l);
    EXPECT_EQ(l->kind, MemoryKind::Act) << a.value->name().str();
    EXPECT_EQ(a.creationRank, l->created);
    int64_t lastFw = l->created, firstBw = -1, lastBw = -1;
    for (const ValueLiveness &m : (*live)->values) {
      if (m.storage != a.value)
        continue;
      lastFw = std::max(lastFw, m.lastForwardUse);
      if (m.firstBackwardUse >= 0 && (firstBw < 0 || m.firstBackwardUse < firstBw))
        firstBw = m.firstBackwardUse;
      lastBw = std::max(lastBw, m.lastBackwardUse);
    }
    EXPECT_EQ(a.lastForwardUseRank, lastFw) << a.value->name().str();
    EXPECT_EQ(a.firstBackwardUseRank, firstBw) << a.value->name().str();
    EXPECT_EQ(a.lastBackwardUseRank, lastBw) << a.value->name().str();
    EXPECT_LE(a.recomputeNodes, a.creationRank + 1);
    EXPECT_GE(a.recomputeNodes, 1u);
  }
}

// The node windows divide the step: each run's node times, added up with the
// profiler's hooks taken out (their cost is measured), are within 5% of the
// median step run without the profiler. Checked on the median over runs of
// those sums: a window that loses or counts twice a twentieth of the step
// fails it. The sum of the node medians is a different figure, and one that
// depends on the machine (a burst of 20 us to 2 ms lands on a different node
// each run, so no node's median holds it: 0.75-0.85 of the step on an idle
// Rocket Lake VM, 0.85-1.0 on others), so it is recorded here (the test's
// XML property) and reported by the pass (profile.json's sum_node_time_s
// against step_time_s), not asserted: timing goals are benchmarks. One of five profiles must agree, so a burst of load
// elsewhere does not fail it, while a systematic gap fails all five. 21 runs
// after 3 warm-ups where the step is short (the tiny MLP's whole step is
// ~0.3 ms: one hiccup is a large share of it); a step of 50 ms or more (the
// zoo's ResNet-152, ~0.8 s) settles in 7 runs after 1 warm-up, which keeps
// this serial test from taking 40 s of make test on that model alone.
TEST_P(ProfileZooTest, NodeTimesAddUpToTheStep) {
  // 5% of the step, but never less than 50 us: on the tiny MLP (a ~0.3 ms
  // step) 5% is 15 us, one scheduling hiccup, and a fresh clone failed it at
  // 0.946 on a healthy machine.
  constexpr double kPerRunShare = 0.05, kPerRunFloorSeconds = 50e-6;
  constexpr double kLongStepSeconds = 0.05;
  double perRun = 0, ofMedians = 0, kPerRunTolerance = kPerRunShare;
  int attempts = 0;
  ProfileAnalysis::Options runs{1, 7};
  do {
    ++attempts;
    AnalysisManager analyses;
    auto r = profile(analyses, runs);
    ASSERT_TRUE(r.ok()) << r.status().message();
    if ((*r)->stepSeconds < kLongStepSeconds && runs.runs != 21) {
      runs = {3, 21}; // a short step: measured again, with more runs
      --attempts;
      continue;
    }
    perRun = (*r)->runNodeSeconds / (*r)->stepSeconds;
    ofMedians = (*r)->sumNodeSeconds / (*r)->stepSeconds;
    kPerRunTolerance = std::max(kPerRunShare, kPerRunFloorSeconds / (*r)->stepSeconds);
    EXPECT_GT((*r)->sumNodeSeconds, 0);
  } while (std::abs(perRun - 1) > kPerRunTolerance && attempts < 5);
  RecordProperty("attempts", attempts);
  RecordProperty("run_node_over_step", std::to_string(perRun));
  RecordProperty("sum_of_medians_over_step", std::to_string(ofMedians));
  EXPECT_NEAR(perRun, 1.0, kPerRunTolerance) << "each run's node times added up, over the unprofiled step";
}

// The report files: exact headers, one row per node and activation, no empty
// cell and no NaN; the four files land together. The pass at its default
// options writes them from the shared profile (the same options: not run again).
TEST_P(ProfileZooTest, ReportsHaveTheExactColumnsAndNoEmptyCells) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("profile-report", dir));
  SharedProfile &shared = sharedProfile();
  auto pass = PassRegistry::instance().create("profile");
  ASSERT_TRUE(pass.ok());
  (*pass)->setReportDirectory(std::string(dir));
  absl::Status st = (*pass)->analyze(*shared.model->graph, shared.analyses);
  ASSERT_TRUE(st.ok()) << st.message();

  auto nodes = readCsv(std::string(dir) + "/node_stats.csv");
  auto acts = readCsv(std::string(dir) + "/activation_stats.csv");
  ASSERT_FALSE(nodes.empty());
  ASSERT_FALSE(acts.empty());
  EXPECT_EQ(absl::StrJoin(nodes[0], ","),
            "rank,node_name,node_type,gtype,median_run_time_s,median_peak_mem_bytes,"
            "median_active_mem_bytes,device");
  EXPECT_EQ(absl::StrJoin(acts[0], ","),
            "activation_name,creation_rank,last_fw_use_rank,first_bw_use_rank,last_bw_use_rank,"
            "median_mem_size_bytes,inactive_time_s,recomp_time_s,recomp_memory_bytes,recompute_ratio,"
            "swap_time_s");
  EXPECT_EQ(nodes.size(), shared.model->graph->numNodes() + 1);
  for (const auto *rows : {&nodes, &acts})
    for (const auto &row : *rows) {
      ASSERT_EQ(row.size(), (*rows)[0].size()) << absl::StrJoin(row, ",");
      for (const std::string &cell : row) {
        EXPECT_FALSE(cell.empty()) << absl::StrJoin(row, ",");
        std::string lower = llvm::StringRef(cell).lower();
        for (const char *bad : {"nan", "-nan", "inf", "-inf"})
          EXPECT_NE(lower, bad) << absl::StrJoin(row, ",");
      }
    }
  for (const char *f : {"profile.json", "trace.json"})
    EXPECT_TRUE(llvm::sys::fs::exists(std::string(dir) + "/" + f)) << f;
  llvm::sys::fs::remove_directories(dir);
}

// On CUDA: CUDA events time the nodes, the caching allocator counts the
// memory, and the same fidelity holds.
TEST_P(ProfileZooTest, ProfilesOnCudaWhenAGpuIsPresent) {
  if (!graphopt::cudaAvailable())
    GTEST_SKIP() << "no GPU on this machine";
  context_.device = c10::Device(c10::DeviceType::CUDA, 0);
  AnalysisManager analyses;
  auto r = profile(analyses);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ProfileResult &p = **r;
  EXPECT_EQ(p.device, "cuda:0");
  EXPECT_NE(p.timeSource.find("CUDA events"), std::string::npos);
  double sum = 0;
  for (const NodeStats &s : p.nodes) {
    EXPECT_GE(s.seconds, 0);
    sum += s.seconds;
  }
  EXPECT_GT(sum, 0);
  EXPECT_GT(p.peakBytes, p.inputBytes);
  int64_t total = 0;
  for (int64_t b : p.breakdownAtPeak)
    total += b;
  EXPECT_EQ(total + p.unattributedAtPeak, p.peakBytes);
  // Reported, not asserted: how far the GPU's kernel times are from the step.
  RecordProperty("sum_over_step", std::to_string(p.sumNodeSeconds / p.stepSeconds));
  RecordProperty("unattributed_at_peak", std::to_string(p.unattributedAtPeak));
}

INSTANTIATE_TEST_SUITE_P(Zoo, ProfileZooTest, testing::ValuesIn(zooArchives({"train"})),
                         ArchiveName());

// beforeRun is called once before each measured run, in order, never before
// a warm-up run; an error from it stops the profile and is what it returns.
TEST(ProfileTest, BeforeRunIsCalledBeforeEachMeasuredRunAndItsErrorStopsTheProfile) {
  ASSERT_FALSE(zooDir().empty()) << "GRAPHOPT_ZOO_DIR is not set";
  auto model = importPt2(zooDir() + "/mlp-train.pt2");
  ASSERT_TRUE(model.ok()) << model.status().message();
  ExecutionContext context;
  context.weights = &model->weights;
  context.inputs = model->exampleInputs;

  std::vector<unsigned> calls;
  ProfileAnalysis::Options options{2, 3};
  options.beforeRun = [&](unsigned run) {
    calls.push_back(run);
    return absl::OkStatus();
  };
  AnalysisManager analyses;
  analyses.setExecutionContext(context);
  auto r = analyses.getResult<ProfileAnalysis>(*model->graph, options);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(calls, (std::vector<unsigned>{0, 1, 2}));

  options.beforeRun = [](unsigned run) {
    return run == 1 ? absl::CancelledError("stopped at run 1") : absl::OkStatus();
  };
  AnalysisManager again;
  again.setExecutionContext(context);
  r = again.getResult<ProfileAnalysis>(*model->graph, options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("stopped at run 1"), std::string::npos)
      << r.status().message();
}
