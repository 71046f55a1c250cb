//===- Statistics.h - Small robust statistics ------------------*- C++ -*-===//
#pragma once

#include <algorithm>
#include <vector>

namespace graphopt {

/// The median of `xs` (the mean of the middle two for an even count; T{} for none).
template <typename T> T medianOf(std::vector<T> xs) {
  if (xs.empty())
    return T{};
  size_t mid = xs.size() / 2;
  std::nth_element(xs.begin(), xs.begin() + static_cast<long>(mid), xs.end());
  T hi = xs[mid];
  if (xs.size() % 2)
    return hi;
  T lo = *std::max_element(xs.begin(), xs.begin() + static_cast<long>(mid));
  return static_cast<T>((lo + hi) / 2);
}

} // namespace graphopt
