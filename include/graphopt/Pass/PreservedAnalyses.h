//===- PreservedAnalyses.h - What a transform left valid ----------*- C++ -*-===//
//
// After a pass changed the graph, it says which cached analyses are still
// right (LLVM's new pass manager is the model):
//
//   PreservedAnalyses::none()                   // the default after a change
//   PreservedAnalyses::all()                    // nothing an analysis reads changed
//   PreservedAnalyses::none().preserve<MeasuredScratchAnalysis>()
//
// The AnalysisManager drops every cached result that is not preserved, and
// with it every result computed from one it dropped (its dependants), even if
// those were marked preserved.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <set>

namespace graphopt {

/// The identity of an analysis type: the address of a static per type.
using AnalysisID = const void *;

namespace detail {
template <typename A> struct AnalysisIDOf {
  static constexpr char key = 0;
};
} // namespace detail

template <typename A> AnalysisID analysisID() { return &detail::AnalysisIDOf<A>::key; }

class PreservedAnalyses {
public:
  static PreservedAnalyses all() {
    PreservedAnalyses pa;
    pa.all_ = true;
    return pa;
  }
  static PreservedAnalyses none() { return PreservedAnalyses(); }

  template <typename A> PreservedAnalyses &preserve() { return preserve(analysisID<A>()); }
  PreservedAnalyses &preserve(AnalysisID id) {
    preserved_.insert(id);
    return *this;
  }

  bool areAllPreserved() const { return all_; }
  template <typename A> bool isPreserved() const { return isPreserved(analysisID<A>()); }
  bool isPreserved(AnalysisID id) const { return all_ || preserved_.count(id) != 0; }

private:
  bool all_ = false;
  std::set<AnalysisID> preserved_;
};

} // namespace graphopt
