//===- ExecutorParityTest.cpp - The executor computes what PyTorch does --===//
//
// For every zoo archive (tiny, inference and joint training graphs), PyTorch
// ran the same graph with torch.fx.Interpreter and the same seed
// (test/Inputs/make_references.py). The executor runs the imported graph with
// the same weights, inputs and seed: the same operators in the same order, so
// every output (loss, each gradient, buffer mutations, user outputs) must be
// bitwise equal, dropout included.
//
//===----------------------------------------------------------------------===//
#include "graphopt/Import/Importer.h"
#include "graphopt/Runtime/Executor.h"
#include "graphopt/Support/FileIO.h"
#include "../ZooArchives.h"

#include <ATen/ops/equal.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <cstdlib>

using namespace graphopt;
using namespace graphopt::test;

namespace {

struct Reference {
  int64_t seed = 0;
  std::vector<at::Tensor> inputs;
  std::vector<at::Tensor> outputs;
};

std::vector<at::Tensor> tensors(const c10::IValue &list) {
  std::vector<at::Tensor> out;
  for (const c10::IValue &v : list.toListRef())
    out.push_back(v.isTensor() ? v.toTensor() : at::Tensor());
  return out;
}

Reference readReference(const std::string &path) {
  auto bytes = readFile(path);
  EXPECT_TRUE(bytes.ok()) << bytes.status().message();
  Reference ref;
  if (!bytes.ok())
    return ref;
  c10::IValue v = torch::jit::pickle_load(std::vector<char>(bytes->begin(), bytes->end()));
  c10::Dict<c10::IValue, c10::IValue> dict = v.toGenericDict();
  ref.seed = dict.at("seed").toInt();
  ref.inputs = tensors(dict.at("inputs"));
  ref.outputs = tensors(dict.at("outputs"));
  return ref;
}

class ExecutorParityTest : public testing::TestWithParam<std::string> {};

TEST_P(ExecutorParityTest, MatchesPyTorchBitwise) {
  ASSERT_FALSE(zooDir().empty()) << "GRAPHOPT_ZOO_DIR is not set";
  std::string stem = zooDir() + "/" + GetParam();
  auto model = importPt2(stem + ".pt2");
  ASSERT_TRUE(model.ok()) << model.status().message();
  Reference ref = readReference(stem + ".ref.pt");
  ASSERT_EQ(ref.outputs.size(), model->graph->outputs().size());

  ExecutionOptions options;
  options.seed = static_cast<uint64_t>(ref.seed);
  Executor executor(*model->graph, model->weights, options);
  auto result = executor.run(ref.inputs);
  ASSERT_TRUE(result.ok()) << result.status().message();
  for (size_t i = 0; i < ref.outputs.size(); ++i) {
    const GraphOutput &out = model->graph->outputs()[i];
    const at::Tensor &got = result->outputs[i];
    const at::Tensor &want = ref.outputs[i];
    std::string what = absl::StrCat("output ", i, " (", outputRoleName(out.role).str(), " ",
                                    out.target, ") %", out.value->name().str());
    ASSERT_EQ(got.defined(), want.defined()) << what;
    if (!want.defined())
      continue;
    EXPECT_EQ(got.scalar_type(), want.scalar_type()) << what;
    EXPECT_EQ(got.sizes(), want.sizes()) << what;
    EXPECT_TRUE(at::equal(got, want)) << what << ": max abs diff "
                                      << got.to(at::kDouble).sub(want.to(at::kDouble)).abs().max().item().toDouble();
  }

  // Two runs with one seed are bitwise identical.
  auto again = executor.run(ref.inputs);
  ASSERT_TRUE(again.ok()) << again.status().message();
  for (size_t i = 0; i < ref.outputs.size(); ++i) {
    if (result->outputs[i].defined()) {
      EXPECT_TRUE(at::equal(result->outputs[i], again->outputs[i])) << "output " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, ExecutorParityTest, testing::ValuesIn(zooArchives({"eval", "train"})),
                         ArchiveName());

} // namespace
