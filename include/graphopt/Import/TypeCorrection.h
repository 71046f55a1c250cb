//===- TypeCorrection.h - Declared result types checked against the kernels -*- C++ -*-===//
//
// An exported graph's types come from torch's fake tensors, and for a few
// operators they say another shape than the CPU kernel makes (aten::lstm.input
// has declared a hidden state f32[1, 1, 4, 128] that the kernel returns as
// f32[1, 4, 128]). After a .pt2 or .pt import every node with a CPU tensor
// result runs once on zero-filled stand-ins of its declared operands (about
// one unplanned step of the model; shapes are static, so zeros give the
// kernel's types), and each result's dtype, sizes, strides and offset are
// compared with the declared ones:
//   - where nothing reads a result, its declared type can only mislead the
//     memory accounting and fail the executor's check: it takes the
//     kernel's, with a remark naming the node;
//   - where only the layout differs (strides, storage offset: an eval-mode
//     dropout that returns its strided input, declared contiguous), it takes
//     the kernel's too, with a remark: readers were typed from the dtype and
//     sizes, which agree, and each later node runs on the corrected types, so
//     what derives from it (a view of it is strided too) is corrected in turn
//     (counted in one remark);
//   - where something reads it and its dtype or sizes differ, the declared
//     type cannot be mended alone (its readers were typed from it): the graph
//     records the conflict (Graph::typeConflicts), the optimizer refuses to
//     run passes on it, and --verify fails at that node (the executor's type
//     check; a wrong shape fails any run there).
// Nodes whose operands and results together span more than
// kMaxCpuCheckedNodeBytes (a large model's layers: running them would cost the
// time of a step at every import) are checked against their meta kernels,
// which run nothing (where the operator has one in C++: aten::relu's, for
// one, is registered from Python only, and such nodes stay unchecked). Nodes
// with effects outside the graph and those whose operator cannot run on
// stand-ins are not checked; their conflicts, if any, are still found by
// --verify. Nodes alike in operator, operand types and
// constants run their kernel once (a model's repeated layers); each is still
// compared with its own declared types.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"

#include <string>
#include <vector>

namespace graphopt {

/// The most a node's operands and results may span for its CPU kernel to be
/// run at import; larger nodes are checked on their meta kernels.
inline constexpr int64_t kMaxCpuCheckedNodeBytes = int64_t{16} << 20;

struct DeclaredTypeCheck {
  /// One per corrected (unread) result, naming the node.
  std::vector<std::string> remarks;
  /// One per read result the kernel contradicts, naming the node and a reader;
  /// also recorded in the graph (Graph::addTypeConflict).
  std::vector<std::string> conflicts;
  size_t nodesChecked = 0;
  /// Nodes the CPU check asks their meta kernels, for their size
  /// (kMaxCpuCheckedNodeBytes).
  size_t nodesOnMetaOnly = 0;
  /// Of those, nodes left unchecked: their operator has no meta kernel in C++
  /// (many pointwise operators' are registered from Python only).
  size_t nodesUnchecked = 0;
};

/// Which kernels the check asks. Cpu runs them (as above). Meta asks every
/// node's meta kernel, which runs nothing (no node is too large): it finds the
/// declared types that contradict their own operands' (torch.compile's joint
/// graphs declare some views of split results without their storage offset)
/// but not where the CPU kernel's layout differs from the meta kernel's. For
/// graphs that are planned, not run (graph_opt's partitioner: on GPT-2's joint
/// graph, one run each, 0.9 s against the CPU check's 3.2-4.6 s).
enum class TypeCheckKernels { Cpu, Meta };

/// Checks every node's declared CPU result types against its kernel's, as
/// above: corrects unread results and layouts (and what derives from them),
/// records conflicts on read results whose dtype or sizes differ.
DeclaredTypeCheck checkDeclaredTypes(Graph &graph,
                                     TypeCheckKernels kernels = TypeCheckKernels::Cpu);

} // namespace graphopt
