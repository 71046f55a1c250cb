//===- MilpProblem.cpp - The files checkpoint{planner=milp} and its solver exchange ---===//
#include "checkpoint/MilpProblem.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <type_traits>

namespace graphopt {

namespace {

constexpr char kRequestMagic[8] = {'G', 'O', 'M', 'I', 'L', 'P', 'Q', '2'};
constexpr char kSolutionMagic[8] = {'G', 'O', 'M', 'I', 'L', 'P', 'S', '2'};
/// No program graph-opt builds comes near (kMaxColumns is 50000): a bound
/// that keeps a damaged file from asking for gigabytes.
constexpr uint64_t kMaxCount = uint64_t(1) << 28;

using File = std::unique_ptr<FILE, int (*)(FILE *)>;

class Writer {
public:
  explicit Writer(FILE *f) : f_(f) {}
  template <typename T> void value(const T &v) {
    static_assert(std::is_trivially_copyable_v<T>);
    ok_ = ok_ && std::fwrite(&v, sizeof v, 1, f_) == 1;
  }
  template <typename T> void array(const std::vector<T> &v) {
    value<uint64_t>(v.size());
    ok_ = ok_ && (v.empty() || std::fwrite(v.data(), sizeof(T), v.size(), f_) == v.size());
  }
  void bytes(const char *p, size_t n) { ok_ = ok_ && std::fwrite(p, 1, n, f_) == n; }
  bool ok() const { return ok_; }

private:
  FILE *f_;
  bool ok_ = true;
};

class Reader {
public:
  explicit Reader(FILE *f) : f_(f) {}
  template <typename T> bool value(T &v) {
    return ok_ = ok_ && std::fread(&v, sizeof v, 1, f_) == 1;
  }
  template <typename T> bool array(std::vector<T> &v) {
    uint64_t n = 0;
    if (!value(n) || n > kMaxCount)
      return ok_ = false;
    v.resize(n);
    return ok_ = n == 0 || std::fread(v.data(), sizeof(T), n, f_) == n;
  }
  bool magic(const char (&expected)[8]) {
    char got[8];
    return ok_ = ok_ && std::fread(got, 1, 8, f_) == 8 && std::memcmp(got, expected, 8) == 0;
  }
  /// Nothing left over: a file longer than its counts say is damaged too.
  bool atEnd() { return ok_ && std::fgetc(f_) == EOF; }

private:
  FILE *f_;
  bool ok_ = true;
};

std::string openError(const std::string &path, const char *what) {
  return "cannot open " + path + " to " + what + ": " + std::strerror(errno);
}

std::string finish(File &f, bool ok, const std::string &path) {
  FILE *raw = f.release();
  if (std::fclose(raw) != 0 || !ok)
    return "cannot write " + path + ": " + std::strerror(errno);
  return {};
}

} // namespace

std::string writeMilpRequest(const std::string &path, const MilpRequest &request) {
  File f(std::fopen(path.c_str(), "wb"), std::fclose);
  if (!f)
    return openError(path, "write");
  Writer w(f.get());
  const MilpProblem &p = request.problem;
  w.bytes(kRequestMagic, 8);
  w.value(request.seconds);
  w.value<uint8_t>(request.preprocess);
  w.value<uint64_t>(p.memoryRows);
  w.array(p.objective);
  w.array(p.upper);
  w.value<uint64_t>(p.rows.size());
  for (const MilpProblem::Row &row : p.rows) {
    w.array(row.columns);
    w.array(row.coefficients);
    w.value(row.rhs);
  }
  w.array(request.start);
  return finish(f, w.ok(), path);
}

std::string readMilpRequest(const std::string &path, MilpRequest &request) {
  File f(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!f)
    return openError(path, "read");
  Reader r(f.get());
  MilpProblem &p = request.problem;
  uint64_t memoryRows = 0, rows = 0;
  uint8_t preprocess = 0;
  bool ok = r.magic(kRequestMagic) && r.value(request.seconds) && r.value(preprocess) &&
            r.value(memoryRows) &&
            r.array(p.objective) && r.array(p.upper) && r.value(rows) && rows <= kMaxCount;
  if (ok) {
    request.preprocess = preprocess != 0;
    p.memoryRows = memoryRows;
    p.rows.resize(rows);
  }
  for (uint64_t i = 0; ok && i < rows; ++i) {
    MilpProblem::Row &row = p.rows[i];
    ok = r.array(row.columns) && r.array(row.coefficients) && r.value(row.rhs) &&
         row.columns.size() == row.coefficients.size();
    for (int c : row.columns)
      ok = ok && c >= 0 && static_cast<size_t>(c) < p.objective.size();
  }
  ok = ok && r.array(request.start) && r.atEnd() && p.upper.size() == p.objective.size() &&
       (request.start.empty() || request.start.size() == p.objective.size());
  if (!ok)
    return path + " is not a MILP request written by graph-opt (damaged or truncated)";
  return {};
}

std::string writeMilpSolution(const std::string &path, const MilpSolution &solution) {
  File f(std::fopen(path.c_str(), "wb"), std::fclose);
  if (!f)
    return openError(path, "write");
  Writer w(f.get());
  w.bytes(kSolutionMagic, 8);
  w.value<uint8_t>(solution.found);
  w.value(solution.gap);
  w.value(solution.bound);
  std::vector<char> status(solution.status.begin(), solution.status.end());
  w.array(status);
  w.array(solution.columns);
  return finish(f, w.ok(), path);
}

std::string readMilpSolution(const std::string &path, MilpSolution &solution) {
  File f(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!f)
    return openError(path, "read");
  Reader r(f.get());
  uint8_t found = 0;
  std::vector<char> status;
  if (!(r.magic(kSolutionMagic) && r.value(found) && r.value(solution.gap) &&
        r.value(solution.bound) && r.array(status) &&
        r.array(solution.columns) && r.atEnd()))
    return path + " is not a MILP solution written by graph-opt-milp (damaged or truncated)";
  solution.found = found != 0;
  solution.status.assign(status.begin(), status.end());
  return {};
}

} // namespace graphopt
