//===- WeightStore.cpp ----------------------------------------------------===//
#include "graphopt/IR/WeightStore.h"

#include <llvm/ADT/DenseSet.h>

#include <algorithm>

namespace graphopt {

std::vector<std::string> WeightStore::names() const {
  std::vector<std::string> out;
  for (const auto &entry : tensors_)
    out.push_back(entry.getKey().str());
  std::sort(out.begin(), out.end());
  return out;
}

int64_t WeightStore::totalStorageBytes() const {
  llvm::DenseSet<const void *> seen;
  int64_t total = 0;
  for (const auto &entry : tensors_) {
    const at::Tensor &t = entry.getValue();
    if (!t.defined() || !t.has_storage())
      continue;
    if (seen.insert(t.storage().unsafeGetStorageImpl()).second)
      total += static_cast<int64_t>(t.storage().nbytes());
  }
  return total;
}

} // namespace graphopt
