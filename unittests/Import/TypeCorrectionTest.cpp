//===- TypeCorrectionTest.cpp - Declared result types against the kernels ===//
#include "graphopt/Import/TypeCorrection.h"

#include "graphopt/IR/Parser.h"

#include "../TestSupport.h"

#include <gtest/gtest.h>

using namespace graphopt;
using graphopt::test::valueNamed;

// %i (unread) is declared with sizes the kernel does not make, as torch's fake
// tensors declared an LSTM's hidden state: corrected, with a remark naming
// the node. %j is declared as wrongly but read: kept, and recorded as a
// conflict in the graph naming the node and its reader. %k is right.
TEST(TypeCorrectionTest, UnreadResultsTakeTheKernelsTypeReadOnesAreConflicts) {
  auto g = parseGraph(R"(graph @g {
  input %x : f32[4, 6] user_input
  %m, %i = aten::max.dim(%x, 1) : f32[4], i64[1, 4]
  %n, %j = aten::max.dim(%x, 0) : f32[6], i64[1, 6]
  %p, %k = aten::min.dim(%x, 1) : f32[4], i64[4]
  %s = aten::add.Tensor(%m, %m) : f32[4]
  %t = aten::add.Tensor(%j, %j) : i64[1, 6]
  output %s user_output
  output %t user_output
  output %n user_output
  output %p user_output
})",
                      "test.gir");
  ASSERT_TRUE(g.ok()) << g.status().message();
  DeclaredTypeCheck check = checkDeclaredTypes(**g);
  EXPECT_EQ(check.nodesChecked, 5u);
  std::vector<std::string> &remarks = check.remarks;
  ASSERT_EQ(remarks.size(), 1u);
  EXPECT_EQ(remarks[0], "node %m = aten::max.dim: result %i is declared i64[1, 4] but the CPU "
                        "kernel makes i64[4]; nothing reads it, so graph-opt takes the kernel's "
                        "type");
  EXPECT_EQ(valueNamed(**g, "i")->tensorType().sizes, (llvm::SmallVector<int64_t, 4>{4}));
  EXPECT_EQ(valueNamed(**g, "j")->tensorType().sizes, (llvm::SmallVector<int64_t, 4>{1, 6}));
  EXPECT_EQ(valueNamed(**g, "k")->tensorType().sizes, (llvm::SmallVector<int64_t, 4>{4}));
  ASSERT_EQ(check.conflicts.size(), 1u);
  EXPECT_EQ(check.conflicts[0],
            "node %n = aten::max.dim: result %j is declared i64[1, 6] but the CPU kernel makes "
            "i64[6], and node %t = aten::add.Tensor reads it as declared");
  ASSERT_EQ((*g)->typeConflicts().size(), 1u);
  EXPECT_EQ((*g)->typeConflicts()[0], check.conflicts[0]);
  EXPECT_EQ((*g)->clone()->typeConflicts().size(), 1u);
  // Nothing left to correct the second time.
  EXPECT_TRUE(checkDeclaredTypes(**g).remarks.empty());
}

TEST(TypeCorrectionTest, RightTypesGiveNothing) {
  auto g = parseGraph(R"(graph @g {
  input %x : f32[4, 6] user_input
  %t = aten::t(%x) : f32[6, 4]{strides=[1, 6]}
  %r = aten::relu(%t) : f32[6, 4]{strides=[1, 6]}
  %c = aten::contiguous(%r) : f32[6, 4]
  output %c user_output
})",
                      "test.gir");
  ASSERT_TRUE(g.ok()) << g.status().message();
  DeclaredTypeCheck check = checkDeclaredTypes(**g);
  EXPECT_EQ(check.nodesChecked, 3u);
  EXPECT_TRUE(check.remarks.empty());
  EXPECT_TRUE(check.conflicts.empty());
  EXPECT_TRUE((*g)->typeConflicts().empty());
}

// Nodes too large to run at import are checked on their meta kernels, not
// run: one by its declared operand (32 MiB), one by what its meta kernel says
// it would make (a result declared f32[2] that aten::full makes 64 MiB large;
// it is not allocated). The meta kernel contradicts %f's declared sizes, which
// %s reads: a conflict, found without running anything. aten::relu has no meta
// kernel in C++: that large node stays unchecked, counted.
TEST(TypeCorrectionTest, LargeNodesAreCheckedOnTheirMetaKernels) {
  auto g = parseGraph(R"(graph @g {
  input %x : f32[2048, 4096] user_input
  %r = aten::add.Tensor(%x, %x) : f32[2048, 4096]
  %u = aten::relu(%x) : f32[2048, 4096]
  %f = aten::full([4096, 4096], 1, dtype=f32) : f32[2]
  %s = aten::sum(%f) : f32[]
  output %r user_output
  output %u user_output
  output %s user_output
})",
                      "test.gir");
  ASSERT_TRUE(g.ok()) << g.status().message();
  DeclaredTypeCheck check = checkDeclaredTypes(**g);
  EXPECT_EQ(check.nodesOnMetaOnly, 3u);
  EXPECT_EQ(check.nodesUnchecked, 1u); // %u
  EXPECT_EQ(check.nodesChecked, 3u);   // %r and %f on meta, %s on CPU
  ASSERT_EQ(check.conflicts.size(), 1u);
  EXPECT_NE(check.conflicts[0].find("node %f = aten::full"), std::string::npos)
      << check.conflicts[0];
}

// A large eval-mode dropout returns its input, a strided slice (a Hugging Face
// RoBERTa classifier's head at batch 64 x 512, hidden 256: 32 MiB), which
// torch.export declares contiguous: the meta kernel makes the input's layout,
// and the declared type is corrected without running the 32 MiB node.
TEST(TypeCorrectionTest, LargeStridedDropoutIsCorrectedByItsMetaKernel) {
  auto g = parseGraph(R"(graph @g {
  input %x : f32[64, 512, 256] user_input
  %v = aten::select.int(%x, 1, 0) : f32[64, 256]{strides=[131072, 1]}
  %d = aten::dropout(%v, 0.1, false) : f32[64, 256]
  %s = aten::sum(%d) : f32[]
  output %s user_output
})",
                      "test.gir");
  ASSERT_TRUE(g.ok()) << g.status().message();
  DeclaredTypeCheck check = checkDeclaredTypes(**g);
  EXPECT_TRUE(check.conflicts.empty());
  const auto &strides = valueNamed(**g, "d")->tensorType().strides;
  EXPECT_EQ(std::vector<int64_t>(strides.begin(), strides.end()),
            (std::vector<int64_t>{131072, 1}));
  EXPECT_GE(check.nodesOnMetaOnly, 2u);
}

// The meta kernels check every node, however large, and run nothing: %p, a
// transpose of the second half of %x, is declared without the storage offset
// its operand has (as torch.compile's joint graphs declare some views of split
// results); the meta kernel makes it with the offset, and the layout is
// corrected. The CPU check asks the meta kernels too (32 MiB operands).
TEST(TypeCorrectionTest, MetaKernelsCheckEveryNodeWithoutRunningIt) {
  const char *text = R"(graph @g {
  input %x : f32[2048, 4096] user_input
  %v = aten::slice.Tensor(%x, 0, 1024, 2048) : f32[1024, 4096]{offset=4194304}
  %p = aten::t(%v) : f32[4096, 1024]{strides=[1, 4096]}
  %s = aten::sum(%p) : f32[]
  output %s user_output
})";
  auto cpu = parseGraph(text, "test.gir");
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  DeclaredTypeCheck onCpu = checkDeclaredTypes(**cpu);
  EXPECT_EQ(onCpu.nodesOnMetaOnly, 3u);
  EXPECT_EQ(onCpu.remarks.size(), 1u); // %p corrected on its meta kernel there too

  auto meta = parseGraph(text, "test.gir");
  ASSERT_TRUE(meta.ok()) << meta.status().message();
  DeclaredTypeCheck onMeta = checkDeclaredTypes(**meta, TypeCheckKernels::Meta);
  EXPECT_EQ(onMeta.nodesOnMetaOnly, 0u);
  EXPECT_EQ(onMeta.nodesChecked, 3u);
  ASSERT_EQ(onMeta.remarks.size(), 1u);
  EXPECT_EQ(onMeta.remarks[0],
            "node %p = aten::t: result %p is declared f32[4096, 1024]{strides=[1, 4096]} but the "
            "meta kernel makes f32[4096, 1024]{strides=[1, 4096], offset=4194304}; only the "
            "layout differs, so graph-opt takes the kernel's and its readers' types follow it");
  EXPECT_EQ(valueNamed(**meta, "p")->tensorType().storageOffset, 4194304);
  EXPECT_TRUE(onMeta.conflicts.empty());
}

// Nodes alike in operator, operand types and constants run their kernel once
// (the check's memo), but each node's declared types are still compared with
// what it makes: %b is %a again declared contiguous; %d differs from %c only
// in a constant; %f from %e only in its operand's strides. Each of the three
// is wrong and unread, so each gets its own remark; the others are right.
TEST(TypeCorrectionTest, AlikeNodesShareTheKernelRunNotTheVerdict) {
  auto g = parseGraph(R"(graph @g {
  input %x : f32[4, 6] user_input
  %a = aten::t(%x) : f32[6, 4]{strides=[1, 6]}
  %b = aten::t(%x) : f32[6, 4]
  %c = aten::sum.dim_IntList(%x, [1]) : f32[4]
  %d = aten::sum.dim_IntList(%x, [0]) : f32[4]
  %e = aten::relu(%a) : f32[6, 4]{strides=[1, 6]}
  %y = aten::contiguous(%a) : f32[6, 4]
  %f = aten::relu(%y) : f32[6, 4]{strides=[1, 6]}
  output %c user_output
  output %e user_output
  output %y user_output
})",
                      "test.gir");
  ASSERT_TRUE(g.ok()) << g.status().message();
  DeclaredTypeCheck check = checkDeclaredTypes(**g);
  EXPECT_EQ(check.nodesChecked, 7u);
  EXPECT_TRUE(check.conflicts.empty());
  ASSERT_EQ(check.remarks.size(), 3u);
  EXPECT_NE(check.remarks[0].find("result %b is declared f32[6, 4] but the CPU kernel makes "
                                  "f32[6, 4]{strides=[1, 6]}"),
            std::string::npos)
      << check.remarks[0];
  EXPECT_NE(check.remarks[1].find("result %d is declared f32[4] but the CPU kernel makes f32[6]"),
            std::string::npos)
      << check.remarks[1];
  EXPECT_NE(check.remarks[2].find("result %f is declared f32[6, 4]{strides=[1, 6]} but the CPU "
                                  "kernel makes f32[6, 4]"),
            std::string::npos)
      << check.remarks[2];
  EXPECT_EQ(valueNamed(**g, "d")->tensorType().sizes, (llvm::SmallVector<int64_t, 4>{6}));
  // The meta kernels the same way.
  auto h = parseGraph(R"(graph @h {
  input %x : f32[4, 6] user_input
  %c = aten::sum.dim_IntList(%x, [1]) : f32[4]
  %d = aten::sum.dim_IntList(%x, [0]) : f32[4]
  output %c user_output
})",
                      "test.gir");
  ASSERT_TRUE(h.ok()) << h.status().message();
  DeclaredTypeCheck onMeta = checkDeclaredTypes(**h, TypeCheckKernels::Meta);
  ASSERT_EQ(onMeta.remarks.size(), 1u);
  EXPECT_NE(onMeta.remarks[0].find("result %d is declared f32[4] but the meta kernel makes "
                                   "f32[6]"),
            std::string::npos)
      << onMeta.remarks[0];
}

// Alike nodes declaring different numbers of results (a hand-written graph
// can): the second is not given the first's results, it fails as it would
// without the memo (the operator returns 2 results for 3 outputs), and the
// check goes on.
TEST(TypeCorrectionTest, AlikeNodesWithOtherResultCountsAreRunAgain) {
  auto g = parseGraph(R"(graph @g {
  input %x : f32[4, 6] user_input
  %a, %b = aten::split.Tensor(%x, 3, 1) : f32[4, 3]{strides=[6, 1]}, f32[4, 3]{strides=[6, 1], offset=3}
  %c, %d, %e = aten::split.Tensor(%x, 3, 1) : f32[4, 3], f32[4, 3], f32[4, 3]
  %s = aten::add.Tensor(%a, %b) : f32[4, 3]
  %t = aten::add.Tensor(%c, %d) : f32[4, 3]
  output %s user_output
  output %t user_output
  output %e user_output
})",
                      "test.gir");
  ASSERT_TRUE(g.ok()) << g.status().message();
  DeclaredTypeCheck check = checkDeclaredTypes(**g);
  EXPECT_TRUE(check.conflicts.empty());
  EXPECT_EQ(check.nodesChecked, 3u); // the first split and the two adds
}
