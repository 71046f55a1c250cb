//===- CostDatabase.cpp - Measured operator costs, kept in SQLite ---------===//
#include "graphopt/Cost/CostDatabase.h"
#include "graphopt/Cost/LearnedCost.h"
#include "graphopt/Cost/OperatorConfig.h"
#include "graphopt/IR/Parser.h"

#include "graphopt/Runtime/Benchmark.h"

#include <ATen/Parallel.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <absl/strings/str_split.h>
#include <torch/headeronly/version.h>

#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <unordered_map>

namespace graphopt {

namespace {

const char *kSchema = R"sql(
CREATE TABLE machines(
  id INTEGER PRIMARY KEY,
  cpu TEXT NOT NULL, threads INTEGER NOT NULL, torch_version TEXT NOT NULL, device TEXT NOT NULL,
  UNIQUE(cpu, threads, torch_version, device));
CREATE TABLE configs(
  id INTEGER PRIMARY KEY,
  op TEXT NOT NULL, family TEXT NOT NULL, dims TEXT NOT NULL, constants TEXT NOT NULL,
  flops REAL NOT NULL, bytes_moved INTEGER NOT NULL, compute_bound INTEGER NOT NULL,
  work REAL NOT NULL, key TEXT NOT NULL UNIQUE);
CREATE INDEX configs_family ON configs(family);
CREATE TABLE sources(
  config_id INTEGER NOT NULL REFERENCES configs(id), source TEXT NOT NULL,
  nodes INTEGER NOT NULL, PRIMARY KEY(config_id, source));
CREATE TABLE measurements(
  config_id INTEGER NOT NULL REFERENCES configs(id),
  machine_id INTEGER NOT NULL REFERENCES machines(id),
  median_s REAL NOT NULL, q1_s REAL NOT NULL, q3_s REAL NOT NULL, min_s REAL NOT NULL,
  runs INTEGER NOT NULL, total_s REAL NOT NULL,
  joules REAL, energy_source TEXT, measured_at TEXT NOT NULL,
  PRIMARY KEY(config_id, machine_id));
CREATE TABLE failures(
  config_id INTEGER NOT NULL REFERENCES configs(id),
  machine_id INTEGER NOT NULL REFERENCES machines(id),
  reason TEXT NOT NULL, PRIMARY KEY(config_id, machine_id));
)sql";

/// Version 2's addition, also what a version-1 file gains when opened.
const char *kInStepSchema = R"sql(
CREATE TABLE in_step(
  config_id INTEGER NOT NULL REFERENCES configs(id),
  machine_id INTEGER NOT NULL REFERENCES machines(id),
  source TEXT NOT NULL, median_s REAL NOT NULL, nodes INTEGER NOT NULL,
  measured_at TEXT NOT NULL,
  PRIMARY KEY(config_id, machine_id, source));
)sql";

/// A prepared statement, finalized when it goes.
class Statement {
public:
  Statement(sqlite3 *db, const char *sql) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK)
      stmt_ = nullptr;
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  bool ok() const { return stmt_ != nullptr; }
  Statement &bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Statement &bind(int i, double v) {
    sqlite3_bind_double(stmt_, i, v);
    return *this;
  }
  Statement &bind(int i, llvm::StringRef v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Statement &bindNull(int i) {
    sqlite3_bind_null(stmt_, i);
    return *this;
  }
  /// SQLITE_ROW, SQLITE_DONE or an error code.
  int step() { return sqlite3_step(stmt_); }
  int64_t integer(int col) const { return sqlite3_column_int64(stmt_, col); }
  double real(int col) const { return sqlite3_column_double(stmt_, col); }
  bool isNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::string text(int col) const {
    const unsigned char *t = sqlite3_column_text(stmt_, col);
    return t ? std::string(reinterpret_cast<const char *>(t)) : std::string();
  }

private:
  sqlite3_stmt *stmt_ = nullptr;
};

std::string nowUtc() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::vector<int64_t> parseDims(llvm::StringRef text) {
  std::vector<int64_t> dims;
  for (absl::string_view part : absl::StrSplit(absl::string_view(text.data(), text.size()), ',',
                                               absl::SkipEmpty())) {
    int64_t v = 0;
    if (absl::SimpleAtoi(part, &v))
      dims.push_back(v);
  }
  return dims;
}

} // namespace

MachineInfo MachineInfo::current(c10::Device device) {
  MachineInfo m;
  m.cpu = cpuModel();
  m.threads = at::get_num_threads();
  m.torchVersion = TORCH_VERSION;
  m.device = device.str();
  return m;
}

std::string MachineInfo::describe() const {
  return absl::StrCat(device, " (", cpu, ", ", threads, " threads, torch ", torchVersion, ")");
}

absl::StatusOr<std::unique_ptr<CostDatabase>> CostDatabase::open(const std::string &path,
                                                                 bool create) {
  sqlite3 *db = nullptr;
  int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
  if (sqlite3_open_v2(path.c_str(), &db, flags, nullptr) != SQLITE_OK) {
    std::string why = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return absl::NotFoundError(absl::StrCat(path, ": cannot open the cost database: ", why,
                                            create ? "" : " (graph-opt-costdb measure makes one)"));
  }
  std::unique_ptr<CostDatabase> self(new CostDatabase(db, path));
  sqlite3_busy_timeout(db, 10000);
  Statement version(db, "PRAGMA user_version");
  if (!version.ok() || version.step() != SQLITE_ROW)
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a cost database (", sqlite3_errmsg(db), ")"));
  int64_t v = version.integer(0);
  if (v == 0) {
    // A new file, or an SQLite database of something else.
    Statement tables(db, "SELECT count(*) FROM sqlite_master");
    if (!tables.ok() || tables.step() != SQLITE_ROW)
      return self->error("cannot read the schema");
    if (tables.integer(0) != 0)
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": an SQLite database, but not a cost database (no schema version)"));
    if (!create)
      return absl::InvalidArgumentError(absl::StrCat(path, ": an empty database"));
    if (absl::Status st = self->begin(); !st.ok())
      return st;
    if (absl::Status st = self->exec(kSchema); !st.ok())
      return st;
    if (absl::Status st = self->exec(kInStepSchema); !st.ok())
      return st;
    if (absl::Status st = self->exec(
            absl::StrCat("PRAGMA user_version = ", kCostDatabaseSchemaVersion).c_str());
        !st.ok())
      return st;
    if (absl::Status st = self->commit(); !st.ok())
      return st;
  } else if (v == 1) {
    // Version 2 only adds the in_step table: upgrade in place, in one transaction.
    absl::Status st = self->begin();
    if (st.ok())
      st = self->exec(kInStepSchema);
    if (st.ok())
      st = self->exec(absl::StrCat("PRAGMA user_version = ", kCostDatabaseSchemaVersion).c_str());
    if (st.ok())
      st = self->commit();
    if (!st.ok()) {
      self->rollback();
      return absl::Status(st.code(), absl::StrCat(path, ": cannot upgrade the cost database from "
                                                        "version 1: ",
                                                  st.message()));
    }
  } else if (v != kCostDatabaseSchemaVersion) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": cost database schema version ", v,
                                                   "; this graph-opt reads version ",
                                                   kCostDatabaseSchemaVersion));
  }
  return self;
}

CostDatabase::~CostDatabase() { sqlite3_close(db_); }

absl::Status CostDatabase::error(llvm::StringRef what) const {
  return absl::InternalError(absl::StrCat(path_, ": ", what.str(), ": ", sqlite3_errmsg(db_)));
}

absl::Status CostDatabase::exec(const char *sql) {
  char *message = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &message) != SQLITE_OK) {
    std::string why = message ? message : "unknown error";
    sqlite3_free(message);
    return absl::InternalError(absl::StrCat(path_, ": ", why));
  }
  return absl::OkStatus();
}

absl::Status CostDatabase::begin() { return exec("BEGIN IMMEDIATE"); }
absl::Status CostDatabase::commit() { return exec("COMMIT"); }
void CostDatabase::rollback() { (void)exec("ROLLBACK"); }

absl::StatusOr<std::optional<int64_t>> CostDatabase::findMachine(const MachineInfo &m) {
  Statement find(db_, "SELECT id FROM machines WHERE cpu=?1 AND threads=?2 AND torch_version=?3 "
                      "AND device=?4");
  if (!find.ok())
    return error("cannot look up the machine");
  find.bind(1, m.cpu).bind(2, static_cast<int64_t>(m.threads)).bind(3, m.torchVersion)
      .bind(4, m.device);
  if (find.step() == SQLITE_ROW)
    return std::optional<int64_t>(find.integer(0));
  return std::optional<int64_t>();
}

absl::StatusOr<int64_t> CostDatabase::machine(const MachineInfo &m) {
  auto found = findMachine(m);
  if (!found.ok())
    return found.status();
  if (*found)
    return **found;
  Statement add(db_, "INSERT INTO machines(cpu, threads, torch_version, device) "
                     "VALUES (?1, ?2, ?3, ?4)");
  add.bind(1, m.cpu).bind(2, static_cast<int64_t>(m.threads)).bind(3, m.torchVersion)
      .bind(4, m.device);
  if (!add.ok() || add.step() != SQLITE_DONE)
    return error("cannot add the machine");
  return static_cast<int64_t>(sqlite3_last_insert_rowid(db_));
}

absl::StatusOr<std::vector<std::pair<int64_t, MachineInfo>>> CostDatabase::machines() {
  Statement all(db_, "SELECT id, cpu, threads, torch_version, device FROM machines ORDER BY id");
  if (!all.ok())
    return error("cannot read the machines");
  std::vector<std::pair<int64_t, MachineInfo>> out;
  while (all.step() == SQLITE_ROW) {
    MachineInfo m;
    m.cpu = all.text(1);
    m.threads = static_cast<int>(all.integer(2));
    m.torchVersion = all.text(3);
    m.device = all.text(4);
    out.emplace_back(all.integer(0), std::move(m));
  }
  return out;
}

absl::StatusOr<int64_t> CostDatabase::config(const OperatorConfig &c) {
  Statement find(db_, "SELECT id FROM configs WHERE key=?1");
  if (!find.ok())
    return error("cannot look up a configuration");
  find.bind(1, c.key);
  if (find.step() == SQLITE_ROW)
    return find.integer(0);
  Statement add(db_, "INSERT INTO configs(op, family, dims, constants, flops, bytes_moved, "
                     "compute_bound, work, key) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
  add.bind(1, c.op).bind(2, c.family).bind(3, absl::StrJoin(c.dims, ",")).bind(4, c.constants)
      .bind(5, c.flops).bind(6, c.bytesMoved).bind(7, static_cast<int64_t>(c.computeBound))
      .bind(8, c.work).bind(9, c.key);
  if (!add.ok() || add.step() != SQLITE_DONE)
    return error(absl::StrCat("cannot add a configuration of ", c.op));
  return static_cast<int64_t>(sqlite3_last_insert_rowid(db_));
}

absl::Status CostDatabase::setSource(int64_t config, llvm::StringRef source, int64_t count) {
  Statement put(db_, "INSERT OR REPLACE INTO sources(config_id, source, nodes) VALUES (?1, ?2, ?3)");
  put.bind(1, config).bind(2, source).bind(3, count);
  if (!put.ok() || put.step() != SQLITE_DONE)
    return error("cannot record a source");
  return absl::OkStatus();
}

absl::StatusOr<bool> CostDatabase::measured(int64_t config, int64_t machine) {
  Statement find(db_, "SELECT 1 FROM measurements WHERE config_id=?1 AND machine_id=?2 UNION ALL "
                      "SELECT 1 FROM failures WHERE config_id=?1 AND machine_id=?2");
  if (!find.ok())
    return error("cannot look up a measurement");
  find.bind(1, config).bind(2, machine);
  return find.step() == SQLITE_ROW;
}

absl::Status CostDatabase::putMeasurement(int64_t config, int64_t machine,
                                          const MeasurementRecord &m) {
  Statement put(db_, "INSERT OR REPLACE INTO measurements(config_id, machine_id, median_s, q1_s, "
                     "q3_s, min_s, runs, total_s, joules, energy_source, measured_at) VALUES "
                     "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)");
  put.bind(1, config).bind(2, machine).bind(3, m.medianSeconds).bind(4, m.q1Seconds)
      .bind(5, m.q3Seconds).bind(6, m.minSeconds).bind(7, static_cast<int64_t>(m.runs))
      .bind(8, m.totalSeconds);
  if (m.joulesPerCall)
    put.bind(9, *m.joulesPerCall).bind(10, m.energySource);
  else
    put.bindNull(9).bindNull(10);
  put.bind(11, nowUtc());
  if (!put.ok() || put.step() != SQLITE_DONE)
    return error("cannot store a measurement");
  Statement clear(db_, "DELETE FROM failures WHERE config_id=?1 AND machine_id=?2");
  clear.bind(1, config).bind(2, machine);
  if (!clear.ok() || clear.step() != SQLITE_DONE)
    return error("cannot clear a failure");
  return absl::OkStatus();
}

absl::Status CostDatabase::putFailure(int64_t config, int64_t machine, llvm::StringRef why) {
  Statement put(db_, "INSERT OR REPLACE INTO failures(config_id, machine_id, reason) "
                     "VALUES (?1, ?2, ?3)");
  put.bind(1, config).bind(2, machine).bind(3, why);
  if (!put.ok() || put.step() != SQLITE_DONE)
    return error("cannot record a failure");
  return absl::OkStatus();
}

absl::Status CostDatabase::putInStep(int64_t config, int64_t machine, const InStepSample &sample) {
  Statement put(db_, "INSERT OR REPLACE INTO in_step(config_id, machine_id, source, median_s, "
                     "nodes, measured_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
  put.bind(1, config).bind(2, machine).bind(3, sample.source).bind(4, sample.medianSeconds)
      .bind(5, sample.nodes).bind(6, nowUtc());
  if (!put.ok() || put.step() != SQLITE_DONE)
    return error("cannot record an in-step time");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<CostEntry>> CostDatabase::entries(int64_t machine) {
  Statement all(db_, "SELECT c.id, c.op, c.family, c.key, c.constants, c.dims, c.work, m.median_s, "
                     "m.q1_s, m.q3_s, m.min_s, m.runs, m.total_s, m.joules, m.energy_source, "
                     "(SELECT group_concat(source, char(10)) FROM sources s WHERE "
                     "s.config_id = c.id), c.flops, c.bytes_moved, c.compute_bound "
                     "FROM configs c JOIN measurements m ON m.config_id = c.id "
                     "WHERE m.machine_id = ?1 ORDER BY c.id");
  if (!all.ok())
    return error("cannot read the measurements");
  all.bind(1, machine);
  std::vector<CostEntry> out;
  while (all.step() == SQLITE_ROW) {
    CostEntry e;
    e.id = all.integer(0);
    e.op = all.text(1);
    e.family = all.text(2);
    e.key = all.text(3);
    e.constants = all.text(4);
    e.dims = parseDims(all.text(5));
    e.work = all.real(6);
    e.measured.medianSeconds = all.real(7);
    e.measured.q1Seconds = all.real(8);
    e.measured.q3Seconds = all.real(9);
    e.measured.minSeconds = all.real(10);
    e.measured.runs = static_cast<unsigned>(all.integer(11));
    e.measured.totalSeconds = all.real(12);
    if (!all.isNull(13)) {
      e.measured.joulesPerCall = all.real(13);
      e.measured.energySource = all.text(14);
    }
    for (absl::string_view s : absl::StrSplit(all.text(15), '\n', absl::SkipEmpty()))
      e.sources.emplace_back(s);
    e.flops = all.real(16);
    e.bytesMoved = all.real(17);
    e.computeBound = all.integer(18) != 0;
    out.push_back(std::move(e));
  }
  Statement steps(db_, "SELECT config_id, source, median_s, nodes FROM in_step "
                       "WHERE machine_id = ?1 ORDER BY config_id, source");
  if (!steps.ok())
    return error("cannot read the in-step times");
  steps.bind(1, machine);
  std::unordered_map<int64_t, CostEntry *> byId;
  for (CostEntry &e : out)
    byId[e.id] = &e;
  while (steps.step() == SQLITE_ROW)
    if (auto it = byId.find(steps.integer(0)); it != byId.end())
      it->second->inStep.push_back({steps.text(1), steps.real(2), steps.integer(3)});
  return out;
}

absl::StatusOr<CostDatabase::Counts> CostDatabase::counts() {
  Counts c;
  std::pair<const char *, int64_t *> queries[] = {
      {"SELECT count(*) FROM machines", &c.machines},
      {"SELECT count(*) FROM configs", &c.configs},
      {"SELECT count(*) FROM measurements", &c.measurements},
      {"SELECT count(*) FROM failures", &c.failures},
      {"SELECT count(DISTINCT source) FROM sources", &c.sources},
      {"SELECT count(*) FROM in_step", &c.inStep}};
  for (auto &[sql, into] : queries) {
    Statement q(db_, sql);
    if (!q.ok() || q.step() != SQLITE_ROW)
      return error("cannot count");
    *into = q.integer(0);
  }
  return c;
}

// --- predictions -------------------------------------------------------------

namespace {

/// How far apart two configurations of one family are: their sizes in log2,
/// plus 2 (four doublings) when their constants differ. (Adding distance for
/// a layout that differs, strided or contiguous, was tried: it moved five
/// unseen models' steps further off, the LSTM's from 1.05 to 1.25.)
double distance(const OperatorConfig &c, const CostEntry &e) {
  double d = c.constants == e.constants ? 0 : 2;
  size_t n = std::min(c.dims.size(), e.dims.size());
  for (size_t i = 0; i < n; ++i)
    d += std::fabs(std::log2(1.0 + static_cast<double>(c.dims[i])) -
                   std::log2(1.0 + static_cast<double>(e.dims[i])));
  return d;
}

constexpr size_t kNeighbours = 3;
constexpr double kFamilyReach = 4.0;
constexpr double kBusyShare = 0.1;

/// Energy follows time: `e`'s joules per second over `seconds` (none without a sensor).
std::optional<double> joulesAt(const CostEntry &e, double seconds) {
  if (!e.measured.joulesPerCall || e.measured.medianSeconds <= 0)
    return std::nullopt;
  return *e.measured.joulesPerCall / e.measured.medianSeconds * seconds;
}

} // namespace

std::string layoutOf(llvm::StringRef key) {
  std::string out;
  llvm::SmallVector<llvm::StringRef, 16> lines;
  key.split(lines, '\n');
  for (llvm::StringRef line : lines) {
    llvm::StringRef text = line.trim();
    // Each operand's line, then the node's (its results' types follow " : ").
    llvm::StringRef types;
    if (text.startswith("input "))
      types = text;
    else if (text.startswith("%") && text.contains(" = "))
      types = text.split(" : ").second;
    else
      continue;
    size_t strided = 0;
    for (size_t at = types.find("strides="); at != llvm::StringRef::npos;
         at = types.find("strides=", at + 1))
      ++strided;
    out += static_cast<char>('0' + std::min<size_t>(strided, 9));
  }
  return out;
}

llvm::StringRef CostModel::howName(How how) {
  switch (how) {
  case How::Exact:
    return "exact";
  case How::Family:
    return "family";
  case How::Operator:
    return "operator";
  case How::Missing:
    return "missing";
  case How::InStep:
    return "in-step";
  case How::Learned:
    return "learned";
  }
  return "missing";
}

CostModel::CostModel(std::vector<CostEntry> entries, const std::set<std::string> &excludedSources,
                     std::string machine)
    : machine_(std::move(machine)) {
  for (CostEntry &e : entries) {
    bool usable = e.sources.empty() && excludedSources.empty();
    for (const std::string &s : e.sources)
      usable |= !excludedSources.count(s);
    if (usable)
      entries_.push_back(std::move(e));
  }
  for (CostEntry &e : entries_) {
    e.layout = layoutOf(e.key);
    repriceOnPaper(e);
  }
  markImplausible();
  findBalance();
  for (const CostEntry &e : entries_) {
    byKey_[e.key] = &e;
    if (!e.implausible) { // else its own configuration only: not interpolated from
      byFamily_[e.family].push_back(&e);
      byOp_[e.op].push_back(&e);
    }
    auto [it, fresh] = floor_.try_emplace(e.op, e.measured.medianSeconds);
    if (!fresh)
      it->second = std::min(it->second, e.measured.medianSeconds);
    // In-step times from the sources not left out, weighted by their nodes.
    double weighted = 0;
    int64_t nodes = 0;
    for (const InStepSample &sample : e.inStep)
      if (!excludedSources.count(sample.source) && sample.medianSeconds > 0) {
        int64_t n = std::max<int64_t>(sample.nodes, 1);
        weighted += sample.medianSeconds * static_cast<double>(n);
        nodes += n;
      }
    if (nodes > 0 && e.measured.medianSeconds > 0) {
      double inStep = weighted / static_cast<double>(nodes);
      inStep_[e.key] = inStep;
      if (!e.implausible)
        context_[e.op].push_back(
            {std::log(std::max(e.work, 1.0)), inStep - e.measured.medianSeconds});
    }
  }
  for (auto &entry : context_)
    std::sort(entry.getValue().begin(), entry.getValue().end(),
              [](const ContextPoint &a, const ContextPoint &b) { return a.logWork < b.logWork; });
}

void CostModel::repriceOnPaper(CostEntry &e) {
  // A query is priced on paper by this build's rules (OperatorCost.h); its
  // neighbours must be too, whatever build measured them: the stored FLOPs,
  // bytes and work are the measuring build's (attention, once one operation
  // per output element, is priced by its products since), and interpolating
  // between two rules put a ViT's attention backward 57x over.
  auto graph = parseGraph(e.key);
  if (!graph.ok())
    return; // an operator this build does not know: the stored figures stand
  auto config = operatorConfigOfGraph(std::move(*graph));
  if (!config.ok())
    return;
  e.flops = config->flops;
  e.bytesMoved = static_cast<double>(config->bytesMoved);
  e.computeBound = config->computeBound;
  e.work = config->work;
}

void CostModel::markImplausible() {
  // Within a family and layout, more work does not take far less time: a
  // measurement more than kImplausible times slower than another of at least
  // its work caught the machine in a slow mode (a 32x32 matrix product timed
  // at 1.3 ms, 5 us when measured again), and interpolating from it carries
  // the slow mode to every neighbour.
  llvm::StringMap<std::vector<size_t>> groups;
  for (size_t i = 0; i < entries_.size(); ++i)
    groups[entries_[i].family + "|" + entries_[i].layout].push_back(i);
  std::vector<bool> drop(entries_.size(), false);
  for (const auto &group : groups)
    for (size_t i : group.getValue())
      for (size_t j : group.getValue())
        if (i != j && entries_[j].work >= entries_[i].work &&
            entries_[i].measured.medianSeconds >
                kImplausible * entries_[j].measured.medianSeconds) {
          drop[i] = true;
          break;
        }
  for (size_t i = 0; i < entries_.size(); ++i)
    if (drop[i]) {
      entries_[i].implausible = true;
      implausible_.push_back(&entries_[i]);
    }
}

void CostModel::findBalance() {
  std::vector<double> flopRates, byteRates;
  for (const CostEntry &e : entries_) {
    double t = e.measured.medianSeconds;
    if (e.implausible || !e.computeBound || t < kRooflineMinSeconds || e.flops <= 0 ||
        e.bytesMoved <= 0)
      continue;
    flopRates.push_back(e.flops / t);
    byteRates.push_back(e.bytesMoved / t);
  }
  if (flopRates.size() < kRooflineMinEntries)
    return;
  auto high = [](std::vector<double> &v) {
    auto at = v.begin() + static_cast<long>(0.9 * static_cast<double>(v.size() - 1));
    std::nth_element(v.begin(), at, v.end());
    return *at;
  };
  balance_ = high(flopRates) / high(byteRates);
}

double CostModel::rooflineWork(bool computeBound, double flops, double bytes, double work) const {
  if (!computeBound || balance_ <= 0 || flops <= 0)
    return std::max(work, 1.0);
  return std::max({flops, bytes * balance_, 1.0});
}

CostModel::~CostModel() = default;
CostModel::CostModel(CostModel &&) = default;

const LearnedCost *CostModel::learned() const {
  if (!learnedOn_)
    return nullptr;
  if (!learnedTried_) {
    learnedTried_ = true;
    std::vector<const CostEntry *> all;
    for (const CostEntry &e : entries_)
      if (!e.implausible)
        all.push_back(&e);
    auto trained = LearnedCost::train(all);
    if (trained.ok())
      learned_ = std::move(*trained);
    else
      learnedWhyNot_ = std::string(trained.status().message());
    // Energy the same way, where enough measurements have it (a sensor).
    if (learned_)
      if (auto joules = LearnedCost::train(all, LearnedCost::Target::Joules); joules.ok())
        learnedJoules_ = std::move(*joules);
  }
  return learned_.get();
}

double CostModel::contextExtra(llvm::StringRef op, double work) const {
  auto it = context_.find(op);
  if (it == context_.end() || it->second.empty())
    return 0;
  // The operator's configurations timed both ways nearest in work: from where
  // the query falls among them (sorted by work), outwards to the nearer side;
  // those more than kContextReach away are not extrapolated from. A median,
  // not a mean: one configuration caught slow in its step (10-20x its
  // isolated time, next to others at 1.2-3x) does not carry its neighbours.
  // An extra, not a factor: a small kernel's in-step cost is mostly per call
  // (threads woken, inputs not in cache), and scaling by a factor carried a
  // 2 us reduction's 10x onto a 10 us one.
  const std::vector<ContextPoint> &points = it->second;
  double x = std::log(std::max(work, 1.0));
  size_t k = std::min(kContextPoints, points.size());
  size_t hi = static_cast<size_t>(
      std::lower_bound(points.begin(), points.end(), x,
                       [](const ContextPoint &p, double v) { return p.logWork < v; }) -
      points.begin());
  size_t lo = hi; // points[lo, hi) taken
  std::vector<double> extras;
  while (hi - lo < k) {
    bool left = lo > 0 && (hi == points.size() ||
                           x - points[lo - 1].logWork <= points[hi].logWork - x);
    const ContextPoint &p = left ? points[--lo] : points[hi++];
    if (std::fabs(p.logWork - x) <= std::log(kContextReach))
      extras.push_back(p.extra);
  }
  if (extras.empty())
    return 0;
  std::sort(extras.begin(), extras.end());
  return extras[extras.size() / 2];
}

double CostModel::inStepOf(const OperatorConfig &config, double isolated) const {
  if (contextMode_ == Context::None)
    return isolated;
  return std::max(isolated + contextExtra(config.op, config.work), isolated / 2);
}

CostModel::Prediction
CostModel::scaled(const OperatorConfig &config,
                  std::vector<std::pair<double, const CostEntry *>> candidates, How how) const {
  // The nearest configurations (by the caller's distance), each with a
  // throughput past the operator's fixed cost (its fastest call): rate =
  // work / (t - floor), the work a compute-bound operator's roofline work.
  size_t k = std::min(kNeighbours, candidates.size());
  std::partial_sort(candidates.begin(), candidates.begin() + static_cast<long>(k), candidates.end(),
                    [](const auto &a, const auto &b) { return a.first < b.first; });
  candidates.resize(k);
  double floor = floor_.lookup(config.op);
  double work = rooflineWork(config.computeBound, config.flops,
                             static_cast<double>(config.bytesMoved), config.work);
  struct Point {
    double logWork, rate, distance;
    double busyShare; ///< of its time, the share past the fixed cost
  };
  std::vector<Point> points;
  for (const auto &[d, e] : candidates) {
    // floor is the least of the operator's times, so never above this one's
    double busy = std::max(e->measured.medianSeconds - floor, 1e-12);
    double w = rooflineWork(e->computeBound, e->flops, e->bytesMoved, e->work);
    points.push_back({std::log(w), w / busy, d, busy / std::max(e->measured.medianSeconds, 1e-12)});
  }
  std::sort(points.begin(), points.end(),
            [](const Point &a, const Point &b) { return a.logWork < b.logWork; });
  double x = std::log(work), rate = points.front().rate;
  if (config.computeBound) {
    // Against the roofline a kernel's rate depends on its shape more than on
    // its work: the neighbours' rates, geometric mean weighted by nearness in
    // shape and in roofline work (in doublings). Interpolating along work
    // alone between the two that bracket it took a matrix product of 16 rows
    // at the rate of one of 8 rows and twice its weight, 2.5x too slow.
    // A neighbour whose time is nearly all the fixed cost says nothing of a
    // rate (the operator's fastest call has none): left out while another is there.
    bool anyBusy = std::any_of(points.begin(), points.end(),
                               [](const Point &pt) { return pt.busyShare >= kBusyShare; });
    double weights = 0, logRate = 0;
    for (const Point &pt : points)
      if (!anyBusy || pt.busyShare >= kBusyShare) {
        double w = 1 / (0.5 + pt.distance + std::fabs(x - pt.logWork) / std::log(2.0));
        weights += w;
        logRate += w * std::log(pt.rate);
      }
    rate = std::exp(logRate / weights);
  } else if (x >= points.back().logWork) {
    // A memory-bound kernel's rate along its bytes: interpolated between the
    // two neighbours whose work brackets its own (in log work), or the nearest
    // one's beyond them (throughput saturates; scaling a small call's time up
    // linearly would carry its overhead along).
    rate = points.back().rate;
  } else if (x > points.front().logWork) {
    for (size_t i = 1; i < points.size(); ++i)
      if (x <= points[i].logWork) {
        const Point &lo = points[i - 1], &hi = points[i];
        double f = hi.logWork > lo.logWork ? (x - lo.logWork) / (hi.logWork - lo.logWork) : 0.5;
        rate = std::exp(std::log(lo.rate) + f * (std::log(hi.rate) - std::log(lo.rate)));
        break;
      }
  }
  Prediction p;
  p.how = how;
  p.seconds = floor + work / rate;
  p.nearest = candidates.front().second;
  p.joules = joulesAt(*p.nearest, p.seconds);
  return p;
}

CostModel::Prediction CostModel::predict(const OperatorConfig &config) const {
  Prediction p = inContext(config);
  p.seconds *= speed_;
  return p;
}

CostModel::Prediction CostModel::inContext(const OperatorConfig &config) const {
  if (auto it = inStep_.find(config.key); it != inStep_.end()) {
    Prediction p;
    p.how = How::InStep;
    p.seconds = it->second;
    p.nearest = byKey_.lookup(config.key);
    p.joules = joulesAt(*p.nearest, p.seconds);
    return p;
  }
  Prediction p = isolated(config);
  if (p.how != How::Missing) {
    double isolated = p.seconds;
    p.seconds = inStepOf(config, isolated);
    p.context = isolated > 0 ? p.seconds / isolated : 1;
    if (p.joules)
      *p.joules *= p.context;
  }
  return p;
}

CostModel::Prediction CostModel::isolated(const OperatorConfig &config) const {
  if (const CostEntry *e = byKey_.lookup(config.key)) {
    Prediction p;
    p.how = How::Exact;
    p.seconds = e->measured.medianSeconds;
    p.joules = e->measured.joulesPerCall;
    p.nearest = e;
    return p;
  }
  double work = std::max(config.work, 1.0);
  // The family, where its measurements reach the query's work (within
  // kFamilyReach either way): far beyond them its calls say little of the
  // query's throughput (a tiny model's calls are all fixed cost), and the
  // operator's other families, the sweeps' among them, may come closer.
  if (auto it = byFamily_.find(config.family); it != byFamily_.end()) {
    double lo = INFINITY, hi = 0;
    for (const CostEntry *e : it->second) {
      lo = std::min(lo, std::max(e->work, 1.0));
      hi = std::max(hi, std::max(e->work, 1.0));
    }
    bool reaches = work >= lo / kFamilyReach && work <= hi * kFamilyReach;
    auto op = byOp_.find(config.op); // every family's op is in byOp_
    if (reaches || op->second.size() == it->second.size()) {
      std::vector<std::pair<double, const CostEntry *>> candidates;
      for (const CostEntry *e : it->second)
        candidates.emplace_back(distance(config, *e), e);
      return scaled(config, std::move(candidates), How::Family);
    }
  }
  // The operator's configurations nearest in work, where one is within
  // kFamilyReach; else (none that near, or the operator never measured) the
  // learned model, where there is one.
  auto op = byOp_.find(config.op);
  bool near = false;
  if (op != byOp_.end())
    for (const CostEntry *e : op->second) {
      double w = std::max(e->work, 1.0);
      near |= work >= w / kFamilyReach && work <= w * kFamilyReach;
    }
  auto fromOperator = [&] {
    std::vector<std::pair<double, const CostEntry *>> candidates;
    for (const CostEntry *e : op->second)
      candidates.emplace_back(std::fabs(std::log2(work / std::max(e->work, 1.0))), e);
    return scaled(config, std::move(candidates), How::Operator);
  };
  if (op != byOp_.end() && near)
    return fromOperator();
  if (const LearnedCost *model = learned()) {
    auto seconds = model->predict(CostFeatureInput::of(config));
    if (seconds.ok()) {
      Prediction p;
      p.how = How::Learned;
      p.seconds = *seconds;
      if (learnedJoules_)
        if (auto joules = learnedJoules_->predict(CostFeatureInput::of(config)); joules.ok())
          p.joules = *joules;
      return p;
    }
  }
  if (op != byOp_.end())
    return fromOperator();
  return Prediction();
}

} // namespace graphopt
