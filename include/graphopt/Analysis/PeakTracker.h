//===- PeakTracker.h - A memory timeline under edits --------------*- C++ -*-===//
//
// A rewrite that changes when storages are freed (CSE keeping one value alive
// for another's uses; recomputation freeing an activation early) changes the
// liveness timeline by adding or removing bytes over a range of node ranks.
// PeakTracker holds a timeline (LivenessResult::timeline) in a segment tree,
// so such an edit and the new peak each take O(log n): a pass can try an edit,
// read the peak, and undo it, for every candidate, without re-simulating.
//
//   PeakTracker peak(liveness.timeline);
//   peak.add(first, last, bytes);      // bytes live over ranks [first, last]
//   int64_t p = peak.peak();           // max over the timeline
//   peak.add(first, last, -bytes);     // undo
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <vector>

#include <llvm/ADT/ArrayRef.h>

namespace graphopt {

class PeakTracker {
public:
  explicit PeakTracker(llvm::ArrayRef<int64_t> timeline);

  /// Adds `bytes` (negative to remove) at every rank in [first, last],
  /// clamped to the timeline; nothing when the range is empty.
  void add(int64_t first, int64_t last, int64_t bytes);
  /// The largest value on the timeline (0 for an empty one).
  int64_t peak() const { return size_ ? max_[1] : 0; }
  /// The first rank holding the peak (-1 for an empty timeline; O(log n)).
  int64_t peakRank() const;
  /// The value at one rank (O(log n)).
  int64_t at(int64_t rank) const;
  int64_t size() const { return size_; }

private:
  void add(size_t node, int64_t lo, int64_t hi, int64_t first, int64_t last, int64_t bytes);
  void build(size_t node, int64_t lo, int64_t hi, llvm::ArrayRef<int64_t> timeline);

  int64_t size_;
  std::vector<int64_t> max_;     ///< max over the node's range, its pending adds included
  std::vector<int64_t> pending_; ///< added to the whole range, not yet pushed to children
};

} // namespace graphopt
