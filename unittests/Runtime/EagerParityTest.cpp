//===- EagerParityTest.cpp - The executor agrees with eager PyTorch -------===//
//
// test/Inputs/make_eager_references.py rebuilds each zoo model as an
// nn.Module with the archive's own weights and runs it eagerly: forward, and
// for training graphs loss.backward(), dropout off. The executor, running the
// exported graph on the same inputs, must agree within float tolerance on the
// loss, every gradient, every buffer update and every user output. Exact
// equality is not expected: autograd and the exported joint graph order
// floating-point work differently (BatchNorm's backward is decomposed in the
// graph). The tolerance is per output, scaled by its magnitude:
//   max |got - want| <= 1e-5 + 5e-4 * max |want|
// An elementwise rtol would flag elements that are tiny because of
// cancellation: the tiny random ResNets are ill-conditioned in float32 (their
// last BatchNorms see two values per channel), and there eager float32 and
// graph float32 agree to 1e-4 of the gradient's scale while both are far from
// a float64 run.
//
//===----------------------------------------------------------------------===//
#include "graphopt/Import/Importer.h"
#include "graphopt/Runtime/Executor.h"
#include "graphopt/Support/FileIO.h"
#include "../ZooArchives.h"

#include <gtest/gtest.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <cstdlib>
#include <map>

using namespace graphopt;
using namespace graphopt::test;

namespace {

std::string labelOf(const GraphOutput &out, std::map<OutputRole, unsigned> &ordinals) {
  if (out.role == OutputRole::Loss || out.role == OutputRole::UserOutput)
    return absl::StrCat(outputRoleName(out.role).str(), " #", ordinals[out.role]++);
  return absl::StrCat(outputRoleName(out.role).str(), " ", out.target);
}

class EagerParityTest : public testing::TestWithParam<std::string> {};

TEST_P(EagerParityTest, AgreesWithEagerPyTorch) {
  ASSERT_FALSE(zooDir().empty()) << "GRAPHOPT_ZOO_DIR is not set";
  std::string stem = zooDir() + "/" + GetParam();
  auto model = importPt2(stem + ".pt2");
  ASSERT_TRUE(model.ok()) << model.status().message();

  auto bytes = readFile(stem + ".eager.pt");
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  c10::Dict<c10::IValue, c10::IValue> ref =
      torch::jit::pickle_load(std::vector<char>(bytes->begin(), bytes->end())).toGenericDict();
  std::vector<at::Tensor> inputs;
  for (const c10::IValue &v : ref.at("inputs").toListRef())
    inputs.push_back(v.toTensor());
  c10::Dict<c10::IValue, c10::IValue> expected = ref.at("outputs").toGenericDict();

  Executor executor(*model->graph, model->weights);
  auto result = executor.run(inputs);
  ASSERT_TRUE(result.ok()) << result.status().message();

  std::map<OutputRole, unsigned> ordinals;
  size_t compared = 0;
  for (unsigned i = 0; i < model->graph->outputs().size(); ++i) {
    std::string label = labelOf(model->graph->outputs()[i], ordinals);
    ASSERT_TRUE(expected.contains(label)) << "eager reference has no '" << label << "'";
    at::Tensor want = expected.at(label).toTensor();
    const at::Tensor &got = result->outputs[i];
    ASSERT_EQ(got.sizes(), want.sizes()) << label;
    ASSERT_EQ(got.scalar_type(), want.scalar_type()) << label;
    if (at::isFloatingType(want.scalar_type())) {
      double scale = want.numel() ? want.abs().max().item().toDouble() : 0.0;
      double diff = want.numel() ? got.sub(want).abs().max().item().toDouble() : 0.0;
      EXPECT_LE(diff, 1e-5 + 5e-4 * scale) << label << " (scale " << scale << ")";
    } else {
      EXPECT_TRUE(got.equal(want)) << label;
    }
    ++compared;
  }
  EXPECT_EQ(compared, expected.size()); // nothing in the reference left unchecked
}

/// Every inference graph, and every training graph without random operators.
std::vector<std::string> deterministicArchives() {
  std::vector<std::string> names = zooArchives({"eval"});
  for (const std::string &m : zooModels())
    names.push_back(m + (hasDropout(m) ? "-train-nodrop" : "-train"));
  return names;
}

INSTANTIATE_TEST_SUITE_P(Zoo, EagerParityTest, testing::ValuesIn(deterministicArchives()),
                         ArchiveName());

} // namespace
