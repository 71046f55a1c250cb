//===- Importer.cpp - Reading a model by its file extension ---------------===//
#include "graphopt/Import/Importer.h"

#include "graphopt/IR/Parser.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/empty_strided.h>
#include <absl/strings/str_cat.h>
#include <llvm/Support/Path.h>

namespace graphopt {

namespace {
at::Tensor standIn(const TensorType &t, at::Generator &gen, double scale) {
  at::Tensor x = at::empty_strided(t.sizes, t.strides, at::TensorOptions().dtype(t.dtype));
  if (at::isFloatingType(t.dtype))
    x.normal_(0, scale, gen);
  else
    x.zero_();
  return x;
}
} // namespace

std::vector<at::Tensor> makeExampleInputs(const Graph &graph, uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::vector<at::Tensor> inputs;
  for (const GraphInput &in : graph.inputs())
    if (in.role == InputRole::UserInput && in.value->isTensor())
      inputs.push_back(standIn(in.value->tensorType(), gen, 1.0));
  return inputs;
}

size_t fillMissingWeights(const Graph &graph, WeightStore &weights, uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed + 1);
  size_t made = 0;
  for (const GraphInput &in : graph.inputs()) {
    // Optimizer state is left to the executor, which starts it at zero as
    // torch.optim does; a random momentum would be no stand-in for that.
    if (in.role == InputRole::UserInput || in.role == InputRole::OptimizerState ||
        !in.value->isTensor() || weights.contains(in.target))
      continue;
    weights.set(in.target, standIn(in.value->tensorType(), gen, 0.1));
    ++made;
  }
  return made;
}

Constant importedDeviceConstant(c10::Device device, c10::Device modelDevice) {
  bool sameDevice = device.type() == modelDevice.type() &&
                    (device.index() == modelDevice.index() || !device.has_index() ||
                     !modelDevice.has_index());
  return sameDevice ? Constant::ofExecutionDevice(modelDevice) : Constant::ofDevice(device);
}

absl::StatusOr<ImportedModel> importModel(llvm::StringRef path, const ImportOptions &options) {
  llvm::StringRef ext = llvm::sys::path::extension(path);
  if (ext == ".pt2")
    return importPt2(path);
  if (ext == ".pt")
    return importTorchScript(path, options);
  if (ext == ".gir" || path == "-") {
    auto g = parseGraphFile(path);
    if (!g.ok())
      return g.status();
    ImportedModel m;
    m.graph = std::move(*g);
    return m;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(path.str(), ": unknown input kind '", ext.str(),
                   "'; graph-opt reads .pt2 (torch.export), .pt (TorchScript) and .gir"));
}

} // namespace graphopt
