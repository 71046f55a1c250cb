//===- graph-opt-costdb.cpp - The operator cost database's tool -----------===//
//
//   graph-opt-costdb measure   --db F [--source NAME] model.pt2 ... sweep.json ...
//   graph-opt-costdb attribute --db F [--leave-out | --exclude-source S] [--tolerance T]
//                              [--calibrate N] [--context nearest|none] model.pt2
//   graph-opt-costdb fill      --db F [--target 0.9] [--time-budget S] model.pt2
//   graph-opt-costdb show      --db F
//
// measure: every distinct operator configuration of the given graphs (.pt2,
// .pt, .gir) and sweep files (.json: a .gir template with ranges, every
// combination), each timed on this machine (Cost/OperatorTiming.h) and
// stored (Cost/CostDatabase.h); a configuration already measured here is
// not measured again (--remeasure does). attribute: the model's step
// predicted node by node from the database, calibrated to the machine's speed
// now (Cost/SpeedCalibration.h), and set against its profile
// (Cost/Attribution.h). fill: the accuracy loop (Fill.h): measure what
// the model's step misses most, with its neighbours, until the share of its
// node time predicted within the tolerance reaches the target. show: what the
// database holds. docs/CostDB.md.
//
// Exit codes: 0 done, 1 some configurations failed to run (the rest are
// stored), 2 bad input or usage, 3 fill stopped short of its target.
//
//===----------------------------------------------------------------------===//
#include "Fill.h"
#include "MeasureConfig.h"
#include "SweepFile.h"

#include "graphopt/Cost/Attribution.h"
#include "graphopt/Cost/CostDatabase.h"
#include "graphopt/Cost/OperatorConfig.h"
#include "graphopt/Cost/OperatorTiming.h"
#include "graphopt/Cost/SpeedCalibration.h"
#include "graphopt/Import/Importer.h"
#include "graphopt/Pass/AnalysisManager.h"
#include "graphopt/Runtime/CudaBackend.h"
#include "graphopt/Runtime/EnergyMeter.h"
#include "graphopt/Support/FileIO.h"
#include "graphopt/Support/Statistics.h"

#include <ATen/Parallel.h>
#include <absl/strings/str_cat.h>
#include <llvm/ADT/MapVector.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/InitLLVM.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/WithColor.h>

#include <map>
#include <optional>
#include <set>

using namespace graphopt;
namespace cl = llvm::cl;

namespace {

constexpr int kOk = 0, kSomeFailed = 1, kBadInput = 2, kTargetNotMet = 3;

cl::SubCommand measureCmd("measure", "Time every operator configuration of graphs and sweeps");
cl::SubCommand attributeCmd("attribute", "Predict a model's step from the database, against its profile");
cl::SubCommand showCmd("show", "What the database holds");
cl::SubCommand fillCmd("fill", "Measure what a model's step misses until it is predicted "
                               "(the accuracy loop)");

cl::opt<std::string> dbPath("db", cl::desc("The cost database (SQLite; measure makes it)"),
                            cl::value_desc("file"), cl::Required, cl::sub(measureCmd),
                            cl::sub(attributeCmd), cl::sub(showCmd), cl::sub(fillCmd));
cl::opt<std::string> deviceName("device", cl::desc("cpu or cuda (default: cuda where a GPU is)"),
                                cl::sub(measureCmd), cl::sub(attributeCmd), cl::sub(showCmd), cl::sub(fillCmd));
cl::opt<unsigned> threads("threads",
                          cl::desc("Intra-op threads (default torch's); part of the machine's key"),
                          cl::init(0), cl::sub(measureCmd), cl::sub(attributeCmd), cl::sub(showCmd), cl::sub(fillCmd));

cl::list<std::string> measureInputs(cl::Positional, cl::desc("<model.pt2|.pt|.gir|sweep.json>..."),
                                    cl::OneOrMore, cl::sub(measureCmd));
cl::opt<std::string> sourceName("source",
                                cl::desc("The source name recorded (default: the file's stem; "
                                         "sweeps: sweep:<file stem>:<name>); one input only"),
                                cl::sub(measureCmd), cl::sub(fillCmd));
cl::opt<double> minTime("min-time", cl::desc("Seconds each configuration is timed at least"),
                        cl::init(0.02), cl::sub(measureCmd), cl::sub(fillCmd));
cl::opt<unsigned> minRuns("min-runs", cl::desc("Timed runs of each configuration at least"),
                          cl::init(5), cl::sub(measureCmd), cl::sub(fillCmd));
cl::opt<bool> remeasure("remeasure", cl::desc("Measure configurations the database already has"),
                        cl::sub(measureCmd), cl::sub(fillCmd));
cl::opt<unsigned> maxSweep("max-sweep",
                           cl::desc("Refuse a sweep of more instances than this (default 5000)"),
                           cl::init(5000), cl::sub(measureCmd));
cl::opt<bool> measureNeighbours("neighbours",
                                cl::desc("Measure each configuration at nearby sizes too "
                                         "(recorded under SOURCE:neighbours)"),
                                cl::sub(measureCmd));
cl::opt<bool> measureInStep("in-step",
                            cl::desc("Also profile each model (--runs) and record each "
                                     "configuration's time inside its step"),
                            cl::sub(measureCmd));
cl::opt<bool> verbose("v", cl::desc("A line per configuration measured"), cl::sub(measureCmd), cl::sub(fillCmd));

cl::opt<std::string> attributeInput(cl::Positional, cl::desc("<model.pt2|.pt|.gir>"), cl::Required,
                                    cl::sub(attributeCmd));
cl::opt<bool> leaveOut("leave-out",
                       cl::desc("Leave out measurements found only in this model's own graph "
                                "(its source name: the file's stem)"),
                       cl::sub(attributeCmd));
cl::list<std::string> excludeSources("exclude-source",
                                     cl::desc("Leave out measurements found only in these sources"),
                                     cl::sub(attributeCmd));
cl::opt<bool> noProfile("no-profile",
                        cl::desc("Predict only: do not run the model (no measured figures)"),
                        cl::sub(attributeCmd));
cl::opt<unsigned> calibrateProbes(
    "calibrate",
    cl::desc("Re-time this many of the database's configurations, before and after the profile, "
             "and scale the predictions by how much slower or faster the machine runs now "
             "(default 32; 0: predict from the stored times as they are)"),
    cl::init(32), cl::sub(attributeCmd));
cl::opt<CostModel::Context> contextMode(
    "context", cl::desc("How an isolated prediction is brought into the step (docs/CostDB.md)"),
    cl::values(clEnumValN(CostModel::Context::Nearest, "nearest",
                          "by the operator's nearest configurations timed both ways (default)"),
               clEnumValN(CostModel::Context::None, "none", "isolated times as they are")),
    cl::init(CostModel::Context::Nearest), cl::sub(attributeCmd));
cl::opt<unsigned> profileRuns("runs", cl::desc("Measured runs of the model's profile"), cl::init(5),
                              cl::sub(attributeCmd), cl::sub(fillCmd), cl::sub(measureCmd));
cl::opt<double> tolerance("tolerance",
                          cl::desc("A node's prediction is accurate within this share of what it "
                                   "measured (default 0.25)"),
                          cl::init(kAccuracyTolerance), cl::sub(attributeCmd), cl::sub(fillCmd));
cl::opt<std::string> fillInput(cl::Positional, cl::desc("<model.pt2|.pt|.gir>"), cl::Required,
                               cl::sub(fillCmd));
cl::opt<double> fillTarget("target",
                           cl::desc("The share of the measured node time to predict within "
                                    "--tolerance (default 0.9)"),
                           cl::init(0.9), cl::sub(fillCmd));
cl::opt<double> fillBudget("time-budget",
                           cl::desc("Seconds after which no more is measured (default 600)"),
                           cl::init(600), cl::sub(fillCmd));
cl::opt<unsigned> fillPerRound("per-round",
                               cl::desc("Configurations measured per round, those carrying the "
                                        "most missed time (default 8)"),
                               cl::init(8), cl::sub(fillCmd));
cl::opt<unsigned> fillRounds("rounds", cl::desc("Rounds at most (default 20)"), cl::init(20),
                             cl::sub(fillCmd));
cl::opt<bool> fillNeighbours("neighbours",
                             cl::desc("Measure each configuration's neighbours at nearby sizes "
                                      "too (default true)"),
                             cl::init(true), cl::sub(fillCmd));
cl::opt<std::string> csvPath("csv", cl::desc("Write the per-node attribution as CSV"),
                             cl::sub(attributeCmd));
cl::opt<std::string> jsonPath("json", cl::desc("Write the totals and per-operator table as JSON"),
                              cl::sub(attributeCmd));

int fail(llvm::StringRef message, int code = kBadInput) {
  llvm::WithColor::error(llvm::errs(), "graph-opt-costdb") << message << '\n';
  return code;
}

int failTolerance() {
  return fail(absl::StrCat("--tolerance must be above 0 (a share such as 0.25), not ",
                           tolerance.getValue()));
}

absl::StatusOr<c10::Device> chosenDevice() { return deviceFromOption(deviceName); }

OperatorTimingOptions timingOptions(c10::Device device) {
  OperatorTimingOptions timing;
  timing.device = device;
  timing.minSeconds = minTime;
  timing.minRuns = minRuns;
  return timing;
}

std::string stem(llvm::StringRef path) { return llvm::sys::path::stem(path).str(); }

/// A graph to measure, with the source name its configurations are recorded under.
struct Source {
  std::string name;
  std::unique_ptr<Graph> graph;
  /// A model's file as imported (its graph is `graph`, moved out): what
  /// --in-step profiles. Null for a sweep's instance.
  std::unique_ptr<ImportedModel> model;
};

/// Every instance of a sweep file (SweepFile.h), each under its sweep's source name.
absl::StatusOr<std::vector<Source>> expandSweeps(const std::string &path) {
  auto instances = expandSweepFile(path, maxSweep);
  if (!instances.ok())
    return instances.status();
  std::vector<Source> out;
  for (SweepInstance &i : *instances) {
    Source source;
    source.name = sourceName.empty() ? absl::StrCat("sweep:", stem(path), ":", i.sweep)
                                     : sourceName.getValue();
    source.graph = std::move(i.graph);
    out.push_back(std::move(source));
  }
  return out;
}

absl::StatusOr<std::vector<Source>> readSources(const std::string &path) {
  if (llvm::StringRef(path).endswith(".json"))
    return expandSweeps(path);
  auto model = importModel(path);
  if (!model.ok())
    return model.status();
  std::vector<Source> out(1);
  out[0].name = sourceName.empty() ? stem(path) : sourceName.getValue();
  out[0].graph = std::move(model->graph);
  out[0].model = std::make_unique<ImportedModel>(std::move(*model));
  return out;
}

/// What measure and fill start from: the database (made if missing), this
/// machine's row in it, the energy meter where there is one.
struct Measuring {
  c10::Device device;
  MachineInfo here;
  std::unique_ptr<CostDatabase> db;
  std::unique_ptr<EnergyMeter> meter;
  std::string whyNoMeter;
  std::optional<ConfigMeasurer> measurer;
};

absl::StatusOr<std::unique_ptr<Measuring>> startMeasuring() {
  auto device = chosenDevice();
  if (!device.ok())
    return device.status();
  auto db = CostDatabase::open(dbPath, /*create=*/true);
  if (!db.ok())
    return db.status();
  auto m = std::make_unique<Measuring>(Measuring{*device, MachineInfo::current(*device),
                                                 std::move(*db), nullptr, "", std::nullopt});
  m->meter = findEnergyMeter(m->device, &m->whyNoMeter);
  auto machine = m->db->machine(m->here);
  if (!machine.ok())
    return machine.status();
  m->measurer.emplace(ConfigMeasurer{*m->db, *machine, timingOptions(m->device), m->meter.get(),
                                     remeasure, verbose});
  return m;
}

/// A distinct configuration of a source, with how many nodes make it.
struct Found {
  std::string source;
  OperatorConfig config;
  int64_t nodes = 0;
  std::vector<size_t> ranks; ///< its nodes' positions in a model's graph
};

/// What one input's graphs hold.
struct FoundConfigs {
  std::vector<Found> found; ///< by source + key, in the order found
  std::map<std::string, std::pair<size_t, std::string>> unmeasurable; ///< op: nodes, why
  size_t nodes = 0;
};

/// measure's first step: the distinct configurations per source, with how many nodes make
/// each, and the operators that have none.
FoundConfigs findConfigs(const std::vector<Source> &sources) {
  FoundConfigs out;
  llvm::StringMap<size_t> foundIndex;
  for (const Source &s : sources) {
    size_t rank = 0;
    for (const Node &n : s.graph->nodes()) {
      ++out.nodes;
      ++rank;
      auto config = operatorConfigOf(n);
      if (!config.ok()) {
        auto &u = out.unmeasurable[n.opName()];
        ++u.first;
        u.second = std::string(config.status().message());
        continue;
      }
      std::string id = s.name + '\n' + config->key;
      auto [it, fresh] = foundIndex.try_emplace(id, out.found.size());
      if (fresh) {
        out.found.emplace_back();
        out.found.back().source = s.name;
        out.found.back().config = std::move(*config);
      }
      ++out.found[it->second].nodes;
      out.found[it->second].ranks.push_back(rank - 1);
    }
  }
  return out;
}

/// What measuring one input's configurations came to.
struct MeasuredCounts {
  size_t measured = 0, already = 0, neighbours = 0, failed = 0;
};

/// measure's timing step: each configuration, then (--neighbours) each at nearby sizes
/// (ConfigNeighbours.h), under SOURCE:neighbours.
absl::StatusOr<MeasuredCounts> measureFound(const std::vector<Found> &found,
                                            const std::string &input, ConfigMeasurer &measurer) {
  MeasuredCounts counts;
  for (const Found &f : found) {
    auto outcome = measurer.measure(f.config, f.source, f.nodes, input);
    if (!outcome.ok())
      return outcome.status();
    counts.measured += *outcome == ConfigMeasurer::Outcome::Measured;
    counts.already += *outcome == ConfigMeasurer::Outcome::Already;
    counts.failed += *outcome == ConfigMeasurer::Outcome::Failed;
  }
  for (size_t i = 0; measureNeighbours && i < found.size(); ++i)
    for (const OperatorConfig &n : neighbourConfigs(found[i].config)) {
      const Found &f = found[i];
      auto outcome = measurer.measure(n, f.source + ":neighbours", 0, input);
      if (!outcome.ok())
        return outcome.status();
      counts.neighbours += *outcome == ConfigMeasurer::Outcome::Measured;
      counts.failed += *outcome == ConfigMeasurer::Outcome::Failed;
    }
  return counts;
}

/// measure's --in-step step: the model profiled, each configuration's median time inside
/// its step recorded; how many were.
absl::StatusOr<size_t> recordInStep(Source &s, const std::vector<Found> &found,
                                    const std::string &input, c10::Device device,
                                    ConfigMeasurer &measurer) {
  s.model->graph = std::move(s.graph); // the profile runs the model as imported
  AnalysisManager analyses;
  auto profile = profileForAttribution(*s.model, input, device, profileRuns, analyses);
  if (!profile.ok())
    return profile.status();
  size_t recorded = 0;
  for (const Found &f : found) {
    std::vector<double> times;
    for (size_t r : f.ranks)
      if (r < (*profile)->nodes.size())
        times.push_back((*profile)->nodes[r].seconds);
    if (times.empty())
      continue;
    InStepSample sample{f.source, medianOf(std::move(times)), f.nodes};
    absl::Status st = measurer.putInStep(f.config, sample);
    if (!st.ok())
      return st;
    ++recorded;
  }
  return recorded;
}

int measure() {
  if (!sourceName.empty() && measureInputs.size() > 1)
    return fail("--source names the source of one input; give one input with it");
  auto setup = startMeasuring();
  if (!setup.ok())
    return fail(std::string(setup.status().message()));
  auto &[device, here, db, meter, whyNoMeter, measurerSlot] = **setup;
  ConfigMeasurer &measurer = *measurerSlot;
  llvm::outs() << "measuring on " << here.describe() << "; energy: "
               << (meter ? meter->source() : "no sensor found: " + whyNoMeter) << "\n";
  bool anyFailed = false;
  for (const std::string &input : measureInputs) {
    auto sources = readSources(input);
    if (!sources.ok())
      return fail(std::string(sources.status().message()));
    FoundConfigs configs = findConfigs(*sources);
    const std::vector<Found> &found = configs.found;
    auto counts = measureFound(found, input, measurer);
    if (!counts.ok())
      return fail(std::string(counts.status().message()));
    // Each configuration's time inside the model's step (a model, not a sweep).
    size_t inStepRecorded = 0;
    if (measureInStep && sources->size() == 1 && (*sources)[0].model) {
      auto recorded = recordInStep((*sources)[0], found, input, device, measurer);
      if (!recorded.ok())
        return fail(std::string(recorded.status().message()));
      inStepRecorded = *recorded;
    }
    anyFailed |= counts->failed > 0;
    llvm::outs() << input << ": " << configs.nodes << " nodes, " << found.size()
                 << " configurations: " << counts->measured << " measured, " << counts->already
                 << " already in the database"
                 << (measureNeighbours
                         ? absl::StrCat(", ", counts->neighbours, " neighbours measured")
                         : "")
                 << (measureInStep ? absl::StrCat(", ", inStepRecorded, " timed in the step")
                                   : "")
                 << (counts->failed ? absl::StrCat(", ", counts->failed, " failed") : "") << "\n";
    for (auto &[op, u] : configs.unmeasurable)
      llvm::outs() << "  not measured: " << op << " (" << u.first << " nodes): " << u.second << "\n";
  }
  auto counts = db->counts();
  if (counts.ok())
    llvm::outs() << dbPath << ": " << counts->configs << " configurations, "
                 << counts->measurements << " measurements on " << counts->machines
                 << " machines, from " << counts->sources << " sources\n";
  return anyFailed ? kSomeFailed : kOk;
}

/// attribute's warning where the machine's speed is not calibrated.
void warnNotCalibrated(const absl::Status &why) {
  llvm::WithColor::warning(llvm::errs(), "graph-opt-costdb")
      << dbPath << ": not calibrated: " << std::string(why.message()) << "\n";
}

/// Times the calibration's probes again (`how`); a failure ends the calibration.
void retime(std::optional<SpeedCalibration> &speed, const OperatorTimingOptions &how) {
  if (!speed)
    return;
  if (absl::Status st = speed->retime(how); !st.ok()) {
    warnNotCalibrated(st);
    speed.reset();
  }
}

/// attribute's calibration step: the probes (--calibrate) that the step's predictions rest
/// on, else any of the database's; none with --calibrate=0 or where none can be picked.
std::optional<SpeedCalibration> pickProbes(const Graph &graph, const CostModel &model) {
  std::optional<SpeedCalibration> speed;
  if (calibrateProbes > 0) {
    auto picked = SpeedCalibration::pickForStep(attributeStep(graph, model, nullptr, tolerance),
                                                calibrateProbes);
    if (!picked.ok())
      picked = SpeedCalibration::pick(model, calibrateProbes);
    if (picked.ok())
      speed = std::move(*picked);
    else
      warnNotCalibrated(picked.status());
  }
  return speed;
}

/// attribute's profiling step: the model's profile (none with --no-profile), the probes
/// timed before each of its runs, interleaved with them, or once without a profile.
absl::StatusOr<const ProfileResult *> profileCalibrated(ImportedModel &imported,
                                                        c10::Device device,
                                                        std::optional<SpeedCalibration> &speed,
                                                        AnalysisManager &analyses) {
  OperatorTimingOptions timing;
  timing.device = device;
  if (noProfile) {
    retime(speed, timing);
    return static_cast<const ProfileResult *>(nullptr);
  }
  // Between runs, each probe timed briefly: the runs give it many timings.
  OperatorTimingOptions brief = timing;
  brief.warmupRuns = 1;
  brief.minRuns = 2;
  brief.minSeconds = 0.005;
  std::function<absl::Status(unsigned)> beforeRun;
  if (speed)
    beforeRun = [&](unsigned) {
      retime(speed, brief);
      return absl::OkStatus();
    };
  auto result = profileForAttribution(imported, attributeInput, device, profileRuns, analyses,
                                      std::move(beforeRun));
  if (!result.ok())
    return result.status();
  return *result;
}

/// attribute's report: the model and the sources left out, the attribution, then the
/// --csv and --json files.
int reportAttribution(const StepAttribution &a, const std::set<std::string> &excluded) {
  llvm::outs() << attributeInput << (excluded.empty() ? "" : " (leaving out: ");
  if (!excluded.empty()) {
    bool first = true;
    for (const std::string &s : excluded)
      llvm::outs() << (first ? "" : ", ") << s, first = false;
    llvm::outs() << ")";
  }
  llvm::outs() << "\n";
  printAttribution(llvm::outs(), a);
  if (!csvPath.empty())
    if (absl::Status st = writeFileAtomically(csvPath, attributionCsv(a)); !st.ok())
      return fail(std::string(st.message()));
  if (!jsonPath.empty())
    if (absl::Status st = writeFileAtomically(jsonPath, attributionJson(a, attributeInput));
        !st.ok())
      return fail(std::string(st.message()));
  return kOk;
}

int attribute() {
  if (!(tolerance > 0))
    return failTolerance();
  auto device = chosenDevice();
  if (!device.ok())
    return fail(std::string(device.status().message()));
  std::set<std::string> excluded(excludeSources.begin(), excludeSources.end());
  if (leaveOut)
    excluded.insert(stem(attributeInput));
  auto model = loadCostModel(dbPath, *device, excluded);
  if (!model.ok())
    return fail(std::string(model.status().message()));
  model->setContext(contextMode);
  auto imported = importModel(attributeInput);
  if (!imported.ok())
    return fail(std::string(imported.status().message()));
  const Graph &graph = *imported->graph;

  // The machine's speed now against the database's (SpeedCalibration.h): the
  // measurements the step's predictions rest on, timed before each of the
  // profile's runs, interleaved with them (a shared host's speed moves within
  // seconds; probes timed only before and after the profile missed it by as
  // much as 1.45x against 1.0x), or once without a profile.
  std::optional<SpeedCalibration> speed = pickProbes(graph, *model);
  AnalysisManager analyses;
  auto profile = profileCalibrated(*imported, *device, speed, analyses);
  if (!profile.ok())
    return fail(std::string(profile.status().message()));
  if (speed)
    model->setSpeed(speed->factor());
  StepAttribution a = attributeStep(graph, *model, *profile, tolerance);
  if (speed) {
    a.speedProbes = speed->probes();
    a.speedQ1 = speed->q1();
    a.speedQ3 = speed->q3();
  }
  return reportAttribution(a, excluded);
}

int fill() {
  if (!(tolerance > 0))
    return failTolerance();
  if (!(fillTarget > 0 && fillTarget <= 1))
    return fail(absl::StrCat("--target must be a share in (0, 1], not ", fillTarget.getValue()));
  if (fillPerRound == 0)
    return fail("--per-round must be at least 1");
  auto setup = startMeasuring();
  if (!setup.ok())
    return fail(std::string(setup.status().message()));
  auto &[device, here, db, meter, whyNoMeter, measurerSlot] = **setup;
  ConfigMeasurer &measurer = *measurerSlot;
  llvm::outs() << "filling " << dbPath << " on " << here.describe() << "\n";
  FillOptions options;
  options.target = fillTarget;
  options.tolerance = tolerance;
  options.budgetSeconds = fillBudget;
  options.perRound = fillPerRound;
  options.maxRounds = fillRounds;
  options.neighbours = fillNeighbours;
  options.profileRuns = profileRuns;
  options.source = sourceName;
  auto result = fillDatabase(dbPath, fillInput, device, measurer, options, llvm::outs());
  if (!result.ok())
    return fail(std::string(result.status().message()));
  if (!result->targetMet)
    return kTargetNotMet;
  return result->failed ? kSomeFailed : kOk;
}

int show() {
  auto db = CostDatabase::open(dbPath, /*create=*/false);
  if (!db.ok())
    return fail(std::string(db.status().message()));
  auto counts = (*db)->counts();
  auto machines = (*db)->machines();
  if (!counts.ok() || !machines.ok())
    return fail(std::string((counts.ok() ? machines.status() : counts.status()).message()));
  llvm::outs() << dbPath << ": schema version " << kCostDatabaseSchemaVersion << ", "
               << counts->configs << " configurations, " << counts->measurements
               << " measurements, " << counts->failures << " failures, from " << counts->sources
               << " sources; " << counts->inStep << " in-step times\n";
  for (const auto &[id, m] : *machines) {
    auto entries = (*db)->entries(id);
    if (!entries.ok())
      return fail(std::string(entries.status().message()));
    llvm::MapVector<llvm::StringRef, size_t> perOp;
    size_t withEnergy = 0;
    for (const CostEntry &e : *entries) {
      ++perOp[e.op];
      withEnergy += e.measured.joulesPerCall.has_value();
    }
    llvm::outs() << "machine " << id << ": " << m.describe() << ": " << entries->size()
                 << " measurements of " << perOp.size() << " operators, " << withEnergy
                 << " with energy\n";
  }
  return kOk;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv,
                              "graph-opt-costdb: the operator cost database (docs/CostDB.md)\n");
  if (threads)
    at::set_num_threads(static_cast<int>(threads));
  if (measureCmd)
    return measure();
  if (attributeCmd)
    return attribute();
  if (showCmd)
    return show();
  if (fillCmd)
    return fill();
  return fail("give a subcommand: measure, attribute, fill or show (--help lists them)");
}
