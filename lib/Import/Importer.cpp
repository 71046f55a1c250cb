//===- Importer.cpp - Reading a model by its file extension ---------------===//
#include "graphopt/Import/Importer.h"

#include "graphopt/IR/Parser.h"

#include <absl/strings/str_cat.h>
#include <llvm/Support/Path.h>

namespace graphopt {

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
