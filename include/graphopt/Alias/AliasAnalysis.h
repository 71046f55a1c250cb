//===- AliasAnalysis.h - Storage, views and writes of one graph -*- C++ -*-===//
//
// The one place graph-opt answers "which storage does this value live in,
// who writes it, who reads it, and which graph outputs hold it". Operator
// effects (IR/OpEffects.h) say what one call does; this analysis follows
// them over a whole graph:
//
//   - storage roots: the values whose storage a value lives in, through
//     chains of views (aten::view, t, expand, split, in-place results), with
//     a tied graph input standing for the input that owns its storage;
//   - views: every value whose storage is a given value's (forward);
//   - writes: which storages are written in place, at which positions
//     (write epochs per storage), and which values are written through;
//   - reads: the last node reading each storage, through any of its values;
//   - graph outputs: which storages escape through an output, and which
//     outputs share storage with each other.
//
// Passes ask the legality predicates built on it (RewriteLegality.h) rather
// than walking views themselves. XLA's HloAliasAnalysis and MLIR's side
// effect interfaces are the models.
//
// A snapshot with updates. The facts are computed once, in O(nodes + values)
// (each value's roots from its operands' roots, in graph order). A pass that
// edits the graph while it asks keeps it right by telling it what changed:
//   - noteReplaced(old, new): every use of `old` now reads `new` and `old`
//     goes; what lived in old's own storage lives in new's (copies folded,
//     equal calls merged, results moved into an operand's storage);
//   - noteReaderReplaced(from, to): node `to` reads what `from` read, where
//     it read it (a call swapped for its in-place variant).
// Values created after the snapshot are followed through their definitions
// on each question. Positions (`rankOf`) and write facts are those of the
// graph as it was analysed: a pass may erase nodes and merge values, but
// one that adds writes must not ask about writes afterwards.
//
// Passes ask the pass manager for it (AliasAnalysis: every fact;
// StorageRootsAnalysis: the roots alone), so that passes that do not edit
// share one walk. A pass that edits works on the manager's copy through
// getResultForUpdate; its updates keep the roots exact, but the read and
// write facts only conservative (a merged storage's writes cover all of it,
// an erased last reader is no reader), so a pass may preserve
// StorageRootsAnalysis, never AliasAnalysis. Code outside a pass (the
// executor, the verifier) makes its own.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"
#include "graphopt/IR/IRMap.h"

#include <absl/status/statusor.h>
#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/SmallVector.h>

#include <set>
#include <utility>
#include <vector>

namespace graphopt {

/// What an AliasInfo computes: everything, or the storage roots alone
/// (liveness's question, asked of every value: the reads, writes and escapes
/// it would not ask cost as much again).
enum class AliasFacts : uint8_t { All, RootsOnly };

class AliasInfo {
public:
  explicit AliasInfo(const Graph &graph, AliasFacts facts = AliasFacts::All);

  const Graph &graph() const { return *graph_; }

  // --- storage ----------------------------------------------------------------

  /// The values whose storage `v` lives in: followed back through views to
  /// values that alias nothing (graph inputs, fresh results), a tied graph
  /// input replaced by the input that owns its storage; `v` itself when it
  /// owns its storage. Several when an operator may return a view of any of
  /// several operands.
  llvm::SmallVector<const Value *, 2> roots(const Value *v) const;
  /// The ids of `v`'s roots, sorted (an id stays right where its value was
  /// erased since, which `roots` could not hand out).
  llvm::SmallVector<unsigned, 2> rootValueIds(const Value *v) const;
  /// `v` is its own and only root: a fresh result or an untied graph input.
  bool ownsStorage(const Value *v) const;
  /// Some storage of `a` is one of `b`'s.
  bool mayShareStorage(const Value *a, const Value *b) const;
  /// Some root of `v` is a graph input's storage.
  bool isRootedInGraphInput(const Value *v) const;
  /// `v` and every value whose storage is v's by being a view of it,
  /// transitively, in the current graph (forward, through uses).
  llvm::SmallVector<const Value *, 8> viewsOf(const Value *v) const;
  /// The bytes a use of `v` keeps alive: the largest span of its roots'
  /// storage (v's own bytes when it owns its storage).
  int64_t storageBytesKeptAlive(const Value *v) const;

  // --- writes -----------------------------------------------------------------

  /// `v` is written in place somewhere, directly or through a view of it.
  bool isWrittenThrough(const Value *v) const;
  /// The storage roots `node` writes in place (through any view).
  llvm::SmallVector<const Value *, 2> rootsWrittenBy(const Node &node) const;
  /// The indices of the graph inputs written in place, directly or through
  /// a view of them (what a run must copy to leave its inputs as they were).
  /// A tied input counts where a write goes through it.
  llvm::SmallVector<unsigned, 4> writtenGraphInputs() const;
  /// A node ranked strictly between `after` and `before` writes a storage
  /// `v` lives in, at bytes v may read (ranks: positions in the analysed
  /// graph). A write to a part of the storage v's offset and span do not
  /// reach (another slice of one buffer) does not count.
  bool writtenBetween(const Value *v, int64_t after, int64_t before) const;
  /// The bytes of its storage `v` may touch, [first, end), from its declared
  /// storage offset and strides; all of them when its type is not known.
  static std::pair<int64_t, int64_t> byteRange(const Value *v);
  /// `a` and `b` may touch a common byte: they share a storage and their
  /// byte ranges meet.
  bool mayOverlap(const Value *a, const Value *b) const;
  /// The rank of the first / last node writing a storage `v` lives in, or -1.
  int64_t firstWriteOf(const Value *v) const;
  int64_t lastWriteOf(const Value *v) const;
  /// The node's position in the analysed graph (-1 for nodes made after).
  int64_t rankOf(const Node *node) const { return rank_.lookup(node); }

  // --- reads and graph outputs -------------------------------------------------

  /// `node` is the last node reading storage root `root` through any value
  /// living in it (false when the last reader was erased since: a node that
  /// replaced it must be noted with noteReaderReplaced).
  bool isLastReader(const Value *root, const Node &node) const;
  /// Some graph output lives in a storage `v` lives in.
  bool reachesGraphOutput(const Value *v) const;
  /// How many operands of `node` (counting repeats) live in storage `root`.
  unsigned readsOf(const Node &node, const Value *root) const;

  // --- updates while a pass edits ------------------------------------------------

  /// Every use of `old` now reads `replacement`, and `old` is about to be
  /// erased: what lived in old's own storage (views of it, its readers, the
  /// graph outputs holding it) now lives in replacement's.
  void noteReplaced(const Value *old, const Value *replacement);
  /// Node `to` now reads what `from` read, at from's place; `from` goes.
  void noteReaderReplaced(const Node *from, const Node *to);

private:
  struct StorageFacts {
    /// The last node reading it, by id (never reused, so an erased node's
    /// address taken by a new node is no match) and by rank in the analysed
    /// graph (a node noted in another's place takes its rank).
    struct Reader {
      unsigned nodeId = ~0u;
      int64_t rank = -1;
    };
    Reader lastReader;
    bool escapes = false;
    /// The nodes writing it, by ascending rank, each with the bytes of the
    /// storage it may write (its written values' byteRange, joined).
    struct Write {
      int64_t rank;
      std::pair<int64_t, int64_t> bytes;
    };
    std::vector<Write> writes;
  };
  // Roots are kept as value ids (never reused): a value erased after
  // noteReplaced leaves its id redirected, and a new value at its address
  // cannot be mistaken for it.
  using Roots = llvm::SmallVector<unsigned, 1>;
  /// The root ids `v` had in the snapshot, or followed on the fly for
  /// values made after it (or whose snapshot went stale), before redirects.
  void rawRoots(const Value *v, Roots &out) const;
  /// `out` plus the root ids `id` stands for once redirects are followed.
  void resolve(unsigned id, Roots &out, unsigned depth = 0) const;
  Roots rootIds(const Value *v) const;
  const StorageFacts *factsOf(unsigned rootId) const;
  void remember(const Value *v) const {
    if (v->id() >= valueOfId_.size())
      valueOfId_.resize(std::max<size_t>(v->id() + 1, 2 * valueOfId_.size()), nullptr);
    valueOfId_[v->id()] = v;
  }
  const Value *valueOfId(unsigned id) const {
    return id < valueOfId_.size() ? valueOfId_[id] : nullptr;
  }

  const Graph *graph_;
  AliasFacts facts_;
  NodeMap<int64_t> rank_;
  ValueMap<Roots> roots_;
  ValueMap<uint8_t> analysed_; ///< 1: roots_ holds the value's roots
  ValueMap<uint8_t> writtenThrough_;
  /// The value of each id seen (roots are looked up by id), indexed by id:
  /// ids are dense, so a vector answers without hashing.
  mutable std::vector<const Value *> valueOfId_;
  /// Facts of each storage, indexed by its root's id (a default entry: no
  /// reader, write or escape), so that the walk over the nodes reaches them
  /// in id order instead of hashing into a table larger than the cache.
  std::vector<StorageFacts> storages_;
  StorageFacts &storage(unsigned rootId) {
    if (rootId >= storages_.size())
      storages_.resize(std::max<size_t>(rootId + 1, 2 * storages_.size()));
    return storages_[rootId];
  }
  /// Storage roots merged into others' (noteReplaced), and where they went.
  llvm::DenseMap<unsigned, Roots> redirects_;
};

/// Every alias fact of a graph, as an analysis the pass manager caches.
struct AliasAnalysis {
  static llvm::StringRef analysisName() { return "alias"; }
  using Result = AliasInfo;
  static absl::StatusOr<AliasInfo> run(const Graph &graph) { return AliasInfo(graph); }
};

/// The storage roots alone (what liveness and the output-sharing check ask),
/// as an analysis the pass manager caches. A pass that tells it each value it
/// replaces (noteReplaced) and creates its new values after it may preserve
/// it; whyDiffers checks such a claim.
struct StorageRootsAnalysis {
  static llvm::StringRef analysisName() { return "storage-roots"; }
  using Result = AliasInfo;
  static absl::StatusOr<AliasInfo> run(const Graph &graph) {
    return AliasInfo(graph, AliasFacts::RootsOnly);
  }
  /// The first value of `graph` whose storage roots differ between the two,
  /// and how; "" when every value's are the same.
  static std::string whyDiffers(const Graph &graph, const AliasInfo &kept, const AliasInfo &fresh);
};

/// The pairs (i, j), i < j, of graph outputs that may share storage (one is
/// a view of the other, both views of one base, or the same value twice).
/// A pass may not add a pair: PyTorch would hand the caller two tensors that
/// are one (two gradients, and `clip_grad_norm_` scales the storage twice).
/// `roots`: the graph's storage roots, when a cached analysis has them.
std::set<std::pair<unsigned, unsigned>> outputsSharingStorage(const Graph &graph);
std::set<std::pair<unsigned, unsigned>> outputsSharingStorage(const Graph &graph,
                                                              const AliasInfo &roots);

} // namespace graphopt
