//===- SerdeCheckTest.cpp - JSON the serde types can read safely -----------===//
#include "SerdeCheck.h"

#include <gtest/gtest.h>

#include <string>

using namespace graphopt;
using Json = nlohmann::json;

namespace {

std::string problem(const std::string &text) {
  absl::Status st = serde::checkExportedProgramJson(Json::parse(text));
  return st.ok() ? "" : std::string(st.message());
}

/// A graph whose one tensor "t" has `size` as its first size, and whose one
/// node's input argument is `arg`.
std::string program(const std::string &size, const std::string &arg = R"({"as_int": 1})") {
  return R"({"graph_module": {"graph": {"tensor_values": {"t": {"dtype": 7, "layout": 1,
           "requires_grad": false, "sizes": [)" + size + R"(], "strides": [{"as_int": 1}]}},
           "nodes": [{"target": "torch.ops.aten.add.Tensor",
                      "inputs": [{"name": "other", "arg": )" + arg + R"(}], "outputs": []}],
           "outputs": []}}})";
}

std::string nested(int depth) {
  std::string s;
  for (int i = 0; i < depth; ++i)
    s += R"({"as_string_to_argument": {"k": )";
  s += R"({"as_none": true})";
  for (int i = 0; i < depth; ++i)
    s += "}}";
  return s;
}

} // namespace

TEST(SerdeCheckTest, IntegersAndF64FieldsPass) {
  EXPECT_EQ(problem(program(R"({"as_int": 4})")), "");
  // F64 fields take floats, integers, lists of either, and LibTorch's strings.
  EXPECT_EQ(problem(program(R"({"as_int": 4})", R"({"as_float": 1e300})")), "");
  EXPECT_EQ(problem(program(R"({"as_int": 4})", R"({"as_float": 2})")), "");
  EXPECT_EQ(problem(program(R"({"as_int": 4})", R"({"as_floats": [0.5, -1e30, 3]})")), "");
  EXPECT_EQ(problem(program(R"({"as_int": 4})", R"({"as_float": "-Infinity"})")), "");
  EXPECT_EQ(problem(program(R"({"as_int": 4})", R"({"as_complex": {"real": 0.5, "imag": -2.5}})")),
            "");
}

TEST(SerdeCheckTest, AFloatWhereTheSchemaHasAnIntegerIsRefused) {
  EXPECT_EQ(problem(program(R"({"as_int": 6.1e89})")),
            "graph_module.graph.tensor_values.t.sizes[0].as_int: expected an integer, found 6.1e+89");
  // Even one that would fit: torch.export never writes an integer as a float.
  EXPECT_EQ(problem(program(R"({"as_int": 3.0})")),
            "graph_module.graph.tensor_values.t.sizes[0].as_int: expected an integer, found 3.0");
  EXPECT_EQ(problem(program(R"({"as_int": 4})", R"({"as_ints": [1, 2.5]})")),
            "graph_module.graph.nodes[0].inputs[0].arg.as_ints[1]: expected an integer, found 2.5");
  // The whole document is checked, not only what the importer reads.
  EXPECT_EQ(problem(R"({"range_constraints": {"s0": {"min_val": 2, "max_val": 1e40}}})"),
            "range_constraints.s0.max_val: expected an integer, found 1e+40");
}

TEST(SerdeCheckTest, AnF64KeyOnlyAllowsFloatsInItsOwnValue) {
  // A tensor named like an F64 field still has integer sizes.
  std::string named = program(R"({"as_int": 4})");
  named.replace(named.find(R"("t":)"), 4, R"("real":)");
  EXPECT_EQ(problem(named), "");
  named.replace(named.find(R"({"as_int": 4})"), 13, R"({"as_int": 4.5})");
  EXPECT_EQ(problem(named),
            "graph_module.graph.tensor_values.real.sizes[0].as_int: expected an integer, found 4.5");
}

TEST(SerdeCheckTest, NestingIsBounded) {
  // 1000 levels of JSON nesting is the limit; each argument map adds two.
  EXPECT_EQ(problem(program(R"({"as_int": 4})", nested(490))), "");
  std::string deep = problem(program(R"({"as_int": 4})", nested(600)));
  EXPECT_NE(deep.find("nested more than 1000 levels deep"), std::string::npos) << deep;
  EXPECT_EQ(deep.rfind("graph_module.graph.nodes[0].inputs[0].arg.as_string_to_argument.k.", 0), 0u)
      << deep;
  EXPECT_LT(deep.size(), 250u) << "the path is shortened";
}

TEST(SerdeCheckTest, PayloadConfigsAreCheckedToo) {
  auto config = [](const std::string &size) {
    return Json::parse(R"({"config": {"w": {"path_name": "weight_0", "is_param": true,
      "use_pickle": false, "tensor_meta": {"dtype": 7, "layout": 1, "requires_grad": true,
      "sizes": [)" + size + R"(], "strides": [{"as_int": 1}]}}}})");
  };
  EXPECT_TRUE(serde::checkPayloadConfigJson(config(R"({"as_int": 8})")).ok());
  absl::Status st = serde::checkPayloadConfigJson(config(R"({"as_int": 1e20})"));
  EXPECT_EQ(st.message(), "config.w.tensor_meta.sizes[0].as_int: expected an integer, found 1e+20");
}
