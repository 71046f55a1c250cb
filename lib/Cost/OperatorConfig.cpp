//===- OperatorConfig.cpp - One operator call, out of its graph ----------===//
#include "graphopt/Cost/OperatorConfig.h"

#include "graphopt/Cost/OperatorCost.h"
#include "graphopt/IR/IRMap.h"
#include "graphopt/IR/Printer.h"
#include "graphopt/Runtime/Collectives.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include <vector>

namespace graphopt {

namespace {

std::string typeSignature(const TensorType &t) {
  return absl::StrCat(dtypeName(t.dtype).str(), "/", t.rank(), "/", t.device.str());
}

/// The family: the operator with each operand's and result's dtype, rank and
/// device, in order (tensor sizes and every constant left out).
std::string familyOf(const Node &node) {
  std::vector<std::string> parts;
  for (const Value *v : node.operandValues())
    parts.push_back(v->isTensor() ? typeSignature(v->tensorType()) : "scalar");
  std::vector<std::string> results;
  for (const Value *v : node.outputs())
    results.push_back(v->isTensor() ? typeSignature(v->tensorType()) : "scalar");
  return absl::StrCat(node.opName(), "(", absl::StrJoin(parts, ","), ")->(",
                      absl::StrJoin(results, ","), ")");
}

OperatorConfig finish(std::unique_ptr<Graph> graph) {
  Node *node = &*graph->nodes().begin();
  OperatorConfig config;
  config.op = node->opName();
  config.family = familyOf(*node);
  config.flops = estimateFlops(*node);
  config.bytesMoved = estimateBytesMoved(*node);
  config.computeBound = isComputeBound(*node);
  config.work = workOf(*node);
  auto appendSizes = [&](llvm::ArrayRef<Value *> values) {
    for (const Value *v : values)
      if (v->isTensor())
        config.dims.insert(config.dims.end(), v->tensorType().sizes.begin(),
                           v->tensorType().sizes.end());
  };
  appendSizes(node->operandValues());
  appendSizes(node->outputs());
  std::vector<std::string> constants;
  for (const Argument &a : node->args())
    if (a.isConstant())
      constants.push_back(printConstantToString(a.getConstant()));
  config.constants = absl::StrJoin(constants, "; ");
  config.key = printGraphToString(*graph);
  config.graph = std::move(graph);
  return config;
}

} // namespace

absl::StatusOr<OperatorConfig> operatorConfigOf(const Node &node) {
  if (isCollective(node))
    return absl::FailedPreconditionError(absl::StrCat(
        node.describe(), " is a collective: its time is the network's, not the operator's"));
  auto graph = std::make_unique<Graph>("op");
  ValueMap<Value *> map;
  unsigned next = 0;
  for (const Value *v : node.operandValues()) {
    if (map.lookup(v))
      continue;
    if (!v->isTensor())
      return absl::FailedPreconditionError(
          absl::StrCat(node.describe(), " reads %", v->name().str(),
                       ", a value the graph computes that is not a tensor: known only when it runs"));
    if (!v->tensorType().isKnown())
      return absl::FailedPreconditionError(
          absl::StrCat(node.describe(), " reads %", v->name().str(), ", whose type is not known"));
    map[v] = graph->addInput(absl::StrCat("a", next++), v->type(), InputRole::UserInput);
  }
  auto cloned = graph->cloneNode(node, map, InsertionPoint::atEnd(*graph, Phase::Forward));
  if (!cloned.ok())
    return cloned.status();
  Node *copy = *cloned;
  std::vector<std::string> keys;
  for (const auto &attr : copy->attrs())
    keys.push_back(attr.first);
  for (const std::string &key : keys)
    copy->removeAttr(key);
  for (unsigned i = 0; i < copy->numOutputs(); ++i) {
    Value *out = copy->output(i);
    if (!out->isTensor())
      continue;
    if (!out->tensorType().isKnown())
      return absl::FailedPreconditionError(
          absl::StrCat(node.describe(), ": result ", i, " has no known type"));
    out->setName(absl::StrCat("r", i));
    graph->addOutput(out, OutputRole::UserOutput);
  }
  return finish(std::move(graph));
}

absl::StatusOr<OperatorConfig> operatorConfigOfGraph(std::unique_ptr<Graph> graph) {
  if (graph->numNodes() != 1)
    return absl::InvalidArgumentError(absl::StrCat("graph @", graph->name().str(), " has ",
                                                   graph->numNodes(),
                                                   " nodes; an operator configuration has one"));
  // Through operatorConfigOf, so that a configuration read back has the same
  // canonical key as the node it was taken from.
  return operatorConfigOf(*graph->nodes().begin());
}

} // namespace graphopt
