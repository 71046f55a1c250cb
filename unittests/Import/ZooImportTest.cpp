//===- ZooImportTest.cpp - Every zoo model imports as Python says it should ---===//
//
// tools/export writes each zoo model (tiny configuration) as a .pt2 archive,
// inference and joint training step, plus a .facts.json of what Python's
// ExportedProgram reports. Each archive must import, pass the structural
// verifier, round-trip through .gir, and match the facts: node count, the
// operator histogram, and every input and output with its role, target, dtype
// and shape. TorchScript exports (.pt) must import with the parameters,
// buffers and output shapes the traced module has.
//
// The archives come from the `export_zoo` ctest fixture, in $GRAPHOPT_ZOO_DIR.
//
//===----------------------------------------------------------------------===//
#include "graphopt/IR/Parser.h"
#include "graphopt/IR/Printer.h"
#include "graphopt/IR/Summary.h"
#include "graphopt/IR/Verifier.h"
#include "graphopt/Import/Importer.h"
#include "graphopt/Support/FileIO.h"
#include "../ZooArchives.h"

#include <gtest/gtest.h>
#include <llvm/Support/JSON.h>
#include <llvm/Support/Path.h>

#include <cstdlib>
#include <map>

using namespace graphopt;
using namespace graphopt::test;

namespace {

llvm::json::Object readFacts(const std::string &path) {
  auto text = readFile(path);
  EXPECT_TRUE(text.ok()) << text.status().message();
  if (!text.ok())
    return {};
  auto json = llvm::json::parse(*text);
  if (!json) {
    ADD_FAILURE() << path << ": " << llvm::toString(json.takeError());
    return {};
  }
  return *json->getAsObject();
}

/// Python's dtype names ("torch.float32") and the .gir ones ("f32") to c10.
std::optional<c10::ScalarType> dtypeFromFacts(llvm::StringRef name) {
  static const std::map<std::string, c10::ScalarType, std::less<>> torchNames = {
      {"torch.float32", c10::kFloat}, {"torch.float64", c10::kDouble},
      {"torch.float16", c10::kHalf},  {"torch.bfloat16", c10::kBFloat16},
      {"torch.int64", c10::kLong},    {"torch.int32", c10::kInt},
      {"torch.bool", c10::kBool},     {"torch.uint8", c10::kByte}};
  if (auto it = torchNames.find(name); it != torchNames.end())
    return it->second;
  return parseDtypeName(name);
}

std::vector<int64_t> shapeFromFacts(const llvm::json::Object &entry) {
  std::vector<int64_t> shape;
  if (const llvm::json::Array *dims = entry.getArray("shape"))
    for (const llvm::json::Value &d : *dims)
      shape.push_back(*d.getAsInteger());
  return shape;
}

std::optional<InputRole> inputRoleFromFacts(llvm::StringRef kind) {
  if (kind == "parameter") return InputRole::Parameter;
  if (kind == "buffer") return InputRole::Buffer;
  if (kind == "user_input") return InputRole::UserInput;
  if (kind == "constant_tensor") return InputRole::Constant;
  return std::nullopt;
}

std::optional<OutputRole> outputRoleFromFacts(llvm::StringRef kind) {
  if (kind == "loss") return OutputRole::Loss;
  if (kind == "gradient") return OutputRole::Gradient;
  if (kind == "user_output") return OutputRole::UserOutput;
  if (kind == "buffer_mutation") return OutputRole::BufferMutation;
  if (kind == "gradient_to_user_input" || kind == "input_gradient") return OutputRole::InputGradient;
  return std::nullopt;
}

void expectRoundTrip(const Graph &g) {
  std::string text = printGraphToString(g);
  auto back = parseGraph(text, "printed.gir");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(printGraphToString(**back), text);
}

void expectTensorType(const Value &v, const llvm::json::Object &entry, llvm::StringRef what) {
  ASSERT_TRUE(v.isTensor()) << what.str();
  auto dtype = dtypeFromFacts(*entry.getString("dtype"));
  ASSERT_TRUE(dtype) << what.str() << ": unknown dtype in facts";
  EXPECT_EQ(v.tensorType().dtype, *dtype) << what.str();
  EXPECT_EQ(std::vector<int64_t>(v.tensorType().sizes.begin(), v.tensorType().sizes.end()),
            shapeFromFacts(entry))
      << what.str();
}

class Pt2ZooTest : public testing::TestWithParam<std::string> {};

TEST_P(Pt2ZooTest, ImportsVerifiesRoundTripsAndMatchesPython) {
  ASSERT_FALSE(zooDir().empty()) << "GRAPHOPT_ZOO_DIR is not set";
  std::string stem = zooDir() + "/" + GetParam();
  auto model = importPt2(stem + ".pt2");
  ASSERT_TRUE(model.ok()) << model.status().message();
  const Graph &g = *model->graph;
  EXPECT_TRUE(verifyGraph(g).ok()) << verifyGraph(g).message();
  expectRoundTrip(g);

  llvm::json::Object facts = readFacts(stem + ".facts.json");
  // The importer inlines the bodies of wrap_with_set_grad_enabled (llama's rotary
  // embedding): compare with the facts' count of the graph with its bodies inlined.
  EXPECT_EQ(static_cast<int64_t>(g.numNodes()), *facts.getInteger("num_inlined_op_nodes"));
  if (facts.getObject("higher_order_ops")->empty()) {
    EXPECT_EQ(static_cast<int64_t>(g.numNodes()), *facts.getInteger("num_op_nodes"));
  }

  std::map<std::string, int64_t> ops, want;
  for (const Node &n : g.nodes())
    ++ops[n.opName()];
  for (const auto &[name, count] : *facts.getObject("inlined_operators"))
    want[name.str()] = *count.getAsInteger();
  EXPECT_EQ(ops, want);

  const llvm::json::Array &inputs = *facts.getArray("inputs");
  ASSERT_EQ(g.inputs().size(), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const llvm::json::Object &in = *inputs[i].getAsObject();
    const GraphInput &gi = g.inputs()[i];
    std::string what = absl::StrCat("input ", i, " %", gi.value->name().str());
    EXPECT_EQ(gi.value->name(), *in.getString("name")) << what;
    EXPECT_EQ(gi.role, inputRoleFromFacts(*in.getString("kind"))) << what;
    if (auto target = in.getString("target")) {
      EXPECT_EQ(gi.target, target->str()) << what;
    }
    expectTensorType(*gi.value, in, what);
    if (gi.role != InputRole::UserInput) {
      const at::Tensor *w = model->weights.lookup(gi.target);
      ASSERT_NE(w, nullptr) << what;
      EXPECT_EQ(w->sizes().vec(), shapeFromFacts(in)) << what;
    }
  }
  const llvm::json::Array &outputs = *facts.getArray("outputs");
  ASSERT_EQ(g.outputs().size(), outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const llvm::json::Object &out = *outputs[i].getAsObject();
    const GraphOutput &go = g.outputs()[i];
    std::string what = absl::StrCat("output ", i, " %", go.value->name().str());
    EXPECT_EQ(go.value->name(), *out.getString("name")) << what;
    EXPECT_EQ(go.role, outputRoleFromFacts(*out.getString("kind"))) << what;
    if (auto target = out.getString("target")) {
      EXPECT_EQ(go.target, target->str()) << what;
    }
    expectTensorType(*go.value, out, what);
  }

  // Tied inputs are exactly the weights that share storage with an earlier one.
  for (const GraphInput &in : g.inputs()) {
    if (!in.tiedTo)
      continue;
    const GraphInput &owner = g.inputs()[in.tiedTo->index()];
    const at::Tensor *a = model->weights.lookup(in.target), *b = model->weights.lookup(owner.target);
    ASSERT_TRUE(a && b) << in.target;
    EXPECT_TRUE(a->storage().is_alias_of(b->storage())) << in.target << " tied to " << owner.target;
  }

  // The device the model was exported on (cpu) is the symbolic execution
  // device, never an explicit one: the graph runs wherever it is run.
  for (const Node &n : g.nodes())
    for (const Argument &a : n.args())
      if (a.isConstant() && a.getConstant().kind() == ConstantKind::Device) {
        EXPECT_TRUE(a.getConstant().isExecutionDevice()) << n.describe();
      }

  // A joint graph has a backward phase after the loss; an inference graph none.
  bool train = llvm::StringRef(GetParam()).endswith("-train");
  size_t backward = 0;
  for (const Node &n : g.nodes())
    backward += n.phase() == Phase::Backward;
  if (train)
    EXPECT_GT(backward, 0u);
  else
    EXPECT_EQ(backward, 0u);
}

INSTANTIATE_TEST_SUITE_P(Zoo, Pt2ZooTest, testing::ValuesIn(zooArchives({"eval", "train"})),
                         ArchiveName());

/// The node in `g` whose first output is named `name`, or null.
const Node *nodeNamed(const Graph &g, llvm::StringRef name) {
  for (const Node &n : g.nodes())
    if (n.numOutputs() && n.output()->name() == name)
      return &n;
  return nullptr;
}

// What torch.export records for reports (nn_module_stack, stack_trace) is kept
// as the attributes `module` and `source`.
TEST(Pt2ZooMetadataTest, NodesCarryTheirModuleAndSourceLine) {
  ASSERT_FALSE(zooDir().empty()) << "GRAPHOPT_ZOO_DIR is not set";
  auto model = importPt2(zooDir() + "/resnet18-eval.pt2");
  ASSERT_TRUE(model.ok()) << model.status().message();
  const Graph &g = *model->graph;
  // The first convolution of the first residual block.
  const Node *conv = nullptr;
  for (const Node &n : g.nodes())
    if (const Constant *m = n.attr("module");
        m && m->asString() == "layer1.0.conv1" && n.opName().find("conv") != std::string::npos) {
      conv = &n;
      break;
    }
  ASSERT_NE(conv, nullptr) << "no convolution with module layer1.0.conv1";
  const Constant *source = conv->attr("source");
  ASSERT_NE(source, nullptr);
  // The line in the model (torchvision's resnet.py), not inside torch.nn.
  EXPECT_TRUE(llvm::StringRef(source->asString()).startswith("torchvision/models/resnet.py:"))
      << source->asString();
  // The stem convolution belongs to the root's child conv1.
  const Node *stem = nodeNamed(g, "conv2d");
  ASSERT_NE(stem, nullptr);
  ASSERT_NE(stem->attr("module"), nullptr);
  EXPECT_EQ(stem->attr("module")->asString(), "conv1");
  // Attributes survive the text form.
  EXPECT_NE(printGraphToString(g).find("module = \"layer1.0.conv1\""), std::string::npos);
  expectRoundTrip(g);

  // Joint graphs record only generated code ("<eval_with_key>"): no source
  // line, and no module stack: missing metadata is no attribute.
  auto train = importPt2(zooDir() + "/resnet18-train.pt2");
  ASSERT_TRUE(train.ok()) << train.status().message();
  for (const Node &n : train->graph->nodes())
    if (const Constant *s = n.attr("source")) {
      EXPECT_FALSE(llvm::StringRef(s->asString()).startswith("<")) << n.describe();
    }
}

// GPT-2 ties its output projection to the token embedding; the archive stores
// the storage once and the graph shows the tie.
TEST(Pt2ZooTiesTest, Gpt2EvalTiesTheOutputEmbedding) {
  ASSERT_FALSE(zooDir().empty()) << "GRAPHOPT_ZOO_DIR is not set";
  auto model = importPt2(zooDir() + "/gpt2-eval.pt2");
  ASSERT_TRUE(model.ok()) << model.status().message();
  const Graph &g = *model->graph;
  const GraphInput *wte = nullptr, *lmHead = nullptr;
  size_t tied = 0;
  for (const GraphInput &in : g.inputs()) {
    if (llvm::StringRef(in.target).endswith("transformer.wte.weight"))
      wte = &in;
    if (llvm::StringRef(in.target).endswith("lm_head.weight"))
      lmHead = &in;
    tied += in.tiedTo != nullptr;
  }
  ASSERT_TRUE(wte && lmHead);
  EXPECT_EQ(lmHead->tiedTo, wte->value);
  EXPECT_EQ(wte->tiedTo, nullptr);
  EXPECT_EQ(g.storageOwner(lmHead->value), wte->value);
  EXPECT_EQ(tied, 1u);
  std::string text = printGraphToString(g);
  EXPECT_NE(text.find(absl::StrCat("parameter \"", lmHead->target, "\" tied %",
                                   wte->value->name().str(), "\n")),
            std::string::npos);
  expectRoundTrip(g);
  EXPECT_TRUE(verifyGraph(g).ok()) << verifyGraph(g).message();
  EXPECT_TRUE(verifyGraph(*g.clone()).ok());
  EXPECT_EQ(g.clone()->inputs()[lmHead->value->index()].tiedTo->name(), wte->value->name());
  // The summary counts the shared storage once.
  GraphSummary s = summarizeGraph(g);
  EXPECT_EQ(s.tiedInputs, 1u);
  EXPECT_EQ(s.parameterBytes + lmHead->value->tensorType().storageBytes(),
            [&] {
              int64_t all = 0;
              for (const GraphInput &in : g.inputs())
                if (in.role == InputRole::Parameter)
                  all += in.value->tensorType().storageBytes();
              return all;
            }());
}

class TorchScriptZooTest : public testing::TestWithParam<std::string> {};

TEST_P(TorchScriptZooTest, ImportsWithTheModulesWeightsAndOutputShapes) {
  ASSERT_FALSE(zooDir().empty()) << "GRAPHOPT_ZOO_DIR is not set";
  std::string stem = zooDir() + "/" + GetParam();
  auto model = importTorchScript(stem + ".pt");
  ASSERT_TRUE(model.ok()) << model.status().message();
  const Graph &g = *model->graph;
  EXPECT_TRUE(verifyGraph(g).ok()) << verifyGraph(g).message();
  expectRoundTrip(g);

  llvm::json::Object facts = readFacts(stem + "-ts.facts.json");
  std::map<std::string, const GraphInput *> byTarget;
  for (const GraphInput &in : g.inputs())
    byTarget[in.target] = &in;
  // Every parameter and buffer the forward pass reads is an input of its role,
  // with the module's tensor as its weight; none is invented.
  size_t weights = 0;
  for (auto [key, role] : {std::pair{"parameters", InputRole::Parameter},
                           std::pair{"buffers", InputRole::Buffer}}) {
    for (const llvm::json::Value &p : *facts.getArray(key)) {
      const llvm::json::Object &entry = *p.getAsObject();
      std::string target = entry.getString("target")->str();
      auto it = byTarget.find(target);
      if (it == byTarget.end())
        continue; // not read in eval mode (e.g. num_batches_tracked)
      ++weights;
      EXPECT_EQ(it->second->role, role) << target;
      expectTensorType(*it->second->value, entry, target);
      EXPECT_NE(model->weights.lookup(target), nullptr) << target;
    }
  }
  size_t weightInputs = 0;
  for (const GraphInput &in : g.inputs())
    weightInputs += in.role == InputRole::Parameter || in.role == InputRole::Buffer;
  EXPECT_EQ(weights, weightInputs);
  EXPECT_GT(weights, 0u);

  // Output types come from type inference: they must be what PyTorch computed.
  const llvm::json::Array &outputs = *facts.getArray("outputs");
  ASSERT_EQ(g.outputs().size(), outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i)
    expectTensorType(*g.outputs()[i].value, *outputs[i].getAsObject(), absl::StrCat("output ", i));
}

INSTANTIATE_TEST_SUITE_P(Zoo, TorchScriptZooTest,
                         testing::Values("mlp-eval", "cnn-eval", "resnet18-eval", "mlp-scripted",
                                         "cnn-scripted"),
                         ArchiveName());

} // namespace
