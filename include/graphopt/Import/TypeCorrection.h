//===- TypeCorrection.h - Unread results typed by the kernel that makes them -*- C++ -*-===//
//
// An exported graph's types come from torch's fake tensors, and for a few
// operators they say another shape than the CPU kernel makes (aten::lstm.input
// has declared a hidden state f32[1, 1, 4, 128] that the kernel returns as
// f32[1, 4, 128]). Where nothing reads such a result, its declared type can
// only mislead the memory accounting and fail the executor's type check, so
// the importers take the kernel's type instead and say so in a remark. A
// result something reads keeps its declared type: every pass and the
// executor rely on it, and the executor's check names the node when the
// kernel disagrees.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graphopt/IR/Graph.h"

#include <string>
#include <vector>

namespace graphopt {

/// For each node with a tensor result on the CPU that nothing reads (no node,
/// no graph output), runs its operator once on zero-filled CPU stand-ins of
/// its operands and, where a result's dtype, sizes, strides or storage offset
/// differ from the declared ones, sets the kernel's. Returns one remark per
/// corrected result, naming the node. Nodes whose operator cannot run on
/// stand-ins are left as they are.
std::vector<std::string> correctUnreadResultTypes(Graph &graph);

} // namespace graphopt
