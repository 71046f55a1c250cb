//===- TypeCorrectionTest.cpp - Unread results typed by their kernel ------===//
#include "graphopt/Import/TypeCorrection.h"

#include "graphopt/IR/Parser.h"

#include "../TestSupport.h"

#include <gtest/gtest.h>

using namespace graphopt;
using graphopt::test::valueNamed;

// %i (unread) is declared with sizes the kernel does not make, as torch's fake
// tensors declared an LSTM's hidden state: corrected, with a remark naming
// the node. %j is declared as wrongly but read: left for the executor's check.
// %k is right: no remark.
TEST(TypeCorrectionTest, OnlyUnreadResultsTakeTheKernelsType) {
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
  std::vector<std::string> remarks = correctUnreadResultTypes(**g);
  ASSERT_EQ(remarks.size(), 1u);
  EXPECT_EQ(remarks[0], "node %m = aten::max.dim: result %i is declared i64[1, 4] but the CPU "
                        "kernel makes i64[4]; nothing reads it, so graph-opt takes the kernel's "
                        "type");
  EXPECT_EQ(valueNamed(**g, "i")->tensorType().sizes, (llvm::SmallVector<int64_t, 4>{4}));
  EXPECT_EQ(valueNamed(**g, "j")->tensorType().sizes, (llvm::SmallVector<int64_t, 4>{1, 6}));
  EXPECT_EQ(valueNamed(**g, "k")->tensorType().sizes, (llvm::SmallVector<int64_t, 4>{4}));
  // Nothing left to correct the second time.
  EXPECT_TRUE(correctUnreadResultTypes(**g).empty());
}
