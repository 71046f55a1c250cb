//===- GraphoptOpsTest.cpp - graphopt::rng_state and native_dropout_replay -===//
#include "graphopt/IR/Graph.h"
#include "graphopt/IR/GraphoptOps.h"
#include "graphopt/IR/OpEffects.h"

#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/native_dropout.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/randn.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

#include <mutex>

using namespace graphopt;

namespace {

c10::OperatorHandle op(const char *name) {
  auto handle = resolveOperator(name);
  EXPECT_TRUE(handle.ok()) << handle.status().message();
  return *handle;
}

at::Tensor cpuState() {
  at::Generator gen = at::globalContext().defaultGenerator(c10::Device(c10::kCPU));
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

} // namespace

TEST(GraphoptOpsTest, ReplayDrawsTheSameMaskAndLeavesLaterDrawsAlone) {
  at::manual_seed(7);
  at::Tensor x = at::randn({1000});
  auto state = op("graphopt::rng_state").typed<at::Tensor(const at::Tensor &)>().call(x);
  EXPECT_EQ(state.numel(), kRngStateBytes);
  EXPECT_EQ(state.scalar_type(), at::kByte);
  auto [out, mask] = at::native_dropout(x, 0.3, true); // the forward call
  at::Tensor before = cpuState();
  auto replay = op("graphopt::native_dropout_replay")
                    .typed<std::tuple<at::Tensor, at::Tensor>(const at::Tensor &, double,
                                                              std::optional<bool>,
                                                              const at::Tensor &)>();
  auto [out2, mask2] = replay.call(x, 0.3, true, state);
  EXPECT_TRUE(at::equal(out, out2));
  EXPECT_TRUE(at::equal(mask, mask2));
  // The generator is where it was: the next draw is the one the original step makes.
  EXPECT_TRUE(at::equal(before, cpuState()));
}

TEST(GraphoptOpsTest, RngStateIsRandomAndTheReplayIsNot) {
  EXPECT_TRUE(opEffects(op("graphopt::rng_state")).random);
  EXPECT_FALSE(opEffects(op("graphopt::native_dropout_replay")).random);
}

TEST(GraphoptOpsTest, AStateThatIsNotOneIsRefused) {
  at::Tensor x = at::randn({16});
  at::Tensor bad = at::zeros({kRngStateBytes}, at::kByte); // a length of 0
  auto replay = op("graphopt::native_dropout_replay")
                    .typed<std::tuple<at::Tensor, at::Tensor>(const at::Tensor &, double,
                                                              std::optional<bool>,
                                                              const at::Tensor &)>();
  EXPECT_THROW(replay.call(x, 0.5, true, bad), c10::Error);
  at::Tensor before = cpuState();
  EXPECT_THROW(replay.call(x, 0.5, true, at::zeros({4}, at::kByte)), c10::Error);
  EXPECT_TRUE(at::equal(before, cpuState()));
}
