//===- PrinterParserTest.cpp - .gir round trips and parse errors ----------===//
#include "TestGraphs.h"

#include "graphopt/IR/Parser.h"
#include "graphopt/IR/Printer.h"
#include "graphopt/IR/Verifier.h"
#include "graphopt/Support/FileIO.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace graphopt;
using namespace graphopt::test;

namespace {

std::unique_ptr<Graph> parseOk(llvm::StringRef text) {
  auto g = parseGraph(text, "test.gir");
  EXPECT_TRUE(g.ok()) << g.status().message();
  if (!g.ok())
    throw std::runtime_error("parse failed");
  return std::move(*g);
}

std::string parseError(llvm::StringRef text) {
  auto g = parseGraph(text, "test.gir");
  EXPECT_FALSE(g.ok()) << "expected a parse error";
  return g.ok() ? "" : std::string(g.status().message());
}

/// print -> parse -> print must give the same text, and the graph must verify.
void expectRoundTrip(const Graph &g) {
  std::string first = printGraphToString(g);
  auto reparsed = parseGraph(first, "printed.gir");
  ASSERT_TRUE(reparsed.ok()) << reparsed.status().message() << "\n--- text ---\n" << first;
  EXPECT_EQ(printGraphToString(**reparsed), first);
  EXPECT_TRUE(verifyGraph(**reparsed).ok()) << verifyGraph(**reparsed).message();
}

const Constant &constantArg(const Graph &g, size_t nodeIndex, unsigned argIndex) {
  auto it = g.nodes().begin();
  std::advance(it, nodeIndex);
  return it->arg(argIndex).getConstant();
}

} // namespace

TEST(PrinterParserTest, ExampleFileRoundTrips) {
  auto text = readFile(GRAPHOPT_SOURCE_DIR "/examples/mlp_train_step.gir");
  ASSERT_TRUE(text.ok()) << text.status().message();
  auto g = parseOk(*text);
  EXPECT_TRUE(verifyGraph(*g).ok()) << verifyGraph(*g).message();
  EXPECT_EQ(g->numNodes(), 25u);
  EXPECT_EQ(g->inputs().size(), 6u);
  EXPECT_EQ(g->outputs().size(), 5u);
  EXPECT_EQ(g->outputs()[1].role, OutputRole::Gradient);
  EXPECT_EQ(g->outputs()[1].target, "fc1.weight");
  expectRoundTrip(*g);
}

TEST(PrinterParserTest, EveryConstantKindRoundTrips) {
  // Builds, through the API, a graph whose arguments use every constant kind.
  Graph g("constants");
  Value *x = g.addInput("x", f32({4, 6}), InputRole::UserInput);
  Value *idx = g.addInput("idx", ValueType::ofTensor(TensorType::contiguous(c10::kLong, {3})),
                          InputRole::UserInput);
  auto C = [](Constant c) { return Argument::constant(std::move(c)); };
  // _to_copy: dtype, layout, device, bool, memory format, None.
  unwrap(g.createNode("aten::_to_copy",
                      {Argument::value(x), C(Constant::ofDtype(c10::kHalf)),
                       C(Constant::ofLayout(c10::kStrided)), C(Constant::ofDevice(c10::Device("cuda:1"))),
                       C(Constant::ofBool(false)), C(Constant::ofBool(true)),
                       C(Constant::ofMemoryFormat(c10::MemoryFormat::ChannelsLast))},
                      {ValueType::ofTensor(TensorType(c10::kHalf, {4, 6}, {6, 1}, c10::Device("cuda:1")))}));
  // div.Tensor_mode: a string.
  unwrap(g.createNode("aten::div.Tensor_mode",
                      {Argument::value(x), Argument::value(x), C(Constant::ofString("fl\"oor\\\n\x01"))},
                      {f32({4, 6})}));
  // sum.dim_IntList: int list, bool, None.
  unwrap(g.createNode("aten::sum.dim_IntList",
                      {Argument::value(x), C(Constant::ofIntList({0, -1})), C(Constant::ofBool(true)),
                       C(Constant::none())},
                      {f32({1, 1})}));
  // empty int list
  unwrap(g.createNode("aten::sum.dim_IntList",
                      {Argument::value(x), C(Constant::ofIntList({})), C(Constant::ofBool(false)),
                       C(Constant::ofDtype(c10::kDouble))},
                      {ValueType::ofTensor(TensorType::contiguous(c10::kDouble, {}))}));
  // upsample_bilinear2d.vec: float list (scale factors), None output size.
  Value *img = g.addInput("img", f32({1, 1, 2, 2}), InputRole::UserInput);
  unwrap(g.createNode("aten::upsample_bilinear2d.vec",
                      {Argument::value(img), C(Constant::none()), C(Constant::ofBool(false)),
                       C(Constant::ofFloatList({2.0, 0.5}))},
                      {f32({1, 1, 4, 1})}));
  // convolution_backward: bool list output_mask; optional int list bias_sizes.
  Value *w = g.addInput("w", f32({1, 1, 1, 1}), InputRole::Parameter, "conv.weight");
  unwrap(g.createNode("aten::convolution_backward",
                      {Argument::value(img), Argument::value(img), Argument::value(w),
                       C(Constant::ofIntList({1})), C(Constant::ofIntList({1, 1})),
                       C(Constant::ofIntList({0, 0})), C(Constant::ofIntList({1, 1})), C(Constant::ofBool(false)),
                       C(Constant::ofIntList({0, 0})), C(Constant::ofInt(1)),
                       C(Constant::ofBoolList({true, false, true}))},
                      {f32({1, 1, 2, 2}), f32({1, 1, 1, 1}), f32({1})}));
  // Scalars: ints and floats of every awkward sort, kept apart in a Scalar argument.
  for (double v : {0.0, -0.0, 1e-05, 0.1, 1.0 / 3.0, 1e300, -2.5e-310,
                   std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                   std::nan("")})
    unwrap(g.createNode("aten::mul.Scalar", {Argument::value(x), C(Constant::ofFloat(v))}, {f32({4, 6})}));
  for (int64_t v : {int64_t(0), int64_t(-1), std::numeric_limits<int64_t>::max(),
                    std::numeric_limits<int64_t>::min()})
    unwrap(g.createNode("aten::mul.Scalar", {Argument::value(x), C(Constant::ofInt(v))}, {f32({4, 6})}));
  unwrap(g.createNode("aten::mul.Scalar", {Argument::value(x), C(Constant::ofBool(true))}, {f32({4, 6})}));
  // Tensor?[] with a None hole.
  unwrap(g.createNode("aten::index.Tensor", {Argument::value(x), Argument::list({nullptr, idx})},
                      {f32({4, 3})}));
  ASSERT_TRUE(verifyGraph(g).ok()) << verifyGraph(g).message();
  expectRoundTrip(g);

  // And the constants read back are the very same constants.
  auto back = parseOk(printGraphToString(g));
  auto a = g.nodes().begin();
  auto b = back->nodes().begin();
  for (; a != g.nodes().end(); ++a, ++b) {
    for (unsigned i = 0; i < a->numArgs(); ++i) {
      if (a->arg(i).isConstant()) {
        EXPECT_EQ(a->arg(i).getConstant(), b->arg(i).getConstant())
            << "node " << a->describe() << " argument " << i;
      }
    }
  }
}

TEST(PrinterParserTest, FloatsRoundTripBitExactly) {
  std::mt19937_64 rng(42);
  std::string text = "graph @floats {\n  input %x : f32[2] user_input\n";
  std::vector<double> values;
  for (int i = 0; i < 500; ++i) {
    uint64_t bits = rng();
    double v;
    std::memcpy(&v, &bits, sizeof v);
    if (std::isnan(v))
      continue;
    values.push_back(v);
    std::string s;
    llvm::raw_string_ostream os(s);
    printFloat(os, v);
    text += "  %m" + std::to_string(values.size() - 1) + " = aten::mul.Scalar(%x, " + os.str() +
            ") : f32[2]\n";
  }
  text += "}\n";
  auto g = parseOk(text);
  ASSERT_EQ(g->numNodes(), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    double got = constantArg(*g, i, 1).asFloat();
    EXPECT_EQ(std::memcmp(&got, &values[i], sizeof got), 0) << values[i];
  }
}

TEST(PrinterParserTest, RandomGraphsRoundTrip) {
  // Random chains of varied operators, phases in order; each must print, parse
  // back to the same text and verify.
  for (unsigned seed = 0; seed < 30; ++seed) {
    std::mt19937 rng(seed);
    Graph g("random" + std::to_string(seed));
    std::vector<Value *> pool;
    for (int i = 0; i < 3; ++i)
      pool.push_back(g.addInput("in", f32({4, 4}), i ? InputRole::UserInput : InputRole::Parameter,
                                i ? "" : "w"));
    Phase phase = Phase::Forward;
    for (int step = 0; step < 40; ++step) {
      if (rng() % 10 == 0 && phase != Phase::Optimizer)
        phase = static_cast<Phase>(static_cast<int>(phase) + 1);
      Value *a = pool[rng() % pool.size()];
      Value *b = pool[rng() % pool.size()];
      auto C = [](Constant c) { return Argument::constant(std::move(c)); };
      switch (rng() % 6) {
      case 0:
        pool.push_back(unwrap(g.createNode("aten::relu", {Argument::value(a)}, {f32({4, 4})}, phase))->output());
        break;
      case 1:
        pool.push_back(unwrap(g.createNode("aten::add.Tensor",
                                           {Argument::value(a), Argument::value(b), C(Constant::ofInt(rng() % 3))},
                                           {f32({4, 4})}, phase))
                           ->output());
        break;
      case 2:
        pool.push_back(unwrap(g.createNode("aten::mul.Scalar",
                                           {Argument::value(a), C(Constant::ofFloat((rng() % 1000) / 7.0))},
                                           {f32({4, 4})}, phase))
                           ->output());
        break;
      case 3: {
        Node *cat = unwrap(g.createNode("aten::cat", {Argument::list({a, b}), C(Constant::ofInt(0))},
                                        {f32({8, 4})}, phase));
        Node *split = unwrap(g.createNode(
            "aten::split.Tensor", {Argument::value(cat->output()), C(Constant::ofInt(4)), C(Constant::ofInt(0))},
            {f32({4, 4}), f32({4, 4})}, phase));
        pool.push_back(split->output(rng() % 2));
        break;
      }
      case 4: {
        Node *t = unwrap(g.createNode("aten::t", {Argument::value(a)},
                                      {ValueType::ofTensor(TensorType(c10::kFloat, {4, 4}, {1, 4}))}, phase));
        pool.push_back(t->output());
        break;
      }
      case 5:
        // A scalar result and a list constant; neither joins the pool, which
        // keeps every pooled value f32[4, 4].
        unwrap(g.createNode("aten::sym_size.int", {Argument::value(a), C(Constant::ofInt(0))},
                            {ValueType::ofScalar(ValueKind::Int)}, phase));
        unwrap(g.createNode("aten::view", {Argument::value(a), C(Constant::ofIntList({16}))},
                            {f32({16})}, phase));
        break;
      }
    }
    g.addOutput(pool.back(), OutputRole::UserOutput); // a loss would need one element
    g.addOutput(pool.front(), OutputRole::Gradient, "w");
    ASSERT_TRUE(verifyGraph(g).ok()) << verifyGraph(g).message();
    expectRoundTrip(g);
  }
}

TEST(PrinterParserTest, DefaultsAreFilledAndOmitted) {
  auto g = parseOk(R"(graph @d {
  input %a : f32[2] user_input
  %b = aten::add.Tensor(%a, %a) : f32[2]
  %c = aten::add.Tensor(%a, %b, alpha=2) : f32[2]
  %d = aten::sum.dim_IntList(%a, [0]) : f32[]
  %e = aten::leaky_relu(%a, 1) : f32[2]
})");
  const Node &b = g->nodes().front();
  ASSERT_EQ(b.numArgs(), 3u);
  EXPECT_EQ(b.arg(2).getConstant(), Constant::ofInt(1)); // alpha filled from the schema
  // `1` for `Scalar negative_slope` stays an int (Scalar keeps int vs float).
  EXPECT_EQ(constantArg(*g, 3, 1), Constant::ofInt(1));
  std::string printed = printGraphToString(*g);
  EXPECT_NE(printed.find("%b = aten::add.Tensor(%a, %a) : f32[2]"), std::string::npos) << printed;
  EXPECT_NE(printed.find("%c = aten::add.Tensor(%a, %b, alpha=2) : f32[2]"), std::string::npos) << printed;
  EXPECT_NE(printed.find("%d = aten::sum.dim_IntList(%a, [0]) : f32[]"), std::string::npos) << printed;
}

TEST(PrinterParserTest, IntLiteralForFloatArgumentBecomesFloat) {
  auto g = parseOk(R"(graph @f {
  input %a : f32[2] user_input
  %b = aten::elu(%a, 1, 1, 1) : f32[2]
  %c, %mask = aten::native_dropout(%a, 0, true) : f32[2], bool[2]
})");
  // native_dropout's `float p`: 0 -> 0.0; elu's Scalars stay ints.
  EXPECT_EQ(constantArg(*g, 1, 1), Constant::ofFloat(0.0));
  EXPECT_EQ(constantArg(*g, 0, 1), Constant::ofInt(1));
  EXPECT_NE(printGraphToString(*g).find("aten::native_dropout(%a, 0.0, true)"), std::string::npos);
}

TEST(PrinterParserTest, MissingTypesParseAsUnknownAndFailVerification) {
  auto g = parseOk(R"(graph @u {
  input %a : f32[2] user_input
  %b = aten::relu(%a)
  %n = aten::sym_size.int(%a, 0)
})");
  EXPECT_FALSE(g->nodes().front().output()->type().isKnown());
  EXPECT_EQ(g->nodes().back().output()->type().kind, ValueKind::Int); // scalars need no annotation
  absl::Status st = verifyGraph(*g);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("output %b has no type"), absl::string_view::npos);
  EXPECT_NE(printGraphToString(*g).find("%b = aten::relu(%a) : ?"), std::string::npos);
  // It still prints and parses back exactly, though it does not verify.
  std::string printed = printGraphToString(*g);
  EXPECT_EQ(printGraphToString(*parseOk(printed)), printed);
}

TEST(PrinterParserTest, ErrorsNameFileLineAndColumn) {
  std::string err = parseError("graph @e {\n  input %a : f32[2] user_input\n  %b = aten::relu(%zz)\n}\n");
  EXPECT_NE(err.find("test.gir:3:19: use of undefined value %zz"), std::string::npos) << err;
  EXPECT_NE(err.find("  %b = aten::relu(%zz)\n                  ^"), std::string::npos) << err;

  err = parseError("graph @e {\n  input %a : f32[2] user_input\n  %b = aten::nope(%a)\n}\n");
  EXPECT_NE(err.find("test.gir:3:8: unknown operator 'aten::nope'"), std::string::npos) << err;

  err = parseError("graph @e {\n  input %a : f32[2] user_input\n  input %a : f32[2] user_input\n}");
  EXPECT_NE(err.find("test.gir:3:9: redefinition of value %a"), std::string::npos) << err;

  err = parseError("graph @e {\n  input %a : f32[2] user_input\n  %b = aten::add.Tensor(%a)\n}");
  EXPECT_NE(err.find("missing argument 'other' of aten::add.Tensor"), std::string::npos) << err;

  err = parseError("graph @e {\n  input %a : f33[2] user_input\n}");
  EXPECT_NE(err.find("test.gir:2:14: unknown dtype 'f33'"), std::string::npos) << err;

  err = parseError("graph @e {\n  input %a : f32[2] user_input\n");
  EXPECT_NE(err.find("expected '}' to close the graph, found end of file"), std::string::npos) << err;

  err = parseError("graph @e {\n  input %a : f32[2] user_input\n  %b = aten::relu(%a, bogus=1) : f32[2]\n}");
  EXPECT_NE(err.find("aten::relu has no argument named 'bogus'"), std::string::npos) << err;

  err = parseError("graph @e {\n  input %a : f32[2] user_input\n  %b, %c = aten::relu(%a)\n}");
  EXPECT_NE(err.find("aten::relu returns 1 value, but 2 result names are given"), std::string::npos) << err;

  err = parseError("");
  EXPECT_NE(err.find("test.gir:1:1: expected 'graph', found end of file"), std::string::npos) << err;
}

TEST(PrinterParserTest, ParseGraphFileReportsMissingFile) {
  auto g = parseGraphFile("/nonexistent/dir/x.gir");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(g.status().message().find("/nonexistent/dir/x.gir"), absl::string_view::npos);
}

TEST(PrinterParserTest, AttributesRoundTripSortedWithEscapes) {
  ReluAddGraph t;
  t.relu->setAttr("source", Constant::ofString("model.py:42"));
  t.relu->setAttr("module", Constant::ofString("layer1.0.\"conv\"\\1\n\t\x01\xc3\xa9"));
  t.relu->setAttr("weird key!", Constant::ofInt(-3));
  t.relu->setAttr("sizes", Constant::ofIntList({1, 2}));
  t.relu->setAttr("scales", Constant::ofFloatList({1.0, 0.5}));
  t.relu->setAttr("flags", Constant::ofBoolList({true, false}));
  t.relu->setAttr("empty", Constant::ofIntList({}));
  t.relu->setAttr("dt", Constant::ofDtype(c10::ScalarType::Half));
  t.relu->setAttr("dev", Constant::ofDevice(c10::Device("cuda:1")));
  t.relu->setAttr("nothing", Constant::none());
  t.relu->setAttr("x", Constant::ofFloat(2.0));
  t.relu->setAttr("x", Constant::ofBool(true)); // replaces
  ASSERT_NE(t.relu->attr("x"), nullptr);
  EXPECT_EQ(*t.relu->attr("x"), Constant::ofBool(true));
  EXPECT_EQ(t.relu->attr("absent"), nullptr);
  EXPECT_TRUE(t.relu->removeAttr("nothing"));
  EXPECT_FALSE(t.relu->removeAttr("nothing"));
  // Sorted iteration.
  std::vector<std::string> keys;
  for (const auto &[k, v] : t.relu->attrs())
    keys.push_back(k);
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  EXPECT_EQ(keys.size(), 10u);

  std::string text = printGraphToString(t.g);
  EXPECT_NE(text.find("%relu = aten::relu(%x) {dev = cuda:1, dt = f16, empty = [], flags = [true, "
                      "false], module = \"layer1.0.\\\"conv\\\"\\\\1\\n\\t\\x01\\xc3\\xa9\", "
                      "scales = [1.0, 0.5], sizes = [1, 2], source = \"model.py:42\", "
                      "\"weird key!\" = -3, x = true} : f32[2, 3]"),
            std::string::npos)
      << text;
  expectRoundTrip(t.g);
  auto back = parseOk(text);
  const Node &relu = back->nodes().front();
  EXPECT_EQ(relu.attrs(), t.relu->attrs());

  // Graph::clone copies attributes.
  auto copy = t.g.clone();
  EXPECT_EQ(copy->nodes().front().attrs(), t.relu->attrs());
}

TEST(PrinterParserTest, AttributeErrors) {
  const char *head = "graph @g {\n  input %x : f32[2] user_input\n";
  auto err = [&](const std::string &node) { return parseError(std::string(head) + node + "\n}\n"); };
  EXPECT_NE(err("  %y = aten::relu(%x) {a = 1, a = 2} : f32[2]")
                .find("test.gir:3:31: duplicate attribute 'a'"),
            std::string::npos);
  EXPECT_NE(err("  %y = aten::relu(%x) {a 1} : f32[2]")
                .find("test.gir:3:26: expected '=' after the attribute name, found '1'"),
            std::string::npos);
  EXPECT_NE(err("  %y = aten::relu(%x) {a = %x} : f32[2]")
                .find("test.gir:3:28: an attribute holds a constant, not a %value"),
            std::string::npos);
  EXPECT_NE(err("  %y = aten::relu(%x) {1 = 2} : f32[2]")
                .find("test.gir:3:24: expected an attribute name"),
            std::string::npos);
  EXPECT_NE(err("  %y = aten::relu(%x) {a = 1 b = 2} : f32[2]")
                .find("test.gir:3:30: expected ',' or '}' in the attributes"),
            std::string::npos);
  EXPECT_NE(err("  %y = aten::relu(%x) {a = [1, true]} : f32[2]")
                .find("a list must hold only ints, only floats or only bools"),
            std::string::npos);
  EXPECT_NE(err("  %y = aten::relu(%x) {a = 1").find("test.gir:5:1: expected '}' to close the graph"), std::string::npos);
}

// A storage offset is printed (and needed) only when it is not 0.
TEST(PrinterParserTest, StorageOffsetsRoundTripWhenNonZero) {
  auto g = parseOk(R"(graph @g {
  input %x : f32[4, 3] user_input
  %a = aten::select.int(%x, 0, 2) : f32[3]{offset=6}
  %b = aten::select.int(%x, 1, 1) : f32[4]{strides=[3], offset=1}
  %c = aten::select.int(%x, 0, 0) : f32[3]{offset=0}
  output %a user_output
  output %b user_output
  output %c user_output
}
)");
  EXPECT_EQ(g->outputs()[0].value->tensorType().storageOffset, 6);
  EXPECT_EQ(g->outputs()[1].value->tensorType().storageOffset, 1);
  std::string text = printGraphToString(*g);
  EXPECT_NE(text.find(": f32[3]{offset=6}"), std::string::npos) << text;
  EXPECT_NE(text.find(": f32[4]{strides=[3], offset=1}"), std::string::npos) << text;
  EXPECT_EQ(text.find("offset=0"), std::string::npos) << text;
  expectRoundTrip(*g);
  EXPECT_NE(parseError("graph @g {\n  input %x : f32[2]{offset=-1} user_input\n}\n")
                .find("storage offset -1 is negative"),
            std::string::npos);
  EXPECT_NE(parseError("graph @g {\n  input %x : f32[2]{offset=1.5} user_input\n}\n")
                .find("expected a storage offset"),
            std::string::npos);
}

TEST(PrinterParserTest, ExecutionDeviceRoundTrips) {
  auto g = parseOk(R"(graph @g {
  input %x : f32[2, 3] user_input
  %a = aten::_to_copy(%x, device=exec_device) : f32[2, 3]
  %b = aten::_to_copy(%x, device=exec_device(cuda:0)) : f32[2, 3]{device=cuda:0}
  %c = aten::_to_copy(%x, device=cpu) : f32[2, 3]
  output %a user_output
  output %b user_output
  output %c user_output
}
)");
  EXPECT_TRUE(constantArg(*g, 0, 3).isExecutionDevice());
  EXPECT_EQ(constantArg(*g, 0, 3).asDevice(), c10::Device("cpu"));
  EXPECT_TRUE(constantArg(*g, 1, 3).isExecutionDevice());
  EXPECT_EQ(constantArg(*g, 1, 3).asDevice(), c10::Device("cuda:0"));
  EXPECT_FALSE(constantArg(*g, 2, 3).isExecutionDevice());
  std::string text = printGraphToString(*g);
  EXPECT_NE(text.find("device=exec_device) :"), std::string::npos) << text;
  EXPECT_NE(text.find("device=exec_device(cuda:0)) :"), std::string::npos) << text;
  EXPECT_NE(text.find("device=cpu) :"), std::string::npos) << text;
  expectRoundTrip(*g);
  // A type's device is always explicit.
  EXPECT_NE(parseError("graph @g {\n  input %x : f32[2]{device=exec_device} user_input\n}\n")
                .find("test.gir:2:21: expected a device"),
            std::string::npos);
}

TEST(PrinterParserTest, TiedInputsRoundTripVerifyAndClone) {
  const char *text = R"(graph @tied {
  input %wte : f32[10, 4] parameter "wte.weight"
  input %x : i64[2] user_input
  input %lm_head : f32[10, 4] parameter "lm_head.weight" tied %wte
forward:
  %e = aten::embedding(%wte, %x) : f32[2, 4]
  %t = aten::t(%lm_head) : f32[4, 10]{strides=[1, 4]}
  %y = aten::mm(%e, %t) : f32[2, 10]
  output %y user_output
}
)";
  auto g = parseOk(text);
  EXPECT_EQ(printGraphToString(*g), text);
  EXPECT_TRUE(verifyGraph(*g).ok()) << verifyGraph(*g).message();
  const GraphInput &lm = g->inputs()[2];
  EXPECT_EQ(lm.tiedTo, g->inputs()[0].value);
  EXPECT_EQ(g->storageOwner(lm.value), g->inputs()[0].value);
  EXPECT_EQ(g->storageOwner(g->inputs()[0].value), g->inputs()[0].value);
  auto copy = g->clone();
  EXPECT_EQ(printGraphToString(*copy), text);
  EXPECT_EQ(copy->inputs()[2].tiedTo, copy->inputs()[0].value);
  // Erasing an input others are tied to is refused.
  Graph h;
  Value *a = h.addInput("a", f32({3}), InputRole::Parameter, "a");
  Value *b = h.addInput("b", f32({3}), InputRole::Parameter, "b");
  Value *c = h.addInput("c", f32({3}), InputRole::Parameter, "c");
  EXPECT_FALSE(h.tieInput(0, b).ok()); // not earlier
  EXPECT_FALSE(h.tieInput(1, b).ok()); // itself
  EXPECT_FALSE(h.tieInput(1, g->inputs()[0].value).ok()); // another graph
  ASSERT_TRUE(h.tieInput(1, a).ok());
  EXPECT_FALSE(h.tieInput(2, b).ok()); // b is tied itself
  EXPECT_FALSE(h.eraseInput(0).ok());
  ASSERT_TRUE(h.tieInput(1, nullptr).ok());
  EXPECT_TRUE(h.eraseInput(0).ok());
  (void)c;

  // Parse errors: not an earlier input, tied to a tied input.
  EXPECT_NE(parseError("graph @g {\n  input %a : f32[2] parameter \"a\" tied %b\n}\n")
                .find("test.gir:2:40: use of undefined value %b"),
            std::string::npos);
  EXPECT_NE(parseError("graph @g {\n  input %a : f32[2] parameter \"a\"\n  input %b : f32[2] "
                       "parameter \"b\" tied %a\n  input %c : f32[2] parameter \"c\" tied %b\n}\n")
                .find("test.gir:4:9: cannot tie graph input %c to %b: it is tied to %a itself"),
            std::string::npos);
  // The verifier checks the storage size.
  auto bad = parseOk("graph @g {\n  input %a : f32[2] parameter \"a\"\n  input %b : f32[3] "
                     "parameter \"b\" tied %a\n}\n");
  auto st = verifyGraph(*bad);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("graph input %b is tied to %a, but they span 12 and 8 storage bytes"),
            std::string::npos)
      << st.message();
}
