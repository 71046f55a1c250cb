//===- OutputVerifier.cpp - Proving a rewritten graph computes the same ---===//
#include "graphopt/Runtime/OutputVerifier.h"

#include "graphopt/Alias/AliasAnalysis.h"
#include "graphopt/IR/IRMap.h"
#include "graphopt/Runtime/Collectives.h"
#include "graphopt/Runtime/CudaBackend.h"
#include "graphopt/Runtime/Executor.h"
#include "graphopt/Runtime/ParameterShards.h"

#include <ATen/Context.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/Support/Format.h>

#include <cmath>
#include <cstring>
#include <map>
#include <set>

namespace graphopt {

Tolerance defaultTolerance(c10::ScalarType dtype) {
  switch (dtype) {
  case c10::kFloat: return {1.3e-6, 1e-5};
  case c10::kDouble: return {1e-7, 1e-7};
  case c10::kHalf: return {1e-3, 1e-5};
  case c10::kBFloat16: return {1.6e-2, 1e-5};
  case c10::kComplexFloat: return {1.3e-6, 1e-5};
  case c10::kComplexDouble: return {1e-7, 1e-7};
  default: return {0, 0}; // integers, bools: exact
  }
}

namespace {

std::string describeTensor(const at::Tensor &t) {
  if (!t.defined())
    return "undefined";
  return absl::StrCat(c10::toString(t.scalar_type()), "[", absl::StrJoin(t.sizes(), ", "), "]");
}

/// compareTensors' bound: the dtype's tolerance, or the options' for a
/// floating result, its atol widened by kSpreadMultiple times the spread.
Tolerance toleranceFor(c10::ScalarType dtype, bool floating, const VerifierOptions &options,
                       double spread) {
  Tolerance tolerance = defaultTolerance(dtype);
  if (floating && options.rtol)
    tolerance.rtol = *options.rtol;
  if (floating && options.atol)
    tolerance.atol = *options.atol;
  // A spread that is not a number (the original's own runs differ in shape,
  // or NaN in one run only) widens nothing.
  if (std::isfinite(spread))
    tolerance.atol += kSpreadMultiple * spread;
  return tolerance;
}

/// compareTensors' NaN check: a NaN on one side only is named ("" where
/// there is none): it is the likeliest sign of a rewrite that reads memory
/// it should not.
std::string oneSidedNaN(const at::Tensor &x, const at::Tensor &y) {
  int64_t onlyOriginal = x.isnan().logical_and(y.isnan().logical_not()).sum().item().toLong();
  int64_t onlyRewritten = y.isnan().logical_and(x.isnan().logical_not()).sum().item().toLong();
  if (!onlyOriginal && !onlyRewritten)
    return "";
  return absl::StrCat("NaN in one graph only: ", onlyRewritten,
                      " element(s) NaN in the rewritten graph and not the original, ",
                      onlyOriginal, " the other way");
}

/// compareTensors' bitwise rule for floating results whose bytes differ:
/// whether every element has the same bits, a NaN in the same place on both
/// sides agreeing whatever its payload bits.
bool sameBitsOrBothNaN(const at::Tensor &ca, const at::Tensor &cb) {
  at::Tensor bothNaN = ca.isnan().logical_and(cb.isnan());
  auto bytesOf = [](const at::Tensor &t) {
    return t.reshape({-1}).view(at::kByte).view({t.numel(), -1});
  };
  at::Tensor sameBits = bytesOf(ca).eq(bytesOf(cb)).all(/*dim=*/1);
  return sameBits.logical_or(bothNaN.reshape({-1})).all().item().toBool();
}

/// Fills the numbers of `c` for tensors `a` (original) and `b` (rewritten).
/// `spread`: the largest difference between two runs of the original (0 when
/// it reproduces itself bit for bit): the bound widens by kSpreadMultiple
/// times it, and such a result is never held to bitwise.
void compareTensors(const at::Tensor &a, const at::Tensor &b, const VerifierOptions &options,
                    OutputComparison &c, double spread) {
  c.spread = spread;
  c.originalValue = describeTensor(a);
  c.rewrittenValue = describeTensor(b);
  if (a.defined() != b.defined()) {
    c.problem = "one side is undefined";
    return;
  }
  if (!a.defined()) {
    c.passed = true;
    return;
  }
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) {
    c.problem = "dtype or shape differs";
    return;
  }
  bool floating = at::isFloatingType(a.scalar_type()) || at::isComplexType(a.scalar_type());
  c.tolerance = toleranceFor(a.scalar_type(), floating, options, spread);
  if (a.numel() == 0) {
    c.passed = true;
    return;
  }
  // The same bytes (the common case, and every case of a sound rewrite
  // compared bitwise) agree under every rule below with no error at all: the
  // element-wise arithmetic would only confirm it, at a dozen kernels a result.
  at::Tensor ca = a.detach().to(at::kCPU).contiguous();
  at::Tensor cb = b.detach().to(at::kCPU).contiguous();
  if (std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0) {
    c.bitwise = options.bitwise && spread == 0;
    c.passed = true;
    return;
  }
  at::Tensor x = ca.to(at::kDouble);
  at::Tensor y = cb.to(at::kDouble);
  at::Tensor diff = x.sub(y).abs();
  // Equal values (equal infinities too) and NaN in the same places are
  // agreement; a NaN anywhere else is an infinite error.
  at::Tensor agree = x.eq(y).logical_or(x.isnan().logical_and(y.isnan()));
  diff = diff.masked_fill(agree, 0.0).nan_to_num(INFINITY, INFINITY, INFINITY);
  at::Tensor rel = diff.div(y.abs().clamp_min(1e-30));
  c.maxAbsError = diff.max().item().toDouble();
  c.maxRelError = rel.max().item().toDouble();
  // A NaN on one side only is named.
  if (floating)
    if (std::string problem = oneSidedNaN(x, y); !problem.empty())
      c.problem = std::move(problem);
  if (options.bitwise && spread == 0) {
    // The same bytes: compare the raw storage of contiguous copies. A NaN in
    // the same place on both sides agrees whatever its payload bits.
    c.bitwise = true;
    c.passed = false; // the bytes differ (above)
    if (floating && c.problem.empty())
      c.passed = sameBitsOrBothNaN(ca, cb);
    return;
  }
  // allclose: |a - b| <= atol + rtol * |b| everywhere (NaN in the same
  // places agrees; its bound would be NaN).
  at::Tensor bound = y.abs().mul(c.tolerance.rtol).add(c.tolerance.atol);
  c.passed = diff.le(bound).logical_or(agree).all().item().toBool();
}

std::string outputLabel(const GraphOutput &out, unsigned ordinal) {
  if (out.role == OutputRole::Loss || out.role == OutputRole::UserOutput)
    return absl::StrCat(outputRoleName(out.role).str(), " #", ordinal);
  // A shard's gradient answers for the whole parameter's (ParameterShards.h).
  if (std::optional<ShardTarget> shard = parseShardTarget(out.target))
    return absl::StrCat(outputRoleName(out.role).str(), " ", shard->parameter);
  return absl::StrCat(outputRoleName(out.role).str(), " ", out.target);
}

/// What the rewritten graph's output `out` is compared with: the original's
/// value, or where the rewrite sharded the parameter (shard-parameters; the
/// original's output `before` is the whole gradient) this rank's cut of it,
/// as reduce_scatter_tensor hands each rank its part.
absl::StatusOr<at::Tensor> referenceFor(const at::Tensor &original, const GraphOutput &before,
                                        const GraphOutput &out) {
  std::optional<ShardTarget> shard = parseShardTarget(out.target);
  if (!shard || parseShardTarget(before.target) || !original.defined())
    return original;
  auto world = processGroupSize(shard->group);
  auto rank = processGroupRank(shard->group);
  if (!world.ok() || !rank.ok())
    return (world.ok() ? rank : world).status();
  return shardOf(original, *world, *rank);
}

/// How a graph input is named in the report once a step wrote it: by role and
/// target (parameters, buffers, optimizer state), by name for user inputs.
std::string stateLabel(const GraphInput &in) {
  if (in.role == InputRole::UserInput)
    return absl::StrCat("user_input %", in.value->name().str(), " after the step");
  return absl::StrCat(inputRoleName(in.role).str(), " ", in.target, " after the step");
}

/// Every graph input of `g`, by its state label, with its value before the
/// step: the WeightStore's tensor, or the user input given.
std::map<std::string, at::Tensor> statesBefore(const Graph &g, const WeightStore &weights,
                                               llvm::ArrayRef<at::Tensor> userInputs) {
  std::map<std::string, at::Tensor> states;
  size_t nextUser = 0;
  for (const GraphInput &in : g.inputs()) {
    at::Tensor value;
    if (in.role == InputRole::UserInput) {
      if (nextUser < userInputs.size())
        value = userInputs[nextUser];
      ++nextUser;
    } else if (const at::Tensor *w = weights.lookup(in.target)) {
      value = *w;
    }
    states[stateLabel(in)] = value;
  }
  return states;
}

/// The state of each input either graph writes in place, after its step;
/// an input only one graph writes is compared with the other's value of it
/// before the step (the other leaves it as it was).
void compareWrittenInputs(const Graph &original, const ExecutionResult &a,
                          llvm::ArrayRef<at::Tensor> originalInputs, const Graph &rewritten,
                          const ExecutionResult &b, llvm::ArrayRef<at::Tensor> rewrittenInputs,
                          const WeightStore &weights, const VerifierOptions &options,
                          const std::map<std::string, double> &spread,
                          VerificationReport &report) {
  std::map<std::string, at::Tensor> afterA = statesBefore(original, weights, originalInputs);
  std::map<std::string, at::Tensor> afterB = statesBefore(rewritten, weights, rewrittenInputs);
  std::set<std::string> written;
  for (const auto &[i, t] : a.writtenInputs) {
    std::string label = stateLabel(original.inputs()[i]);
    afterA[label] = t;
    written.insert(label);
  }
  for (const auto &[i, t] : b.writtenInputs) {
    std::string label = stateLabel(rewritten.inputs()[i]);
    afterB[label] = t;
    written.insert(label);
  }
  for (const std::string &label : written) {
    OutputComparison c;
    c.label = label;
    auto x = afterA.find(label), y = afterB.find(label);
    if (x == afterA.end() || y == afterB.end()) {
      c.problem = x == afterA.end() ? "written by the rewritten graph, which the original does not take"
                                    : "written by the original graph, which the rewritten does not take";
    } else {
      auto s = spread.find(label);
      compareTensors(x->second, y->second, options, c, s == spread.end() ? 0.0 : s->second);
    }
    report.passed &= c.passed;
    report.outputs.push_back(std::move(c));
  }
}

} // namespace

std::map<std::string, unsigned> outputKeys(const Graph &g) {
  std::map<std::string, unsigned> keys;
  std::map<OutputRole, unsigned> ordinals;
  for (unsigned i = 0; i < g.outputs().size(); ++i)
    keys[outputLabel(g.outputs()[i], ordinals[g.outputs()[i].role]++)] = i;
  return keys;
}

absl::StatusOr<VerificationReport> verifyRewrite(const Graph &original, const Graph &rewritten,
                                                 WeightStore &weights,
                                                 llvm::ArrayRef<at::Tensor> userInputs,
                                                 const VerifierOptions &options) {
  return verifyRewrite(original, rewritten, weights, userInputs, userInputs, options);
}

namespace {

/// PyTorch's deterministic algorithms (warn-only: an op without a
/// deterministic kernel warns instead of failing) for the verifier's runs,
/// restored after. Some kernels do not give the same bits for the same inputs
/// by default (index_put with accumulate on CPU adds in a thread-dependent
/// order; many CUDA reductions use atomics).
class DeterministicScope {
public:
  explicit DeterministicScope(bool on)
      : was_(at::globalContext().deterministicAlgorithms()),
        wasWarnOnly_(at::globalContext().deterministicAlgorithmsWarnOnly()), on_(on) {
    if (on_)
      at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true);
  }
  ~DeterministicScope() {
    if (on_)
      at::globalContext().setDeterministicAlgorithms(was_, wasWarnOnly_);
  }

private:
  bool was_, wasWarnOnly_, on_;
};

/// One run of each graph.
struct RunPair {
  ExecutionResult original, rewritten;
};

/// The two graphs with their inputs, and what comparing them needs.
struct Comparison {
  const Graph &original, &rewritten;
  WeightStore &weights;
  llvm::ArrayRef<at::Tensor> originalInputs, rewrittenInputs;
  const VerifierOptions &options;
  std::map<std::string, unsigned> originalKeys, rewrittenKeys;

  /// Every output by label, then every input either graph writes in place:
  /// the rewritten run `b` against the original run `a`. `spread` widens the
  /// bound of the labels the original does not reproduce (learnSpread).
  VerificationReport compare(const ExecutionResult &a, const ExecutionResult &b,
                             const std::map<std::string, double> &spread) const;
  /// The original's run `a` against its own second run `again`, bitwise:
  /// {label: largest difference} for each label the two runs disagree on.
  std::map<std::string, double> learnSpread(const ExecutionResult &a,
                                            const ExecutionResult &again) const;
  /// On a failure: the first node, in the original's order, whose value the
  /// rewritten graph makes otherwise (both rerun keeping every value), or the
  /// first state written in place that differs.
  absl::Status findDivergence(const ExecutionOptions &exec, VerificationReport &report) const;
};

VerificationReport Comparison::compare(const ExecutionResult &a, const ExecutionResult &b,
                                       const std::map<std::string, double> &spread) const {
  VerificationReport into;
  into.passed = true;
  auto spreadOf = [&](const std::string &label) {
    auto it = spread.find(label);
    return it == spread.end() ? 0.0 : it->second;
  };
  for (const auto &[label, i] : originalKeys) {
    OutputComparison c;
    c.label = label;
    auto it = rewrittenKeys.find(label);
    if (it == rewrittenKeys.end()) {
      c.problem = "missing from the rewritten graph";
      c.originalValue = describeTensor(a.outputs[i]);
    } else {
      auto reference =
          referenceFor(a.outputs[i], original.outputs()[i], rewritten.outputs()[it->second]);
      if (reference.ok())
        compareTensors(*reference, b.outputs[it->second], options, c, spreadOf(label));
      else
        c.problem = std::string(reference.status().message());
    }
    into.passed &= c.passed;
    into.outputs.push_back(std::move(c));
  }
  for (const auto &[label, i] : rewrittenKeys) {
    if (originalKeys.count(label))
      continue;
    OutputComparison c;
    c.label = label;
    c.problem = "not an output of the original graph";
    into.passed = false;
    into.outputs.push_back(std::move(c));
  }
  compareWrittenInputs(original, a, originalInputs, rewritten, b, rewrittenInputs, weights,
                       options, spread, into);
  return into;
}

std::map<std::string, double> Comparison::learnSpread(const ExecutionResult &a,
                                                      const ExecutionResult &again) const {
  // The original against itself: the same graph on both sides, compared bitwise.
  VerifierOptions exact = options;
  exact.bitwise = true;
  Comparison self{original, original, weights, originalInputs, originalInputs, exact,
                  originalKeys, originalKeys};
  std::map<std::string, double> spread;
  for (const OutputComparison &c : self.compare(a, again, {}).outputs)
    if (!c.passed)
      spread[c.label] = c.problem.empty() ? c.maxAbsError : INFINITY;
  return spread;
}

absl::Status Comparison::findDivergence(const ExecutionOptions &base,
                                        VerificationReport &report) const {
  ExecutionOptions exec = base;
  exec.keepAllValues = true;
  Executor a(original, weights, exec), b(rewritten, weights, exec);
  auto ra = a.run(originalInputs);
  if (!ra.ok())
    return ra.status();
  auto rb = b.run(rewrittenInputs);
  if (!rb.ok())
    return rb.status();
  llvm::StringMap<const c10::IValue *> rewrittenValues;
  for (const auto &[v, iv] : rb->values)
    rewrittenValues[v->name()] = &iv;
  ValueMap<const c10::IValue *> originalValues(original, nullptr);
  for (const auto &[v, iv] : ra->values)
    originalValues[v] = &iv;
  // A value living in a storage that is written in place holds, when the run
  // ends, what the last write left, not what its node made: it says nothing
  // about where the two graphs part.
  AliasInfo aliases(original);
  for (const Node &n : original.nodes()) {
    for (unsigned i = 0; i < n.numOutputs(); ++i) {
      const Value *v = n.output(i);
      if (aliases.lastWriteOf(v) >= 0)
        continue;
      auto other = rewrittenValues.find(v->name());
      const c10::IValue *mine = originalValues.lookup(v);
      if (other == rewrittenValues.end() || !mine || !mine->isTensor() || !other->second->isTensor())
        continue;
      OutputComparison c;
      compareTensors(mine->toTensor(), other->second->toTensor(), options, c, 0);
      if (!c.passed) {
        report.firstDivergence = absl::StrCat(
            "node ", n.describe(), ": value %", v->name().str(), " differs (max abs error ",
            c.maxAbsError, c.problem.empty() ? "" : ", ", c.problem, ")");
        return absl::OkStatus();
      }
    }
  }
  // Every value agrees: the graphs part in what they write in place. Name
  // the first state that differs and the node that writes it first.
  for (const OutputComparison &c : report.outputs) {
    if (c.passed || !llvm::StringRef(c.label).endswith(" after the step"))
      continue;
    for (const GraphInput &in : rewritten.inputs())
      if (stateLabel(in) == c.label) {
        AliasInfo writes(rewritten);
        int64_t rank = writes.firstWriteOf(in.value);
        const Node *writer = nullptr;
        for (const Node &n : rewritten.nodes())
          if (rank-- == 0) {
            writer = &n;
            break;
          }
        report.firstDivergence =
            absl::StrCat("the in-place writes to ", c.label.substr(0, c.label.size() - 15),
                         writer ? absl::StrCat(" (first written by ", writer->describe(),
                                               " in the rewritten graph)")
                                : "");
        return absl::OkStatus();
      }
  }
  return absl::OkStatus();
}

/// The worse of two comparisons of the same label: failed over passed, then
/// the larger error.
void keepWorse(OutputComparison &kept, const OutputComparison &other) {
  if (kept.passed && !other.passed)
    kept = other;
  else if (kept.passed == other.passed && other.maxAbsError > kept.maxAbsError)
    kept = other;
}

/// The names and spreads of the outputs the original does not reproduce.
std::string describeSpread(const std::map<std::string, double> &spread) {
  std::vector<std::string> parts;
  for (const auto &[label, s] : spread)
    parts.push_back(absl::StrCat(label, " (by up to ", s, ")"));
  return absl::StrCat("the original graph does not reproduce ", spread.size(),
                      spread.size() == 1 ? " result" : " results",
                      " from one run to the next with the same seed: ",
                      absl::StrJoin(parts, ", "), "; each is compared within ",
                      kSpreadMultiple, "x that spread beyond its tolerance");
}

} // namespace

absl::StatusOr<VerificationReport> verifyRewrite(const Graph &original, const Graph &rewritten,
                                                 WeightStore &weights,
                                                 llvm::ArrayRef<at::Tensor> originalInputs,
                                                 llvm::ArrayRef<at::Tensor> rewrittenInputs,
                                                 const VerifierOptions &options) {
  DeterministicScope deterministic(options.bitwise || options.deterministic);
  const bool gpu = graphopt::cudaAvailable();
  const c10::Device device = options.device ? *options.device
                                            : (gpu ? c10::Device(c10::DeviceType::CUDA, 0)
                                                   : c10::Device(c10::DeviceType::CPU));
  ExecutionOptions exec;
  exec.device = device;
  exec.seed = options.seed;
  exec.captureWrittenInputs = true;
  exec.checkLayouts = true;
  // Each graph runs twice, interleaved: the original's two runs say what it
  // reproduces bit for bit, and each of the rewritten graph's runs must match
  // it. A rewrite that is wrong only some of the time (a missing wait, a read
  // before a write) is caught on the run where it is wrong: a second run that
  // happens to agree never excuses the first.
  Executor a(original, weights, exec), b(rewritten, weights, exec);
  std::vector<RunPair> runs(kVerifierRuns);
  for (RunPair &r : runs) {
    auto ra = a.run(originalInputs);
    if (!ra.ok())
      return absl::Status(ra.status().code(), absl::StrCat("original graph: ", ra.status().message()));
    auto rb = b.run(rewrittenInputs);
    if (!rb.ok())
      return absl::Status(rb.status().code(), absl::StrCat("rewritten graph: ", rb.status().message()));
    r = {std::move(*ra), std::move(*rb)};
  }
  Comparison cmp{original, rewritten, weights, originalInputs, rewrittenInputs, options,
                 outputKeys(original), outputKeys(rewritten)};
  std::map<std::string, double> spread;
  for (size_t i = 1; i < runs.size(); ++i)
    for (const auto &[label, s] : cmp.learnSpread(runs[0].original, runs[i].original))
      spread[label] = std::max(spread[label], s);
  VerificationReport report = cmp.compare(runs[0].original, runs[0].rewritten, spread);
  for (size_t i = 1; i < runs.size(); ++i) {
    VerificationReport next = cmp.compare(runs[0].original, runs[i].rewritten, spread);
    report.passed &= next.passed;
    for (size_t o = 0; o < report.outputs.size() && o < next.outputs.size(); ++o)
      keepWorse(report.outputs[o], next.outputs[o]);
  }
  report.device = device;
  report.gpuAvailable = gpu;
  if (!spread.empty())
    report.note = describeSpread(spread);
  // A result laid out otherwise than declared: the graph's types are wrong
  // where passes read them (the first such node, original graph first).
  for (const RunPair &r : runs)
    for (const auto *result : {&r.original, &r.rewritten})
      if (!result->layoutMismatch.empty()) {
        report.passed = false;
        report.firstDivergence = absl::StrCat(
            result == &r.original ? "the original graph's " : "the rewritten graph's ",
            "declared types: ", result->layoutMismatch);
        return report;
      }
  if (report.passed)
    return report;
  if (absl::Status found = cmp.findDivergence(exec, report); !found.ok())
    return found;
  return report;
}

namespace {

void printComparison(llvm::raw_ostream &os, const OutputComparison &c, size_t width) {
  os << "  " << (c.passed ? "PASS" : "FAIL") << "  " << llvm::left_justify(c.label, width);
  if (!c.problem.empty()) {
    os << "  " << c.problem << " (" << c.originalValue << " vs " << c.rewrittenValue << ")\n";
    return;
  }
  if (c.bitwise)
    os << llvm::format("  max abs %.3g  max rel %.3g  (bitwise)\n", c.maxAbsError, c.maxRelError);
  else if (c.spread > 0)
    os << llvm::format("  max abs %.3g  max rel %.3g  (rtol %.2g, atol %.2g: the original "
                       "varies by up to %.3g from run to run)\n",
                       c.maxAbsError, c.maxRelError, c.tolerance.rtol, c.tolerance.atol, c.spread);
  else
    os << llvm::format("  max abs %.3g  max rel %.3g  (rtol %.2g, atol %.2g)\n", c.maxAbsError,
                       c.maxRelError, c.tolerance.rtol, c.tolerance.atol);
}

/// What kind of result a label names: its first word ("loss", "gradient",
/// "user_output"), and "state" for an input the step writes.
std::string kindOf(llvm::StringRef label) {
  if (label.endswith(" after the step"))
    return "state";
  return label.split(' ').first.str();
}

/// One line for all the results: how many of each kind, how they were
/// compared, and the one furthest off (by relative error, then absolute).
void printSummary(llvm::raw_ostream &os, llvm::ArrayRef<OutputComparison> outputs) {
  std::map<std::string, size_t> kinds;
  size_t bitwise = 0, failed = 0;
  std::set<std::pair<double, double>> tolerances;
  double rtol = 0, atol = 0;
  const OutputComparison *worst = nullptr;
  for (const OutputComparison &c : outputs) {
    ++kinds[kindOf(c.label)];
    failed += !c.passed;
    if (c.bitwise)
      ++bitwise;
    else {
      tolerances.insert({c.tolerance.rtol, c.tolerance.atol});
      rtol = std::max(rtol, c.tolerance.rtol);
      atol = std::max(atol, c.tolerance.atol);
    }
    if (!worst || std::make_pair(c.maxRelError, c.maxAbsError) >
                      std::make_pair(worst->maxRelError, worst->maxAbsError))
      worst = &c;
  }
  os << "  " << outputs.size() << " results compared (";
  bool first = true;
  for (const auto &[kind, n] : kinds) {
    os << (first ? "" : ", ") << n << " " << kind;
    first = false;
  }
  os << "): ";
  if (failed)
    os << failed << " failed, ";
  if (bitwise)
    os << bitwise << " bitwise";
  if (bitwise < outputs.size()) {
    os << (bitwise ? ", " : "") << outputs.size() - bitwise << " within tolerance";
    if (tolerances.size() == 1)
      os << llvm::format(" (rtol %.2g, atol %.2g)", tolerances.begin()->first,
                         tolerances.begin()->second);
    else // per dtype and role: -v lists each
      os << llvm::format(" (rtol up to %.2g, atol up to %.2g)", rtol, atol);
  }
  if (worst && (worst->maxAbsError > 0 || worst->maxRelError > 0))
    os << llvm::format("; furthest: %s, max abs %.3g, max rel %.3g", worst->label.c_str(),
                       worst->maxAbsError, worst->maxRelError);
  else if (worst)
    os << "; every one equal to the original's";
  os << "\n";
}

} // namespace

void VerificationReport::print(llvm::raw_ostream &os, bool eachResult) const {
  os << "verification on " << device.str();
  if (device.is_cpu())
    os << (gpuAvailable ? " (chosen)" : " (no GPU present, so CPU)");
  os << ":\n";
  if (eachResult || !passed) {
    size_t width = 0;
    for (const auto &c : outputs)
      width = std::max(width, c.label.size());
    for (const auto &c : outputs)
      printComparison(os, c, width);
  }
  printSummary(os, outputs);
  if (!note.empty())
    os << "  note: " << note << "\n";
  os << (passed ? "verification PASSED" : "verification FAILED");
  if (!passed && !firstDivergence.empty())
    os << ": first divergence at " << firstDivergence;
  os << '\n';
}

} // namespace graphopt
