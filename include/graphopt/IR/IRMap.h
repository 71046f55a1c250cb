//===- IRMap.h - Per-node and per-value tables indexed by id ------*- C++ -*-===//
//
// Analyses keep one entry per node or per value. Node::id() and Value::id()
// are small, dense, never reused numbers, so a plain vector indexed by id is
// both faster than a pointer hash map and stable under rewrites: a result is
// looked up by the node or value it describes, never by its position in the
// node list (which changes when a pass inserts or erases nodes).
//
//   NodeMap<int64_t> rank(graph, -1);      // one slot per node id, all -1
//   rank[&node] = 3;
//   int64_t r = rank.lookup(&other);       // -1 when never set
//
// A map grows on demand, so nodes or values created after it was made (by a
// rewrite) can be added; `lookup` of an id beyond its size gives the default.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"

#include <type_traits>
#include <vector>

namespace graphopt {

template <typename Key, typename T> class IdMap {
  static_assert(!std::is_same_v<T, bool>, "use uint8_t: std::vector<bool> hands out no T&");

public:
  IdMap() = default;
  explicit IdMap(unsigned idBound, T defaultValue = T())
      : data_(idBound, defaultValue), default_(std::move(defaultValue)) {}

  /// The entry of `key`, growing the table (with the default) if needed.
  T &operator[](const Key *key) {
    unsigned id = key->id();
    if (id >= data_.size())
      data_.resize(id + 1, default_);
    return data_[id];
  }
  /// The entry of `key`, or the default when it has none.
  const T &lookup(const Key *key) const {
    unsigned id = key->id();
    return id < data_.size() ? data_[id] : default_;
  }
  const T &defaultValue() const { return default_; }
  /// One past the largest id with a slot.
  size_t size() const { return data_.size(); }
  void clear() { data_.assign(data_.size(), default_); }

private:
  std::vector<T> data_;
  T default_{};
};

/// One entry per node of a graph, indexed by Node::id().
template <typename T> class NodeMap : public IdMap<Node, T> {
public:
  NodeMap() = default;
  explicit NodeMap(const Graph &graph, T defaultValue = T())
      : IdMap<Node, T>(graph.nodeIdBound(), std::move(defaultValue)) {}
};

/// One entry per value of a graph, indexed by Value::id(). With T = Value *
/// it is also the old-to-new mapping of a clone (null: not mapped).
template <typename T> class ValueMap : public IdMap<Value, T> {
public:
  ValueMap() = default;
  explicit ValueMap(const Graph &graph, T defaultValue = T())
      : IdMap<Value, T>(graph.valueIdBound(), std::move(defaultValue)) {}
};

} // namespace graphopt
