//===- InductorCostTests.cpp - checkpoint{cost=inductor}'s node prices ----===//
//
// InductorCost.h on graphs written out by hand, at stated rates (1 GB/s,
// 1 GFLOP/s) so that every price is exact: fusing operators pay the bytes
// they read from memory, kernels a roofline or the database, views nothing.
//
//===----------------------------------------------------------------------===//
#include "checkpoint/InductorCost.h"

#include "graphopt/IR/Parser.h"

#include <gtest/gtest.h>

#include <map>

namespace graphopt {
namespace {

constexpr MachineRates kRates{/*bytesPerSecond=*/1e9, /*flopsPerSecond=*/1e9};

const char *kGraph = R"(graph @g {
  input %x : f32[64, 64] user_input
  input %u : f32[64, 8] parameter "u"
  input %v : f32[8, 64] parameter "v"
  input %q : f32[2, 4, 16, 8] user_input
forward:
  %m = aten::mm(%u, %v) : f32[64, 64]
  %a = aten::sin(%x) : f32[64, 64]
  %b = aten::mul.Tensor(%a, %m) : f32[64, 64]
  %c = aten::cos(%b) : f32[64, 64]
  %t = aten::t(%c) : f32[64, 64]
  %d = aten::exp(%t) : f32[64, 64]
  %o, %lse = aten::_scaled_dot_product_flash_attention_for_cpu(%q, %q, %q, 0.0, false) : f32[2, 4, 16, 8], f32[2, 4, 16]
  %loss = aten::sum(%d) : f32[]
backward:
  %g = aten::mul.Tensor(%c, %loss) : f32[64, 64]
  output %loss loss
  output %g gradient "u"
}
)";

std::map<std::string, std::pair<double, PriceSource>> priced(const Graph &g,
                                                             const InductorPrices &prices) {
  std::map<std::string, std::pair<double, PriceSource>> out;
  size_t r = 0;
  for (const Node &n : g.nodes()) {
    out[n.output(0)->name().str()] = {prices.seconds[r], prices.sources[r]};
    ++r;
  }
  return out;
}

TEST(InductorCostTest, FusingOperatorsPayWhatTheyReadFromMemory) {
  auto g = parseGraph(kGraph);
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto p = priced(**g, inductorNodeSeconds(**g, kRates));
  const double tile = 64 * 64 * 4 / 1e9; // one f32[64, 64] at 1 GB/s
  // sin reads the input %x.
  EXPECT_DOUBLE_EQ(p["a"].first, tile);
  EXPECT_EQ(p["a"].second, PriceSource::FusedBytes);
  // mul reads the kernel output %m; %a (a fusing operator's, not saved) stays in the kernel.
  EXPECT_DOUBLE_EQ(p["b"].first, tile);
  // cos reads %b from inside the kernel: nothing.
  EXPECT_DOUBLE_EQ(p["c"].first, 0);
  // exp reads %c through a view: %c is saved for backward, so it is in memory.
  EXPECT_DOUBLE_EQ(p["d"].first, tile);
  EXPECT_EQ(p["t"].second, PriceSource::View);
  EXPECT_DOUBLE_EQ(p["t"].first, 0);
}

TEST(InductorCostTest, KernelsTakeTheRooflineOrTheDatabase) {
  auto g = parseGraph(kGraph);
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto p = priced(**g, inductorNodeSeconds(**g, kRates));
  // mm: 2*64*64*8 FLOPs, more than the (64*8 + 8*64 + 64*64) * 4 bytes it moves
  // at these rates.
  EXPECT_DOUBLE_EQ(p["m"].first, 2.0 * 64 * 64 * 8 / 1e9);
  EXPECT_EQ(p["m"].second, PriceSource::Roofline);
  // Attention: 4 * query elements * key length FLOPs, more than the bytes (the
  // one input read once, the output and the log-sum-exp written).
  EXPECT_EQ(p["o"].second, PriceSource::Roofline);
  EXPECT_DOUBLE_EQ(p["o"].first, 4.0 * (2 * 4 * 16 * 8) * 16 / 1e9);
  EXPECT_GT(4.0 * (2 * 4 * 16 * 8) * 16, 2 * (2 * 4 * 16 * 8 * 4) + 2 * 4 * 16 * 4);
  EXPECT_TRUE(isExternKernel(*(*g)->nodes().begin()));

  std::vector<std::optional<double>> db((*g)->numNodes());
  db[0] = 0.25; // the mm
  db[1] = 7.0;  // sin: the database does not price fusing operators
  auto withDb = priced(**g, inductorNodeSeconds(**g, kRates, &db));
  EXPECT_DOUBLE_EQ(withDb["m"].first, 0.25);
  EXPECT_EQ(withDb["m"].second, PriceSource::Database);
  EXPECT_DOUBLE_EQ(withDb["a"].first, p["a"].first);
  EXPECT_EQ(withDb["o"].second, PriceSource::Roofline); // none in the database
}

TEST(InductorCostTest, TheMachineIsMeasured) {
  const MachineRates &rates = measuredCpuRates();
  EXPECT_GT(rates.bytesPerSecond, 1e7);
  EXPECT_GT(rates.flopsPerSecond, 1e7);
  EXPECT_EQ(&rates, &measuredCpuRates()); // once per process
}

} // namespace
} // namespace graphopt
