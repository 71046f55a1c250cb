//===- WeightStore.h - Parameter, buffer and constant tensors -----*- C++ -*-===//
//
// Weights live beside the graph, not in it: a graph input with role
// parameter, buffer, constant or optimizer_state names its tensor here by its
// target ("layer1.0.conv1.weight"). Tensors that shared storage in the source
// model share it here too (tied weights stay tied).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <ATen/core/Tensor.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/ADT/StringRef.h>

#include <string>
#include <vector>

namespace graphopt {

class WeightStore {
public:
  void set(llvm::StringRef name, at::Tensor tensor) { tensors_[name] = std::move(tensor); }
  /// The tensor stored under `name`, or null.
  const at::Tensor *lookup(llvm::StringRef name) const {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
  }
  at::Tensor *lookup(llvm::StringRef name) {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
  }
  bool contains(llvm::StringRef name) const { return tensors_.count(name) != 0; }
  size_t size() const { return tensors_.size(); }
  bool empty() const { return tensors_.empty(); }
  /// Names in sorted order (deterministic iteration).
  std::vector<std::string> names() const;
  /// Bytes of distinct storages (shared storage counted once).
  int64_t totalStorageBytes() const;

private:
  llvm::StringMap<at::Tensor> tensors_;
};

} // namespace graphopt
