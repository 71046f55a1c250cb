//===- PeakTracker.cpp - A memory timeline under edits --------------------===//
#include "graphopt/Analysis/PeakTracker.h"

#include <algorithm>

namespace graphopt {

PeakTracker::PeakTracker(llvm::ArrayRef<int64_t> timeline)
    : size_(static_cast<int64_t>(timeline.size())), max_(4 * timeline.size() + 4, 0),
      pending_(4 * timeline.size() + 4, 0) {
  if (size_)
    build(1, 0, size_ - 1, timeline);
}

void PeakTracker::build(size_t node, int64_t lo, int64_t hi, llvm::ArrayRef<int64_t> timeline) {
  if (lo == hi) {
    max_[node] = timeline[lo];
    return;
  }
  int64_t mid = lo + (hi - lo) / 2;
  build(2 * node, lo, mid, timeline);
  build(2 * node + 1, mid + 1, hi, timeline);
  max_[node] = std::max(max_[2 * node], max_[2 * node + 1]);
}

void PeakTracker::add(int64_t first, int64_t last, int64_t bytes) {
  first = std::max<int64_t>(first, 0);
  last = std::min<int64_t>(last, size_ - 1);
  if (first > last || bytes == 0)
    return;
  add(1, 0, size_ - 1, first, last, bytes);
}

// Lazy range add: a node covered whole takes the add in `pending_` (and its
// max), children are never touched; max_[node] = pending_[node] + max of children.
void PeakTracker::add(size_t node, int64_t lo, int64_t hi, int64_t first, int64_t last,
                      int64_t bytes) {
  if (last < lo || hi < first)
    return;
  if (first <= lo && hi <= last) {
    max_[node] += bytes;
    pending_[node] += bytes;
    return;
  }
  int64_t mid = lo + (hi - lo) / 2;
  add(2 * node, lo, mid, first, last, bytes);
  add(2 * node + 1, mid + 1, hi, first, last, bytes);
  max_[node] = pending_[node] + std::max(max_[2 * node], max_[2 * node + 1]);
}

int64_t PeakTracker::peakRank() const {
  if (!size_)
    return -1;
  // Descend towards the child whose max (plus the adds pending above it) is the peak.
  size_t node = 1;
  int64_t lo = 0, hi = size_ - 1, above = 0;
  while (lo != hi) {
    above += pending_[node];
    int64_t mid = lo + (hi - lo) / 2;
    if (above + max_[2 * node] == max_[1]) {
      node = 2 * node;
      hi = mid;
    } else {
      node = 2 * node + 1;
      lo = mid + 1;
    }
  }
  return lo;
}

int64_t PeakTracker::at(int64_t rank) const {
  size_t node = 1;
  int64_t lo = 0, hi = size_ - 1, sum = 0;
  while (lo != hi) {
    sum += pending_[node];
    int64_t mid = lo + (hi - lo) / 2;
    if (rank <= mid) {
      node = 2 * node;
      hi = mid;
    } else {
      node = 2 * node + 1;
      lo = mid + 1;
    }
  }
  return sum + max_[node];
}

} // namespace graphopt
