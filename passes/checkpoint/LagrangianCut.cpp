//===- LagrangianCut.cpp - A closure program with priced rows, solved by minimum cuts ---===//
#include "checkpoint/LagrangianCut.h"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/boykov_kolmogorov_max_flow.hpp>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <utility>

namespace graphopt {

namespace {

using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
struct Arc {
  int64_t capacity = 0;
  int64_t residual = 0;
  Traits::edge_descriptor reverse;
};
using FlowGraph =
    boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, boost::no_property, Arc>;

/// Capacities are integers (a max-flow on doubles can loop on rounding):
/// the weights scaled so that all the finite ones sum to kFiniteTotal, far
/// below kInfinite, which no cut can pay.
constexpr double kFiniteTotal = 1e15;
constexpr int64_t kInfinite = int64_t{1} << 62;

/// The minimum-weight closure of a fixed set of implications, for weights
/// given per call: a source-to-column arc for a negative weight, a
/// column-to-sink arc for a positive one, an uncuttable arc for each
/// implication; the closure is what the source still reaches after the flow.
class ClosureCut {
public:
  /// `implied[a]`: the columns that column a chosen means chosen.
  ClosureCut(const std::vector<std::vector<int>> &implied, const std::vector<double> &upper)
      : graph_(implied.size() + 2), source_(implied.size()), sink_(implied.size() + 1) {
    for (size_t j = 0; j < implied.size(); ++j) {
      fromSource_.push_back(addArc(source_, j, 0));
      toSink_.push_back(addArc(j, sink_, upper[j] < 0.5 ? kInfinite : 0));
      fixedOff_.push_back(upper[j] < 0.5);
    }
    for (size_t a = 0; a < implied.size(); ++a)
      for (int b : implied[a])
        addArc(a, b, kInfinite);
    reached_.resize(implied.size() + 2);
  }

  /// Fills `chosen` with the least-weight closure (the smallest of those,
  /// as the flow leaves it) and returns the scale's rounding error bound.
  double solve(const std::vector<double> &weights, std::vector<uint8_t> &chosen) {
    double total = 0;
    for (size_t j = 0; j < weights.size(); ++j)
      if (!fixedOff_[j])
        total += std::abs(weights[j]);
    const double scale = total > 0 ? kFiniteTotal / total : 1;
    for (size_t j = 0; j < weights.size(); ++j) {
      graph_[fromSource_[j]].capacity = std::llround(std::max(0.0, -weights[j]) * scale);
      if (!fixedOff_[j])
        graph_[toSink_[j]].capacity = std::llround(std::max(0.0, weights[j]) * scale);
    }
    boost::boykov_kolmogorov_max_flow(graph_, boost::get(&Arc::capacity, graph_),
                                      boost::get(&Arc::residual, graph_),
                                      boost::get(&Arc::reverse, graph_),
                                      boost::get(boost::vertex_index, graph_), source_, sink_);
    // The source side of the minimum cut: reachable through unsaturated arcs.
    std::fill(reached_.begin(), reached_.end(), 0);
    std::vector<size_t> stack{source_};
    reached_[source_] = 1;
    while (!stack.empty()) {
      size_t u = stack.back();
      stack.pop_back();
      for (auto [e, end] = boost::out_edges(u, graph_); e != end; ++e)
        if (size_t v = boost::target(*e, graph_); !reached_[v] && graph_[*e].residual > 0) {
          reached_[v] = 1;
          stack.push_back(v);
        }
    }
    chosen.assign(reached_.begin(), reached_.begin() + weights.size());
    // Each weight was rounded by at most half a unit of the scale: the
    // closure's true weight is within this of the true least one.
    return static_cast<double>(weights.size()) / scale;
  }

private:
  Traits::edge_descriptor addArc(size_t u, size_t v, int64_t capacity) {
    auto e = boost::add_edge(u, v, graph_).first;
    auto r = boost::add_edge(v, u, graph_).first;
    graph_[e].capacity = capacity;
    graph_[r].capacity = 0;
    graph_[e].reverse = r;
    graph_[r].reverse = e;
    return e;
  }

  FlowGraph graph_;
  size_t source_, sink_;
  std::vector<Traits::edge_descriptor> fromSource_, toSink_;
  std::vector<uint8_t> fixedOff_;
  std::vector<uint8_t> reached_;
};

/// A row short by less than this (in the program's units) is met.
constexpr double kRowTolerance = 1e-9;
/// The most cuts each way of raising the prices until a point meets every row.
constexpr unsigned kRepairCuts = 48;
/// The step's factor halves after this many cuts without a better bound.
constexpr unsigned kPatience = 6;
/// boundByLagrangianCuts' cuts: at most this many columns' worth in all (a
/// 1M-node chain has 0.56M columns: 4 cuts; 100k nodes, 36), and at least
/// kMinBoundCuts.
constexpr size_t kBoundCutColumns = 2'000'000;
constexpr size_t kMinBoundCuts = 4;
/// A bound searched for to pass a value is given up after this many cuts
/// that do not bring it closer (boundByLagrangianCuts).
constexpr unsigned kStall = 2 * kPatience;

/// The program's structure: implications both ways, each column's memory
/// coefficients, the rows' right-hand sides.
struct Structure {
  explicit Structure(const MilpProblem &p) : p(p) {
    const size_t n = p.objective.size();
    const size_t firstMemoryRow = p.rows.size() - p.memoryRows;
    implied.resize(n);
    implying.resize(n);
    for (size_t r = 0; r < firstMemoryRow; ++r) {
      const MilpProblem::Row &row = p.rows[r];
      assert(row.columns.size() == 2 && row.rhs == 0 && row.coefficients[0] == 1 &&
             row.coefficients[1] == -1 && "a closure row: x_a - x_b >= 0");
      implied[row.columns[1]].push_back(row.columns[0]);
      implying[row.columns[0]].push_back(row.columns[1]);
    }
    inRows.resize(n);
    for (size_t r = firstMemoryRow; r < p.rows.size(); ++r) {
      const MilpProblem::Row &row = p.rows[r];
      for (size_t k = 0; k < row.columns.size(); ++k)
        inRows[row.columns[k]].push_back({r - firstMemoryRow, row.coefficients[k]});
      rhs.push_back(row.rhs);
    }
  }

  /// How far each row is from being met by `chosen` (positive: short).
  std::vector<double> shortfall(const std::vector<uint8_t> &chosen) const {
    std::vector<double> shortBy = rhs;
    for (size_t j = 0; j < chosen.size(); ++j)
      if (chosen[j])
        for (auto [r, a] : inRows[j])
          shortBy[r] -= a;
    return shortBy;
  }
  double cost(const std::vector<uint8_t> &chosen) const {
    double sum = 0;
    for (size_t j = 0; j < chosen.size(); ++j)
      if (chosen[j])
        sum += p.objective[j];
    return sum;
  }

  /// The columns not in `chosen` that choosing `j` brings in (itself
  /// included), following `edges`; empty when one of them is fixed to 0.
  std::vector<int> reach(int j, const std::vector<uint8_t> &chosen, bool want,
                         const std::vector<std::vector<int>> &edges) const {
    std::vector<int> out{j}, stack{j};
    // Marks stamped per call: no clearing of a column-sized array each time.
    if (seen_.size() != chosen.size())
      seen_.assign(chosen.size(), 0);
    const uint32_t mark = ++stamp_;
    seen_[j] = mark;
    while (!stack.empty()) {
      int u = stack.back();
      stack.pop_back();
      for (int v : edges[u])
        if (seen_[v] != mark && (chosen[v] != 0) != want) {
          seen_[v] = mark;
          out.push_back(v);
          stack.push_back(v);
        }
    }
    return out;
  }

  /// Completes `chosen` (a closure) until every row is met: each time the
  /// column whose closure covers the most shortfall per unit of objective.
  /// False when nothing left covers what is short.
  bool complete(std::vector<uint8_t> &chosen) const {
    std::vector<double> shortBy = shortfall(chosen);
    std::vector<double> byRow(shortBy.size(), 0); // a closure's bytes per row (zero between uses)
    std::vector<size_t> touched;
    while (true) {
      std::vector<uint8_t> helps(chosen.size(), 0);
      bool isShort = false;
      for (size_t r = 0; r < shortBy.size(); ++r)
        isShort |= shortBy[r] > kRowTolerance;
      if (!isShort)
        return true;
      for (size_t j = 0; j < chosen.size(); ++j)
        if (!chosen[j] && p.upper[j] >= 0.5)
          for (auto [r, a] : inRows[j])
            if (a > 0 && shortBy[r] > kRowTolerance)
              helps[j] = 1;
      double bestRatio = 0;
      std::vector<int> bestSet;
      for (size_t j = 0; j < chosen.size(); ++j) {
        if (!helps[j])
          continue;
        std::vector<int> set = reach(static_cast<int>(j), chosen, /*want=*/true, implied);
        if (touchesFixed(set))
          continue;
        double cost = 0;
        touched.clear();
        for (int k : set) {
          cost += p.objective[k];
          for (auto [r, a] : inRows[k]) {
            if (byRow[r] == 0)
              touched.push_back(r);
            byRow[r] += a;
          }
        }
        double covered = 0;
        for (size_t r : touched) {
          if (shortBy[r] > kRowTolerance && byRow[r] > 0)
            covered += std::min(byRow[r], shortBy[r]);
          byRow[r] = 0;
        }
        if (covered <= 0)
          continue;
        const double ratio = covered / std::max(cost, 1e-12);
        if (ratio > bestRatio) {
          bestRatio = ratio;
          bestSet = std::move(set);
        }
      }
      if (bestSet.empty())
        return false;
      for (int k : bestSet) {
        chosen[k] = 1;
        for (auto [r, a] : inRows[k])
          shortBy[r] -= a;
      }
    }
  }

  /// Takes out of `chosen` (which meets every row) whatever can go, the
  /// dearest first, each with the columns that need it.
  void prune(std::vector<uint8_t> &chosen) const {
    std::vector<double> shortBy = shortfall(chosen);
    std::vector<int> order;
    for (size_t j = 0; j < chosen.size(); ++j)
      if (chosen[j] && p.objective[j] > 0)
        order.push_back(static_cast<int>(j));
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return p.objective[a] > p.objective[b]; });
    for (int j : order) {
      if (!chosen[j])
        continue;
      std::vector<int> set = reach(j, chosen, /*want=*/false, implying);
      std::vector<double> after = shortBy;
      for (int k : set)
        for (auto [r, a] : inRows[k])
          after[r] += a;
      if (std::all_of(after.begin(), after.end(), [](double s) { return s <= kRowTolerance; })) {
        for (int k : set)
          chosen[k] = 0;
        shortBy = std::move(after);
      }
    }
  }

  bool touchesFixed(const std::vector<int> &set) const {
    return std::any_of(set.begin(), set.end(), [&](int k) { return p.upper[k] < 0.5; });
  }

  const MilpProblem &p;
  std::vector<std::vector<int>> implied, implying; ///< column -> what it implies / what implies it
  std::vector<std::vector<std::pair<size_t, double>>> inRows;
  std::vector<double> rhs;
  mutable std::vector<uint32_t> seen_;
  mutable uint32_t stamp_ = 0;
};

/// One solveByLagrangianCuts call: the closure solved at given prices (each a
/// bound on the program's optimum), and the cheapest point meeting every row
/// found along the way.
class PricedCuts {
public:
  PricedCuts(const MilpProblem &p, unsigned maxCuts)
      : p_(p), structure_(p), numColumns_(p.objective.size()),
        numRows_(structure_.rhs.size()), maxCuts_(maxCuts), cut_(structure_.implied, p.upper),
        weights_(numColumns_) {}

  /// With no point known, a first one for the step to aim below: the
  /// column-by-column completion of the empty closure.
  void offerCompletedEmpty();
  /// The subgradient search for the best bound (Polyak's steps), with
  /// `searchCuts` cuts at most (the rest for the repairs), until the bound
  /// passes `stopAbove`; the best prices found.
  std::vector<double> searchPrices(double upperBound, unsigned searchCuts,
                                   double stopAbove = std::numeric_limits<double>::infinity());
  /// Points that meet every row, from the best prices: all of them raised by
  /// one factor, the least that meets every row found by bisection.
  void raiseAllPrices(const std::vector<double> &bestPrices);
  /// The rows still short raised alone, a tenth each round (a row priced at
  /// zero starts where its cheapest column pays for itself).
  void raiseShortRows(const std::vector<double> &bestPrices);
  /// The best prices' own closure completed column by column; then whatever
  /// the best point holds that no row needs taken out.
  void completeBest(const std::vector<double> &bestPrices);

  LagrangianCutSolution take() { return std::move(out_); }

private:
  /// A point that meets every row: kept when the cheapest so far.
  void offer(const std::vector<uint8_t> &point);
  /// Solves the closure at `prices`; fills `chosen_` and `shortBy_`; returns
  /// the Lagrangian value (a bound on the program's optimum).
  double priced(const std::vector<double> &prices, bool &meetsRows);
  /// priced(), its value raising the bound where it is higher.
  bool pricedRaisingBound(const std::vector<double> &prices) {
    bool meetsRows = false;
    out_.bound = std::max(out_.bound, priced(prices, meetsRows));
    return meetsRows;
  }

  const MilpProblem &p_;
  const Structure structure_;
  const size_t numColumns_;
  const size_t numRows_;
  const unsigned maxCuts_;
  ClosureCut cut_;
  std::vector<double> weights_;
  std::vector<uint8_t> chosen_;
  std::vector<double> shortBy_;
  LagrangianCutSolution out_;
};

void PricedCuts::offer(const std::vector<uint8_t> &point) {
  if (double cost = structure_.cost(point); cost < out_.objective) {
    out_.objective = cost;
    out_.columns.assign(point.begin(), point.end());
  }
}

double PricedCuts::priced(const std::vector<double> &prices, bool &meetsRows) {
  for (size_t j = 0; j < numColumns_; ++j) {
    double w = p_.objective[j];
    for (auto [r, a] : structure_.inRows[j])
      w -= prices[r] * a;
    weights_[j] = w;
  }
  double value = -cut_.solve(weights_, chosen_);
  ++out_.cuts;
  for (size_t r = 0; r < numRows_; ++r)
    value += prices[r] * structure_.rhs[r];
  for (size_t j = 0; j < numColumns_; ++j)
    if (chosen_[j])
      value += weights_[j];
  shortBy_ = structure_.shortfall(chosen_);
  meetsRows = std::all_of(shortBy_.begin(), shortBy_.end(),
                          [](double s) { return s <= kRowTolerance; });
  if (meetsRows)
    offer(chosen_);
  return value;
}

void PricedCuts::offerCompletedEmpty() {
  std::vector<uint8_t> point(numColumns_, 0);
  if (structure_.complete(point)) {
    structure_.prune(point);
    offer(point);
  }
}

std::vector<double> PricedCuts::searchPrices(double upperBound, unsigned searchCuts,
                                             double stopAbove) {
  std::vector<double> prices(numRows_, 0), bestPrices = prices;
  double theta = 2;
  unsigned sinceBetter = 0;
  // With a bound to pass: given up once kStall cuts in a row raise it by
  // less than a thousandth of what is left to pass (the step halves every
  // kPatience cuts without a better bound, and the bound has settled short).
  const bool toPass = std::isfinite(stopAbove);
  unsigned stalled = 0;
  while (out_.cuts < searchCuts && out_.bound <= stopAbove) {
    bool meetsRows = false;
    const double before = out_.bound;
    const double value = priced(prices, meetsRows);
    if (toPass) {
      const bool rose = std::isfinite(before) && value - before > 1e-3 * (stopAbove - before);
      stalled = !std::isfinite(before) || rose ? 0 : stalled + 1;
      if (stalled >= kStall)
        break;
    }
    if (value > out_.bound) {
      out_.bound = value;
      bestPrices = prices;
      sinceBetter = 0;
    } else if (++sinceBetter >= kPatience) {
      theta /= 2;
      sinceBetter = 0;
    }
    const double upper = std::min(upperBound, out_.objective);
    if (std::isfinite(upper) && upper - out_.bound <= 1e-6 * std::max(1.0, std::abs(upper)))
      break; // the point found is optimal
    double norm = 0;
    for (size_t r = 0; r < numRows_; ++r)
      if (shortBy_[r] > 0 || prices[r] > 0)
        norm += shortBy_[r] * shortBy_[r];
    if (norm == 0 || theta < 1e-4)
      break;
    // Polyak's step towards the best objective known (or, with none yet, a
    // tenth above this value).
    const double target = std::isfinite(upper) ? upper : value + 0.1 * std::max(1.0, std::abs(value));
    const double step = theta * std::max(target - value, 1e-9) / norm;
    for (size_t r = 0; r < numRows_; ++r)
      prices[r] = std::max(0.0, prices[r] + step * shortBy_[r]);
  }
  return bestPrices;
}

void PricedCuts::raiseAllPrices(const std::vector<double> &bestPrices) {
  auto meets = [&](double factor) {
    std::vector<double> raised = bestPrices;
    for (double &price : raised)
      price *= factor;
    return pricedRaisingBound(raised);
  };
  double low = 1, high = 1;
  bool found = meets(1);
  for (unsigned k = 0; !found && k < kRepairCuts / 3 && out_.cuts < maxCuts_; ++k) {
    low = high;
    high *= 2;
    found = meets(high);
  }
  for (unsigned k = 0; found && k < kRepairCuts / 3 && high - low > 1e-3 * high && out_.cuts < maxCuts_;
       ++k) {
    const double mid = (low + high) / 2;
    (meets(mid) ? high : low) = mid;
  }
}

void PricedCuts::raiseShortRows(const std::vector<double> &bestPrices) {
  std::vector<double> floorPrice(numRows_, std::numeric_limits<double>::infinity());
  for (size_t j = 0; j < numColumns_; ++j)
    for (auto [r, a] : structure_.inRows[j])
      if (a > 0)
        floorPrice[r] = std::min(floorPrice[r], std::max(p_.objective[j], 1e-12) / a);
  std::vector<double> prices = bestPrices;
  for (unsigned round = 0; round < kRepairCuts && out_.cuts < maxCuts_; ++round) {
    if (pricedRaisingBound(prices))
      break;
    for (size_t r = 0; r < numRows_; ++r)
      if (shortBy_[r] > kRowTolerance)
        prices[r] = prices[r] > 0 ? prices[r] * 1.1
                                  : (std::isfinite(floorPrice[r]) ? floorPrice[r] : 1.0);
  }
}

void PricedCuts::completeBest(const std::vector<double> &bestPrices) {
  pricedRaisingBound(bestPrices);
  if (std::vector<uint8_t> point = chosen_; structure_.complete(point)) {
    structure_.prune(point);
    offer(point);
  }
  if (!out_.columns.empty()) {
    std::vector<uint8_t> point(out_.columns.begin(), out_.columns.end());
    structure_.prune(point);
    offer(point);
  }
}

} // namespace

LagrangianCutSolution solveByLagrangianCuts(const MilpProblem &p, double upperBound,
                                            unsigned maxCuts) {
  PricedCuts cuts(p, maxCuts);
  if (!std::isfinite(upperBound))
    cuts.offerCompletedEmpty();
  // The cuts left after the search go to points that meet the rows.
  const std::vector<double> bestPrices = cuts.searchPrices(upperBound, maxCuts - maxCuts / 3);
  cuts.raiseAllPrices(bestPrices);
  cuts.raiseShortRows(bestPrices);
  cuts.completeBest(bestPrices);
  return cuts.take();
}

double boundByLagrangianCuts(const MilpProblem &p, double aim, double stopAbove, unsigned maxCuts) {
  // Each cut costs a max-flow over every column: on the largest graphs only
  // as many as kBoundCutColumns column-cuts in all.
  const size_t affordable = kBoundCutColumns / std::max<size_t>(p.objective.size(), 1);
  maxCuts = static_cast<unsigned>(
      std::min<size_t>(maxCuts, std::max<size_t>(affordable, kMinBoundCuts)));
  PricedCuts cuts(p, maxCuts);
  cuts.searchPrices(aim, maxCuts, stopAbove);
  return cuts.take().bound;
}

} // namespace graphopt
