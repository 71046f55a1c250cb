//===- ValueReplacements.h - The equal values a pipeline merged -*- C++ -*-===//
//
// What cse merged and canonicalize folded, as the passes did it: each entry
// says "every reader of `old` now reads `replacement`, an equal value". A
// caller that keeps another copy of the graph (torch.compile's fx joint
// graph, which graph-opt plans) applies the same replacements to it from this
// record, instead of comparing the two graphs' readers afterwards.
//
// Only replacements by an equal value go here; a pass that makes readers
// read a different value (reinplace's in-place result, a recomputation in
// backward, an all-reduced gradient) records none. Values are told apart by
// Value::id(), never reused, and reported by name, which a clone keeps: a
// name may be given again to a later value once the first is gone.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace graphopt {

class Graph;
class Value;

class ValueReplacements {
public:
  /// The graph as a run is given it: composed() reports its values only. The
  /// first call counts; without one every value is the given graph's.
  void begin(const Graph &graph);
  /// Every reader of `old` now reads `replacement`, which equals it.
  void note(const Value &old, const Value &replacement);
  /// {old name, name of the value it is now read as}, chains followed (x
  /// merged into y, y later folded to z: x is read as z), in the order first
  /// replaced; only values of the graph begin() saw, on both sides (a
  /// constant canonicalize made is no value the caller's copy has).
  std::vector<std::pair<std::string, std::string>> composed() const;

private:
  struct Entry {
    unsigned oldId, newId;
    std::string oldName, newName;
  };
  std::vector<Entry> entries_;
  unsigned givenIdBound_ = std::numeric_limits<unsigned>::max();
  bool begun_ = false;
};

} // namespace graphopt
