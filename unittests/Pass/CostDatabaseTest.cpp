//===- CostDatabaseTest.cpp - Operator configurations, the database, predictions ===//
#include "graphopt/Cost/Attribution.h"
#include "graphopt/Cost/ConfigNeighbours.h"
#include "graphopt/Cost/CostDatabase.h"
#include "graphopt/Cost/LearnedCost.h"
#include "graphopt/Cost/OperatorConfig.h"
#include "graphopt/Cost/OperatorCost.h"
#include "graphopt/Cost/OperatorTiming.h"
#include "graphopt/Cost/SpeedCalibration.h"
#include "graphopt/IR/Parser.h"
#include "graphopt/Runtime/EnergyMeter.h"

#include <absl/strings/str_cat.h>
#include <gtest/gtest.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

using namespace graphopt;

namespace {

/// relu, exp and mm on f32[8, 8]: the attribution's and the calibration's step.
constexpr const char *kReluExpMm = R"(graph @g {
  input %x : f32[8, 8] user_input
  input %w : f32[8, 8] user_input
forward:
  %r = aten::relu(%x) : f32[8, 8]
  %e = aten::exp(%r) : f32[8, 8]
  %m = aten::mm(%e, %w) : f32[8, 8]
  output %m user_output
})";

std::unique_ptr<Graph> parse(llvm::StringRef text) {
  auto g = parseGraph(text);
  EXPECT_TRUE(g.ok()) << g.status().message();
  return g.ok() ? std::move(*g) : nullptr;
}

OperatorConfig configOfFirstNode(const Graph &g) {
  auto c = operatorConfigOf(*g.nodes().begin());
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? std::move(*c) : OperatorConfig();
}

/// The directories tempPath made, removed when the test program exits (each
/// test's databases stay until then; before, every run left them in /tmp).
struct TempDirs {
  std::vector<std::string> made;
  ~TempDirs() {
    for (const std::string &dir : made)
      llvm::sys::fs::remove_directories(dir);
  }
};

std::string tempPath(llvm::StringRef name) {
  static TempDirs dirs;
  llvm::SmallString<128> path;
  llvm::sys::fs::createUniqueDirectory("costdb-test", path);
  dirs.made.emplace_back(path.str());
  return (path + "/" + name).str();
}

void writeText(const std::string &path, llvm::StringRef text) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  ASSERT_FALSE(ec) << path;
  os << text;
}

CostEntry entry(int64_t id, llvm::StringRef op, llvm::StringRef family, std::vector<int64_t> dims,
                double work, double seconds, std::vector<std::string> sources = {"m"}) {
  CostEntry e;
  e.id = id;
  e.op = op.str();
  e.family = family.str();
  e.key = absl::StrCat("key", id);
  e.dims = std::move(dims);
  e.work = work;
  e.measured.medianSeconds = seconds;
  e.sources = std::move(sources);
  return e;
}

/// A configuration to predict, as the model sees it (no graph behind it).
OperatorConfig query(llvm::StringRef op, llvm::StringRef key, llvm::StringRef family,
                     std::vector<int64_t> dims, double work) {
  OperatorConfig c;
  c.op = op.str();
  c.key = key.str();
  c.family = family.str();
  c.dims = std::move(dims);
  c.work = work;
  return c;
}

} // namespace

// Names, phases and module attributes do not change a configuration; sizes,
// strides and constants do.
TEST(OperatorConfigTest, TheKeyIsTheCallAndNothingElse) {
  auto a = parse(R"(graph @a {
  input %x : f32[8, 16] user_input
  input %w : f32[16, 4] parameter "w"
forward:
  %h = aten::mm(%x, %w) {module = "layer1"} : f32[8, 4]
  output %h user_output
})");
  auto b = parse(R"(graph @b {
  input %p : f32[8, 16] user_input
  input %q : f32[16, 4] user_input
backward:
  %zz = aten::mm(%p, %q) : f32[8, 4]
  output %zz user_output
})");
  auto strided = parse(R"(graph @c {
  input %p : f32[8, 16]{strides=[1, 8]} user_input
  input %q : f32[16, 4] user_input
forward:
  %zz = aten::mm(%p, %q) : f32[8, 4]
  output %zz user_output
})");
  ASSERT_TRUE(a && b && strided);
  OperatorConfig ca = configOfFirstNode(*a), cb = configOfFirstNode(*b),
                 cs = configOfFirstNode(*strided);
  EXPECT_EQ(ca.key, cb.key);
  EXPECT_EQ(ca.op, "aten::mm");
  EXPECT_EQ(ca.key.find("layer1"), std::string::npos) << ca.key;
  EXPECT_NE(ca.key, cs.key);
  EXPECT_EQ(ca.family, cs.family);
  EXPECT_DOUBLE_EQ(ca.flops, 2.0 * 8 * 4 * 16);
  EXPECT_EQ(ca.bytesMoved, (8 * 16 + 16 * 4 + 8 * 4) * 4);
  EXPECT_TRUE(ca.computeBound);
  EXPECT_EQ(ca.dims, (std::vector<int64_t>{8, 16, 16, 4, 8, 4}));
  // The key reads back to the same configuration.
  auto again = parseGraph(ca.key);
  ASSERT_TRUE(again.ok()) << again.status().message();
  auto cr = operatorConfigOfGraph(std::move(*again));
  ASSERT_TRUE(cr.ok()) << cr.status().message();
  EXPECT_EQ(cr->key, ca.key);
}

// An operand read twice is one input: mul(x, x) is not mul(x, y).
TEST(OperatorConfigTest, AnOperandReadTwiceStaysOneTensor) {
  auto g = parse(R"(graph @g {
  input %x : f32[4] user_input
forward:
  %s = aten::mul.Tensor(%x, %x) : f32[4]
  output %s user_output
})");
  ASSERT_TRUE(g);
  OperatorConfig c = configOfFirstNode(*g);
  EXPECT_EQ(c.graph->inputs().size(), 1u);
  EXPECT_EQ(c.bytesMoved, 2 * 4 * 4);
}

TEST(OperatorTimingTest, TimesAGraphOnItsOwnInputs) {
  auto g = parse(R"(graph @g {
  input %x : f32[64, 64] user_input
  input %i : i64[8] user_input
forward:
  %e = aten::embedding(%x, %i) : f32[8, 64]
  output %e user_output
})");
  ASSERT_TRUE(g);
  OperatorTimingOptions options;
  options.minRuns = 7;
  options.minSeconds = 0.001;
  auto t = timeGraph(*g, options, nullptr);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_GE(t->runs, 7u);
  EXPECT_GT(t->medianSeconds, 0);
  EXPECT_LE(t->minSeconds, t->q1Seconds);
  EXPECT_LE(t->q1Seconds, t->medianSeconds);
  EXPECT_LE(t->medianSeconds, t->q3Seconds);
  EXPECT_FALSE(t->joulesPerCall);
}

// A fake powercap tree: package domains summed, sub-domains left out, the
// counter's wrap-around undone.
TEST(EnergyMeterTest, ReadsRaplPackagesAndUndoesTheWrap) {
  llvm::SmallString<128> root;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("powercap", root));
  std::string pkg = (root + "/intel-rapl:0").str(), sub = (root + "/intel-rapl:0:0").str();
  ASSERT_FALSE(llvm::sys::fs::create_directories(pkg));
  ASSERT_FALSE(llvm::sys::fs::create_directories(sub));
  writeText(pkg + "/energy_uj", "1000000\n");
  writeText(pkg + "/max_energy_range_uj", "4000000\n");
  writeText(pkg + "/name", "package-0\n");
  writeText(sub + "/energy_uj", "999999999\n");
  ::setenv("GRAPHOPT_POWERCAP_DIR", root.c_str(), 1);
  std::string why;
  auto meter = findEnergyMeter(c10::Device(c10::DeviceType::CPU), &why);
  ASSERT_TRUE(meter) << why;
  EXPECT_EQ(meter->source(), "RAPL: package-0");
  auto j = meter->joules();
  ASSERT_TRUE(j.ok());
  EXPECT_DOUBLE_EQ(*j, 1.0);
  writeText(pkg + "/energy_uj", "3000000\n");
  EXPECT_DOUBLE_EQ(*meter->joules(), 3.0);
  writeText(pkg + "/energy_uj", "500000\n"); // wrapped at 4 J
  EXPECT_DOUBLE_EQ(*meter->joules(), 4.5);

  ::setenv("GRAPHOPT_POWERCAP_DIR", (root + "/none").str().c_str(), 1);
  EXPECT_FALSE(findEnergyMeter(c10::Device(c10::DeviceType::CPU), &why));
  EXPECT_NE(why.find("no readable RAPL package domain"), std::string::npos) << why;
  ::unsetenv("GRAPHOPT_POWERCAP_DIR");
  llvm::sys::fs::remove_directories(root);
}

// NVML is asked for the CUDA device's UUID, in the form nvidia-smi -L prints
// (CUDA's index and NVML's can name different GPUs).
TEST(EnergyMeterTest, NamesTheCudaDeviceByItsNvmlUuid) {
  const unsigned char bytes[16] = {0x1f, 0x2e, 0x3d, 0x4c, 0x5b, 0x6a, 0x79, 0x88,
                                   0x97, 0xa6, 0xb5, 0xc4, 0xd3, 0xe2, 0xf1, 0x00};
  EXPECT_EQ(nvmlUuidText(bytes), "GPU-1f2e3d4c-5b6a-7988-97a6-b5c4d3e2f100");
  std::string why;
  if (!findEnergyMeter(c10::Device(c10::DeviceType::CUDA, 0), &why))
    EXPECT_FALSE(why.empty()); // no NVML, or no such device: it says which
}

TEST(CostDatabaseTest, StoresAndReadsBackAMeasurement) {
  std::string path = tempPath("costs.sqlite");
  auto g = parse(R"(graph @g {
  input %x : f32[4, 4] user_input
forward:
  %r = aten::relu(%x) : f32[4, 4]
  output %r user_output
})");
  ASSERT_TRUE(g);
  OperatorConfig config = configOfFirstNode(*g);
  {
    auto db = CostDatabase::open(path, /*create=*/true);
    ASSERT_TRUE(db.ok()) << db.status().message();
    MachineInfo here = MachineInfo::current(c10::Device(c10::DeviceType::CPU));
    auto m = (*db)->machine(here);
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(*(*db)->machine(here), *m); // found, not added again
    auto c = (*db)->config(config);
    ASSERT_TRUE(c.ok()) << c.status().message();
    EXPECT_EQ(*(*db)->config(config), *c);
    ASSERT_TRUE((*db)->setSource(*c, "model-a", 3).ok());
    ASSERT_TRUE((*db)->setSource(*c, "model-a", 2).ok()); // replaced, not added
    EXPECT_FALSE(*(*db)->measured(*c, *m));
    MeasurementRecord rec;
    rec.medianSeconds = 2e-6;
    rec.q1Seconds = 1e-6;
    rec.q3Seconds = 3e-6;
    rec.minSeconds = 1e-6;
    rec.runs = 9;
    ASSERT_TRUE((*db)->putMeasurement(*c, *m, rec).ok());
    EXPECT_TRUE(*(*db)->measured(*c, *m));
    ASSERT_TRUE((*db)->putInStep(*c, *m, {"model-a", 5e-6, 2}).ok());
    ASSERT_TRUE((*db)->putInStep(*c, *m, {"model-a", 4e-6, 2}).ok()); // replaced
  }
  auto db = CostDatabase::open(path, /*create=*/false);
  ASSERT_TRUE(db.ok()) << db.status().message();
  auto counts = (*db)->counts();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->configs, 1);
  EXPECT_EQ(counts->measurements, 1);
  EXPECT_EQ(counts->sources, 1);
  auto machine = (*db)->findMachine(MachineInfo::current(c10::Device(c10::DeviceType::CPU)));
  ASSERT_TRUE(machine.ok() && *machine);
  auto entries = (*db)->entries(**machine);
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_EQ((*entries)[0].key, config.key);
  EXPECT_EQ((*entries)[0].measured.runs, 9u);
  EXPECT_FALSE((*entries)[0].measured.joulesPerCall);
  EXPECT_EQ((*entries)[0].sources, std::vector<std::string>{"model-a"});
  EXPECT_EQ((*entries)[0].dims, config.dims);
  ASSERT_EQ((*entries)[0].inStep.size(), 1u);
  EXPECT_EQ((*entries)[0].inStep[0].source, "model-a");
  EXPECT_DOUBLE_EQ((*entries)[0].inStep[0].medianSeconds, 4e-6);
  EXPECT_EQ((*entries)[0].inStep[0].nodes, 2);
  EXPECT_EQ(counts->inStep, 1);

  // Not a database, and a database that is not one of ours.
  std::string text = tempPath("notes.txt");
  writeText(text, "hello\n");
  auto bad = CostDatabase::open(text, false);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find(text), std::string::npos);
  EXPECT_FALSE(CostDatabase::open(tempPath("missing.sqlite"), false).ok());
}

TEST(CostModelTest, PredictsExactlyThenFromTheFamilyThenFromTheOperator) {
  std::vector<CostEntry> entries;
  entries.push_back(entry(1, "aten::mm", "mm-f32", {64, 64, 64, 64, 64, 64}, 1e6, 1e-3));
  entries.push_back(entry(2, "aten::mm", "mm-f16", {8, 8, 8, 8, 8, 8}, 1e3, 1e-5));
  entries.push_back(entry(3, "aten::relu", "relu", {10}, 80, 2e-6, {"only-here"}));
  CostModel model(std::move(entries), {"only-here"});
  EXPECT_EQ(model.size(), 2u); // relu's measurement came only from the excluded source

  OperatorConfig exact = query("aten::mm", "key1", "mm-f32", {}, 0);
  EXPECT_EQ(model.predict(exact).how, CostModel::How::Exact);
  EXPECT_DOUBLE_EQ(model.predict(exact).seconds, 1e-3);

  // Twice the work of entry 1 in its family: the floor (the operator's
  // fastest call, 1e-5) plus twice the rest.
  CostModel::Prediction p =
      model.predict(query("aten::mm", "new", "mm-f32", {128, 64, 64, 64, 128, 64}, 2e6));
  EXPECT_EQ(p.how, CostModel::How::Family);
  EXPECT_NEAR(p.seconds, 1e-5 + (1e-3 - 1e-5) * 2, 1e-12);

  // Far beyond what the family measured (more than 4x its largest work), the
  // operator's other families are asked instead.
  EXPECT_EQ(model.predict(query("aten::mm", "far", "mm-f32", {4096, 64, 64, 64, 4096, 64}, 1e9)).how,
            CostModel::How::Operator);

  // Another family of the operator: its entries nearest in work.
  p = model.predict(query("aten::mm", "other", "mm-bf16", {}, 1e3));
  EXPECT_EQ(p.how, CostModel::How::Operator);
  EXPECT_GT(p.seconds, 0);
  EXPECT_LT(p.seconds, 1e-3);

  OperatorConfig relu = query("aten::relu", "key3", "relu", {}, 0);
  EXPECT_EQ(model.predict(relu).how, CostModel::How::Missing);
}

// Accuracy counts the measured time of the nodes predicted within the
// tolerance of what they measured; a node the database cannot predict is
// never accurate, however its time compares.
TEST(AttributionTest, AccuracyIsTheMeasuredTimePredictedWithinTheTolerance) {
  auto g = parse(kReluExpMm);
  ASSERT_TRUE(g);
  std::vector<const Node *> nodes;
  for (const Node &n : g->nodes())
    nodes.push_back(&n);
  ASSERT_EQ(nodes.size(), 3u);
  // relu predicted 20% over what it measures, exp twice; mm not measured.
  std::vector<CostEntry> entries;
  double predicted[2] = {1.2e-3, 2e-3};
  for (int i = 0; i < 2; ++i) {
    auto c = operatorConfigOf(*nodes[i]);
    ASSERT_TRUE(c.ok()) << c.status().message();
    CostEntry e = entry(i + 1, c->op, c->family, c->dims, c->work, predicted[i]);
    e.key = c->key;
    entries.push_back(std::move(e));
  }
  CostModel model(std::move(entries));
  ProfileResult profile;
  for (const Node *n : nodes) {
    NodeStats s;
    s.node = n;
    s.seconds = n == nodes[2] ? 2e-3 : 1e-3; // mm: 2 ms, unpredicted
    profile.nodes.push_back(s);
  }
  profile.sumNodeSeconds = 4e-3;
  profile.stepSeconds = 4e-3;

  StepAttribution a = attributeStep(*g, model, &profile);
  EXPECT_DOUBLE_EQ(a.tolerance, 0.25);
  EXPECT_EQ(a.predictedNodes, 2u);
  EXPECT_EQ(a.accurateNodes, 1u);
  EXPECT_DOUBLE_EQ(a.explainedShare(), 0.5);
  EXPECT_DOUBLE_EQ(a.accurateShare(), 0.25);
  EXPECT_TRUE(a.nodes[0].accurate(0.25));
  EXPECT_FALSE(a.nodes[1].accurate(0.25));
  EXPECT_FALSE(a.nodes[2].accurate(1e9)); // missing

  // Wider, exp counts too; the missing mm still does not.
  StepAttribution wide = attributeStep(*g, model, &profile, 1.5);
  EXPECT_EQ(wide.accurateNodes, 2u);
  EXPECT_DOUBLE_EQ(wide.accurateShare(), 0.5);

  // Without a profile there is nothing to be accurate against.
  StepAttribution blind = attributeStep(*g, model, nullptr);
  EXPECT_EQ(blind.accurateNodes, 0u);
  EXPECT_EQ(blind.accurateShare(), -1);

  // The table gives the operators' accurate shares; the JSON the totals.
  std::string text;
  llvm::raw_string_ostream os(text);
  printAttribution(os, a);
  EXPECT_NE(text.find("accurate: 25.0% of the measured node time predicted within 25%"),
            std::string::npos)
      << text;
  std::string json = attributionJson(a, "g");
  EXPECT_NE(json.find("\"accurate_share\": 0.25"), std::string::npos) << json;
}

namespace {

/// Each neighbour's operand and result sizes (OperatorConfig::dims), sorted.
std::vector<std::vector<int64_t>> neighbourDims(llvm::StringRef gir,
                                                const NeighbourOptions &options = {}) {
  auto g = parse(gir);
  std::vector<std::vector<int64_t>> out;
  if (!g)
    return out;
  OperatorConfig config = configOfFirstNode(*g);
  for (const OperatorConfig &n : neighbourConfigs(config, options)) {
    EXPECT_NE(n.key, config.key);
    EXPECT_EQ(n.family, config.family) << n.key;
    out.push_back(n.dims);
  }
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace

// The size most operands carry is scaled first, everywhere it appears; the
// results' sizes come from the operator.
TEST(ConfigNeighboursTest, ScalesTheMostUsedSizesEverywhereTheyAppear) {
  using Dims = std::vector<std::vector<int64_t>>;
  EXPECT_EQ(neighbourDims(R"(graph @g {
  input %a : f32[16, 32] user_input
  input %b : f32[32, 8] user_input
forward:
  %c = aten::mm(%a, %b) : f32[16, 8]
  output %c user_output
})"),
            (Dims{{8, 32, 32, 8, 8, 8}, {16, 16, 16, 8, 16, 8}, {16, 64, 64, 8, 16, 8},
                  {32, 32, 32, 8, 32, 8}}));
  // Sizes from the size arguments too: expand's result.
  EXPECT_EQ(neighbourDims(R"(graph @g {
  input %g : f32[] user_input
forward:
  %e = aten::expand(%g, [16, 8]) : f32[16, 8]{strides=[0, 0]}
  output %e user_output
})"),
            (Dims{{8, 8}, {16, 4}, {16, 16}, {32, 8}}));
}

// A substitution the operator rejects is dropped: a view to a product of
// sizes cannot follow one of its factors.
TEST(ConfigNeighboursTest, DropsWhatTheOperatorRejects) {
  NeighbourOptions three;
  three.sizesScaled = 3;
  using Dims = std::vector<std::vector<int64_t>>;
  EXPECT_EQ(neighbourDims(R"(graph @g {
  input %x : f32[4, 16, 8] user_input
forward:
  %v = aten::view(%x, [64, 8]) : f32[64, 8]
  output %v user_output
})",
                          three),
            (Dims{{4, 16, 4, 64, 4}, {4, 16, 16, 64, 16}}));
}

// Operands keep their layout: a transposed operand stays transposed, with
// dense strides at its new sizes; a broadcast dimension stays broadcast.
TEST(ConfigNeighboursTest, OperandsKeepTheirLayout) {
  auto g = parse(R"(graph @g {
  input %a : f32[16, 32]{strides=[1, 16]} user_input
  input %b : f32[16, 32]{strides=[0, 1]} user_input
forward:
  %c = aten::add.Tensor(%a, %b) : f32[16, 32]
  output %c user_output
})");
  ASSERT_TRUE(g);
  OperatorConfig config = configOfFirstNode(*g);
  NeighbourOptions one;
  one.sizesScaled = 1;
  one.factors = {2.0};
  std::vector<OperatorConfig> n = neighbourConfigs(config, one);
  ASSERT_EQ(n.size(), 1u);
  // 32 is the larger of two sizes used twice each.
  auto inputs = n[0].graph->inputs();
  ASSERT_EQ(inputs.size(), 2u);
  EXPECT_EQ(inputs[0].value->tensorType().sizes, (llvm::SmallVector<int64_t, 4>{16, 64}));
  EXPECT_EQ(inputs[0].value->tensorType().strides, (llvm::SmallVector<int64_t, 4>{1, 16}));
  EXPECT_EQ(inputs[1].value->tensorType().strides, (llvm::SmallVector<int64_t, 4>{0, 1}));
}

// A configuration timed inside a step is predicted by that time; the others
// of its operator are scaled by the in-step context of the nearest in work;
// left out, the in-step times count for nothing.
TEST(CostModelTest, InStepTimesPredictTheirConfigurationAndCalibrateTheOperator) {
  auto entries = [] {
    std::vector<CostEntry> out;
    out.push_back(entry(1, "aten::relu", "relu", {10}, 1e3, 1e-6));
    out.back().inStep = {{"a", 2e-6, 3}, {"b", 3e-6, 1}}; // weighted: 2.25e-6
    out.push_back(entry(2, "aten::relu", "relu", {40}, 4e3, 1e-4));
    out.push_back(entry(3, "aten::mm", "mm", {64, 64, 64, 64, 64, 64}, 1e6, 1e-3));
    return out;
  };
  CostModel model(entries());
  CostModel::Prediction p = model.predict(query("aten::relu", "key1", "relu", {}, 0));
  EXPECT_EQ(p.how, CostModel::How::InStep);
  EXPECT_DOUBLE_EQ(p.seconds, 2.25e-6);
  EXPECT_EQ(CostModel::howName(p.how), "in-step");

  // Its in-step extra, 1.25 us, goes on relu's other configuration (4x its work).
  p = model.predict(query("aten::relu", "key2", "relu", {}, 4e3));
  EXPECT_EQ(p.how, CostModel::How::Exact);
  EXPECT_DOUBLE_EQ(p.seconds, 1e-4 + 1.25e-6);
  EXPECT_DOUBLE_EQ(p.context, (1e-4 + 1.25e-6) / 1e-4);
  EXPECT_DOUBLE_EQ(model.contextExtra("aten::relu", 5e3), 1.25e-6);

  // No in-step time for mm: its isolated time stands.
  p = model.predict(query("aten::mm", "key3", "mm", {}, 1e6));
  EXPECT_EQ(p.how, CostModel::How::Exact);
  EXPECT_DOUBLE_EQ(p.context, 1);
  EXPECT_DOUBLE_EQ(p.seconds, 1e-3);

  // Leaving out one source keeps the other's time; leaving out both, none.
  CostModel withoutA(entries(), {"a"});
  EXPECT_DOUBLE_EQ(withoutA.predict(query("aten::relu", "key1", "relu", {}, 0)).seconds, 3e-6);
  CostModel withoutBoth(entries(), {"a", "b"});
  p = withoutBoth.predict(query("aten::relu", "key1", "relu", {}, 0));
  EXPECT_EQ(p.how, CostModel::How::Exact);
  EXPECT_DOUBLE_EQ(p.seconds, 1e-6);
  EXPECT_DOUBLE_EQ(withoutBoth.contextExtra("aten::relu", 1e3), 0);
}

namespace {

/// An operator whose time is a fixed cost plus its bytes at 1 GB/s, at
/// `count` sizes from 1 KB to 10 MB.
std::vector<CostEntry> linearOperator(llvm::StringRef op, int count, int64_t firstId) {
  std::vector<CostEntry> out;
  for (int i = 0; i < count; ++i) {
    double bytes = 1e3 * std::pow(1e4, static_cast<double>(i) / (count - 1));
    CostEntry e = entry(firstId + i, op, (op + "(f32/1/cpu)->(f32/1/cpu)").str(),
                        {static_cast<int64_t>(bytes / 8), static_cast<int64_t>(bytes / 8)},
                        bytes, 2e-6 + bytes * 1e-9);
    e.bytesMoved = bytes;
    out.push_back(std::move(e));
  }
  return out;
}

} // namespace

// The learned model refuses to train on too little, and otherwise follows
// what it was trained on; an operator it never saw still gets a prediction
// from its other features.
TEST(LearnedCostTest, TrainsOnTheMeasurementsAndRefusesTooFew) {
  std::vector<CostEntry> few = linearOperator("aten::exp", 5, 1);
  std::vector<const CostEntry *> fewPtrs;
  for (const CostEntry &e : few)
    fewPtrs.push_back(&e);
  auto refused = LearnedCost::train(fewPtrs);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(std::string(refused.status().message()).find("at least 20 measurements"),
            std::string::npos)
      << refused.status().message();

  std::vector<CostEntry> many = linearOperator("aten::exp", 60, 1);
  std::vector<const CostEntry *> ptrs;
  for (const CostEntry &e : many)
    ptrs.push_back(&e);
  auto model = LearnedCost::train(ptrs);
  ASSERT_TRUE(model.ok()) << model.status().message();
  EXPECT_EQ((*model)->trainingRows(), 60u);
  // Between two training sizes, within the step of the trees.
  CostEntry query = linearOperator("aten::exp", 60, 100)[0];
  query.bytesMoved = query.work = 2.5e5;
  query.dims = {31250, 31250};
  double truth = 2e-6 + 2.5e5 * 1e-9;
  auto seconds = (*model)->predict(CostFeatureInput::of(query));
  ASSERT_TRUE(seconds.ok()) << seconds.status().message();
  EXPECT_NEAR(*seconds / truth, 1.0, 0.3) << *seconds;
  // Unseen operator: its rate feature is missing, the rest stands.
  query.op = "aten::sin";
  std::vector<float> f = (*model)->features(CostFeatureInput::of(query));
  ASSERT_EQ(f.size(), static_cast<size_t>(LearnedCost::kFeatures));
  EXPECT_TRUE(std::isnan(f.back()));
  EXPECT_FLOAT_EQ(f[7], 4); // f32
  auto unseen = (*model)->predict(CostFeatureInput::of(query));
  ASSERT_TRUE(unseen.ok());
  EXPECT_GT(*unseen, 0);
}

// The cost model asks the learned model only where nothing measured is near:
// an operator it never measured, or one measured only far from the query's work.
TEST(CostModelTest, LearnedWhereNothingMeasuredIsNear) {
  CostModel model(linearOperator("aten::exp", 40, 1));
  EXPECT_EQ(model.predict(query("aten::sin", "k-sin", "aten::sin(f32/1/cpu)->(f32/1/cpu)",
                                {1000, 1000}, 8e3))
                .how,
            CostModel::How::Learned);
  // Near the measured works: interpolated as before.
  EXPECT_EQ(model.predict(query("aten::exp", "k-near", "aten::exp(f16/1/cpu)->(f16/1/cpu)",
                                {1000, 1000}, 8e3))
                .how,
            CostModel::How::Operator);
  // 100x beyond the largest: learned.
  EXPECT_EQ(model.predict(query("aten::exp", "k-far", "aten::exp(f16/1/cpu)->(f16/1/cpu)",
                                {1 << 27, 1 << 27}, 1e9))
                .how,
            CostModel::How::Learned);
  // Switched off, or too little to train on: the lookup alone.
  CostModel lookupOnly(linearOperator("aten::exp", 40, 1));
  lookupOnly.setLearned(false);
  EXPECT_EQ(lookupOnly.predict(query("aten::sin", "k-sin", "x", {}, 8e3)).how,
            CostModel::How::Missing);
  // With energy on enough measurements, the learned nodes get joules too.
  std::vector<CostEntry> withEnergy = linearOperator("aten::exp", 40, 1);
  for (CostEntry &e : withEnergy)
    e.measured.joulesPerCall = e.measured.medianSeconds * 50; // 50 W
  CostModel energetic(std::move(withEnergy));
  CostModel::Prediction learned = energetic.predict(
      query("aten::sin", "k-sin", "aten::sin(f32/1/cpu)->(f32/1/cpu)", {1000, 1000}, 8e3));
  ASSERT_EQ(learned.how, CostModel::How::Learned);
  ASSERT_TRUE(learned.joules);
  EXPECT_NEAR(*learned.joules / learned.seconds, 50, 20);
  EXPECT_FALSE(model.predict(query("aten::sin", "k-sin", "x", {1000, 1000}, 8e3)).joules);
  CostModel small(linearOperator("aten::exp", 5, 1));
  EXPECT_EQ(small.predict(query("aten::sin", "k-sin", "x", {}, 8e3)).how, CostModel::How::Missing);
  EXPECT_NE(small.learnedUnavailable().find("at least 20"), std::string::npos);
}

// The in-step extra of a query is the median of (in-step - isolated) over the
// operator's five configurations timed both ways nearest to it in work, those
// within 8x of it: one far slower in its step does not move it, and nothing
// is extrapolated from configurations far away in work.
TEST(CostModelTest, TheInStepExtraIsTheMedianOfTheNearestWithinReach) {
  std::vector<CostEntry> entries;
  double works[] = {1e3, 2e3, 4e3, 8e3, 16e3, 32e3, 1e6};
  double extras[] = {1e-6, 2e-6, 3e-6, 4e-6, 5e-6, 600e-6, 100e-6};
  for (int i = 0; i < 7; ++i) {
    entries.push_back(entry(i + 1, "aten::add", "add", {i + 1}, works[i], 1e-6));
    entries.back().inStep = {{"m", 1e-6 + extras[i], 1}};
  }
  CostModel model(std::move(entries));
  // 8e3: 8e3, 4e3, 16e3, 2e3, 32e3 (600 us, an outlier): the median, 4 us.
  EXPECT_NEAR(model.contextExtra("aten::add", 8e3), 4e-6, 1e-12);
  // 1.1e3: its five nearest, 1e3 to 16e3, 16e3 beyond reach: the upper median of four.
  EXPECT_NEAR(model.contextExtra("aten::add", 1.1e3), 3e-6, 1e-12);
  // 1e6: only itself within 8x.
  EXPECT_NEAR(model.contextExtra("aten::add", 1e6), 100e-6, 1e-12);
  // Beyond every configuration's reach, or an operator never timed in a step: none.
  EXPECT_DOUBLE_EQ(model.contextExtra("aten::add", 1e9), 0);
  EXPECT_DOUBLE_EQ(model.contextExtra("aten::mul", 1e3), 0);

  // A negative extra (faster in the step) takes a prediction down to half at most.
  std::vector<CostEntry> faster;
  faster.push_back(entry(1, "aten::add", "add", {1}, 1e3, 10e-6));
  faster.back().inStep = {{"m", 1e-6, 1}};
  faster.push_back(entry(2, "aten::add", "add", {2}, 2e3, 4e-6));
  CostModel down(std::move(faster));
  EXPECT_NEAR(down.predict(query("aten::add", "key2", "add", {}, 2e3)).seconds, 2e-6, 1e-12);
}

namespace {

/// A model of relu, exp and mm on f32[8, 8], each measured: stored times as given.
struct CalibrationFixture {
  std::unique_ptr<Graph> graph;
  CostModel model;

  static std::unique_ptr<Graph> step() {
    return parse(kReluExpMm);
  }
  static std::vector<CostEntry> entries(const Graph &g, const std::vector<double> &stored) {
    std::vector<CostEntry> out;
    size_t i = 0;
    for (const Node &n : g.nodes()) {
      auto c = operatorConfigOf(n);
      EXPECT_TRUE(c.ok());
      CostEntry e = entry(static_cast<int64_t>(i + 1), c->op, c->family, c->dims, c->work,
                          stored[i]);
      e.key = c->key;
      out.push_back(std::move(e));
      ++i;
    }
    return out;
  }
  explicit CalibrationFixture(const std::vector<double> &stored)
      : graph(step()), model(entries(*graph, stored)) {}
};

} // namespace

// The probes for a step are the measurements its predictions rest on, those
// carrying the most predicted time first, weighted by it; the factor is the
// weighted median of time now over time stored.
TEST(SpeedCalibrationTest, ProbesTheStepsHeaviestMeasurementsAndTakesTheirWeightedMedian) {
  // relu stored 1000 s (it runs in microseconds: ratio far below 1), exp and
  // mm stored 1 ps (ratios far above 1).
  CalibrationFixture f({1e3, 1e-12, 1e-12});
  ASSERT_TRUE(f.graph);
  StepAttribution predicted = attributeStep(*f.graph, f.model, nullptr);
  ASSERT_EQ(predicted.nodes.size(), 3u);
  for (const NodeAttribution &n : predicted.nodes)
    EXPECT_NE(n.nearest, nullptr) << n.op;

  // relu alone is longer than the default limit: only exp and mm are probes.
  auto bounded = SpeedCalibration::pickForStep(predicted, 8);
  ASSERT_TRUE(bounded.ok()) << bounded.status().message();
  EXPECT_EQ(bounded->probes(), 2u);
  auto one = SpeedCalibration::pickForStep(predicted, 1, 1e4);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->probes(), 1u); // relu, which carries the most
  EXPECT_DOUBLE_EQ(one->factor(), 1); // not timed yet

  auto all = SpeedCalibration::pickForStep(predicted, 8, 1e4);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->probes(), 3u);
  OperatorTimingOptions timing;
  timing.minRuns = 3;
  timing.minSeconds = 0.001;
  timing.warmupSeconds = 0;
  ASSERT_TRUE(all->retime(timing).ok());
  // relu's weight (1000 s of 1000 s) carries the median and the quartiles.
  EXPECT_LT(all->factor(), 1e-3);
  EXPECT_LE(all->q1(), all->factor());
  EXPECT_LE(all->factor(), all->q3());

  // Weighted alike (pick), two of three ratios are above 1: so is the median.
  auto even = SpeedCalibration::pick(f.model, 3, 1e4);
  ASSERT_TRUE(even.ok());
  EXPECT_EQ(even->probes(), 3u);
  ASSERT_TRUE(even->retime(timing).ok());
  EXPECT_GT(even->factor(), 1e3);
  EXPECT_LT(even->q1(), 1e-3);
}

TEST(SpeedCalibrationTest, RefusesWithoutMeasurementsShortEnough) {
  CalibrationFixture f({10, 20, 30});
  ASSERT_TRUE(f.graph);
  auto none = SpeedCalibration::pick(f.model, 4); // every measurement over 5 ms
  ASSERT_FALSE(none.ok());
  EXPECT_NE(std::string(none.status().message()).find("no measurement of at most 5 ms"),
            std::string::npos)
      << none.status().message();
  StepAttribution predicted = attributeStep(*f.graph, f.model, nullptr);
  EXPECT_FALSE(SpeedCalibration::pickForStep(predicted, 4).ok()); // none under 0.1 s
  CostModel empty(std::vector<CostEntry>{});
  EXPECT_FALSE(SpeedCalibration::pick(empty, 4).ok());
}

// The model's speed scales every predicted time, exact ones included, and
// the attribution says what it was scaled by.
TEST(SpeedCalibrationTest, TheSpeedScalesEveryPrediction) {
  CalibrationFixture f({1e-3, 2e-3, 4e-3});
  ASSERT_TRUE(f.graph);
  StepAttribution before = attributeStep(*f.graph, f.model, nullptr);
  f.model.setSpeed(1.5);
  StepAttribution after = attributeStep(*f.graph, f.model, nullptr);
  EXPECT_DOUBLE_EQ(before.predictedSeconds, 7e-3);
  EXPECT_DOUBLE_EQ(after.predictedSeconds, 1.5 * 7e-3);
  EXPECT_EQ(after.nodes[0].how, CostModel::How::Exact);
  EXPECT_DOUBLE_EQ(after.nodes[0].predictedSeconds, 1.5e-3);
  EXPECT_DOUBLE_EQ(after.speed, 1.5);
  after.speedProbes = 3;
  std::string json = attributionJson(after, "g");
  EXPECT_NE(json.find("\"speed_factor\": 1.5"), std::string::npos) << json;
  EXPECT_NE(json.find("\"speed_probes\": 3"), std::string::npos) << json;
}

// A configuration's layout: per operand, then for the node's results, how
// many strided tensors its key prints.
TEST(CostModelTest, LayoutSaysWhichOperandsAreStrided) {
  auto g = parse(R"(graph @g {
  input %x : f32[4, 8] user_input
  input %w : f32[8, 4] user_input
forward:
  %t = aten::t(%w) : f32[4, 8]{strides=[1, 4]}
  %c = aten::clone(%t) : f32[4, 8]
  %y = aten::add.Tensor(%x, %t) : f32[4, 8]
  output %c user_output
  output %y user_output
})");
  ASSERT_TRUE(g);
  std::vector<std::string> layouts;
  for (const Node &n : g->nodes())
    if (auto c = operatorConfigOf(n); c.ok())
      layouts.push_back(layoutOf(c->key));
  ASSERT_EQ(layouts.size(), 3u);
  EXPECT_EQ(layouts[0], "01"); // t: a contiguous operand, a strided result
  EXPECT_EQ(layouts[1], "10"); // clone of the strided view: a contiguous copy
  EXPECT_EQ(layouts[2], "010"); // add: the second operand strided
  EXPECT_EQ(layoutOf("not a graph"), "");
}

// A measurement far slower than a configuration of its family and layout
// with more work caught the machine in a slow mode: no other configuration
// is predicted from it.
TEST(CostModelTest, LeavesOutMeasurementsFarSlowerThanLargerOnes) {
  auto copy = [](int64_t n, llvm::StringRef layout) {
    return absl::StrCat("graph @op {\n  input %a0 : f32[", n, ", ", n, "]", layout.str(),
                        " user_input\nforward:\n  %r0 = aten::clone(%a0) : f32[", n, ", ", n,
                        "]\n  output %r0 user_output\n}\n");
  };
  std::vector<CostEntry> entries;
  auto add = [&](int64_t n, llvm::StringRef layout, double seconds) {
    CostEntry e = entry(static_cast<int64_t>(entries.size() + 1), "aten::clone", "clone-f32",
                        {n, n, n, n}, static_cast<double>(n * n), seconds);
    e.key = copy(n, layout);
    entries.push_back(std::move(e));
  };
  add(32, "", 1e-3);                      // 1 ms: 100x the larger copy below
  add(64, "", 5e-6);
  add(128, "", 1e-5);
  add(32, "{strides=[1, 32]}", 4e-5);     // a permuting copy: 4x, of another layout, stays
  add(16, "", 2e-6);
  CostModel model(std::move(entries));
  ASSERT_EQ(model.implausible().size(), 1u);
  EXPECT_DOUBLE_EQ(model.implausible()[0]->measured.medianSeconds, 1e-3);
  EXPECT_EQ(model.size(), 5u);
  // Its own configuration keeps it; one beside it is predicted from the
  // others, far under the 1 ms the slow one was caught at.
  EXPECT_EQ(model.predict(query("aten::clone", copy(32, ""), "clone-f32", {}, 1024)).how,
            CostModel::How::Exact);
  CostModel::Prediction p =
      model.predict(query("aten::clone", copy(33, ""), "clone-f32", {33, 33, 33, 33}, 1089));
  EXPECT_EQ(p.how, CostModel::How::Family);
  EXPECT_LT(p.seconds, 1e-4);
}

// A matrix product with few rows reads its whole weight for them: bound by
// memory, not by its FLOPs. Measurements that follow a roofline exactly
// (100 GFLOP/s, 10 GB/s) give the machine's balance, 10 FLOPs per byte, and
// a product of 16 rows, between the measured 8 and 64, is predicted at its
// bytes' time; interpolating its rate along FLOPs between those two took it
// twice too slow.
TEST(CostModelTest, ComputeBoundCallsFollowTheRoofline) {
  constexpr double kFlopRate = 100e9, kByteRate = 10e9;
  struct Shape {
    int64_t m, k, n;
    double flops() const { return 2.0 * static_cast<double>(m * k * n); }
    double bytes() const { return 4.0 * static_cast<double>(m * k + k * n + m * n); }
    double seconds() const { return 1e-7 + std::max(flops() / kFlopRate, bytes() / kByteRate); }
  };
  std::vector<CostEntry> entries;
  auto add = [&](Shape s) {
    CostEntry e = entry(static_cast<int64_t>(entries.size() + 1), "aten::mm", "mm-f32",
                        {s.m, s.k, s.k, s.n, s.m, s.n}, s.flops(), s.seconds());
    e.computeBound = true;
    e.flops = s.flops();
    e.bytesMoved = s.bytes();
    entries.push_back(std::move(e));
  };
  for (int64_t m : {1, 2, 4, 8, 64, 128, 256, 512})
    for (int64_t k : {256, 512, 1024, 2048})
      for (int64_t n : {256, 1024, 2048})
        add({m, k, n});
  add({1, 1, 1}); // the operator's fixed cost: 0.1 us, far from the rest
  CostModel model(std::move(entries));
  EXPECT_NEAR(model.balance(), kFlopRate / kByteRate, 0.01); // the 0.1 us fixed cost aside

  Shape few{16, 2048, 2048};
  ASSERT_LT(few.flops(), few.bytes() * model.balance()); // bound by memory
  OperatorConfig q = query("aten::mm", "few", "mm-f32", {16, 2048, 2048, 2048, 16, 2048},
                           few.flops());
  q.computeBound = true;
  q.flops = few.flops();
  q.bytesMoved = static_cast<int64_t>(few.bytes());
  CostModel::Prediction p = model.predict(q);
  EXPECT_EQ(p.how, CostModel::How::Family);
  EXPECT_NEAR(p.seconds, few.seconds(), 0.05 * few.seconds());

  // Under kRooflineMinEntries measurements, no balance: work is the FLOPs.
  std::vector<CostEntry> some;
  for (int i = 0; i < 5; ++i) {
    CostEntry e = entry(i + 1, "aten::mm", "mm-f32", {64, 64, 64, 64, 64, 64}, 1e6, 1e-4);
    e.computeBound = true;
    e.flops = 1e6;
    e.bytesMoved = 1e5;
    some.push_back(std::move(e));
  }
  EXPECT_EQ(CostModel(std::move(some)).balance(), 0);
}

// A compute-bound call's rate comes from the neighbours nearest in shape, not
// from the one that happens to have its work: twice the columns of a 16-row
// product run at that product's rate, not at the rate of a 1024-row product
// of the same FLOPs (the one a rate interpolated along work alone took).
TEST(CostModelTest, ComputeBoundRatesComeFromTheNearestShapes) {
  std::vector<CostEntry> entries;
  auto add = [&](llvm::StringRef family, std::vector<int64_t> dims, double flops, double rate) {
    CostEntry e = entry(static_cast<int64_t>(entries.size() + 1), "aten::mm", family,
                        std::move(dims), flops, flops / rate);
    e.computeBound = true;
    e.flops = flops;
    entries.push_back(std::move(e));
  };
  add("mm-f32", {16, 2048, 2048, 512, 16, 512}, 2.0 * 16 * 2048 * 512, 80e9);
  add("mm-f32", {1024, 64, 64, 512, 1024, 512}, 2.0 * 1024 * 64 * 512, 160e9);
  add("mm-other", {1, 1, 1, 1, 1, 1}, 2, 2e7); // the operator's fixed cost, 0.1 us
  CostModel model(std::move(entries));
  double flops = 2.0 * 16 * 2048 * 1024;
  OperatorConfig q = query("aten::mm", "wider", "mm-f32", {16, 2048, 2048, 1024, 16, 1024}, flops);
  q.computeBound = true;
  q.flops = flops;
  CostModel::Prediction p = model.predict(q);
  EXPECT_EQ(p.how, CostModel::How::Family);
  double atItsShapesRate = flops / 80e9;
  EXPECT_NEAR(p.seconds, atItsShapesRate, 0.15 * atItsShapesRate);
}

// Scaled dot-product attention, kept fused by the joint export (its CPU flash
// kernel forward and backward): priced by its two products forward and five
// backward, as torch.utils.flop_counter counts them, not one operation per
// output element.
TEST(OperatorCostTest, AttentionIsPricedByItsProducts) {
  auto g = parse(R"(graph @attn {
  input %q : f32[2, 4, 16, 8] user_input
  input %k : f32[2, 4, 32, 8] user_input
  input %v : f32[2, 4, 32, 6] user_input
forward:
  %out, %lse = aten::_scaled_dot_product_flash_attention_for_cpu(%q, %k, %v, 0.0, false) : f32[2, 4, 16, 6], f32[2, 4, 16]
  %gq, %gk, %gv = aten::_scaled_dot_product_flash_attention_for_cpu_backward(%out, %q, %k, %v, %out, %lse, 0.0, false) : f32[2, 4, 16, 8], f32[2, 4, 32, 8], f32[2, 4, 32, 6]
  output %gq user_output
  output %gk user_output
  output %gv user_output
}
)");
  ASSERT_TRUE(g);
  auto it = g->nodes().begin();
  const Node &forward = *it, &backward = *++it;
  const double bhls = 2.0 * 4 * 16 * 32;
  EXPECT_TRUE(isComputeBound(forward));
  EXPECT_TRUE(isComputeBound(backward));
  EXPECT_DOUBLE_EQ(estimateFlops(forward), 2 * bhls * (8 + 6));
  EXPECT_DOUBLE_EQ(estimateFlops(backward), 2 * bhls * (3 * 8 + 2 * 6));
  EXPECT_DOUBLE_EQ(workOf(forward), estimateFlops(forward));
}

// An entry is priced on paper by this build's rules, not by the figures the
// measuring build stored: a database measured before attention was priced by
// its products held bytes as its work, and a query priced by FLOPs was
// interpolated from them 57x over.
TEST(CostModelTest, EntriesArePricedOnPaperByThisBuildsRules) {
  auto config = operatorConfigOfGraph(parse(R"(graph @mm {
  input %a : f32[8, 16] user_input
  input %b : f32[16, 4] user_input
forward:
  %c = aten::mm(%a, %b) : f32[8, 4]
  output %c user_output
}
)"));
  ASSERT_TRUE(config.ok()) << config.status().message();
  CostEntry stale;
  stale.key = config->key;
  stale.flops = 1;
  stale.bytesMoved = 2;
  stale.work = 3;
  stale.computeBound = false;
  CostModel::repriceOnPaper(stale);
  EXPECT_DOUBLE_EQ(stale.flops, 2.0 * 8 * 4 * 16);
  EXPECT_DOUBLE_EQ(stale.bytesMoved, 4.0 * (8 * 16 + 16 * 4 + 8 * 4));
  EXPECT_TRUE(stale.computeBound);
  EXPECT_DOUBLE_EQ(stale.work, stale.flops);
  CostEntry unknown; // a key this build cannot read keeps what was stored
  unknown.key = "graph @g { not a graph";
  unknown.work = 3;
  CostModel::repriceOnPaper(unknown);
  EXPECT_EQ(unknown.work, 3);
}
